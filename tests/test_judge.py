"""The judge routes each task's answers to its back-end: a real executor for code tasks, a real
math checker for math tasks, in one call, with the verdicts in the order of tasks and answers."""

from __future__ import annotations

import pytest

from selfplay.config import MathCheckConfig
from selfplay.judge import Judge
from selfplay.mathcheck import MathChecker
from selfplay.types import Task

PROGRAM = "def f(xs):\n    return sorted(xs)"


@pytest.fixture(scope="module")
def checker():
    with MathChecker(MathCheckConfig(timeout_s=5.0)) as c:
        yield c


def deduction(executor) -> Task:
    [v] = executor.validate([(PROGRAM, "[3, 1, 2]")])
    return Task("deduction", PROGRAM, (v.input,), (v.output,), cpu_s=v.cpu_s)


def math_task(gold: str) -> Task:
    return Task("math", "", ("",), (gold,), "What is half of one?")


def test_mixed_items_are_routed_by_type_and_keep_their_order(executor, checker):
    half, code = math_task("\\frac{1}{2}"), deduction(executor)
    items = [
        (half, ["0.5", "2"]),
        (code, ["[1, 2, 3]", "[3, 2, 1]"]),
        (half, ["1/3"]),
        (code, []),
        (math_task("4"), ["4"]),
    ]
    verdicts = Judge(executor, checker).judge(items)
    assert [[v.ok for v in row] for row in verdicts] == [
        [True, False],
        [True, False],
        [False],
        [],
        [True],
    ]
    assert verdicts[0][1].reason == "not_equal"  # the math checker's reason
    assert verdicts[1][1].reason == "wrong_output"  # the executor's


def test_a_judge_without_a_math_checker_judges_code_and_refuses_math(executor):
    judge = Judge(executor)
    [[right, wrong]] = judge.judge([(deduction(executor), ["[1, 2, 3]", "[1, 2]"])])
    assert right.ok and not wrong.ok
    with pytest.raises(ValueError, match="no math checker"):
        judge.judge([(math_task("1"), ["1"])])


def test_abduction_answers_are_read_in_the_judge_s_input_mode(executor):
    [v] = executor.validate([(PROGRAM, "[3, 1, 2]")])
    task = Task("abduction", PROGRAM, (v.input,), (v.output,), cpu_s=v.cpu_s)
    answers = ["list(range(3, 0, -1))"]
    [[literal]] = Judge(executor).judge([(task, answers)])
    [[expression]] = Judge(executor, inputs="expression").judge([(task, answers)])
    assert literal.reason == "answer:not_literal" and expression.ok
