"""The learning rate's schedule: a linear warm-up, then a constant rate or one that decays over
the run.

The schedule advances once per optimizer step (`trainer.warmup_steps` counts them). After the
warm-up the rate is `trainer.lr` (`constant`), or falls from it toward `trainer.min_lr_ratio` x
`trainer.lr` over the run's planned optimizer steps, `run.steps` x `trainer.mini_batches` x
`trainer.ppo_epochs` (`linear`, or `cosine`: half a cosine wave, slow at both ends). The planned
count is the most a run takes: a step whose rollouts fill fewer mini-batches takes fewer
optimizer steps, and the decay then ends later. As in the usual schedules (transformers',
TRL's), the floor is where the decay would be one optimizer step after the run's last. A
decaying schedule needs planned optimizer steps after the warm-up: a warm-up that covers them all
is refused.

A run resumed with another `run.steps` plans its schedule anew over the new length and goes on
at the same optimizer step: the rate there is the new schedule's, which may jump (a run
lengthened after its decay ended goes back up to where the longer decay would be;
`checkpoint.configured_rates` says by how much it changed).
"""

from __future__ import annotations

import math

import torch

__all__ = ["SCHEDULES", "lr_factor", "lr_scheduler", "planned_steps"]

SCHEDULES = ("constant", "linear", "cosine")


def lr_factor(step: int, warmup: int, total: int, schedule: str, floor: float) -> float:
    """The share of the base rate that optimizer step `step` (from 0) uses: (step + 1) /
    `warmup` during the warm-up, then the schedule's decay from 1 toward `floor` by optimizer
    step `total`."""
    if step < warmup:
        return (step + 1) / warmup
    if schedule == "constant":
        return 1.0
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    if schedule == "linear":
        left = 1.0 - progress
    elif schedule == "cosine":
        left = 0.5 * (1.0 + math.cos(math.pi * progress))
    else:
        raise ValueError(f"unknown learning-rate schedule {schedule!r}; one of {SCHEDULES}")
    return floor + (1.0 - floor) * left


def planned_steps(steps: int, trainer) -> int:
    """The optimizer steps a run of `steps` steps takes at most."""
    return steps * trainer.mini_batches * trainer.ppo_epochs


def lr_scheduler(optimizer, trainer, steps: int) -> torch.optim.lr_scheduler.LambdaLR:
    """The schedule of `trainer` (its warm-up, `lr_schedule`, `min_lr_ratio`) for a run of
    `steps` steps. A decay with no planned optimizer step left after the warm-up is refused:
    it would drop from the full rate to the floor in one step."""
    total = planned_steps(steps, trainer)
    warmup, schedule, floor = trainer.warmup_steps, trainer.lr_schedule, trainer.min_lr_ratio
    if schedule != "constant" and warmup >= total:
        raise ValueError(
            f"trainer.lr_schedule={schedule}: trainer.warmup_steps={warmup} covers all {total} "
            f"planned optimizer steps (run.steps={steps} x trainer.mini_batches="
            f"{trainer.mini_batches} x trainer.ppo_epochs={trainer.ppo_epochs}), so the rate "
            "would never decay; shorten the warm-up or use lr_schedule=constant"
        )
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: lr_factor(s, warmup, total, schedule, floor)
    )
