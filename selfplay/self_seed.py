"""Seeding the pool from the model's own proposals before the first step (zero data).

A zero-data run starts from AZR's one seed task, the identity function. Its first steps show
the proposer that task alone as a reference and give the solver that task alone to train on;
a small proposer copies it, so the pool stays a few identity-like programs for many steps
(measured: 2-3 programs after 17 steps, 57-90% of valid proposals no new work). AZR fills its
buffers before training the same way: the base model proposes from the seed, and the valid
tasks become the first pool.

`seed_from_model` runs the first three stages of a step (propose, validate, store) once, at
step 0, with `selfplay.seed_proposals` samples per proposer prompt; nothing is trained. Every
rule of the store stage applies: copies of the seed, trivial tasks, benchmarks' programs and
repeats stay out of the pool, so only new, non-trivial programs seed it. Induction prompts
need a non-trivial program of the pool to write inputs for, so they start at step 1.

The generation seeds depend on the run seed and step 0 only, and adding a task is idempotent:
a run that restarts before its first checkpoint seeds the same pool again.
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import replace
from typing import TYPE_CHECKING

from selfplay import stages

if TYPE_CHECKING:
    from selfplay.runs import Run

__all__ = ["seed_from_model"]


def seed_from_model(run: Run) -> dict[str, float]:
    """Propose, validate and store once at step 0 with `selfplay.seed_proposals` samples per
    prompt; returns the metrics of the seeding (`seed/...`), empty when it is off."""
    n = run.config.selfplay.seed_proposals
    if not n:
        return {}
    cfg = run.config
    seeding = copy.copy(run)  # the same pool, engine and executor; more samples per prompt
    seeding.config = replace(cfg, selfplay=replace(cfg.selfplay, proposal_samples=n))
    seeding.version = "step0"
    if run.on_stage is not None:
        run.on_stage("seed")
    stored = stages.store_tasks(seeding, stages.validate(seeding, stages.propose(seeding, 0)), 0)
    run.engine_role = seeding.engine_role  # the engine is shared: whose weights it now holds
    valid = [s for s in stored if s.validated.task is not None]
    added = sum(1 for s in valid if s.added and not s.no_new_work)
    reasons = Counter(s.no_new_work.split(":")[0] for s in valid if s.no_new_work)
    metrics = {
        "seed/proposals": float(len(stored)),
        "seed/valid": float(len(valid)),
        "seed/added": float(added),
    }
    metrics.update({f"seed/{reason}": float(count) for reason, count in sorted(reasons.items())})
    return metrics
