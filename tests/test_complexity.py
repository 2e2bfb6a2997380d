"""The statement count of proposed programs, and the floor the validate stage puts on it."""

from __future__ import annotations

from selfplay.config import RolesConfig
from selfplay.proposer import proposer_prompt
from selfplay.proposer.complexity import statements, too_simple

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
    assert statements("def f(x) return x") == 0  # does not parse


def test_the_floor_says_how_far_below_it_a_program_is():
    assert too_simple(ONE_LINE, 0) is None
    assert too_simple(LOOP, 5) is None
    reason = too_simple(ONE_LINE, 3)
    assert reason.startswith("too_simple:") and "1 statements" in reason and "3" in reason


def test_the_prompt_states_the_floor_only_when_there_is_one():
    def text(roles):
        return proposer_prompt("deduction", [], roles)[-1].content

    assert "at least" not in text(RolesConfig())
    assert "at least 3 statements" in text(RolesConfig(min_statements=3))
