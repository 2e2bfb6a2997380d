"""Seeding the pool from the model's own proposals before the first step (zero data).

A zero-data run starts from AZR's one seed task, the identity function. Its first steps show
the proposer that task alone as a reference and give the solver that task alone to train on;
a small proposer copies it, so the pool stays a few identity-like programs for many steps
(measured: 2-3 programs after 17 steps, 57-90% of valid proposals no new work). AZR fills its
buffers before training the same way: the base model proposes from the seed, and the valid
tasks become the first pool.

`seed_from_model` runs the first three stages of a step (propose, validate, store) at step 0,
`selfplay.seed_proposals` samples per proposer prompt in all, in rounds of
`selfplay.seed_round`; nothing is trained. Each round draws its own generation seeds, topics
and references (`stages.propose`'s draw), the references from the pool the rounds before
filled, as AZR draws its seeding's references from the buffer it fills. Every rule of the
store stage applies: copies of the seed, trivial tasks, benchmarks' programs and repeats stay
out of the pool, so only new, non-trivial programs seed it. Induction prompts need a
non-trivial program of the pool to write inputs for: they join once a round has added one.

A long seeding (a length floor keeps 2% of proposals: a 200-task pool takes thousands) must
survive an interruption: after each round, `seeding.json` in the run folder records the rounds
done and the metrics so far, and a restart goes on from the next round. A round's seeds
depend on the run seed and the round only, and adding a task is idempotent, so a round
interrupted half-way runs again and asks what it asked.
"""

from __future__ import annotations

import copy
import json
import math
import os
from collections import Counter
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from selfplay import stages
from selfplay.files import SEEDING_FILE

if TYPE_CHECKING:
    from selfplay.runs import Run

__all__ = ["round_counts", "seed_from_model", "SEEDING_FILE"]

#: the repeats of a pooled task in other words, each counted apart (`new_work`)
_OTHER_WORDS = {"repeat:renamed": "renamed", "repeat:behaviour": "alike"}


def seed_from_model(
    run: Run, on_round: Callable[[int, int, dict[str, float]], None] | None = None
) -> dict[str, float]:
    """Propose, validate and store at step 0, in rounds, until `selfplay.seed_proposals`
    samples per prompt are drawn; returns the metrics of the whole seeding (`seed/...`),
    empty when it is off. `on_round(done, rounds, metrics)` hears of each finished round."""
    total = run.config.selfplay.seed_proposals
    if not total:
        return {}
    size = run.config.selfplay.seed_round
    rounds = math.ceil(total / size)
    path = run.folder / SEEDING_FILE
    done, metrics = _finished_rounds(path, size, total)
    for r in range(done, rounds):
        counts = _seed_round(run, r, min(size, total - r * size))
        metrics = dict(Counter(metrics) + Counter(counts))  # a count of 0 is dropped
        for key in ("seed/proposals", "seed/valid", "seed/added"):
            metrics.setdefault(key, 0.0)
        if run.ranks.is_main:
            _record(path, {"seed_round": size, "seed_proposals": total, "rounds": r + 1}, metrics)
        if on_round is not None:
            on_round(r + 1, rounds, metrics)
    return {**metrics, "seed/rounds": float(rounds)}


def _seed_round(run: Run, r: int, samples: int) -> dict[str, float]:
    cfg = run.config
    seeding = copy.copy(run)  # the same pool, engine and executor; more samples per prompt
    seeding.config = replace(cfg, selfplay=replace(cfg.selfplay, proposal_samples=samples))
    seeding.version = "step0"
    if run.on_stage is not None:
        run.on_stage("seed")
    proposed = stages.propose(seeding, 0, draw=r)
    stored = stages.store_tasks(seeding, stages.validate(seeding, proposed), 0)
    run.engine_role = seeding.engine_role  # the engine is shared: whose weights it now holds
    return round_counts(stored)


def round_counts(stored) -> dict[str, float]:
    """A round's metrics: its proposals, the valid ones, the tasks they added, and every valid
    proposal that added nothing, by why (`seed/<kind>`). The rounds share step 0, so the store
    stage takes a task an earlier round pooled for the step's own (as it must for a round run
    again) and does not call it a repeat: here it is one. Repeats in other words are counted
    apart from the exact ones: renamed (`seed/renamed`) or behaving alike (`seed/alike`)."""
    valid = [s for s in stored if s.validated.task is not None]
    added = sum(1 for s in valid if s.added and not s.no_new_work)
    reasons = Counter(
        _OTHER_WORDS.get(s.no_new_work, s.no_new_work_kind or "repeat")
        for s in valid
        if s.no_new_work or not s.added
    )
    counts = {
        "seed/proposals": float(len(stored)),
        "seed/valid": float(len(valid)),
        "seed/added": float(added),
    }
    counts.update({f"seed/{reason}": float(n) for reason, n in sorted(reasons.items())})
    return counts


def _finished_rounds(path: Path, size: int, total: int) -> tuple[int, dict[str, float]]:
    """The rounds a stopped seeding finished and its metrics so far; (0, {}) without one."""
    if not path.exists():
        return 0, {}
    try:
        record = json.loads(path.read_text())
        done, metrics = int(record["rounds"]), dict(record["metrics"])
        before = int(record["seed_round"])
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(
            f"{path}: not a seeding record ({err}); delete it to seed the pool again from the "
            "first round (the tasks already seeded stay: adding them again changes nothing)"
        ) from err
    metrics = {k: float(v) for k, v in metrics.items()}
    if done * before >= total:  # finished (a smaller seed_proposals than before included)
        return math.ceil(total / size), metrics
    if before != size:
        raise ValueError(
            f"{path}: the seeding stopped after {done} rounds of {before} samples per prompt; "
            f"resume it with selfplay.seed_round={before}, or delete the file to start over"
        )
    return done, metrics


def _record(path: Path, state: dict, metrics: dict[str, float]) -> None:
    partial = path.with_suffix(".json.partial")
    partial.write_text(json.dumps({**state, "metrics": metrics}, indent=1, sort_keys=True) + "\n")
    os.replace(partial, path)
