"""The statement count of proposed programs, and the floor the validate stage puts on it."""

from __future__ import annotations

from selfplay.config import RolesConfig
from selfplay.proposer import proposer_prompt
from selfplay.proposer.complexity import brevity, loops, statements, too_simple

ONE_LINE = "def f(x):\n    return x * x"
LOOP = """
import string

def f(s):
    '''Keeps the capitals.'''
    out = []
    for c in s:
        if c in string.ascii_uppercase:
            out.append(c)
        else:
            pass
    return ''.join(out)
"""


def test_statements_count_what_runs_inside_functions():
    assert statements(ONE_LINE) == 1
    # out =, for, if, append, return: the docstring, import, def and pass do not count
    assert statements(LOOP) == 5
    helpers = "def g(x):\n    y = x + 1\n    return y\n\ndef f(x):\n    return g(x)"
    assert statements(helpers) == 3
    nested = "def f(x):\n    def g(y):\n        return y\n    return g(x)"
    assert statements(nested) == 2  # f's return and g's, once each
    handled = "def f(x):\n    try:\n        y = 1 / x\n    except ZeroDivisionError:\n" + (
        "        y = 0\n    finally:\n        z = 1\n    return y"
    )
    assert statements(handled) == 5
    branches = "def f(x):\n    if x:\n        y = 1\n    elif x is None:\n        y = 2\n" + (
        "    else:\n        y = 3\n    while y:\n        y -= 1\n    else:\n        y = 0\n"
        "    return y"
    )
    assert statements(branches) == 9  # if, elif (one more if), three y =, while, -=, y = 0, return
    matched = "def f(x):\n    match x:\n        case 1:\n            return 'one'\n" + (
        "        case _:\n            return 'many'"
    )
    assert statements(matched) == 3
    context = "import contextlib\ndef f(x):\n    with contextlib.suppress(ValueError):\n" + (
        "        return int(x)\n    return 0"
    )
    assert statements(context) == 3
    methods = "class A:\n    k = 2\n    def g(self, x):\n        return x * self.k\n" + (
        "@staticmethod\ndef f(x):\n    return A().g(x)"
    )
    assert statements(methods) == 2  # the class attribute is not in a function
    padded = "def f(x):\n    'doc'\n    ...\n    'a note'\n    global y\n    pass\n    return x"
    assert statements(padded) == 1
    assert statements("async def f(x):\n    y = x\n    return y") == 2
    assert statements("f = lambda x: x") == 0
    assert statements("def f(x) return x") is None  # does not parse


def test_the_floor_says_how_far_below_it_a_program_is():
    assert too_simple(ONE_LINE, 0) is None
    assert too_simple(LOOP, 5) is None
    assert too_simple(ONE_LINE, 3) == "1 of at least 3 statements in its functions"
    # the executor says what is wrong with a program that does not parse
    assert too_simple("def f(x) return x", 3) is None


def test_the_prompt_states_the_floor_only_when_there_is_one():
    def text(roles):
        return proposer_prompt("deduction", [], roles)[-1].content

    assert "at least" not in text(RolesConfig())
    assert "at least 3 statements" in text(RolesConfig(min_statements=3))


def test_brevity_is_the_share_of_the_target_a_program_falls_short_of():
    assert brevity(ONE_LINE, 4) == 0.75
    assert brevity(LOOP, 4) == 0.0  # 5 statements: nothing above the target is paid for
    assert brevity("def f(x):\n    y = x\n    return y", 4) == 0.5
    assert brevity("def f(x) return x", 4) == 0.0  # refused by the executor, not here


def test_loops_and_comprehensions_inside_functions_are_found():
    assert loops(LOOP) is True
    assert loops(ONE_LINE) is False
    assert loops("def f(xs):\n    return sum(x * x for x in xs)") is True
    assert loops("def f(xs):\n    return {k: 1 for k in xs}") is True
    assert loops("def f(n):\n    while n > 1:\n        n //= 2\n    return n") is True
    assert loops("squares = [k * k for k in range(3)]\ndef f(i):\n    return squares[i]") is False
    assert loops("def f(x) return x") is None
