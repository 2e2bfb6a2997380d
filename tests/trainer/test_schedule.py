"""The learning rate's schedule: warm-up, then constant, linear or cosine decay to a floor."""

from __future__ import annotations

import math

import pytest
import torch

from selfplay.config import TrainerConfig
from selfplay.trainer.schedule import lr_factor, lr_scheduler, planned_steps


def test_the_warm_up_rises_linearly_then_the_constant_schedule_holds():
    assert [lr_factor(s, 4, 10, "constant", 0.0) for s in range(6)] == [0.25, 0.5, 0.75, 1, 1, 1]
    assert lr_factor(10**6, 0, 10, "constant", 0.5) == 1.0  # no floor without decay


@pytest.mark.parametrize("schedule", ["linear", "cosine"])
def test_a_decay_starts_at_the_full_rate_after_the_warm_up_and_ends_at_the_floor(schedule):
    warmup, total, floor = 2, 12, 0.1
    factors = [lr_factor(s, warmup, total, schedule, floor) for s in range(total + 3)]
    assert factors[:2] == [0.5, 1.0]  # warm-up
    assert factors[2] == 1.0  # the first step after it
    decay = factors[2 : total + 1]
    assert all(a > b for a, b in zip(decay, decay[1:], strict=False))  # strictly falling
    assert factors[total - 1] > floor  # the run's last optimizer step still learns
    assert factors[total:] == pytest.approx([floor] * 3)  # one step past it: the floor, kept
    half = lr_factor(warmup + (total - warmup) // 2, warmup, total, schedule, floor)
    assert half == pytest.approx(floor + (1 - floor) / 2)  # both are halfway at the midpoint


def test_cosine_is_slow_at_both_ends_and_linear_is_not():
    linear = [lr_factor(s, 0, 100, "linear", 0.0) for s in range(101)]
    cosine = [lr_factor(s, 0, 100, "cosine", 0.0) for s in range(101)]
    assert linear[10] == pytest.approx(0.9) and cosine[10] == pytest.approx(
        0.5 * (1 + math.cos(math.pi / 10))
    )
    assert cosine[10] > linear[10] and cosine[90] < linear[90]


def test_an_unknown_schedule_is_refused():
    with pytest.raises(ValueError, match="unknown learning-rate schedule 'step'"):
        lr_factor(5, 0, 10, "step", 0.0)


def test_the_scheduler_plans_the_run_s_optimizer_steps():
    t = TrainerConfig(lr=1e-3, lr_schedule="linear", mini_batches=2, ppo_epochs=3)
    assert planned_steps(5, t) == 30
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=t.lr)
    scheduler = lr_scheduler(optimizer, t, steps=5)
    rates = []
    for _ in range(30):
        rates.append(scheduler.get_last_lr()[0])
        optimizer.step()
        scheduler.step()
    assert rates[0] == 1e-3 and rates[-1] == pytest.approx(1e-3 / 30)
    assert scheduler.get_last_lr()[0] == 0.0  # after the last planned step


@pytest.mark.parametrize("warmup", [30, 31])
def test_a_decay_whose_warm_up_covers_the_whole_run_is_refused(warmup):
    optimizer = torch.optim.AdamW([torch.nn.Parameter(torch.zeros(2))], lr=1e-3)
    t = TrainerConfig(lr_schedule="cosine", warmup_steps=warmup, mini_batches=2, ppo_epochs=3)
    with pytest.raises(ValueError, match=f"warmup_steps={warmup} covers all 30 planned"):
        lr_scheduler(optimizer, t, steps=5)
    constant = TrainerConfig(warmup_steps=warmup, mini_batches=2, ppo_epochs=3)
    lr_scheduler(optimizer, constant, steps=5)  # a constant rate has nothing to decay
    lr_scheduler(
        optimizer,
        TrainerConfig(lr_schedule="cosine", warmup_steps=29, mini_batches=2, ppo_epochs=3),
        steps=5,
    )
