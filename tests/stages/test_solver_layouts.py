"""The solver's prompt layouts (`roles.solver_layouts`): the `assert` layout's prompt, where its
generation stops, how its answer is read back, how a run draws the layouts, and a solve stage
asked in it."""

from __future__ import annotations

import re

import pytest

from selfplay.config import ConfigError, RolesConfig, load
from selfplay.engine.base import Completion, Generation
from selfplay.extract import ANSWER_STOP
from selfplay.solver import parse_answer, reply, solver_prompt, solver_stop
from selfplay.solver.layout import answer_regex, answer_regexes
from selfplay.solver.prompts import CLOSED_BLOCK, answer_opening, draw_layouts
from selfplay.types import Answer, Task
from tests.stages.scripted import TRIPLE, PoolAnswerer, one_step

DOUBLE = "def f(n):\n    return n * 2"
DEDUCTION = Task("deduction", TRIPLE, ("4",), ("12",))
ABDUCTION = Task("abduction", TRIPLE, ("4",), ("12",))
ROLES = RolesConfig(think=False, prefill=True, solver_layouts=("answer", "assert"))


def test_the_assert_layout_asks_for_the_assertion_with_the_answer_in_place_of_the_blank():
    deduction = solver_prompt(DEDUCTION, ROLES, (), "assert")
    assert f"```python\n{TRIPLE}\nassert f(4) == ??\n```" in deduction[1].content
    assert "```output" not in deduction[1].content and "<answer>" not in deduction[1].content
    abduction = solver_prompt(ABDUCTION, ROLES, (), "assert")[1].content
    assert f"```python\n{TRIPLE}\nassert f(??) == 12\n```" in abduction
    # the reply is never begun for the model (prefill or not), so it writes its own opening
    assert reply(deduction, "x") == "x"
    thinking = RolesConfig(think=True, prefill=True)
    assert reply(solver_prompt(DEDUCTION, thinking, (), "assert"), "x") == "<think>\nx"
    # the answer layout is the prompt as it was; induction and math have one layout
    assert solver_prompt(DEDUCTION, ROLES) == solver_prompt(DEDUCTION, ROLES, (), "answer")
    induction = Task("induction", TRIPLE, ("1", "2"), ("3", "6"), n_visible=1)
    assert solver_prompt(induction, ROLES, (), "assert") == solver_prompt(induction, ROLES)


def test_the_assert_layout_shows_worked_examples_as_completed_assertions():
    example = Task("deduction", DOUBLE, ("5",), ("10",))
    text = solver_prompt(DEDUCTION, ROLES, [example], "assert")[1].content
    plain = solver_prompt(DEDUCTION, ROLES, (), "assert")[1].content
    assert text.startswith("Completed assertions")
    assert f"Example 1.\n```python\n{DOUBLE}\nassert f(5) == 10\n```" in text
    assert text.endswith("Now yours.\n\n" + plain)
    shown = Task("abduction", DOUBLE, ("5",), ("10",))
    abduction = solver_prompt(ABDUCTION, ROLES, [shown], "assert")[1].content
    assert f"```python\n{DOUBLE}\nassert f(5) == 10\n```" in abduction


@pytest.mark.parametrize(
    ("text", "deduction", "abduction"),
    [
        ("assert f(4) == 12", "12", "4"),
        ("```python\nassert f(4) == 12", "12", "4"),  # cut at the closing fence
        ("The assertion:\nassert f([1, 2], 'a') == [2, 1]\n", "[2, 1]", "[1, 2], 'a'"),
        # a reply that writes an example over again answers with the example's values
        (f"```python\n{DOUBLE}\nassert f(5) == 10", "10", "5"),
    ],
)
def test_a_completed_assertion_reads_back_as_the_answer(text, deduction, abduction):
    assert parse_answer(text, "deduction") == Answer("deduction", deduction)
    assert parse_answer(text, "abduction") == Answer("abduction", abduction)


def _cut(text: str, stop) -> str:
    """`text` as generation stopped at the first of `stop` leaves it (the stop string kept)."""
    at = min((text.find(s) + len(s) for s in stop if s in text), default=len(text))
    return text[:at]


@pytest.mark.parametrize(
    "text",
    [
        "```python\nassert f(4) == 12\n```\nThis holds because 4 * 3 is 12.",
        "The completed assertion:\n```python\nassert f(4) == 12\n```\n\nMore text.",
        "assert f(4) == 12",
    ],
)
def test_an_assertion_ends_after_its_block_never_at_the_block_s_opening(text):
    stop = solver_stop(ROLES, "deduction", "assert")
    assert stop == (*ANSWER_STOP, CLOSED_BLOCK)
    cut = _cut(text, stop)
    assert "More" not in cut and "because" not in cut
    assert parse_answer(cut, "deduction") == Answer("deduction", "12")


def test_an_assertion_with_thinking_is_not_cut_at_a_code_block():
    thinking = RolesConfig(think=True)
    assert solver_stop(thinking, "abduction", "assert") == ANSWER_STOP  # code while thinking
    assert solver_stop(thinking, "deduction") == ANSWER_STOP
    assert solver_stop(ROLES, "math", "assert") == solver_stop(ROLES, "math")


def test_the_constrained_assertion_is_one_line_that_reads_back():
    pattern = answer_regex("deduction", ROLES, layout="assert")
    assert re.fullmatch(pattern, "assert f([1], 'a') == [2]\n")
    assert not re.fullmatch(pattern, "[2]\n") and not re.fullmatch(pattern, "assert f(1) ==\n")
    thinking = answer_regex("abduction", RolesConfig(think=True, prefill=False), 100, "assert")
    assert re.fullmatch(thinking, "<think>\nthree times\n</think>\nassert f(4) == 12\n")
    config = load(None, ["generation.constrained_answers=true", "roles.think=false"])
    both = answer_regexes(config, ["deduction", "deduction"], ["answer", "assert"])
    assert answer_regexes(config, ["deduction"]) == both[:1]  # the answer layout by default
    assert re.fullmatch(both[1], "assert f(4) == 12\n") and not re.fullmatch(both[0], "12\n")


def test_a_run_draws_each_trained_prompts_layout_by_its_seed():
    drawn = draw_layouts(ROLES, "train", 64, 7)
    assert drawn == draw_layouts(ROLES, "train", 64, 7)  # a resumed step draws them again
    assert drawn != draw_layouts(ROLES, "train", 64, 8)
    assert 16 < drawn.count("assert") < 48
    assert draw_layouts(RolesConfig(), "train", 3, 7) == ("answer",) * 3
    # new tasks' solve rates are all asked in the first layout listed
    assert draw_layouts(ROLES, "estimate", 3, 7) == ("answer",) * 3
    assert draw_layouts(RolesConfig(solver_layouts=("assert", "answer")), "estimate", 2, 7) == (
        "assert",
        "assert",
    )
    with pytest.raises(ValueError, match="solver layout"):
        solver_prompt(DEDUCTION, ROLES, (), "asert")
    with pytest.raises(ConfigError, match="solver_layouts"):
        RolesConfig(solver_layouts=())
    with pytest.raises(ConfigError, match="solver_layouts"):
        RolesConfig(solver_layouts=("assert", "assert"))


class AssertAnswerer(PoolAnswerer):
    """Answers prompts in the assert layout with the completed assertion (right: the task's
    answer; wrong: another value), and the others as `PoolAnswerer` does."""

    def generate(self, prompts, params):
        self.asked += prompts
        pool = self.store.get(self.store.index["id"].tolist())
        tasks = {solver_prompt(t.task, self.roles, (), "assert")[1].content: t.task for t in pool}
        out = []
        for prompt in prompts:
            task = tasks[prompt[1].content.split("Now yours.\n\n")[-1]]
            texts = [_assertion(task, ok) for ok in self.right(task)[: params.n]]
            out.append(_generation(texts))
        return out


def _assertion(task: Task, right: bool) -> str:
    if task.type == "deduction":
        return f"assert f({task.input}) == {task.output if right else 'None'}"
    return f"assert f({task.input if right else '[9]'}) == {task.output}"


def _generation(texts):
    return Generation((3, 4), tuple(Completion(t, (1, 2), (-0.1, -0.2), "stop") for t in texts))


@pytest.mark.parametrize("examples", [0, 1])
def test_a_solve_stage_asked_in_the_assert_layout_judges_the_assertions(make_run, examples):
    more = [Task("deduction", DOUBLE, ("5",), ("10",)), DEDUCTION]
    overrides = ["roles.solver_layouts=[assert]", f"roles.worked_examples={examples}"]
    run, _ = make_run([*overrides, "selfplay.solver_tasks=3"], more=more)
    run.engine = AssertAnswerer(run.store, run.config.roles)
    _, judged, _, metrics = one_step(run, [])
    asked = [p[1].content for p in run.engine.asked]
    assert len(asked) == 3 and all("== ??\n```" in text for text in asked)
    assert all(text.startswith("Completed assertions") == bool(examples) for text in asked)
    assert [j.outcome for j in judged] == ["correct", "wrong"] * 3
    assert metrics["solve/accuracy"] == 0.5


class Recorder(AssertAnswerer):
    """Answers both layouts, and keeps each call's prompts and sampling parameters."""

    def __init__(self, store, roles):
        super().__init__(store, roles)
        self.calls: list = []

    def generate(self, prompts, params):
        self.calls.append((list(prompts), params))
        plain = [p for p in prompts if "== ??" not in p[1].content]
        answered = iter(_begun(plain, PoolAnswerer.generate(self, plain, params) if plain else []))
        asserts = [p for p in prompts if "== ??" in p[1].content]
        assertions = iter(super().generate(asserts, params) if asserts else [])
        return [next(assertions if "== ??" in p[1].content else answered) for p in prompts]


def _begun(prompts, generations):
    """The generations less what each prompt began its reply with (`roles.prefill`)."""
    out = []
    for prompt, g in zip(prompts, generations, strict=True):
        texts = [c.text.removeprefix(reply(prompt, "")) for c in g.completions]
        out.append(_generation(texts))
    return out


def test_a_step_in_both_layouts_pairs_each_prompt_with_its_stop_and_expression(make_run):
    more = [Task("deduction", DOUBLE, (str(n),), (str(2 * n),)) for n in range(5, 13)]
    overrides = [
        "roles.solver_layouts=[answer, assert]",
        "roles.think=false",
        "roles.prefill=true",
        "generation.constrained_answers=true",
        "selfplay.solver_tasks=8",
    ]
    run, _ = make_run(overrides, more=more)
    run.engine = Recorder(run.store, run.config.roles)
    _, judged, rollouts, metrics = one_step(run, [])
    # the layouts end apart, so each is one call, with its own stop strings and seed
    calls = run.engine.calls
    assert len(calls) == 2 and calls[0][1].seed != calls[1][1].seed
    asked_in = []
    for prompts, params in calls:
        layouts = {"assert" if "== ??" in p[1].content else "answer" for p in prompts}
        assert len(layouts) == 1
        layout = layouts.pop()
        assert params.stop == solver_stop(run.config.roles, "deduction", layout)
        assert all(("assert f" in regex) == (layout == "assert") for regex in params.regex)
        assert len(params.regex) == len(prompts)
        # the answer layout's reply is begun inside its block; the assertion's is not begun
        opening = "" if layout == "assert" else answer_opening("deduction")
        assert all(reply(p, "") == opening for p in prompts)
        asked_in += [layout] * len(prompts)
    assert set(asked_in) == {"answer", "assert"}
    # each answer and rollout carries its prompt's layout, and each is scored apart
    assert [j.attempted.layout for j in judged] == [x for x in asked_in for _ in range(2)]
    assert sorted(r.layout for r in rollouts) == sorted(j.attempted.layout for j in judged)
    for layout in ("answer", "assert"):
        assert metrics[f"solve/layout/{layout}/accuracy"] == 0.5
        assert metrics[f"solve/layout/{layout}/parse_rate"] == 1.0
