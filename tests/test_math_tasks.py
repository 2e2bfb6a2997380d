"""The math task type: a word problem with a program `f()` that computes its answer, or a
labeled problem (GSM8K, MATH-500 shape) with a gold answer and no program.

Parsing and prompts on their own, then one step's stages from propose to reward with a
scripted engine (the generation protocol, no model) and the real executor, task pool and math
checker: the proposals' programs run in the sandbox for the gold answers, the solver's answers
are judged by math-verify, and the rewards and advantages follow. Labeled problems are imported
as a run imports `seed.labeled`, drawn, answered and judged against their LaTeX gold answers.
"""

from __future__ import annotations

import json
import re

import pytest

from selfplay import semi, stages
from selfplay.config import Config, ConfigError, MathCheckConfig, load
from selfplay.curriculum import Provenance, TaskStore
from selfplay.engine.base import Completion, Generation
from selfplay.mathcheck import MathChecker
from selfplay.proposer import parse_proposal, proposer_prompt, task_from
from selfplay.runs import Run
from selfplay.solver import parse_answer, solver_prompt
from selfplay.types import (
    Answer,
    ParseFailure,
    Proposal,
    Proposed,
    Stored,
    Task,
    Validated,
    Verdict,
)

EGGS = "Janet's ducks lay 16 eggs a day. She eats 3 and bakes with 4. How many are left?"
HALF = "A cake is cut into 8 equal slices and 4 are eaten. What fraction of the cake is left?"
WORDS = "Name the colour of the sky."


def proposal(problem: str, body: str) -> str:
    return (
        f"<think>a small problem</think>\n<answer>\n```problem\n{problem}\n```\n"
        f"```python\ndef f():\n    {body}\n\nprint(f())\n```\n</answer>"
    )


def test_parse_a_math_proposal():
    parsed = parse_proposal(proposal(EGGS, "return 16 - 3 - 4"), "math")
    assert parsed == Proposal("math", "def f():\n    return 16 - 3 - 4", ("",), EGGS)
    labelled = "Problem: How much is 2 + 2?\n```python\ndef f():\n    return 4\n```"
    assert parse_proposal(labelled, "math").message == "How much is 2 + 2?"
    assert parse_proposal("```python\ndef f():\n    return 4\n```", "math").reason == "no_problem"
    assert parse_proposal(f"```problem\n{EGGS}\n```", "math").reason == "no_program"


def test_a_math_task_needs_a_number():
    parsed = parse_proposal(proposal(EGGS, "return 9"), "math")
    ok = Verdict(True, output="9", input="")
    assert task_from(parsed, [ok]) == Task("math", parsed.program, ("",), ("9",), EGGS)
    assert task_from(parsed, [Verdict(True, output="0.5", input="")]).output == "0.5"
    for output in ("'nine'", "True", "[9]", "inf"):
        assert task_from(parsed, [Verdict(True, output=output, input="")]) is None


def test_prompts_and_answers():
    task = Task("math", "def f():\n    return 9", ("",), ("9",), EGGS)
    shown = proposer_prompt("math", [task])[-1].content
    assert EGGS in shown and "Its answer is 9." in shown and "```problem" in shown
    assert "no earlier problems" in proposer_prompt("math", [])[-1].content
    solver = solver_prompt(task)[-1].content
    assert EGGS in solver and "\\boxed" in solver and "def f" not in solver
    assert parse_answer("<answer>\\boxed{9}</answer>", "math") == Answer("math", "9")
    assert parse_answer("I give up", "math").reason == "no_answer"
    assert isinstance(parse_answer("", "math"), ParseFailure)


class WordProblemEngine:
    """Writes fixed proposals, and answers each problem with fixed texts (one per sample)."""

    tokenizer = None

    def __init__(self, proposals: list[str], answers: dict[str, list[str]]):
        self.proposals, self.answers = proposals, answers

    def generate(self, prompts, params):
        out = []
        for k, prompt in enumerate(prompts):
            text = prompt[-1].content
            if "Invent a new math word problem" in text:
                texts = [self.proposals[k]] * params.n
            else:
                problem = re.search(r"Solve this problem:\n(.*?)\n\n", text, re.S).group(1)
                texts = self.answers[problem][: params.n]
            completions = tuple(Completion(t, (1, 2), (-0.1, -0.2), "stop") for t in texts)
            out.append(Generation((3, 4), completions))
        return out


def scripted_run(config, folder, engine, executor, store, checker) -> Run:
    """A run with a scripted engine and no model: enough for the stages up to reward."""
    no_model = dict(accelerator=None, model=None, tokenizer=None, optimizer=None, scheduler=None)
    return Run(
        config=config,
        folder=folder,
        engine=engine,
        executor=executor,
        store=store,
        pad_id=0,
        math_checker=checker,
        **no_model,
    )


@pytest.fixture
def math_run(tmp_path, executor):
    config = load(
        None,
        [
            "selfplay.task_types=[math]",
            "selfplay.proposals=3",
            "selfplay.attempts=2",
            "selfplay.solver_tasks=2",
            "selfplay.solver_samples=2",
            "curriculum.type_quotas=[0, 0, 0, 1]",
        ],
    )
    engine = WordProblemEngine(
        [
            proposal(EGGS, "return 16 - 3 - 4"),
            proposal(HALF, "return (8 - 4) / 8"),
            proposal(WORDS, "return 'blue'"),
        ],
        {
            EGGS: ["<answer>\\boxed{9}</answer>", "The answer is 10."],
            HALF: ["<answer>$\\boxed{\\frac{1}{2}}$</answer>", "So half: 0.5"],
        },
    )
    store = TaskStore.open(str(tmp_path / "pool.sqlite"), "math", config.curriculum)
    with MathChecker(MathCheckConfig()) as checker:
        run = scripted_run(config, tmp_path, engine, executor, store, checker)
        yield run
    store.close()


def test_one_step_of_math_tasks(math_run):
    proposed = stages.propose(math_run, 1)
    assert [p.parsed.type for p in proposed] == ["math"] * 3
    validated = stages.validate(math_run, proposed)
    assert [p.outcome for p in validated] == ["valid", "valid", "invalid"]
    assert validated[2].verdicts[0].reason == "math:not_a_number"
    assert [p.task.output for p in validated[:2]] == ["9", "0.5"]
    placed = stages.store_tasks(math_run, validated, 1)
    stored = math_run.store.get([p.task_id for p in placed[:2]])
    assert [t.task.message for t in stored] == [EGGS, HALF]
    batch, _ = stages.sample(math_run, 1)
    assert sorted(t.task.message for t in batch.tasks) == sorted([EGGS, HALF])
    attempted = stages.solve(math_run, placed, batch, 1)
    answers = stages.verify(math_run, attempted, 1)
    judged = {(j.attempted.task.message, j.attempted.parsed.text): j.outcome for j in answers}
    assert judged == {
        (EGGS, "9"): "correct",
        (EGGS, "10"): "wrong",
        (HALF, "\\frac{1}{2}"): "correct",
        (HALF, "0.5"): "correct",
    }
    rates = stages.solve_rates(placed, answers)
    rollouts = stages.reward(math_run, placed, rates, answers, 1)
    advantages = [r.advantage for r in rollouts]
    assert list(rates[:2]) == [0.5, 1.0]
    assert {r.task_type for r in rollouts} == {"math"}
    # three proposals, two answers to each of the two new tasks (estimates), two to each of
    # the two frontier tasks (train): every judged answer is a rollout
    assert len(advantages) == len(rollouts) == 3 + 2 * 2 + 2 * 2
    solver = [a for r, a in zip(rollouts, advantages, strict=True) if r.role == "solve"]
    assert any(a > 0 for a in solver) and any(a < 0 for a in solver)


def test_math_tasks_are_not_verified_by_the_executor(executor):
    task = Task("math", "def f():\n    return 9", ("",), ("9",), EGGS)
    with pytest.raises(ValueError, match="math checker"):
        executor.verify(task, ["9"])


def test_three_type_quotas_leave_math_out():
    config = load(None, ["curriculum.type_quotas=[2, 1, 1]"])
    assert config.curriculum.type_quotas == (2.0, 1.0, 1.0, 0.0)
    assert Config().curriculum.type_quotas == (1.0, 1.0, 1.0, 1.0)


EGGS_BOXES = "A box holds 12 eggs. How many eggs are in 3 boxes?"
SINE = "What is $\\sin 60^\\circ$?"
SQUARE = "For which real $x$ is $x^2 < 4$? Give an interval."
LABELED_ANSWERS = {
    EGGS_BOXES: ["<answer>\\boxed{36}</answer>", "The answer is 38."],
    SINE: ["<answer>$\\boxed{\\frac{\\sqrt3}{2}}$</answer>", "<answer>\\boxed{0.5}</answer>"],
    SQUARE: ["<answer>\\boxed{(-2,2)}</answer>", "<answer>\\boxed{[-2, 2]}</answer>"],
}


def test_a_labeled_math_task_is_drawn_answered_and_judged(tmp_path, executor):
    gsm = tmp_path / "gsm.jsonl"
    gsm.write_text(json.dumps({"question": EGGS_BOXES, "answer": "12 * 3 = 36\n#### 36"}) + "\n")
    math500 = tmp_path / "math500.jsonl"
    math500.write_text(
        json.dumps({"problem": SINE, "answer": "\\frac{\\sqrt{3}}{2}"})
        + "\n"
        + json.dumps({"problem": SQUARE, "solution": "So $-2 < x < 2$: $\\boxed{(-2, 2)}$."})
        + "\n"
    )
    overrides = [
        "selfplay.task_types=[math]",
        "selfplay.solver_tasks=3",
        "selfplay.solver_samples=2",
        "curriculum.type_quotas=[0, 0, 0, 1]",
        "curriculum.labeled_ratio=1.0",
        f"seed.labeled=[{gsm}, {math500}]",
    ]
    config = load(None, overrides)
    paths = semi.labeled_paths(config)
    with pytest.raises(ConfigError, match="add math to selfplay.task_types"):
        semi.labeled_paths(load(None, overrides[1:]))
    engine = WordProblemEngine([], LABELED_ANSWERS)
    store = TaskStore.open(str(tmp_path / "pool.sqlite"), "labeled", config.curriculum)
    with store, MathChecker(MathCheckConfig()) as checker:
        run = scripted_run(config, tmp_path, engine, executor, store, checker)
        reports = semi.import_labeled(store, executor, paths, tmp_path, ["math"], checker)
        assert [(r.format, r.added) for r in reports] == [("gsm8k", 1), ("math500", 2)]
        batch, _ = stages.sample(run, 1)
        assert sorted(t.task.message for t in batch.tasks) == sorted(LABELED_ANSWERS)
        assert all(t.provenance.origin == "labeled" for t in batch.tasks)
        shown = [solver_prompt(t.task)[-1].content for t in batch.tasks]
        assert all("def f" not in text and "```python" not in text for text in shown)
        attempted = stages.solve(run, (), batch, 1)
        answers = stages.verify(run, attempted, 1)
        judged = {
            (j.attempted.task.output, j.attempted.parsed.text): (j.outcome, j.verdict.reason)
            for j in answers
        }
        assert judged == {
            ("36", "36"): ("correct", "ok"),
            ("36", "38"): ("wrong", "not_equal"),
            ("\\frac{\\sqrt{3}}{2}", "\\frac{\\sqrt3}{2}"): ("correct", "ok"),
            ("\\frac{\\sqrt{3}}{2}", "0.5"): ("wrong", "not_equal"),
            ("(-2, 2)", "(-2,2)"): ("correct", "ok"),
            ("(-2, 2)", "[-2, 2]"): ("wrong", "not_equal"),
        }
        rollouts = stages.reward(run, (), (), answers, 1)
        advantages = [r.advantage for r in rollouts]
        paid = {j.outcome: set() for j in answers}
        for r, j in zip(rollouts, answers, strict=True):
            paid[j.outcome].add(r.reward)
        assert len(paid["correct"]) == len(paid["wrong"]) == 1
        assert min(paid["correct"]) > max(paid["wrong"])
        assert sum(a > 0 for a in advantages) == sum(a < 0 for a in advantages) == 3
        stats = store.stats(1)
        assert (stats.answers, stats.correct, stats.never_attempted) == (6, 3, 0)
    log = [json.loads(line) for line in (tmp_path / "imports.jsonl").read_text().splitlines()]
    assert [entry["by_type"] for entry in log] == [{"math": 1}, {"math": 2}]


def test_the_math_proposer_is_not_shown_labeled_problems():
    labeled = Task("math", "", ("",), ("\\frac{\\sqrt{3}}{2}",), SINE)
    proposed = Task("math", "def f():\n    return 9", ("",), ("9",), EGGS)
    assert labeled.is_labeled_math and not proposed.is_labeled_math
    assert "no earlier problems" in proposer_prompt("math", [labeled])[-1].content
    shown = proposer_prompt("math", [labeled, proposed])[-1].content
    assert EGGS in shown and SINE not in shown


class StopRecorder(WordProblemEngine):
    """Answers math problems as `WordProblemEngine` does and a deduction task with `output`,
    cuts each text at the call's first stop string (as vLLM does), and records each call's
    stop strings and seed with its prompts' kinds."""

    def __init__(self, answers, output: str):
        super().__init__([], answers)
        self.output, self.calls = output, []

    def generate(self, prompts, params):
        kinds = ["math" if "Solve this problem" in p[-1].content else "code" for p in prompts]
        self.calls.append((params.stop, params.seed, kinds))
        math = [p for p, kind in zip(prompts, kinds, strict=True) if kind == "math"]
        answers = iter(super().generate(math, params))
        code = [Completion(self.output, (1,), (-0.1,), "stop")] * params.n
        out = []
        for kind in kinds:
            completions = next(answers).completions if kind == "math" else code
            cut = tuple(
                Completion(_cut(c.text, params.stop), (1,), (-0.1,), "stop") for c in completions
            )
            out.append(Generation((3, 4), cut))
        return out


def _cut(text: str, stops) -> str:
    ends = [text.find(s) for s in stops if s in text]
    return text[: min(ends)] if ends else text


def _mixed_run(tmp_path, executor, checker, engine, task_types="[deduction, math]"):
    config = load(
        None,
        [
            f"selfplay.task_types={task_types}",
            "selfplay.solver_tasks=2",
            "selfplay.solver_samples=2",
            "selfplay.attempts=2",
            "curriculum.type_quotas=[1, 0, 0, 1]",
            "roles.think=false",
            "roles.prefill=true",
        ],
    )
    store = TaskStore.open(str(tmp_path / "pool.sqlite"), "mixed", config.curriculum)
    return scripted_run(config, tmp_path, engine, executor, store, checker)


FENCED = "```python\nprint(16 - 3 - 4)\n```\n<answer>\\boxed{9}</answer>"
MATH = Task("math", "def f():\n    return 9", ("",), ("9",), EGGS)
SORTING = Task("deduction", "def f(x):\n    return sorted(x)", ("[2, 1]",), ("[1, 2]",))


def test_a_prefilled_code_answer_stops_at_its_fence_and_a_math_answer_does_not(tmp_path, executor):
    """In a step that draws both, the math answers are generated without the closing fence as
    a stop string (their prompt begins no code block, and their reply may hold one); the
    estimate answers of new tasks too, and every task is one group."""
    engine = StopRecorder({EGGS: [FENCED, "<answer>\\boxed{10}</answer>"]}, "[1, 2]")
    with MathChecker(MathCheckConfig()) as checker:
        run = _mixed_run(tmp_path, executor, checker, engine)
        with run.store:
            ids = run.store.add_tasks([MATH, SORTING], Provenance("seed", 0, "", "test")).ids
            new = tuple(
                Stored(Validated(Proposed(t.type, 0, (), (), (), (), None), (), t), i, True)
                for t, i in zip([SORTING, MATH], ids[::-1], strict=True)
            )
            batch, _ = stages.sample(run, 1)
            judged = stages.verify(run, stages.solve(run, new, batch, 1), 1)
    stops = {kinds[0]: stop for stop, _, kinds in engine.calls}
    assert len(engine.calls) == 4  # two jobs (estimate, train), two stop sets each
    assert all(len(set(kinds)) == 1 for _, _, kinds in engine.calls)
    assert stops == {"code": ("</answer>", "\n```"), "math": ("</answer>",)}
    # the reply with a code block before its answer is read whole, so it is right
    outcomes = sorted((j.attempted.purpose, j.attempted.task.type, j.outcome) for j in judged)
    each = [("deduction", "correct")] * 2 + [("math", "correct"), ("math", "wrong")]
    assert outcomes == sorted((p, t, o) for p in ("estimate", "train") for t, o in each)
    groups: dict[tuple, set] = {}
    for j in judged:
        groups.setdefault((j.attempted.purpose, j.attempted.task_id), set()).add(j.attempted.group)
    assert all(len(g) == 1 for g in groups.values())
    assert sorted(g.pop() for g in groups.values()) == [0, 1, 2, 3]  # one group per task


def test_a_step_without_math_generates_in_one_call_with_the_stage_seed(tmp_path, executor):
    engine = StopRecorder({}, "[1, 2]")
    with MathChecker(MathCheckConfig()) as checker:
        run = _mixed_run(tmp_path, executor, checker, engine, "[deduction]")
        with run.store:
            run.store.add_tasks([SORTING], Provenance("seed", 0, "", "test"))
            batch, _ = stages.sample(run, 3)
            stages.solve(run, (), batch, 3)
        assert [(stop, seed) for stop, seed, _ in engine.calls] == [
            (("</answer>", "\n```"), stages._seed(run, 3, stages._TRAIN_STAGE))
        ]
    engine = StopRecorder({EGGS: ["<answer>\\boxed{9}</answer>"] * 2}, "[1, 2]")
    with MathChecker(MathCheckConfig()) as checker:
        (tmp_path / "mixed").mkdir()
        run = _mixed_run(tmp_path / "mixed", executor, checker, engine)
        with run.store:
            run.store.add_tasks([SORTING, MATH], Provenance("seed", 0, "", "test"))
            batch, _ = stages.sample(run, 3)
            stages.solve(run, (), batch, 3)
    seeds = [seed for _, seed, _ in engine.calls]
    assert len(seeds) == 2 and seeds[0] == stages._seed(run, 3, stages._TRAIN_STAGE)
    assert seeds[1] != seeds[0]
