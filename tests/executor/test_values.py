"""Canonical values: type-exact, order rules, caps, and a literal parser that never evaluates."""

from __future__ import annotations

import math

import pytest

from selfplay.executor.values import (
    Limits,
    NotLiteral,
    TooLarge,
    Unserializable,
    canonical,
    canonical_from_text,
    parse_call_args,
    parse_literal,
)


@pytest.mark.parametrize(
    "value, text",
    [
        (None, "None"),
        (True, "True"),
        (1, "1"),
        (1.0, "1.0"),
        (-0.0, "-0.0"),
        (math.nan, "float('nan')"),
        (-math.inf, "-float('inf')"),
        ("it's", '"it\'s"'),
        (b"\x00a", "b'\\x00a'"),
        ((1,), "(1,)"),
        ((), "()"),
        ({"b": 1, "a": [2, (3,)]}, "{'a': [2, (3,)], 'b': 1}"),
        ({3, 1, 2}, "{1, 2, 3}"),
        (set(), "set()"),
        (frozenset({"b", "a"}), "frozenset({'a', 'b'})"),
        (frozenset(), "frozenset()"),
    ],
)
def test_canonical_text(value, text):
    assert canonical(value) == text


def test_types_are_exact():
    assert canonical(True) != canonical(1) != canonical(1.0)
    assert canonical((1, 2)) != canonical([1, 2])
    assert canonical({1}) != canonical(frozenset({1}))


def test_every_nan_is_the_same_and_negative_zero_is_not_zero():
    assert canonical(float("nan")) == canonical(-math.nan)
    assert canonical(-0.0) != canonical(0.0)


def test_dict_and_set_order_do_not_matter_list_order_does():
    assert canonical({"a": 1, "b": 2}) == canonical({"b": 2, "a": 1})
    assert canonical({"x", "y", "z"}) == canonical({"z", "y", "x"})
    assert canonical([1, 2]) != canonical([2, 1])


def test_other_types_are_refused():
    class Spoof:
        def __eq__(self, other):
            return True

    for value in (Spoof(), object(), [1, Spoof()], iter([]), 1j, str, {"k": Spoof()}):
        with pytest.raises(Unserializable):
            canonical(value)


def test_subclasses_of_allowed_types_are_refused():
    class MyStr(str):
        pass

    from collections import Counter, OrderedDict

    for value in (MyStr("a"), Counter("ab"), OrderedDict(a=1)):
        with pytest.raises(Unserializable):
            canonical(value)


def test_caps():
    limits = Limits(max_chars=50, max_depth=3, max_items=10, max_int_digits=5)
    with pytest.raises(TooLarge):
        canonical("x" * 51, limits)
    with pytest.raises(TooLarge):
        canonical([[[[1]]]], limits)
    with pytest.raises(TooLarge):
        canonical(list(range(11)), limits)
    with pytest.raises(TooLarge):
        canonical(123456, limits)
    assert canonical(12345, limits) == "12345"


def test_a_value_that_contains_itself_is_too_deep():
    loop: list = []
    loop.append(loop)
    with pytest.raises(TooLarge):
        canonical(loop)


def test_huge_ints_are_refused_without_converting_them():
    with pytest.raises(TooLarge):
        canonical(10**100_000)


@pytest.mark.parametrize(
    "text, value",
    [
        ("[1, -2.5, 'a', b'b', None, True]", [1, -2.5, "a", b"b", None, True]),
        ("{'k': (1, {2, 3})}", {"k": (1, {2, 3})}),
        ("set()", set()),
        ("frozenset([1, 2])", frozenset({1, 2})),
        ("float('inf')", math.inf),
        ("-float('inf')", -math.inf),
        ("[inf, -inf]", [math.inf, -math.inf]),
    ],
)
def test_parse_literal(text, value):
    assert parse_literal(text) == value


@pytest.mark.parametrize(
    "text",
    [
        "__import__('os').system('echo pwned')",
        "open('/etc/passwd').read()",
        "().__class__.__base__.__subclasses__()",
        "x",
        "[i for i in range(3)]",
        "lambda: 1",
        "1 + 1",
        "2 ** 100000",
        "{**{}}",
        "float('1e308') * 10",
        "float(1.5)",  # a model's answer: once an AttributeError in the trusted process
        "float(None)",
        "set(range(3))",
        "1j",
        "...",
        "{[1]: 2}",
    ],
)
def test_parse_literal_refuses_code(text):
    with pytest.raises((NotLiteral, TooLarge)):
        parse_literal(text)


def test_parse_literal_caps_size_and_depth():
    with pytest.raises(TooLarge):
        parse_literal("[" * 40 + "]" * 40)
    with pytest.raises((TooLarge, NotLiteral)):
        parse_literal("[" * 100_000 + "]" * 100_000)
    with pytest.raises(TooLarge):
        parse_literal(repr(list(range(20_000))))


def test_canonical_from_text_normalises_spelling():
    assert canonical_from_text("{ 'b':1,'a' :2 }") == "{'a': 2, 'b': 1}"
    assert canonical_from_text('"x"') == "'x'"
    assert canonical_from_text("{-inf: nan}") == "{-float('inf'): float('nan')}"


def test_parse_call_args_normalises_and_keeps_dict_order():
    assert parse_call_args("[1,2],  'a'") == "[1, 2], 'a'"
    assert parse_call_args("{'b': 1, 'a': 2}") == "{'b': 1, 'a': 2}"
    assert parse_call_args("x=3, y=[1]") == "x=3, y=[1]"
    assert parse_call_args("") == ""


@pytest.mark.parametrize(
    "text",
    ["1), print(2", "*[1, 2]", "**{'a': 1}", "dict(a=1)", "lambda x: x", "x", "1)(2"],
)
def test_parse_call_args_refuses_non_literals(text):
    with pytest.raises((NotLiteral, TooLarge)):
        parse_call_args(text)
