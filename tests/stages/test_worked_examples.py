"""Worked examples in the solver's prompts (`roles.worked_examples`): which pool tasks are
shown, what the prompt shows of them, and that a copy of a shown answer is judged wrong and
counted (`solve/example_copies`)."""

from __future__ import annotations

import math
import re

import pytest

from selfplay.config import ConfigError, RolesConfig, load
from selfplay.curriculum import Provenance, TaskStore
from selfplay.judge import Judge
from selfplay.solver import solver_prompt
from selfplay.solver.examples import copies_shown, worked_examples
from selfplay.types import Task
from tests.stages.scripted import REVERSED, SORTED, TRIPLE, PoolAnswerer, one_step

DOUBLE = "def f(n):\n    return n * 2"
TASKS = [
    Task("deduction", TRIPLE, ("4",), ("12",)),
    Task("deduction", DOUBLE, ("5",), ("10",)),
    Task("deduction", DOUBLE, ("6",), ("12",)),  # the answer of the first
    Task("abduction", REVERSED, ("'ab'",), ("'ba'",)),
    Task("abduction", "def f(s):\n    return s.upper()", ("'ab'",), ("'AB'",)),  # its input
    Task("abduction", "def f(s):\n    return s * 2", ("'xy'",), ("'xyxy'",)),
    Task("induction", SORTED, ("[2, 1]", "[1]"), ("[1, 2]", "[1]"), message="", n_visible=1),
]


@pytest.fixture
def store(tmp_path):
    config = load(None, ["curriculum.references=1"]).curriculum
    store = TaskStore.open(str(tmp_path / "pool.sqlite"), "t", config, answers=2)
    store.add_tasks(TASKS, Provenance("seed", 0, "", "test"))
    yield store
    store.close()


def test_examples_are_other_tasks_of_the_type_never_with_the_tasks_program_or_answer(store):
    for step in range(1, 6):
        shown = worked_examples(store, TASKS, 2, step)
        assert shown[-1] == ()  # induction: none
        for task, examples in zip(TASKS, shown, strict=True):
            for example in examples:
                assert example.type == task.type and example.program != task.program
                assert example.input != task.input and example.output != task.output
        assert {e.program for e in shown[0]} == {DOUBLE}  # the pool's only one that can be
        assert shown[0][0].output == "10"  # not the DOUBLE task whose output is 12
        assert [e.output for e in shown[3]] == ["'xyxy'"]  # not `'AB'`: its input is `'ab'`
        assert shown == worked_examples(store, TASKS, 2, step)  # a resumed step draws it again
    assert worked_examples(store, TASKS, 0, 1) == [()] * len(TASKS)
    assert all(len(e) <= 1 for e in worked_examples(store, TASKS, 1, 1))
    assert worked_examples(store, TASKS, 2, 1, max_chars=len(DOUBLE))[0]
    assert worked_examples(store, TASKS, 2, 1, max_chars=len(DOUBLE) - 1)[0] == ()  # too long


def test_an_example_whose_answer_is_right_for_the_task_is_not_shown(tmp_path, executor):
    # `'xy'` is the input of `s * 2`'s example, and `len('xy') > 1` gives the task's output
    task = Task("abduction", "def f(s):\n    return len(s) > 1", ("'abc'",), ("True",))
    other = Task("abduction", "def f(s):\n    return s * 2", ("'xy'",), ("'xyxy'",))
    config = load(None, []).curriculum
    store = TaskStore.open(str(tmp_path / "pool.sqlite"), "t", config, answers=2)
    try:
        store.add_tasks([task, other], Provenance("seed", 0, "", "test"))
        assert worked_examples(store, [task], 1, 1) == [(other,)]  # no judge: shown
        assert worked_examples(store, [task], 1, 1, judge=Judge(executor)) == [()]
        assert worked_examples(store, [other], 1, 1, judge=Judge(executor)) == [(task,)]
    finally:
        store.close()


def test_a_prompt_shows_its_examples_solved_above_the_task_it_asks_for():
    roles = RolesConfig(think=False, prefill=True)
    task, example = TASKS[0], TASKS[1]
    plain = solver_prompt(task, roles)[1].content
    text = solver_prompt(task, roles, [example])[1].content
    assert text.endswith("Now your task.\n\n" + plain)
    assert DOUBLE in text and "The call `f(5)` returns:\n<answer>\n```output\n10\n```" in text
    abduction = solver_prompt(TASKS[3], roles, [TASKS[5]])[1].content
    assert "An input for which `f` returns `'xyxy'`:\n<answer>\n```input\n'xy'\n```" in abduction
    # induction shows none, and no examples is the prompt as before
    assert solver_prompt(TASKS[6], roles, [TASKS[6]]) == solver_prompt(TASKS[6], roles)
    assert solver_prompt(task, roles, ()) == solver_prompt(task, roles)
    with pytest.raises(ConfigError, match="worked_examples"):
        RolesConfig(worked_examples=-1)


class Copier(PoolAnswerer):
    """Answers every prompt that shows an example with the first example's answer."""

    def answer(self, task, right, prompt):
        shown = re.search(r"```(?:output|input)\n(.*)\n```", prompt[1].content)
        if shown is None:
            return super().answer(task, right, prompt)
        fence = "output" if task.type == "deduction" else "input"
        return f"<answer>\n```{fence}\n{shown.group(1)}\n```\n</answer>"


@pytest.mark.parametrize("copy", [False, True])
def test_the_solve_stage_shows_examples_and_counts_the_answers_that_copy_them(make_run, copy):
    more = [Task("deduction", DOUBLE, ("5",), ("10",)), Task("deduction", TRIPLE, ("4",), ("12",))]
    run, _ = make_run(["roles.worked_examples=1", "selfplay.solver_tasks=3"], more=more)
    if copy:
        run.engine = Copier(run.store, run.config.roles)
    _, judged, rollouts, metrics = one_step(run, [])
    assert len(judged) == 3 * 2
    for j in judged:
        assert len(j.attempted.shown) == 1 and j.attempted.shown[0] != j.attempted.task.output
    # the rollouts carry what was shown, for samples.jsonl
    assert sorted(r.shown for r in rollouts) == sorted(j.attempted.shown for j in judged)
    asked = [p[1].content for p in run.engine.asked]
    assert len(asked) == 3 and all(text.startswith("Solved examples") for text in asked)
    if copy:  # every copy is a wrong answer
        assert metrics["solve/example_copies"] == 1.0 and metrics["solve/accuracy"] == 0.0
    else:
        assert metrics["solve/example_copies"] == 0.0 and metrics["solve/accuracy"] == 0.5
    assert metrics["solve/example_copies/deduction"] == metrics["solve/example_copies"]
    assert math.isnan(metrics["solve/example_copies/abduction"])  # no abduction trained


@pytest.mark.parametrize(
    ("answer", "task_type", "shown", "copies"),
    [
        ("[1,2]", "deduction", ["[1, 2]"], True),
        ("'a'", "deduction", ['"a"'], True),
        ("(10)", "deduction", ["10"], True),
        ("10", "deduction", ["10.0", "'10'"], False),
        ("1,2", "abduction", ["1, 2"], True),
        ("1, 2", "abduction", ["(1, 2)"], False),  # two arguments, not one tuple
        ("x=3", "abduction", [" x=3 "], True),  # not a literal: as written
        ("x = 3", "abduction", ["x=3"], False),
        ("[1, 2]", "deduction", [], False),
    ],
)
def test_a_copy_is_the_shown_value_however_it_is_written(answer, task_type, shown, copies):
    assert copies_shown(answer, task_type, shown) is copies


class Recorder(PoolAnswerer):
    """Also records each call's prompt count, samples per prompt and seed."""

    calls: list

    def generate(self, prompts, params):
        self.calls.append((len(prompts), params.n, params.seed))
        return super().generate(prompts, params)


def test_turning_examples_on_changes_no_other_draw(make_run):
    """The same two steps with and without examples: the same tasks answered with the same
    seeds, the same pool afterwards and the same references for the next proposer prompts."""
    more = [Task("deduction", DOUBLE, ("5",), ("10",)), *TASKS[3:6]]
    seen = []
    for k in (0, 1):
        run, _ = make_run([f"roles.worked_examples={k}", "selfplay.solver_tasks=3"], more=more)
        run.engine = Recorder(run.store, run.config.roles)
        run.engine.calls = []
        answered = [
            [(j.attempted.task_id, j.outcome) for j in one_step(run, [], step)[1]]
            for step in (1, 2)
        ]
        refs = [[t.id for t in r] for r in run.store.references(4, 3, k=2)]
        pool = [(t.id, t.estimate) for t in run.store.get(run.store.index["id"].tolist())]
        seen.append((answered, run.engine.calls, refs, pool))
        assert run.engine.asked[0][1].content.startswith("Solved") == bool(k)
    assert seen[0] == seen[1]


def test_without_examples_the_prompts_and_metrics_are_as_before(make_run):
    run, _ = make_run(["selfplay.solver_tasks=1"])
    _, judged, _, metrics = one_step(run, [])
    assert all(j.attempted.shown == () for j in judged)
    assert run.engine.asked == [solver_prompt(judged[0].attempted.task, run.config.roles)]
    assert math.isnan(metrics["solve/example_copies"])  # none shown
