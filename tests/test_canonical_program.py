"""A program's canonical text: copies of a reference with renamed variables, other layout or a
definition repeated are the same program; programs that compute something else are not."""

import pytest

from selfplay.proposer.canonical import canonical_program

IDENTITY = "def f(a):\n    return a"


@pytest.mark.parametrize(
    "copy",
    [
        "def f(x):\n    return x",
        "def f(a):  # the identity\n\n    return (a)\n",
        "def f(a):\n    return a\n\ndef f(a):\n    return a",
        "def f(x):\n    return x * 2\n\ndef f(a):\n    return a",  # the last definition runs
        "def f(a: str) -> str:\n    return a",
    ],
)
def test_copies_of_the_identity_are_the_identity(copy):
    assert canonical_program(copy) == canonical_program(IDENTITY)


@pytest.mark.parametrize(
    "other",
    [
        "def f(a):\n    return a * 2",
        "def f(a, b):\n    return a",
        "def f(a):\n    return len(a)",
        "def f(a):\n    return a\n\ndef f(a):\n    return a + 1",
    ],
)
def test_other_programs_stay_apart(other):
    assert canonical_program(other) != canonical_program(IDENTITY)


def test_locals_loops_and_comprehensions_are_renamed_by_shape_builtins_kept():
    one = (
        "def f(xs):\n    total = 0\n    for x in xs:\n        total += x\n"
        "    return [y for y in range(total)]"
    )
    two = (
        "def f(items):\n    acc = 0\n    for it in items:\n        acc += it\n"
        "    return [k for k in range(acc)]"
    )
    assert canonical_program(one) == canonical_program(two)
    assert "range" in canonical_program(one) and "total" not in canonical_program(one)
    swapped = one.replace("total += x", "total -= x")
    assert canonical_program(swapped) != canonical_program(one)


def test_text_that_does_not_parse_is_compared_by_its_words():
    assert canonical_program("def f(:\n   return") == canonical_program("def f(:  return")
