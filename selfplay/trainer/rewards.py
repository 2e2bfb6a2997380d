"""Rewards: plain functions with one signature, `reward(result, config) -> float`, in one dict.

Solver (one answer to one task):
  correct    1
  wrong      `reward.solver_wrong` (default -0.5): well-formed, but the executor says no
  malformed  `reward.solver_malformed` (default -1): no answer could be read from the text

Proposer (one proposed task, after the solver attempted it `selfplay.attempts` times):
  valid      learnability of the task's empirical solve rate p (the share of those attempts
             that were correct), under the shape `reward.learnability` names:
               azr         1 - p, and 0 when p is 0 or 1 (AZR). Its expectation over n
                           attempts is the sampler's `azr` weight, (1 - p) - (1 - p)**n.
               rzero_band  1 when curriculum.band[0] <= p <= curriculum.band[1], else 0
               rzero_peak  min(p, 1 - p), largest at p = 1/2 (R-Zero's uncertainty reward / 2)
               variance    p (1 - p)
             less `penalty`: R-Zero's batch repetition penalty and the novelty penalty
             (`reward.repetition`, `reward.novelty`; `repetition.py`) and the brevity
             penalty of a short program (`reward.brevity`; `proposer/complexity.py`), down
             to the penalty floor at most: the higher of the duplicate and invalid
             penalties, so that new work never earns less than a copy or a refusal
  duplicate  `reward.proposer_duplicate` (default -1): valid, but no new work: the pool
             held the task, its program copies a reference shown in the prompt, it is
             trivial or a benchmark's program (`stages.store_tasks` decides)
  invalid    `reward.proposer_invalid` (default -0.5): it parsed, but the executor refused it
  malformed  `reward.proposer_malformed` (default -1): no program or input could be read

The penalties follow AZR's format rewards (-0.5 for a well-formed wrong response, -1 for a
formatting error). A valid task at p = 0 or p = 1 earns 0 under `azr`: more than an invalid
one, less than one at the frontier.

A duplicate earns what an unreadable proposal earns, not 0: the references are frontier
tasks shown in the answer format, so copying one is a valid proposal for no effort. At 0 it
would beat every failed attempt, and in the steps where most proposals fail (the start of a
zero-data run) the group-relative advantage would reward copying over trying. At the
refusal's penalty (-0.5, the default until measured) a copy grouped with an unreadable
proposal gained a positive advantage, and runs copied more as they trained; at -0.75 a
15-step run copied no less; at -1, where a copy never gains a positive advantage, two 15-step
runs (seeds 0 and 1) copied less (no new work 45% against 69% of valid proposals over steps
5-15), and their checkpoints were not significantly below the base on CRUXEval-O, and no
worse than the -0.5 runs' on either CRUXEval set (docs/results.md).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from selfplay.curriculum.sampler import SHAPES
from selfplay.types import AnswerOutcome, ProposalOutcome, Role

__all__ = ["RoleResult", "REWARDS", "reward", "learnability", "penalty_floor"]


@dataclass(frozen=True)
class RoleResult:
    role: Role
    outcome: ProposalOutcome | AnswerOutcome
    solve_rate: float | None = None  # proposer, valid: the solver's empirical solve rate
    duplicate: bool = False  # proposer, valid: no new task (see `selfplay.types.Stored`)
    penalty: float = 0.0  # proposer, valid: the repetition, novelty and brevity penalties


def learnability(shape: str, p: float, config) -> float:
    """The proposer's reward for a valid task solved with empirical rate `p`."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"a solve rate is between 0 and 1, got {p}")
    if shape == "azr":
        return 0.0 if p in (0.0, 1.0) else 1.0 - p
    if shape not in SHAPES:
        raise ValueError(f"unknown learnability shape {shape!r}; known: {sorted(SHAPES)}")
    # p is the share of `selfplay.attempts` answers (only azr, above, depends on the count)
    return float(SHAPES[shape](np.array([p]), config.curriculum, config.selfplay.attempts)[0])


def solver_reward(result: RoleResult, config) -> float:
    cfg = config.reward
    table = {"correct": 1.0, "wrong": cfg.solver_wrong, "malformed": cfg.solver_malformed}
    return table[result.outcome]


def proposer_reward(result: RoleResult, config) -> float:
    cfg = config.reward
    if result.outcome == "malformed":
        return cfg.proposer_malformed
    if result.outcome == "invalid":
        return cfg.proposer_invalid
    if result.duplicate:
        return cfg.proposer_duplicate
    if result.solve_rate is None:
        raise ValueError("a valid proposal's reward needs the solver's solve rate")
    reward = learnability(cfg.learnability, result.solve_rate, config)
    if result.penalty:
        return max(penalty_floor(cfg), reward - result.penalty)
    return reward


def penalty_floor(cfg) -> float:
    """The least a new, valid task earns after its penalties: what a copy or a refused
    proposal earns, whichever is more (with a copy at -1, a repetitive new task must not
    earn less than a program the executor refuses)."""
    return max(cfg.proposer_duplicate, cfg.proposer_invalid)


REWARDS: dict[str, Callable[[RoleResult, object], float]] = {
    "solve": solver_reward,
    "propose": proposer_reward,
}


def reward(result: RoleResult, config) -> float:
    return REWARDS[result.role](result, config)
