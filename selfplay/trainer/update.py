"""The optimizer step: recompute the log-probabilities of sampled tokens, clipped loss, step.

A batch of rollouts is split into mini-batches (one optimizer step each, repeated for
`ppo_epochs`) and each mini-batch into micro-batches whose gradients accumulate. The loss of
each micro-batch is divided by the token (or sequence) count of its whole mini-batch, so the
accumulated gradient is exactly that of the mini-batch's loss (see `loss._aggregate`).

Log-probabilities are those of the model's own distribution, log_softmax(logits), the same
quantity the generation engines report for sampled tokens, so the importance ratio is 1 for
the first optimizer step after sampling.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from selfplay.trainer.loss import LossSettings, policy_loss
from selfplay.types import Rollout

__all__ = ["UpdateSettings", "collate", "token_logprobs", "policy_update"]


@dataclass(frozen=True)
class UpdateSettings:
    micro_batch: int = 4
    mini_batches: int = 1
    ppo_epochs: int = 1
    max_grad_norm: float = 1.0
    loss: LossSettings = LossSettings()


@dataclass
class Batch:
    input_ids: torch.Tensor  # (B, L) prompt + completion, right-padded
    attention_mask: torch.Tensor  # (B, L)
    targets: torch.Tensor  # (B, L - 1) the token each position predicts
    mask: torch.Tensor  # (B, L - 1) 1 where the target is a completion token
    old_logp: torch.Tensor  # (B, L - 1) sampling-time log-probabilities, on the same grid
    advantages: torch.Tensor  # (B,)


def collate(rollouts: Sequence[Rollout], advantages: Sequence[float], pad_id: int) -> Batch:
    length = max(len(r.prompt_ids) + len(r.completion_ids) for r in rollouts)
    shape = (len(rollouts), length)
    ids = torch.full(shape, pad_id, dtype=torch.long)
    attention = torch.zeros(shape, dtype=torch.long)
    mask = torch.zeros(len(rollouts), length - 1)
    old = torch.zeros(len(rollouts), length - 1)
    for row, r in enumerate(rollouts):
        p, c = len(r.prompt_ids), len(r.completion_ids)
        ids[row, : p + c] = torch.tensor(r.prompt_ids + r.completion_ids)
        attention[row, : p + c] = 1
        # the logits at position p - 1 + k predict completion token k
        mask[row, p - 1 : p - 1 + c] = 1
        old[row, p - 1 : p - 1 + c] = torch.tensor(r.logprobs)
    adv = torch.tensor(list(advantages), dtype=torch.float32)
    return Batch(ids, attention, ids[:, 1:], mask, old, adv)


def token_logprobs(model, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """(log-probability of each target token, entropy of each position's distribution)."""
    logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask).logits
    logp_all = torch.log_softmax(logits[:, :-1].float(), dim=-1)
    logp = logp_all.gather(-1, batch.targets.unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():
        entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


def _chunks(items: list, parts: int) -> list[list]:
    size = math.ceil(len(items) / parts)
    return [items[i : i + size] for i in range(0, len(items), size)]


def policy_update(
    accelerator,
    model,
    optimizer,
    scheduler,
    rollouts: Sequence[Rollout],
    advantages: Sequence[float],
    settings: UpdateSettings,
    pad_id: int,
) -> dict[str, float]:
    """Train on `rollouts`; returns statistics averaged over the optimizer steps taken."""
    order = sorted(range(len(rollouts)), key=lambda i: len(rollouts[i].completion_ids))
    sums: dict[str, float] = {}
    micro_count = steps = 0
    model.train()
    for _ in range(settings.ppo_epochs):
        for mini in _chunks(order, settings.mini_batches):
            micro = _chunks(mini, max(1, math.ceil(len(mini) / settings.micro_batch)))
            denominator = _denominator([rollouts[i] for i in mini], settings.loss.aggregation)
            for k, indices in enumerate(micro):
                batch = collate(
                    [rollouts[i] for i in indices], [advantages[i] for i in indices], pad_id
                )
                batch = Batch(*(t.to(accelerator.device) for t in vars(batch).values()))
                last = k == len(micro) - 1
                with contextlib.nullcontext() if last else accelerator.no_sync(model):
                    logp, entropy = token_logprobs(model, batch)
                    loss, stats = policy_loss(
                        logp, batch.old_logp, batch.advantages, batch.mask, settings.loss,
                        denominator=denominator,
                    )  # fmt: skip
                    accelerator.backward(loss)
                tokens = batch.mask.sum().clamp(min=1)
                stats["entropy"] = float((entropy * batch.mask).sum() / tokens)
                stats["loss"] = float(loss.detach()) * len(micro)  # micro losses sum to the step's
                for name, value in stats.items():
                    sums[name] = sums.get(name, 0.0) + value
                micro_count += 1
            grad_norm = accelerator.clip_grad_norm_(model.parameters(), settings.max_grad_norm)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            sums["grad_norm"] = sums.get("grad_norm", 0.0) + float(grad_norm) * len(micro)
            steps += 1
    out = {name: value / max(1, micro_count) for name, value in sums.items()}
    out["optimizer_steps"] = float(steps)
    out["tokens"] = float(sum(len(r.completion_ids) for r in rollouts))
    out["lr"] = float(scheduler.get_last_lr()[0])
    return out


def _denominator(rollouts: Sequence[Rollout], aggregation: str) -> float:
    if aggregation == "token":
        return float(max(1, sum(len(r.completion_ids) for r in rollouts)))
    return float(max(1, len(rollouts)))
