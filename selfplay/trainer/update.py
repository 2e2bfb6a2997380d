"""The optimizer step: recompute the log-probabilities of sampled tokens, clipped loss, step.

A batch of rollouts is split into mini-batches (one optimizer step each, repeated for
`ppo_epochs`) and each mini-batch into micro-batches whose gradients accumulate. The loss of
each micro-batch is divided by the token (or sequence) count of its whole mini-batch, so the
accumulated gradient is exactly that of the mini-batch's loss (see `loss._aggregate`).

Two savings that leave the gradient exactly as it is:
  * a rollout whose advantage is 0 adds 0 to the loss and to its gradient (both branches of
    the clipped objective are multiplied by it), so it is counted in the denominator but not
    run through the model; a mini-batch with no other rollout takes no optimizer step;
  * sequences are left-padded, so every completion ends at the last position and the language
    model head and the log-softmax run only over the last (longest completion) positions,
    not over the prompts (`logits_to_keep`).

The policy trained is the tempered distribution the engine samples from,
softmax(logits / temperature): its log-probabilities are what the engines report for sampled
tokens (`engine.base`), so with top-p 1 the importance ratio is 1 for the first optimizer step
after sampling, and the gradient is that of the distribution that drew the samples.

Mini-batches are cut from a seeded shuffle of the rollouts, so that each optimizer step sees a
fair share of both roles and of short and long answers; within a mini-batch, rollouts are
sorted by length before they are cut into micro-batches, so that little padding is wasted.
The learning-rate schedule advances once per optimizer step (`trainer.warmup_steps` counts
optimizer steps), and the rate reported is the one the last optimizer step used.

With several processes (`share=`), every rank cuts the same mini-batches and runs its share of
each in the same number of micro-batches (`micro_batch_share`); the statistics reported are the
whole update's, gathered from every rank.
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from selfplay.distributed import Ranks, share_bounds
from selfplay.trainer.loss import policy_loss
from selfplay.types import Rollout

if TYPE_CHECKING:
    from selfplay.config import TrainerConfig

__all__ = ["MicroBatch", "collate", "token_logprobs", "policy_update"]


@dataclass
class MicroBatch:
    """Rollouts as tensors for one forward/backward pass."""

    input_ids: torch.Tensor  # (B, W) prompt + completion, left-padded
    attention_mask: torch.Tensor  # (B, W)
    position_ids: torch.Tensor  # (B, W) positions of real tokens, as without padding
    targets: torch.Tensor  # (B, C) the last C tokens: what the kept logits predict
    mask: torch.Tensor  # (B, C) 1 where the target is a completion token
    old_logp: torch.Tensor  # (B, C) sampling-time log-probabilities, on the same grid
    advantages: torch.Tensor  # (B,)


def collate(rollouts: Sequence[Rollout], advantages: Sequence[float], pad_id: int) -> MicroBatch:
    width = max(len(r.prompt_ids) + len(r.completion_ids) for r in rollouts)
    tail = max(len(r.completion_ids) for r in rollouts)
    ids = torch.full((len(rollouts), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(rollouts), width), dtype=torch.long)
    mask = torch.zeros(len(rollouts), tail)
    old = torch.zeros(len(rollouts), tail)
    for row, r in enumerate(rollouts):
        sequence = r.prompt_ids + r.completion_ids
        ids[row, width - len(sequence) :] = torch.tensor(sequence)
        attention[row, width - len(sequence) :] = 1
        c = len(r.completion_ids)
        mask[row, tail - c :] = 1
        old[row, tail - c :] = torch.tensor(r.logprobs)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    adv = torch.tensor(list(advantages), dtype=torch.float32)
    return MicroBatch(ids, attention, positions, ids[:, width - tail :], mask, old, adv)


def token_logprobs(
    model, batch: MicroBatch, temperature: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """(log-probability of each target token, entropy of each position's distribution), under
    softmax(logits / temperature); temperature 0 (greedy sampling) scores the model's own.

    The logits at position t predict token t + 1, so the last C targets need the C logits
    before the last position: keep C + 1 and drop the final one."""
    tail = batch.targets.shape[1]
    out = model(
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        position_ids=batch.position_ids,
        logits_to_keep=tail + 1,
    )
    logits = out.logits[:, :-1].float()
    if temperature > 0 and temperature != 1:
        logits = logits / temperature
    logp_all = torch.log_softmax(logits, dim=-1)
    logp = logp_all.gather(-1, batch.targets.unsqueeze(-1)).squeeze(-1)
    with torch.no_grad():
        entropy = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


def _chunks(items: list, parts: int) -> list[list]:
    size = math.ceil(len(items) / parts)
    return [items[i : i + size] for i in range(0, len(items), size)]


def _mini_batches(lengths: Sequence[int], parts: int, rng: random.Random) -> list[list[int]]:
    """Rollout indices in `parts` mini-batches cut from a shuffle, each sorted by length."""
    order = list(range(len(lengths)))
    rng.shuffle(order)
    return [sorted(mini, key=lengths.__getitem__) for mini in _chunks(order, parts)]


def micro_batch_share(active: Sequence[int], micro_batch: int, share: Ranks) -> list[list[int]]:
    """This rank's micro-batches of a mini-batch's `active` rollouts (sorted by length).

    Rank r takes every world_size-th rollout from r, so that the ranks' shares are equally
    long, and every rank runs the same number of micro-batches: as many as the largest share
    needs. A rank whose share runs out has empty micro-batches; the update runs each as one
    zero-weight rollout, so that DDP's gradient all-reduce meets every rank at every one."""
    mine = list(active[share.rank :: share.world_size])
    count = max(1, math.ceil(math.ceil(len(active) / share.world_size) / micro_batch))
    return [mine[start:stop] for start, stop in share_bounds(len(mine), count)]


def policy_update(
    accelerator,
    model,
    optimizer,
    scheduler,
    rollouts: Sequence[Rollout],
    advantages: Sequence[float],
    config: TrainerConfig,
    pad_id: int,
    reference=None,
    temperature: float = 1.0,
    seed: int = 0,
    share: Ranks | None = None,
) -> dict[str, float]:
    """Train on `rollouts`; returns statistics averaged over the optimizer steps taken.
    From `config` it takes the batching (`micro_batch`, `mini_batches`, `ppo_epochs`), the
    gradient clip `max_grad_norm` and the loss's settings (`loss.policy_loss`). `reference` is
    the frozen model of the KL term (needed when `config.kl_coef > 0`). `temperature` is the
    one the rollouts were sampled at; `seed` draws the mini-batches.

    With several processes every rank passes the whole step's rollouts and advantages and its
    `share` (`selfplay.distributed.Ranks`): mini-batches are cut the same way on every rank
    (same seed), each rank runs its share of each (`micro_batch_share`), and its loss is
    divided by the whole mini-batch's denominator and multiplied by the world size, so that
    the gradient DDP averages over ranks is exactly the one process's gradient."""
    if config.kl_coef > 0 and reference is None:
        raise ValueError("kl_coef > 0 needs a reference model")
    share = share or Ranks()
    length = [len(r.prompt_ids) + len(r.completion_ids) for r in rollouts]
    rng = random.Random(seed)
    lr = float(scheduler.get_last_lr()[0])
    # Zero-advantage rollouts add nothing to the loss, unless the KL term makes them count.
    skippable = config.kl_coef == 0
    # parts of the mini-batch's loss (summed over ranks) and per-micro-batch means
    parts = {"loss": 0.0, "kl_ref": 0.0}
    means: dict[str, float] = {}
    micro_count = real_count = steps = 0
    grad_norms = 0.0
    model.train()
    skipped = 0
    for _ in range(config.ppo_epochs):
        for mini in _mini_batches(length, config.mini_batches, rng):
            denominator = _denominator([rollouts[i] for i in mini], config.aggregation)
            active = [i for i in mini if advantages[i] != 0.0 or not skippable]
            skipped += len(mini) - len(active)
            if not active:
                continue
            micro = micro_batch_share(active, config.micro_batch, share)
            for k, indices in enumerate(micro):
                padding = not indices
                rows = indices or [active[0]]
                batch = collate([rollouts[i] for i in rows], [advantages[i] for i in rows], pad_id)
                if padding:
                    batch.mask.zero_()
                batch = MicroBatch(*(t.to(accelerator.device) for t in vars(batch).values()))
                last = k == len(micro) - 1
                ref_logp = None
                if config.kl_coef > 0:
                    with torch.no_grad():
                        ref_logp, _ = token_logprobs(reference, batch, temperature)
                with contextlib.nullcontext() if last else accelerator.no_sync(model):
                    logp, entropy = token_logprobs(model, batch, temperature)
                    loss, stats = policy_loss(
                        logp,
                        batch.old_logp,
                        batch.advantages,
                        batch.mask,
                        config,
                        ref_logp=ref_logp,
                        denominator=denominator,
                    )
                    accelerator.backward(loss * share.world_size)
                micro_count += 1
                # the loss and KL of a micro-batch are parts of the mini-batch's (same
                # denominator): scaled so that their average over micro-batches is the whole
                parts["loss"] += float(loss.detach()) * len(micro)
                parts["kl_ref"] += stats.pop("kl_ref", 0.0) * len(micro)
                if padding:
                    continue
                tokens = batch.mask.sum().clamp(min=1)
                stats["entropy"] = float((entropy * batch.mask).sum() / tokens)
                for name, value in stats.items():
                    means[name] = means.get(name, 0.0) + value
                real_count += 1
            grad_norm = accelerator.clip_grad_norm_(model.parameters(), config.max_grad_norm)
            lr = float(scheduler.get_last_lr()[0])  # the rate this optimizer step uses
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad(set_to_none=True)
            grad_norms += float(grad_norm) * len(micro)
            steps += 1
    out = _combine(share, parts, means, micro_count, real_count, config.kl_coef > 0)
    if steps:
        out["grad_norm"] = grad_norms / micro_count
    out["optimizer_steps"] = float(steps)
    out["zero_advantage_skipped"] = float(skipped)
    out.update(_token_counts(rollouts, advantages, skippable))
    out["lr"] = lr
    return out


def _token_counts(rollouts, advantages, skippable: bool) -> dict[str, float]:
    """Completion tokens of the batch, and those that carried a gradient (`signal_tokens`:
    zero-advantage rollouts are skipped where they add nothing)."""
    signal = (r for r, a in zip(rollouts, advantages) if a != 0 or not skippable)
    return {
        "tokens": float(sum(len(r.completion_ids) for r in rollouts)),
        "signal_tokens": float(sum(len(r.completion_ids) for r in signal)),
    }


def _combine(
    share: Ranks, parts: dict, means: dict, micro_count: int, real_count: int, kl: bool
) -> dict[str, float]:
    """The statistics of the whole update from every rank's: the loss (and KL) parts summed
    over ranks, per-micro-batch statistics averaged over every rank's real micro-batches.
    Every rank runs `micro_count` micro-batches."""
    gathered = share.gather((parts, means, real_count))
    if not micro_count:
        return {}
    out = {}
    for name in ("loss", "kl_ref") if kl else ("loss",):
        out[name] = sum(p[name] for p, _, _ in gathered) / micro_count
    real = sum(count for _, _, count in gathered)
    for name in means:
        out[name] = sum(m.get(name, 0.0) for _, m, _ in gathered) / max(1, real)
    return out


def _denominator(rollouts: Sequence[Rollout], aggregation: str) -> float:
    if aggregation == "token":
        return float(max(1, sum(len(r.completion_ids) for r in rollouts)))
    return float(max(1, len(rollouts)))
