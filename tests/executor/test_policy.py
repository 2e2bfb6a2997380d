"""The static policy: what compiles, what is refused before anything runs, and with which rule."""

from __future__ import annotations

import ast

import pytest
from RestrictedPython.transformer import RestrictingNodeTransformer

from selfplay.executor import policy
from selfplay.executor.policy import (
    CompiledInput,
    CompiledProgram,
    PolicyRejection,
    compile_input,
    compile_program,
)
from selfplay.executor.values import Limits


def reason(source: str) -> str:
    result = compile_program(source)
    return "ok" if isinstance(result, CompiledProgram) else result.reason


@pytest.mark.parametrize(
    "source",
    [
        "def f(x: int) -> int:\n    y: int = x + 1\n    return y",
        "def f(x):\n    match x:\n        case [a, *rest]:\n            return a\n        case {'k': v}:\n"
        "            return v\n        case _:\n            return None",
        "def f(d):\n    d['a'] += 1\n    d['b'] = d.get('b', 0)\n    return d",
        "class C:\n    def __init__(self):\n        self._n = 0\n    def bump(self):\n"
        "        self._n += 1\n        return self._n\ndef f(x):\n    return C().bump()",
        "def f(x):\n    total = 0\n    def add(v):\n        nonlocal total\n        total += v\n"
        "    add(x)\n    return total",
        "def f(x):\n    _cache = {}\n    return [i ** 2 for i in range(x) if i % 2]",
        "def f(x):\n    return f'{x!r:>10}'",
        "from __future__ import annotations\nfrom dataclasses import dataclass\n@dataclass\n"
        "class P:\n    x: int\ndef f(x):\n    return P(x).x",
        "class V:\n    __slots__ = ('a',)\n    __hash__ = None\n    def __eq__(self, o):\n"
        "        return True\n    def __lt__(self, o):\n        return False\ndef f(x):\n    return 1",
        "def f(x):\n    try:\n        return 1 // x\n    except:\n        return None",
        "def f(input, id):\n    return input + id",
        "if __name__ == '__main__':\n    pass\ndef f(x):\n    return x",
        "import collections.abc\nfrom typing import List\nimport sys\ndef f(x):\n    return sys.maxsize",
        "def f(xs):\n    xs[1:3] += [9]\n    return xs",
    ],
)
def test_ordinary_code_compiles(source):
    assert reason(source) == "ok"


@pytest.mark.parametrize(
    "source, expected",
    [
        ("def f(:\n    pass", "syntax"),
        ("def g(x):\n    return x", "no_f"),
        ("import os\ndef f(x):\n    return 1", "policy:import"),
        ("from os import path\ndef f(x):\n    return 1", "policy:import"),
        ("import random\ndef f(x):\n    return 1", "policy:import"),
        ("from functools import singledispatch\ndef f(x):\n    return 1", "policy:import"),
        ("from string import Formatter\ndef f(x):\n    return 1", "policy:import"),
        ("from sys import modules\ndef f(x):\n    return 1", "policy:import"),
        ("from . import x\ndef f(x):\n    return 1", "policy:import"),
        ("def f(x):\n    return eval('1')", "policy:forbidden_name"),
        ("def f(x):\n    exec('x = 1')", "policy:forbidden_name"),
        ("def f(x):\n    return open('/etc/passwd')", "policy:forbidden_name"),
        ("def f(x):\n    return id(x)", "policy:forbidden_name"),
        ("def f(x):\n    return globals()", "policy:forbidden_name"),
        ("def f(x):\n    return __import__('os')", "policy:forbidden_name"),
        ("def f(x):\n    return x.__class__.__bases__", "policy:dunder"),
        ("def f(x):\n    return f.__globals__", "policy:dunder"),
        ("def f(x):\n    x.__class__ = int", "policy:dunder"),
        ("def f(x):\n    return (i for i in x).gi_frame", "policy:introspection"),
        ("def f(x):\n    return int.mro()", "policy:introspection"),
        ("def f(x):\n    return __builtins__", "policy:private_name"),
        ("def f(x):\n    _getattr_ = None\n    return x", "policy:private_name"),
        (
            "class C:\n    def __del__(self):\n        pass\ndef f(x):\n    return 1",
            "policy:private_name",
        ),
        (
            "class C:\n    __match_args__ = ('__class__',)\ndef f(x):\n    return 1",
            "policy:private_name",
        ),
        (
            "def f(x):\n    match x:\n        case int(__class__=c):\n            return c",
            "policy:dunder",
        ),
        ("async def f(x):\n    return 1", "policy:construct"),
        (
            "def f(x):\n    try:\n        pass\n    except* ValueError:\n        pass",
            "policy:construct",
        ),
        ("class C(metaclass=type):\n    pass\ndef f(x):\n    return 1", "policy:construct"),
    ],
)
def test_refusals_and_their_rules(source, expected):
    assert reason(source) == expected


def test_size_cap():
    assert compile_program("x = 1\n" * 20, max_chars=10).reason == "program_too_large"


def test_deep_nesting_is_a_syntax_error_not_a_crash():
    assert reason("def f(x):\n    return " + "(" * 500 + "1" + ")" * 500) == "syntax"


def test_optional_modules_only_when_asked():
    source = "import random, hashlib\ndef f(x):\n    return 1"
    assert reason(source) == "policy:import"
    assert isinstance(compile_program(source, extra_modules=("random", "hashlib")), CompiledProgram)


def test_bare_except_cannot_catch_the_executors_interrupt():
    compiled = compile_program("def f(x):\n    try:\n        pass\n    except:\n        pass")
    assert "Exception" in compiled.code.co_consts[0].co_names


def test_compile_input_modes():
    limits = Limits()
    literal = compile_input("[1, 2], {'a': 1}", "literal", limits)
    assert isinstance(literal, CompiledInput) and not literal.expression
    assert compile_input("dict(a=1)", "literal", limits).reason == "input:not_literal"
    expression = compile_input("dict(a=1), lambda x: x", "expression", limits)
    assert isinstance(expression, CompiledInput) and expression.expression
    assert expression.text == "dict(a=1), lambda x: x"
    assert compile_input("().__class__.__base__", "expression", limits).reason == "policy:dunder"
    assert compile_input("1)(2", "expression", limits).reason == "input:syntax"
    assert isinstance(compile_input(5, "literal", limits), PolicyRejection)


def test_how_deep_a_program_may_nest_does_not_depend_on_the_callers_stack():
    """The rewrite recurses per level of the tree: without a cap, a program near the recursion
    limit would compile from a shallow caller (a compile helper) and not from a deep one."""

    def nested(levels: int) -> str:
        return "def f(x):\n    return " + "[" * levels + "x" + "]" * levels

    def at_depth(frames: int, call):
        return call() if frames == 0 else at_depth(frames - 1, call)

    deepest = policy.MAX_NESTING - 4  # module, def, return, the name: 4 levels of their own
    for frames in (0, 400):
        assert isinstance(
            at_depth(frames, lambda: compile_program(nested(deepest))), CompiledProgram
        )
        refused = at_depth(frames, lambda: compile_program(nested(deepest + 1)))
        assert isinstance(refused, PolicyRejection) and refused.reason == "syntax"
        assert "nested more than" in refused.detail


@pytest.mark.parametrize("pattern", ["{d}", "{d}()", "{{{d}: y}}", "[1, {d}]"])
def test_patterns_dotted_names_count_towards_the_nesting_cap(pattern):
    """Patterns are checked, not visited, by the rewrite, and compiled all the same."""
    dotted = "a" + ".b" * (policy.MAX_NESTING + 50)
    source = (
        "def f(x):\n    match x:\n        case "
        + pattern.format(d=dotted)
        + ":\n            return 1\n    return 0\n"
    )
    for frames in (0, 400):
        refused = _at_depth(frames, lambda: compile_program(source))
        assert isinstance(refused, PolicyRejection) and "nested more than" in refused.detail


def test_a_bound_forbidden_name_at_the_deepest_level_compiles_like_any_name():
    def nested(name: str) -> str:
        levels = policy.MAX_NESTING - 4
        return f"def f({name}):\n    return " + "[" * levels + name + "]" * levels

    for frames in range(0, 800, 25):  # wherever the caller's stack lets a program compile
        plain = _at_depth(frames, lambda: compile_program(nested("x")))
        bound = _at_depth(frames, lambda: compile_program(nested("input")))
        assert type(plain) is type(bound), (frames, getattr(bound, "detail", None))


def _at_depth(frames: int, call):
    return call() if frames == 0 else _at_depth(frames - 1, call)


class _RestrictedPythonsOwnRewrites(policy.SandboxTransformer):
    """The transformer with RestrictedPython's own subscript, loop and `n += v` rewrites (and
    its `copy_locations`), which `SandboxTransformer` replaces to locate only new nodes."""

    visit_Subscript = RestrictingNodeTransformer.visit_Subscript
    guard_iter = RestrictingNodeTransformer.guard_iter

    def visit_AugAssign(self, node):
        if isinstance(node.target, ast.Name):
            return RestrictingNodeTransformer.visit_AugAssign(self, node)
        return super().visit_AugAssign(node)


@pytest.mark.parametrize(
    "source",
    [
        "def f(a, i, j):\n    return a[i][j:][::2], a[i][a[j]]",
        "def f(a):\n    a[0][1] = a[1:]\n    del a[0][0]\n    a[0] += 1\n    return a",
        "def f(a):\n    n = 0\n    for x, (y, *z) in a:\n        n += x\n    return n",
        "def f(a):\n    for x in a[0]:\n        pass\n    return [(u, v) for u, (v, w) in a if u]",
        "def f(a):\n    return {k: [v[0] for v in w] for k, w in a.items()}",
        "def f(a):\n    n = s = 1\n    n **= 2\n    s //= a[0][0]\n    return n, s",
    ],
)
def test_rewrites_give_the_code_restrictedpython_gives(source):
    """Each rewrite builds RestrictedPython's nodes with RestrictedPython's locations: the
    compiled code is equal (code objects compare their instructions, constants, names, line
    and exception tables, nested functions' too; marshalled bytes would not do, as they vary
    with reference counts)."""

    def compiled(transformer: type):
        tree = ast.parse(source)
        rewriter = transformer()
        rewriter._bound_names = policy._bound_names(tree)
        tree = rewriter.visit(tree)
        assert not rewriter.errors
        return compile(tree, "<program>", "exec", dont_inherit=True)

    assert compiled(policy.SandboxTransformer) == compiled(_RestrictedPythonsOwnRewrites)
