"""`roles.bare_programs`: an induction answer whose top-level code demonstrates it (the prompt's
examples written back out as calls, prints or asserts) earns the malformed reward instead of
being judged without that code; evaluation is unchanged."""

from __future__ import annotations

import pytest

from selfplay.extract import has_test_code
from selfplay.solver import parse_answer
from selfplay.types import Answer, Task
from tests.stages.scripted import TRIPLE, PoolAnswerer, one_step

TRIPLES = Task("induction", TRIPLE, ("1", "2", "3", "4"), ("3", "6", "9", "12"), n_visible=2)
ECHO = f"```python\n{TRIPLE}\n\nprint(f(1))  # 3\nassert f(2) == 6\n```"
BARE = f"```python\nLIMIT = 3\n\n{TRIPLE}\n```"


class InductionAnswerer(PoolAnswerer):
    """Answers an induction prompt with the right program, bare, then echoing the examples;
    the seed's deduction prompt as `PoolAnswerer` does."""

    def answer(self, task: Task, right: bool, prompt) -> str:
        if task.type != "induction":
            return super().answer(task, right, prompt)
        return BARE if right else ECHO


def test_test_code_is_a_top_level_call_of_f_or_print_or_an_assertion():
    assert has_test_code(f"{TRIPLE}\nprint(f(1))")
    assert has_test_code(f"{TRIPLE}\nprint('done')")
    assert has_test_code(f"{TRIPLE}\ndef check():\n    assert f(1) == 3\ncheck()")
    assert has_test_code(f"{TRIPLE}\nresult = f(1)")
    assert has_test_code(f"{TRIPLE}\nassert f(2) == 6")
    assert has_test_code(f"{TRIPLE}\nif __name__ == '__main__':\n    f(1)")
    assert has_test_code(f"print(f(1))\n{TRIPLE}")  # before the function as well
    assert not has_test_code(f"import math\nLIMIT = 3\n{TRIPLE}\n# f(1) == 3")
    assert not has_test_code(f'"""Triples n."""\n{TRIPLE}')
    assert not has_test_code(f"VOWELS = set('aeiou')\n{TRIPLE}\npass")
    assert not has_test_code(f"try:\n    import math\nexcept ImportError:\n    pass\n{TRIPLE}")
    assert not has_test_code("def f(:")  # the executor reports the syntax error


def test_the_parser_refuses_test_code_only_when_asked():
    assert parse_answer(ECHO, "induction") == Answer("induction", TRIPLE)
    refused = parse_answer(ECHO, "induction", bare_programs=True)
    assert refused.reason == "test_code"
    assert parse_answer(BARE, "induction", bare_programs=True) == Answer(
        "induction", f"LIMIT = 3\n\n{TRIPLE}"
    )
    # not caught: an unfenced program ends at its first unindented line (docs/design.md)
    unfenced = f"Here it is:\n{TRIPLE}\nprint(f(1))"
    assert parse_answer(unfenced, "induction", bare_programs=True) == Answer("induction", TRIPLE)
    main = f"```python\n{TRIPLE}\n\nif __name__ == '__main__':\n    print(f(1))\n```"
    assert parse_answer(main, "induction", bare_programs=True).reason == "test_code"
    documented = f'```python\n"""Triples n."""\n{TRIPLE}\n```'
    assert parse_answer(documented, "induction", bare_programs=True) == Answer("induction", TRIPLE)
    assert parse_answer("```output\n3\n```", "deduction", bare_programs=True) == Answer(
        "deduction", "3"
    )


@pytest.mark.parametrize("bare", [False, True])
def test_a_run_rewards_an_echoing_program_as_malformed_when_asked(make_run, bare):
    overrides = ["selfplay.task_types=[induction]", f"roles.bare_programs={str(bare).lower()}"]
    run, _ = make_run(overrides, more=[TRIPLES])
    run.engine = InductionAnswerer(run.store, run.config.roles)
    _, judged, rollouts, _ = one_step(run, [])
    solved = [r for r in rollouts if r.role == "solve"]
    assert len(solved) == len(judged)
    induction = [(j, r) for j, r in zip(judged, solved) if j.attempted.task.type == "induction"]
    assert induction
    echo = ("malformed", run.config.reward.solver_malformed) if bare else ("correct", 1.0)
    pairs = [(j.outcome, r.reward) for j, r in induction]
    assert pairs == [("correct", 1.0), echo] * (len(pairs) // 2)
