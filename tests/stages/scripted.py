"""Scripted stand-ins for the stage tests: a pool with a seed task, an engine that answers
solver prompts about any pool task (the generation protocol, no model) or every proposer prompt
with fixed texts, and the stages after propose as the loop calls them. The executor and the task
pool are the real ones.
"""

from __future__ import annotations

import pytest

from selfplay import stages
from selfplay.config import load
from selfplay.curriculum import Provenance, TaskStore
from selfplay.engine.base import Completion, Generation
from selfplay.runs import Run
from selfplay.solver import solver_prompt
from selfplay.step import StageTimer, step_metrics
from selfplay.types import Proposal, Proposed, Task

SORTED = "def f(xs):\n    return sorted(xs)"
REVERSED = "def f(s):\n    return s[::-1]"
TRIPLE = "def f(n):\n    return n * 3"
SEED = Task("deduction", SORTED, ("[3, 1, 2]",), ("[1, 2, 3]",), cpu_s=1e-4)


class PoolAnswerer:
    """Answers a solver prompt about any pool task: sample j is right where `right(task)[j]`
    is True (default: right, wrong, right, ...) and wrong otherwise. A prompt that shows
    worked examples is answered as its task's prompt without them; the prompts are kept in
    `asked`."""

    tokenizer = None

    def __init__(self, store: TaskStore, roles, right=None):
        self.store, self.roles = store, roles
        self.right = right or (lambda task: [True, False] * 8)
        self.asked: list = []

    def generate(self, prompts, params):
        pool = self.store.get(self.store.index["id"].tolist())
        tasks = {solver_prompt(t.task, self.roles)[1].content: t.task for t in pool}
        out = []
        self.asked += prompts
        for prompt in prompts:
            task = tasks[prompt[1].content.split("Now your task.\n\n")[-1]]
            texts = [self.answer(task, ok, prompt) for ok in self.right(task)[: params.n]]
            completions = tuple(Completion(t, (1, 2), (-0.1, -0.2), "stop") for t in texts)
            out.append(Generation((3, 4), completions))
        return out

    def answer(self, task: Task, right: bool, prompt) -> str:
        return _answer(task, right)


def _answer(task: Task, right: bool) -> str:
    if task.type == "deduction":
        return f"<answer>\n```output\n{task.output if right else 'None'}\n```\n</answer>"
    return f"<answer>\n```input\n{task.input if right else '[9]'}\n```\n</answer>"


def proposed(group: int, task_type: str, program: str, text: str, refs=()) -> Proposed:
    """A proposal as the propose stage records it, shown the pool tasks `refs`."""
    parsed = Proposal(task_type, program, (text,))
    return Proposed(task_type, group, (3, 4), (5, 6, 7), (-0.5,) * 3, tuple(refs), parsed)


@pytest.fixture
def make_run(tmp_path, executor):
    """A run with a pool holding SEED (and `more` tasks), the scripted engine and no model."""
    stores = []

    def make(overrides=(), more=(), right=None) -> tuple[Run, int]:
        config = load(
            None,
            [
                "selfplay.task_types=[deduction, abduction]",
                "selfplay.attempts=2",
                "selfplay.solver_samples=2",
                *overrides,
            ],
        )
        path = str(tmp_path / f"pool{len(stores)}.sqlite")
        store = TaskStore.open(path, "t", config.curriculum, answers=config.selfplay.solver_samples)
        stores.append(store)
        seed_id = store.add_tasks([SEED, *more], Provenance("seed", 0, "", "test")).ids[0]
        no_model = dict(
            accelerator=None, model=None, tokenizer=None, optimizer=None, scheduler=None
        )
        run = Run(
            config=config,
            folder=tmp_path,
            engine=PoolAnswerer(store, config.roles, right),
            executor=executor,
            store=store,
            pad_id=0,
            **no_model,
        )
        return run, seed_id

    yield make
    for store in stores:
        store.close()


def one_step(run: Run, proposals, step: int = 1):
    """The stages after propose, as `loop.run_step` calls them, and the step's metrics."""
    stored = stages.store_tasks(run, stages.validate(run, tuple(proposals)), step)
    batch, _ = stages.sample(run, step)
    judged = stages.verify(run, stages.solve(run, stored, batch, step), step)
    rates = stages.solve_rates(stored, judged)
    rollouts = stages.reward(run, stored, rates, judged, step)
    metrics = step_metrics(run, stored, judged, rates, batch, rollouts, {}, StageTimer())
    return stored, judged, rollouts, metrics


class ScriptedProposer:
    """Answers every proposer prompt with `texts` (as many as the request's `n`) and records
    what it was asked."""

    tokenizer = None

    def __init__(self, texts):
        self.texts, self.asked = texts, []

    def generate(self, prompts, params):
        self.asked.append((len(prompts), params.n))
        completions = tuple(
            Completion(t, (1, 2), (-0.1, -0.2), "stop") for t in self.texts[: params.n]
        )
        return [Generation((3, 4), completions) for _ in prompts]
