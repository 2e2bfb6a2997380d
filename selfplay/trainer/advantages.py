"""Advantage estimators: how a sample's reward becomes its advantage.

All three subtract a baseline and divide by a spread computed over a group of samples, and
differ in the grouping:

  trr++        task-relative REINFORCE++ (AZR): one group per (role, task type), so the
               proposer's learnability rewards and the solver's correctness rewards, and the
               task types, are each normalised on their own scale;
  grpo         one group per prompt: the n samples drawn for the same prompt (GRPO);
  reinforce++  one group for the whole batch (REINFORCE++).

For a group G with rewards r_i: A_i = (r_i - mean_G(r)) / (std_G(r) + eps), with the
population standard deviation. A group with a single sample, or whose rewards are all equal,
gets advantages of 0: it carries no signal about which sample was better. Equal means within
rounding (a spread under `TIED` of the rewards' scale, computed in float64): 0.75 - 0.3 and 0.45
differ in their last bit, and a group of eight 0.45 normalised in float32 had a spread of one
rounding error, so every sample got the same advantage of about -0.03 and the update trained on
the group instead of skipping it.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

import torch

__all__ = ["AdvantageInputs", "ESTIMATORS", "compute_advantages"]


@dataclass(frozen=True)
class AdvantageInputs:
    rewards: torch.Tensor  # (N,) float
    roles: Sequence[str]  # "propose" or "solve", per sample
    task_types: Sequence[str]  # per sample
    prompts: Sequence[int]  # samples drawn from the same prompt share an id


#: a group's rewards are tied when their spread is under this share of their scale (at least 1)
TIED = 1e-9


def normalise_within(rewards: torch.Tensor, keys: Sequence[Hashable], eps: float) -> torch.Tensor:
    """(r - mean) / (std + eps) within each group of equal keys; 0 in a group whose rewards
    are tied (see the module docstring)."""
    out = torch.zeros_like(rewards, dtype=torch.float32)
    groups: dict[Hashable, list[int]] = {}
    for index, key in enumerate(keys):
        groups.setdefault(key, []).append(index)
    for members in groups.values():
        if len(members) < 2:
            continue
        index = torch.tensor(members)
        group = rewards[index].double()
        mean = group.mean()
        std = group.std(unbiased=False)
        if std <= TIED * max(1.0, float(group.abs().max())):
            continue
        out[index] = ((group - mean) / (std + eps)).float()
    return out


def _trr(inputs: AdvantageInputs, eps: float) -> torch.Tensor:
    keys = list(zip(inputs.roles, inputs.task_types, strict=True))
    return normalise_within(inputs.rewards, keys, eps)


def _grpo(inputs: AdvantageInputs, eps: float) -> torch.Tensor:
    return normalise_within(inputs.rewards, list(inputs.prompts), eps)


def _reinforce(inputs: AdvantageInputs, eps: float) -> torch.Tensor:
    return normalise_within(inputs.rewards, [0] * len(inputs.rewards), eps)


ESTIMATORS: dict[str, Callable[[AdvantageInputs, float], torch.Tensor]] = {
    "trr++": _trr,
    "grpo": _grpo,
    "reinforce++": _reinforce,
}


def compute_advantages(name: str, inputs: AdvantageInputs, eps: float = 1e-6) -> torch.Tensor:
    if name not in ESTIMATORS:
        raise ValueError(f"unknown advantage estimator {name!r}; known: {sorted(ESTIMATORS)}")
    n = len(inputs.rewards)
    if not (len(inputs.roles) == len(inputs.task_types) == len(inputs.prompts) == n):
        raise ValueError("rewards, roles, task types and prompts must be equally long")
    return ESTIMATORS[name](inputs, eps)
