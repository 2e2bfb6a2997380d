"""An evaluation split across ranks, in one process: `Ranks(shares=N)` runs every share here, so
the records and scores of N shares can be set beside one share's (the 2-process run is in
`tests/distributed/test_processes.py`)."""

from __future__ import annotations

import json

import pytest

from selfplay.config import load
from selfplay.distributed import Ranks
from selfplay.engine.base import Completion, Generation
from selfplay.eval import generated, harness, sharded
from selfplay.eval.in_loop import InLoopEval
from selfplay.solver import solver_prompt
from selfplay.types import Verdict

WRAP = "<answer>\n```{}\n{}\n```\n</answer>".format


class KeyedEngine:
    """Answers each prompt with the texts given for it, whichever call and batch it comes in;
    keeps the prompts of each call."""

    tokenizer = None

    def __init__(self, answers: dict[str, list[str]]):
        self.answers = answers
        self.calls: list[list[str]] = []

    def generate(self, prompts, params):
        keys = [repr(p) for p in prompts]
        self.calls.append(keys)
        return [
            Generation((1,), tuple(Completion(t, (1,), (0.0,), "stop") for t in self.answers[k]))
            for k in keys
        ]


def _engine(problems, roles) -> KeyedEngine:
    """Right, wrong and unreadable answers in turn over the problems of each kind."""
    answers = {}
    for i, p in enumerate(problems):
        layout, gold = ("output", p.task.outputs[0])
        if p.task.type == "abduction":
            layout, gold = ("input", p.task.inputs[0])
        text = [WRAP(layout, gold), WRAP(layout, "'surely not this'"), "I do not know"][i % 3]
        answers[repr(solver_prompt(p.task, roles))] = [text]
    return KeyedEngine(answers)


@pytest.mark.parametrize("shares", [2, 3, 5])
def test_shares_give_the_records_and_scores_of_one_process(tmp_path, executor, shares):
    config = load(None, ["run.eval_benchmarks=[generated]", "run.eval_problems=4"])
    problems = generated.load_problems(executor, 4)
    results = {}
    for n in (1, shares):
        engine = _engine(problems, config.roles)
        folder = tmp_path / f"shares{n}"
        folder.mkdir()
        metrics = InLoopEval(config, executor, None, Ranks(shares=n))(engine, folder, 3)
        results[n] = (metrics, (folder / "eval/generated-step000003.jsonl").read_text(), engine)
    (one, one_rows, alone), (many, many_rows, split) = results[1], results[shares]
    assert many == one
    assert many_rows == one_rows
    rows = [json.loads(line) for line in one_rows.splitlines()]
    assert [r["id"] for r in rows] == [p.id for p in problems]  # the one-process order
    assert {r["failure"] for r in rows} == {None, "wrong_value", "unreadable"}
    # one generate call per kind alone; one per non-empty share and kind split, each the
    # strided share of that kind's prompts
    used = min(shares, 4)  # 4 problems of each kind: a fifth share is empty
    assert len(alone.calls) == 2
    assert len(split.calls) == 2 * used
    prompts = [repr(solver_prompt(p.task, config.roles)) for p in problems]
    for i, kind in enumerate(generated.KINDS):
        own = [q for q, p in zip(prompts, problems, strict=True) if p.task.type == kind]
        calls = split.calls[i * used : (i + 1) * used]
        assert calls == [own[k::shares] for k in range(used)]


class _Problem:
    def __init__(self, i: int):
        self.id = str(i)


class _Judge:
    def judge(self, items):
        return [
            [Verdict(a == "yes", "ok" if a == "yes" else "wrong") for a in ans] for _, ans in items
        ]


def test_the_harness_splits_only_inside_across():
    problems = [_Problem(i) for i in range(7)]
    seen = []

    class Engine:
        def generate(self, prompts, params):
            seen.append((list(prompts), params.seed))
            return [
                Generation((1,), (Completion("yes" if int(p) % 2 else "no", (1,), (0.0,), "stop"),))
                for p in prompts
            ]

    from selfplay.engine import SamplingParams

    def run():
        return harness.evaluate(
            problems,
            lambda p: p.id,
            _Judge(),
            engine=Engine(),
            params=SamplingParams(n=1, temperature=0.0, seed=7),
            read=lambda p, c: c.text,
            task=lambda p: p,
            name="toy",
        )

    alone = run()
    assert seen == [([str(i) for i in range(7)], 7)]
    seen.clear()
    with sharded.across(Ranks(shares=3)) as ranks:
        assert sharded.current() is ranks
        split = run()
    assert sharded.current().shares == 1  # back to one process
    assert split == alone
    assert alone[0] == {"toy/pass@1": 3 / 7}
    assert [prompts for prompts, _ in seen] == [["0", "3", "6"], ["1", "4"], ["2", "5"]]
    assert len({seed for _, seed in seen}) == 3  # a seed per share, as a step's generation
