"""Runs steps of a self-play run in this process and saves what it saw, for the tests of
`test_processes.py`. Launched alone (`--shares N` reproduces an N-process run's samples in one
process) or by torchrun (one per rank):

    python tests/distributed/step_worker.py --out DIR --steps 2 --shares 2 key=value ...
    torchrun --nproc_per_node 2 tests/distributed/step_worker.py --out DIR --steps 2 key=value ...

Each rank writes `rank<r>-step<s>.pt` after each step: its parameters, the step's rollouts
(completion ids, rewards, advantages) and metrics. Rank 0 also writes `pool.json`: the
pool's tasks and their recorded attempts. Each rank also writes what it holds when the run is
open and after the last step (`rank<r>-opened.pt`, `rank<r>-closed.pt`: the first step, the
parameters, the optimizer's and scheduler's states and torch's RNG state); with `--checkpoint`
the run saves a checkpoint after its last step, as the loop does.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch


def main() -> None:
    from selfplay import stages
    from selfplay.config import load
    from selfplay.distributed import Ranks
    from selfplay.loop import run_step
    from selfplay.runs import close_run, open_run
    from selfplay.trainer.checkpoint import Checkpoints

    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--steps", type=int, default=1)
    parser.add_argument("--shares", type=int, default=0)
    parser.add_argument("--checkpoint", action="store_true")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    state, start = open_run(load(None, args.overrides))
    torch.save(held(state, start), args.out / f"rank{state.ranks.rank}-opened.pt")
    if args.shares:
        state.ranks = Ranks(shares=args.shares)
    seen = {}
    reward = stages.reward

    def keep(*a, **k):
        seen["rollouts"] = reward(*a, **k)
        return seen["rollouts"]

    stages.reward = keep
    for step in range(start, start + args.steps):
        metrics = run_step(state, step)
        model = state.accelerator.unwrap_model(state.model)
        rollouts = seen["rollouts"]
        record = {
            "params": {k: v.detach().clone() for k, v in model.state_dict().items()},
            "completions": [r.completion_ids for r in rollouts],
            "rewards": [r.reward for r in rollouts],
            "advantages": [r.advantage for r in rollouts],
            "metrics": metrics,
        }
        torch.save(record, args.out / f"rank{state.ranks.rank}-step{step}.pt")
    torch.save(held(state, start), args.out / f"rank{state.ranks.rank}-closed.pt")
    if args.checkpoint:
        last = start + args.steps - 1
        Checkpoints(state.folder).save(state.accelerator, state.model, state.tokenizer, last)
    if state.ranks.is_main:
        (args.out / "pool.json").write_text(json.dumps(pool_contents(state.store.local)))
    close_run(state)


def held(state, start: int) -> dict:
    """What a rank holds that a checkpoint carries: parameters, optimizer and scheduler
    states, torch's RNG state, and the run's first step."""
    model = state.accelerator.unwrap_model(state.model)
    return {
        "start": start,
        "params": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "optimizer": state.optimizer.state_dict(),
        "scheduler": state.scheduler.state_dict(),
        "rng": torch.get_rng_state(),
    }


def pool_contents(store) -> dict:
    """The pool's tasks (type, program, inputs, outputs, origin) and attempts (task, step,
    answers, correct), each list sorted."""
    from sqlalchemy import select

    from selfplay.curriculum.schema import Attempt

    tasks = store.get(store.index["id"].tolist())
    with store.engine.connect() as connection:
        attempts = connection.execute(
            select(Attempt.task_id, Attempt.step, Attempt.n, Attempt.correct)
        ).all()
    by_id = {t.id: t for t in tasks}
    return {
        "tasks": sorted(
            [
                t.task.type,
                t.task.program,
                list(t.task.inputs),
                list(t.task.outputs),
                t.provenance.origin,
            ]  # fmt: skip
            for t in tasks
        ),
        "attempts": sorted(
            [by_id[a.task_id].task.program, a.step, a.n, a.correct] for a in attempts
        ),
    }


if __name__ == "__main__":
    main()
