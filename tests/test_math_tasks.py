"""The math task type: a word problem with a program `f()` that computes its answer.

Parsing and prompts on their own, then one step's stages from propose to reward with a
scripted engine (the generation protocol, no model) and the real executor, task pool and math
checker: the proposals' programs run in the sandbox for the gold answers, the solver's answers
are judged by math-verify, and the rewards and advantages follow.
"""

from __future__ import annotations

import re

import pytest

from selfplay import stages
from selfplay.config import Config, MathCheckConfig, load
from selfplay.curriculum import TaskStore
from selfplay.engine.base import Completion, Generation
from selfplay.loop import Run
from selfplay.mathcheck import MathChecker
from selfplay.proposer import parse_proposal, proposer_prompt, task_from
from selfplay.solver import parse_answer, solver_prompt
from selfplay.types import Answer, ParseFailure, Proposal, Task, Verdict

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
        run = Run(config, tmp_path, None, None, None, None, None, engine, executor, store, None, 0)
        run.math_checker = checker
        yield run
    store.close()


def test_one_step_of_math_tasks(math_run):
    proposed = stages.propose(math_run, 1)
    assert [p.parsed.type for p in proposed] == ["math"] * 3
    stages.validate(math_run, proposed)
    assert [p.outcome for p in proposed] == ["valid", "valid", "invalid"]
    assert proposed[2].verdicts[0].reason == "math:not_a_number"
    assert [p.task.output for p in proposed[:2]] == ["9", "0.5"]
    stages.store_tasks(math_run, proposed, 1)
    stored = math_run.store.get([p.task_id for p in proposed[:2]])
    assert [t.task.message for t in stored] == [EGGS, HALF]
    batch, _ = stages.sample(math_run, 1)
    assert sorted(t.task.message for t in batch.tasks) == sorted([EGGS, HALF])
    attempted = stages.solve(math_run, proposed, batch, 1)
    stages.verify(math_run, attempted, 1)
    judged = {(a.task.message, a.parsed.text): a.outcome for a in attempted}
    assert judged == {
        (EGGS, "9"): "correct",
        (EGGS, "10"): "wrong",
        (HALF, "\\frac{1}{2}"): "correct",
        (HALF, "0.5"): "correct",
    }
    rollouts, advantages = stages.reward(math_run, proposed, attempted)
    assert [p.solve_rate for p in proposed[:2]] == [0.5, 1.0]
    assert {r.task_type for r in rollouts} == {"math"}
    assert len(advantages) == len(rollouts) == 3 + 2 * 2
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
