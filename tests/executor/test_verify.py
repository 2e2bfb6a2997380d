"""Verification of answers: the three task types, batching, dedup and derived time limits."""

from __future__ import annotations

import time

import pytest

from selfplay.config import ExecutorConfig
from selfplay.executor import Executor
from selfplay.types import Task

PROGRAM = "def f(xs, k):\n    return sorted(x * k for x in xs)"


def validated_task(executor, kind: str, program: str = PROGRAM, inputs=("[3, 1, 2], 2",)) -> Task:
    verdicts = executor.validate([(program, i) for i in inputs])
    assert all(v.ok for v in verdicts), verdicts
    return Task(
        kind,
        program,
        tuple(v.input for v in verdicts),
        tuple(v.output for v in verdicts),
        cpu_s=max(v.cpu_s for v in verdicts),
    )


def test_deduction(executor):
    task = validated_task(executor, "deduction")
    verdicts = executor.verify(
        task, ["[2, 4, 6]", "[2,4,6]", "[6, 4, 2]", "(2, 4, 6)", "[2, 4,", "x"]
    )
    assert [v.ok for v in verdicts] == [True, True, False, False, False, False]
    assert [v.reason for v in verdicts[2:]] == [
        "wrong_output", "wrong_output", "answer:not_literal", "answer:not_literal"
    ]  # fmt: skip
    assert verdicts[0].score == 1.0 and verdicts[2].score == 0.0


def test_abduction_accepts_any_input_that_gives_the_output(executor):
    task = validated_task(executor, "abduction")
    answers = ["[3, 1, 2], 2", "[1, 2, 3], 2", "[6, 4, 2], 1", "[1], 2", "None, 2", "dict(a=1)"]
    verdicts = executor.verify(task, answers)
    assert [v.ok for v in verdicts] == [True, True, True, False, False, False]
    assert verdicts[3].reason == "wrong_output"
    assert verdicts[4].reason == "crash:TypeError"
    assert verdicts[5].reason == "answer:not_literal"


def test_an_expression_input_that_fails_is_the_answers_fault(executor):
    """A benchmark's input answer (expression mode) that cannot be evaluated (an undefined
    name, an exception of its own) is refused as `answer:<exception>`, not counted as the
    program's crash: the evaluation reports it as no value, apart from wrong values."""
    task = validated_task(executor, "abduction")
    answers = ["[3, 1, x], 2", "[1][5], 2", "[3, 1, 2], 2", "None, 2"]
    verdicts = executor.verify(task, answers, inputs="expression")
    assert [v.reason for v in verdicts] == [
        "answer:NameError", "answer:IndexError", "ok", "crash:TypeError"
    ]  # fmt: skip
    [validated] = executor.validate([(PROGRAM, "[1, y], 2")], inputs="expression")
    assert validated.reason == "input:NameError"


def test_induction_scores_the_fraction_of_hidden_pairs(executor):
    inputs = ("[1], 1", "[2, 1], 3", "[0], 5", "[4, 4], 0")
    task = validated_task(executor, "induction", inputs=inputs)
    exact = "def f(xs, k):\n    return sorted(k * x for x in xs)"
    partial = "def f(xs, k):\n    return sorted(xs) if k == 1 else [x * k for x in sorted(xs)][:1]"
    broken = "def f(xs, k):\n    return xs[10]"
    [good, half, bad, syntax] = executor.verify(task, [exact, partial, broken, "def f(:"])
    assert good.ok and good.score == 1.0
    assert not half.ok and half.reason == "wrong_output" and 0 < half.score < 1
    assert bad.reason == "crash:IndexError" and bad.score == 0.0
    assert syntax.reason == "syntax"


def test_induction_checks_only_hidden_pairs(executor):
    inputs = ("[1], 1", "[2], 2")
    base = validated_task(executor, "induction", inputs=inputs)
    task = Task("induction", base.program, base.inputs, base.outputs, n_visible=1, cpu_s=base.cpu_s)
    only_second = "def f(xs, k):\n    return [4] if xs == [2] else ['wrong']"
    assert executor.verify(task, [only_second])[0].ok


def test_identical_answers_are_checked_once(executor, monkeypatch):
    submitted = []
    real_run = executor.pool.run

    def counting_run(jobs):
        submitted.extend(run for _, runs in jobs.values() for run in runs)
        return real_run(jobs)

    monkeypatch.setattr(executor.pool, "run", counting_run)
    abduction = validated_task(executor, "abduction")
    submitted.clear()
    verdicts = executor.verify(abduction, ["[3, 1, 2], 2", "[3,1,2],2", "[3, 1, 2],  2", "[1], 1"])
    assert [v.ok for v in verdicts] == [True, True, True, False]
    assert len(submitted) == 2  # three spellings of one input run once
    induction = validated_task(executor, "induction", inputs=("[1], 1", "[2], 1"))
    submitted.clear()
    executor.verify(induction, ["def f(xs, k):\n    return xs"] * 8)
    assert len(submitted) == 2  # one answer, two hidden inputs


def test_a_looping_wrong_answer_costs_little():
    """The limit derives from the task's own run time, not the validation limit."""
    config = ExecutorConfig(run_timeout_s=5.0, verify_time_factor=20.0, verify_time_floor_s=0.05)
    program = "def f(n):\n    while n != 1:\n        n = n - 2\n    return 'done'"
    with Executor(config) as ex:
        task = validated_task(ex, "abduction", program=program, inputs=("7",))
        start = time.monotonic()
        verdicts = ex.verify(task, ["9", "8", "11", "6"])
        elapsed = time.monotonic() - start
    assert [v.ok for v in verdicts] == [True, False, True, False]
    assert {verdicts[1].reason, verdicts[3].reason} == {"timeout"}
    assert elapsed < 1.5  # two loops at ~0.05 s each, not two at 5 s


def test_induction_skips_the_rest_of_an_answer_after_a_timeout():
    config = ExecutorConfig(verify_time_floor_s=0.05)
    with Executor(config) as ex:
        task = validated_task(ex, "induction", inputs=tuple(f"[{i}], 1" for i in range(10)))
        start = time.monotonic()
        [verdict] = ex.verify(task, ["def f(xs, k):\n    while True:\n        pass"])
        elapsed = time.monotonic() - start
    assert verdict.reason == "timeout" and verdict.score == 0.0
    assert elapsed < 1.0  # one time limit, not ten


def test_many_tasks_in_one_batch(executor):
    tasks = [validated_task(executor, "abduction", inputs=(f"[{i}], 2",)) for i in range(20)]
    results = executor.verify_many([(t, [t.input, "[], 1"]) for t in tasks])
    assert all(first.ok and not second.ok for first, second in results)


def test_an_induction_task_without_hidden_pairs_is_our_error(executor):
    task = Task("induction", PROGRAM, ("[1], 1",), ("[1]",), n_visible=1)
    with pytest.raises(ValueError, match="hidden"):
        executor.verify(task, [PROGRAM])


def test_what_ends_an_input_answers_own_evaluation_is_the_answers(executor):
    """An input answer (expression mode) whose own evaluation runs out of memory or time (in a
    native call: the child dies) or trips a run-time guard built no value: it is refused as
    the answer's, as one that raises is. A guard the task's program trips on a well-formed
    answer (CRUXEval's sample_441, where plain Python raises TypeError inside `f`) is the
    program failing on that input, not a construct of the answer refused."""
    program = "def f(base, k, v):\n    base[k] = v\n    return base"
    task = validated_task(executor, "abduction", program, ("{37: 'x'}, '23', 'what?'",))
    answers = [
        "37, 'forty-five', 'what?'",
        "'a' * 10**10, 1, 2",
        "sum(range(10**11)), 1, 2",
        "[0 for _ in range(10**9)], 1, 2",
        "type('A', (), {}), 1, 2",
        "{37: 'x'}, '23', 'what?'",
    ]
    verdicts = executor.verify(task, answers, inputs="expression")
    assert [v.reason for v in verdicts] == [
        "crash:policy", "answer:memory", "answer:timeout", "answer:timeout", "answer:policy", "ok"
    ]  # fmt: skip
    assert verdicts[0].detail.startswith("write: ") and verdicts[4].detail.startswith("builtin: ")
    validated = executor.validate([(program, a) for a in answers[1:3]], inputs="expression")
    assert [v.reason for v in validated] == ["input:memory", "input:timeout"]


@pytest.mark.parametrize(
    "looping", ["def f(x):\n    while True:\n        pass", "sum(range(10**11))"]
)
def test_a_timeout_in_the_program_or_in_its_input_skips_the_rest_of_the_answer(looping):
    """The runs of one answer share a group: after one times out, in the program or in its
    input's own evaluation (`input:timeout`, here a native call the child dies in), the rest
    are skipped, so a looping answer costs one time limit, not one per input."""
    config = ExecutorConfig(verify_time_floor_s=0.05)
    with Executor(config) as ex:
        program = looping if looping.startswith("def") else "def f(x):\n    return x"
        first = "1" if looping.startswith("def") else looping
        calls = [ex.compile_input(text, "expression") for text in [first, "2", "3", "4"]]
        start = time.monotonic()
        results = ex.run_items([(program, call, 0, 0.05, 7) for call in calls])
        elapsed = time.monotonic() - start
    assert results[0].reason in ("timeout", "input:timeout")
    assert [r.detail for r in results[1:]] == ["skipped after a timeout in the same answer"] * 3
    assert elapsed < 1.0  # one time limit, not four
