"""The optimizer step: recompute the log-probabilities of sampled tokens, clipped loss, step.

A batch of rollouts is split into mini-batches (one optimizer step each, repeated for
`ppo_epochs`) and each mini-batch into micro-batches whose gradients accumulate. The loss of
each micro-batch is divided by the token (or sequence) count of its whole mini-batch, so the
accumulated gradient is exactly that of the mini-batch's loss (see `loss._aggregate`).

Three savings that leave the gradient exactly as it is:
  * a rollout whose advantage is 0 adds 0 to the loss and to its gradient (both branches of
    the clipped objective are multiplied by it), so it is counted in the denominator but not
    run through the model; a mini-batch with no other rollout takes no optimizer step (not
    with a KL term or an entropy bonus, which such a rollout does feed:
    `loss.zero_advantage_adds_nothing`);
  * the completions of one prompt share a row behind a single copy of it (`collate`), each
    attending to the prompt and to its own tokens only, at the positions it was sampled at:
    a group of 8 answers to a 200-token prompt runs 200 prompt tokens instead of 1,600
    (`trainer.share_prompts`; its speed-up is measured in docs/results.md);
  * rows are left-padded, so every row's completions end at the last position and the
    language model head and the log-softmax run only over the last positions, not over the
    prompts (`logits_to_keep`).

The policy trained is the tempered distribution the engine samples from,
softmax(logits / temperature): its log-probabilities are what the engines report for sampled
tokens (`engine.base`), so with top-p 1 the importance ratio is 1 for the first optimizer step
after sampling, and the gradient is that of the distribution that drew the samples.

Mini-batches are cut from a seeded shuffle of the rollouts, so that each optimizer step sees a
fair share of both roles and of short and long answers; within a mini-batch, rollouts are
sorted by length before they are cut into micro-batches, so that little padding is wasted.
The learning-rate schedule (`schedule`) advances once per optimizer step (`trainer.warmup_steps`
counts optimizer steps), and the rate reported is the one the last optimizer step used.

With several processes (`share=`), every rank cuts the same mini-batches and runs its share of
each in the same number of micro-batches (`micro_batch_share`); the statistics reported are the
whole update's, gathered from every rank.
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import torch

from selfplay.distributed import Ranks, share_bounds
from selfplay.trainer.lora import ROLES, activate, per_role, role_parameters
from selfplay.trainer.loss import policy_loss, zero_advantage_adds_nothing
from selfplay.trainer.update_stats import Statistics, loss_weight
from selfplay.types import Rollout

if TYPE_CHECKING:
    from selfplay.config import TrainerConfig

__all__ = ["MicroBatch", "collate", "policy_update", "token_logprobs"]

#: attention implementations that take a 4-D mask, so that completions can share a prompt
MASKED_ATTENTION = ("sdpa", "eager")


@dataclass
class MicroBatch:
    """Rollouts as tensors for one forward/backward pass.

    Each row holds one prompt once, followed by every completion of it in the micro-batch (a
    GRPO group shares its prompt): each completion attends to the prompt and to its own
    earlier tokens only (`attention_mask`, (R, 1, W, W)) at the positions it had when it was
    sampled (`position_ids`), so its log-probabilities are those of prompt + completion
    alone, while the prompt's tokens are run through the model once for the whole group.
    Rows are left-padded to end together; the logits of the last `keep` positions are
    computed (every row's completions and the prompt token before them, which predicts each
    completion's first token). The rollouts' own tensors are on a (B, C) grid of completion
    tokens, first token first."""

    input_ids: torch.Tensor  # (R, W) per row: left padding, prompt, completion, completion...
    attention_mask: torch.Tensor  # (R, 1, W, W) what each position may attend to
    position_ids: torch.Tensor  # (R, W) each token's position in prompt + its completion
    keep: int  # the logits of the last `keep` positions are computed
    row: torch.Tensor  # (B,) the row holding each rollout
    source: torch.Tensor  # (B, C) the kept position whose logits predict each target
    targets: torch.Tensor  # (B, C) completion tokens
    mask: torch.Tensor  # (B, C) 1 where the target is a completion token
    old_logp: torch.Tensor  # (B, C) sampling-time log-probabilities, on the same grid
    advantages: torch.Tensor  # (B,)
    kl_weights: torch.Tensor  # (B,) each rollout's weight in the KL term
    proposal: torch.Tensor  # (B,) True for a proposer's rollout

    def to(self, device) -> MicroBatch:
        moved = {k: v.to(device) if torch.is_tensor(v) else v for k, v in vars(self).items()}
        return MicroBatch(**moved)


def collate(
    rollouts: Sequence[Rollout],
    advantages: Sequence[float],
    pad_id: int,
    share_prompts: bool = True,
    attention: str = "sdpa",
    kl_weights: Sequence[float] | None = None,
) -> MicroBatch:
    """The micro-batch of `rollouts`: with `share_prompts` the rollouts of one role's prompt
    share a row, else every rollout has a row of its own. `attention` is the model's attention
    implementation: a boolean mask for `sdpa` (and the others that take one), an additive
    float mask for `eager`. `kl_weights` are the rollouts' weights in the KL term (1 each
    where None)."""
    # A row is one prompt of one role: each row is scored at its role's temperature
    # (`token_logprobs`), so a proposer's and a solver's prompt of the same text never share one.
    rows: dict[tuple[str, tuple[int, ...]] | int, list[int]] = {}
    for b, r in enumerate(rollouts):
        rows.setdefault((r.role, r.prompt_ids) if share_prompts else b, []).append(b)
    members = list(rows.values())
    areas = [sum(len(rollouts[b].completion_ids) for b in m) for m in members]
    width = max(len(rollouts[m[0]].prompt_ids) + a for m, a in zip(members, areas, strict=True))
    keep = max(areas) + 1
    tail = max(len(r.completion_ids) for r in rollouts)
    ids = torch.full((len(members), width), pad_id, dtype=torch.long)
    positions = torch.zeros((len(members), width), dtype=torch.long)
    # the segment of each position: -1 padding, 0 the prompt, j + 1 the row's j-th completion
    segment = torch.full((len(members), width), -1, dtype=torch.long)
    row = torch.zeros(len(rollouts), dtype=torch.long)
    source = torch.zeros((len(rollouts), tail), dtype=torch.long)
    targets = torch.zeros((len(rollouts), tail), dtype=torch.long)
    mask = torch.zeros(len(rollouts), tail)
    old = torch.zeros(len(rollouts), tail)
    for r_index, (m, area) in enumerate(zip(members, areas, strict=True)):
        prompt = rollouts[m[0]].prompt_ids
        start = width - area - len(prompt)
        ids[r_index, start : width - area] = torch.tensor(prompt)
        positions[r_index, start : width - area] = torch.arange(len(prompt))
        segment[r_index, start : width - area] = 0
        at = width - area  # where the next completion begins
        for j, b in enumerate(m):
            completion = rollouts[b].completion_ids
            n = len(completion)
            ids[r_index, at : at + n] = torch.tensor(completion)
            positions[r_index, at : at + n] = torch.arange(len(prompt), len(prompt) + n)
            segment[r_index, at : at + n] = j + 1
            # token 0 is predicted by the prompt's last position, token t by the one before it
            predictors = [width - area - 1, *range(at, at + n - 1)][:n]
            row[b] = r_index
            source[b, :n] = torch.tensor(predictors) - (width - keep)
            targets[b, :n] = torch.tensor(completion)
            mask[b, :n] = 1
            old[b, :n] = torch.tensor(rollouts[b].logprobs)
            at += n
    adv = torch.tensor(list(advantages), dtype=torch.float32)
    weights = [1.0] * len(rollouts) if kl_weights is None else list(kl_weights)
    kl_w = torch.tensor(weights, dtype=torch.float32)
    proposal = torch.tensor([r.role == "propose" for r in rollouts], dtype=torch.bool)
    visible = _visibility(segment, attention)
    return MicroBatch(
        ids, visible, positions, keep, row, source, targets, mask, old, adv, kl_w, proposal
    )


def _visibility(segment: torch.Tensor, attention: str) -> torch.Tensor:
    """(R, 1, W, W): query q may attend to key k when k <= q and k is in the prompt or in q's
    own completion. A padding position attends to itself alone (a row of the softmax must not
    be empty); nothing attends to padding."""
    width = segment.shape[1]
    causal = torch.ones(width, width, dtype=torch.bool).tril()
    query, key = segment.unsqueeze(2), segment.unsqueeze(1)
    allowed = causal & (key >= 0) & ((key == 0) | (key == query))
    allowed |= torch.eye(width, dtype=torch.bool) & (query < 0)
    allowed = allowed.unsqueeze(1)
    if attention == "eager":  # added to the attention scores
        return torch.zeros(allowed.shape).masked_fill(~allowed, torch.finfo(torch.float32).min)
    if attention in MASKED_ATTENTION:
        return allowed
    if segment.max() > 1:
        raise ValueError(
            f"{attention} attention takes no mask that lets completions share a prompt: "
            "set trainer.share_prompts=false or load the model with sdpa or eager attention"
        )
    return (segment >= 0).long()  # one completion a row: a padding mask is all it needs


def attention_of(model) -> str:
    """The attention implementation of an unwrapped `model` (a peft model's is its base's),
    which decides the form of the mask (`collate`)."""
    return getattr(model.config, "_attn_implementation", None) or "sdpa"


def token_logprobs(
    model,
    batch: MicroBatch,
    temperature: float = 1.0,
    entropy_grad: bool = False,
    solve_temperature: float | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(log-probability of each target token, entropy of its position's distribution), on
    the (B, C) grid, under softmax(logits / temperature); temperature 0 (greedy sampling)
    scores the model's own. A solver's rollout is scored at `solve_temperature` where given
    (a row holds one prompt's completions, so one role's). The entropy carries a gradient
    with `entropy_grad` (an entropy bonus in the loss), and is detached otherwise."""
    out = model(
        input_ids=batch.input_ids,
        attention_mask=batch.attention_mask,
        position_ids=batch.position_ids,
        logits_to_keep=batch.keep,
    )
    logits = out.logits.float()
    if solve_temperature is not None and solve_temperature != temperature:
        logits = logits / _row_temperatures(batch, temperature, solve_temperature, logits)
    elif temperature > 0 and temperature != 1:
        logits = logits / temperature
    logp_all = torch.log_softmax(logits, dim=-1)  # (R, keep, V)
    rows = batch.row.unsqueeze(-1).expand_as(batch.source)
    logp = logp_all[rows, batch.source, batch.targets]
    with torch.set_grad_enabled(entropy_grad and torch.is_grad_enabled()):
        entropy = _Entropy.apply(logp_all)[rows, batch.source]
    return logp, entropy


def _row_temperatures(batch: MicroBatch, propose: float, solve: float, logits) -> torch.Tensor:
    """(R, 1, 1): each row's temperature, its role's (0, greedy, scores at 1)."""
    proposal = torch.zeros(logits.shape[0], dtype=torch.bool, device=logits.device)
    proposal[batch.row] = batch.proposal.to(device=logits.device, dtype=torch.bool)
    t = torch.where(proposal, propose or 1.0, solve or 1.0).to(logits.dtype)
    return t.view(-1, 1, 1)


class _Entropy(torch.autograd.Function):
    """H = -sum(exp(logp) * logp) over the last dimension, keeping for the backward pass only
    `logp` (which log_softmax keeps anyway), not exp(logp): one (rows, positions, vocabulary)
    tensor less held per micro-batch. dH/dlogp_i = -p_i (logp_i + 1)."""

    @staticmethod
    def forward(ctx, logp: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(logp)
        return -(logp.exp() * logp).sum(-1)

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        (logp,) = ctx.saved_tensors
        return -grad.unsqueeze(-1) * logp.exp() * (logp + 1)


def _chunks(items: list, parts: int) -> list[list]:
    size = math.ceil(len(items) / parts)
    return [items[i : i + size] for i in range(0, len(items), size)]


def _mini_batches(keys: Sequence, parts: int, rng: random.Random) -> list[list[int]]:
    """Rollout indices in `parts` mini-batches cut from a shuffle, each sorted by `keys`."""
    order = list(range(len(keys)))
    rng.shuffle(order)
    return [sorted(mini, key=keys.__getitem__) for mini in _chunks(order, parts)]


def _layout_key(rollout: Rollout) -> tuple:
    """Rollouts of one prompt side by side (they share a row), prompts by length, so that
    micro-batches cut from a sorted mini-batch waste little padding."""
    return len(rollout.prompt_ids), rollout.prompt_ids, len(rollout.completion_ids)


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
    advantages: Sequence[float] | None = None,
    config: TrainerConfig | None = None,
    pad_id: int | None = None,
    reference=None,
    temperature: float = 1.0,
    seed: int = 0,
    share: Ranks | None = None,
    solve_temperature: float | None = None,
) -> dict[str, float]:
    """Train on `rollouts`, each with its advantage; returns statistics averaged over the
    optimizer steps taken (`kl_ref`: the mean KL per token over the whole update).
    `advantages`, where given, stand in for the rollouts' own. From `config` it takes the
    proposer's weights (`propose_weight`: a proposal's advantage is multiplied by it;
    `propose_kl_weight`: its KL term is), the
    batching (`micro_batch`, `mini_batches`, `ppo_epochs`), the gradient clip `max_grad_norm`
    and the loss's settings (`loss.policy_loss`); `pad_id` pads rows. `reference` is the
    frozen model of the KL term (needed when `config.kl_coef > 0`). `temperature` is the one
    the rollouts were sampled at (the solver's at `solve_temperature`, where given); `seed`
    draws the mini-batches.

    With several processes every rank passes the whole step's rollouts and its `share`
    (`selfplay.distributed.Ranks`): mini-batches are cut the same way on every rank (same
    seed), each rank runs its share of each (`micro_batch_share`), and its loss is divided by
    the whole mini-batch's denominator and multiplied by the world size, so that the gradient
    DDP averages over ranks is exactly the one process's gradient.

    With one adapter per role (`trainer.lora.per_role`) each micro-batch holds one role's
    rollouts, runs with that role's adapter, and is divided by that role's part of the
    mini-batch's denominator; each adapter's gradient is clipped on its own. Each adapter then
    takes the step it would take trained on its role's rollouts alone, and the loss reported
    is the sum of the two roles' losses."""
    if config is None or pad_id is None:
        raise TypeError("policy_update needs the trainer's config and the pad token's id")
    if config.kl_coef > 0 and reference is None:
        raise ValueError("kl_coef > 0 needs a reference model")
    if advantages is not None:
        rollouts = [replace(r, advantage=a) for r, a in zip(rollouts, advantages, strict=True)]
    if config.propose_weight != 1.0:
        rollouts = [
            replace(r, advantage=r.advantage * config.propose_weight) if r.role == "propose" else r
            for r in rollouts
        ]
    share = share or Ranks()
    unwrapped = accelerator.unwrap_model(model)
    attention = attention_of(unwrapped)
    by_role = per_role(unwrapped)  # one adapter per role: each micro-batch one role's
    plan, skipped = _plan(rollouts, config, seed, share, by_role)
    stats = Statistics(float(scheduler.get_last_lr()[0]))
    model.train()
    for mini in plan:  # one optimizer step each
        for k, indices in enumerate(mini.micro):
            rows = indices or mini.active[:1]
            batch = _micro_batch(rollouts, rows, pad_id, config, attention)
            if by_role:
                activate(unwrapped, rollouts[rows[0]].role)
            if not indices:  # this rank's share ran out: a zero-weight stand-in for DDP
                batch.mask.zero_()
            batch = batch.to(accelerator.device)
            sync = k == len(mini.micro) - 1  # DDP averages gradients on the last micro-batch
            with contextlib.nullcontext() if sync else accelerator.no_sync(model):
                loss, loss_stats, entropy = _backward(
                    accelerator, model, reference, batch, config,
                    (temperature, solve_temperature), mini.denominators[k], share.world_size,
                )  # fmt: skip
            stats.micro_batch(loss, loss_stats, entropy, batch, len(mini.micro), bool(indices))
        grad_norms = _clip(accelerator, model, unwrapped, config.max_grad_norm, by_role)
        lr = float(scheduler.get_last_lr()[0])  # the rate this optimizer step uses
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        stats.optimizer_step(grad_norms, lr, len(mini.micro))
    return stats.result(share, rollouts, config, skipped)


@dataclass(frozen=True)
class _MiniBatch:
    """One optimizer step's rollouts: this rank's micro-batches of those with a gradient
    (`active`), and each micro-batch's loss denominator: the whole mini-batch's, or with one
    adapter per role its role's part of the mini-batch."""

    active: list[int]
    micro: list[list[int]]
    denominators: list[float]


def _clip(accelerator, model, unwrapped, max_norm: float, by_role: bool) -> dict[str, float]:
    """Clip the gradient to `max_norm` by its global norm (each role's adapter on its own,
    `by_role`, so that one role's gradient does not shrink the other's step); returns the
    norm before clipping (`grad_norm`) and, by role, each adapter's (`grad_norm_solve`, ...)."""
    if not by_role:
        return {"grad_norm": float(accelerator.clip_grad_norm_(model.parameters(), max_norm))}
    accelerator.unscale_gradients()  # once: a loss scaler (fp16) refuses a second unscale
    norms = {
        f"grad_norm_{role}": float(
            torch.nn.utils.clip_grad_norm_(role_parameters(unwrapped, role), max_norm)
        )
        for role in ROLES
    }
    return {"grad_norm": math.sqrt(sum(n * n for n in norms.values())), **norms}


def _plan(
    rollouts: Sequence[Rollout],
    config: TrainerConfig,
    seed: int,
    share: Ranks,
    by_role: bool = False,
) -> tuple[list[_MiniBatch], int]:
    """(the update's mini-batches, every epoch's in turn, rollouts skipped). Zero-advantage
    rollouts add nothing to the loss, unless a KL term or an entropy bonus makes them count:
    they are skipped, counted in their mini-batch's denominator; a mini-batch left with none
    takes no step.
    `by_role`: every micro-batch holds one role's rollouts and is divided by that role's
    part of the denominator (one adapter per role: each trains as if on its rollouts alone)."""
    skippable = zero_advantage_adds_nothing(config)
    keys = [_layout_key(r) for r in rollouts]
    rng = random.Random(seed)
    plan, skipped = [], 0
    for _ in range(config.ppo_epochs):
        for mini in _mini_batches(keys, config.mini_batches, rng):
            active = [i for i in mini if rollouts[i].advantage != 0.0 or not skippable]
            skipped += len(mini) - len(active)
            if active:
                parts = [(active, _denominator([rollouts[i] for i in mini], config.aggregation))]
                if by_role:
                    parts = [
                        ([i for i in active if rollouts[i].role == role],
                         _denominator([rollouts[i] for i in mini if rollouts[i].role == role],
                                      config.aggregation))
                        for role in ROLES
                    ]  # fmt: skip
                micro, denominators = [], []
                for part, part_denominator in parts:
                    cut = micro_batch_share(part, config.micro_batch, share) if part else []
                    micro += cut
                    denominators += [part_denominator] * len(cut)
                plan.append(_MiniBatch(active, micro, denominators))
    return plan, skipped


def _micro_batch(rollouts, indices, pad_id, config, attention) -> MicroBatch:
    rows = [rollouts[i] for i in indices]
    advantages = [r.advantage for r in rows]
    kl_weights = [config.propose_kl_weight if r.role == "propose" else 1.0 for r in rows]
    return collate(rows, advantages, pad_id, config.share_prompts, attention, kl_weights)


def _backward(accelerator, model, reference, batch, config, temperatures, denominator, world):
    """One micro-batch's loss, backpropagated (scaled by the world size, as DDP averages):
    (loss, statistics, per-token entropy). `temperatures`: (the proposer's, the solver's)."""
    propose, solve = temperatures
    ref_logp = None
    if config.kl_coef > 0:
        with torch.no_grad():
            ref_logp, _ = token_logprobs(reference, batch, propose, solve_temperature=solve)
    logp, entropy = token_logprobs(model, batch, propose, config.entropy_coef > 0, solve)
    loss, stats = policy_loss(
        logp,
        batch.old_logp,
        batch.advantages,
        batch.mask,
        config,
        ref_logp=ref_logp,
        denominator=denominator,
        kl_weights=batch.kl_weights,
        entropy=entropy,
    )
    accelerator.backward(loss * world)
    return loss, stats, entropy.detach()


def _denominator(rollouts: Sequence[Rollout], aggregation: str) -> float:
    return float(max(1, sum(loss_weight(r, aggregation) for r in rollouts)))
