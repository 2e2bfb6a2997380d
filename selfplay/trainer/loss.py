"""The policy-gradient loss: a PPO-style clipped objective over completion tokens.

For completion token t of sample i, with the sample's advantage A_i and the probability ratio
rho_it = exp(logp_new_it - logp_old_it) between the policy being trained and the policy that
sampled the token:

    l_it = -min(rho_it * A_i, clip(rho_it, 1 - eps_low, 1 + eps_high) * A_i)

Where the sampling policy's log-probability is unknown (NaN: a format-constrained sample, whose
engine log-probabilities are of the constrained distribution), logp_old is logp_new itself,
detached: rho = 1 and the token's term is the plain policy gradient -A_i * logp_new_it.

Separate low and high clip ranges (eps_high > eps_low, "clip-higher") leave more room to raise
the probability of unlikely tokens with positive advantage, which keeps entropy from collapsing.

Aggregation:
  token     sum over every completion token of the batch / number of such tokens, so long
            completions weigh in proportion to their length (token-level policy gradient);
  sequence  mean over each completion's tokens, then mean over completions (PPO/GRPO's
            original form, which down-weights the tokens of long completions).

Optional entropy bonus (off unless entropy_coef > 0): minus entropy_coef times the entropy of
each completion token's next-token distribution, aggregated as the policy term; it widens the
distribution (the weight's controller: entropy_control.py).

Optional KL penalty to a frozen reference policy (off unless kl_coef > 0), with the k3
estimator, per token: exp(logp_ref - logp_new) - (logp_ref - logp_new) - 1, which is unbiased
for KL(new || ref) and never negative.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from selfplay.config import TrainerConfig

__all__ = ["policy_loss", "zero_advantage_adds_nothing"]


def _aggregate(
    per_token: torch.Tensor, mask: torch.Tensor, how: str, denominator: float | None
) -> torch.Tensor:
    """Token sum / token count, or mean of per-sequence means. `denominator` (the whole
    batch's token or sequence count) keeps the result exact when the batch is split into
    micro-batches whose losses are summed."""
    if how == "token":
        count = denominator if denominator is not None else mask.sum().clamp(min=1)
        return (per_token * mask).sum() / count
    if how == "sequence":
        per_sequence = (per_token * mask).sum(-1) / mask.sum(-1).clamp(min=1)
        count = denominator if denominator is not None else per_sequence.numel()
        return per_sequence.sum() / count
    raise ValueError(f"unknown loss aggregation {how!r}; use 'token' or 'sequence'")


def zero_advantage_adds_nothing(config: TrainerConfig) -> bool:
    """Whether a rollout of advantage 0 leaves the loss's gradient as it is (no KL term, no
    entropy bonus), so that an update may skip it. Never while the entropy bonus adapts: its
    controller reads the update's entropy, which would otherwise cover all rollouts while the
    bonus is on and only those with an advantage while it is off."""
    return config.kl_coef == 0 and config.entropy_coef == 0 and config.entropy_target == 0


def policy_loss(
    new_logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    config: TrainerConfig,
    ref_logp: torch.Tensor | None = None,
    denominator: float | None = None,
    kl_weights: torch.Tensor | None = None,
    entropy: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict]:
    """Loss over (batch, tokens) log-probabilities of the sampled tokens; `mask` marks
    completion tokens; `denominator` see `_aggregate`; `kl_weights` (batch,) multiply each
    sample's KL term (1 where None); `entropy` (batch, tokens) is each token's distribution's
    entropy, with its gradient. From `config` it takes the clip range (`clip_low`,
    `clip_high`), the `aggregation`, `kl_coef` and `entropy_coef`. Returns the loss and
    statistics (the KL in them unweighted: `kl_ref_sum` over every token, `kl_ref_rows` per
    sample)."""
    mask = mask.to(new_logp.dtype)
    advantage = advantages.to(new_logp.dtype).unsqueeze(-1)
    old_logp = torch.where(old_logp.isnan(), new_logp.detach(), old_logp)
    log_ratio = new_logp - old_logp
    ratio = torch.exp(log_ratio)
    unclipped = ratio * advantage
    clipped = torch.clamp(ratio, 1 - config.clip_low, 1 + config.clip_high) * advantage
    per_token = -torch.minimum(unclipped, clipped)
    loss = _aggregate(per_token, mask, config.aggregation, denominator)
    tokens = mask.sum().clamp(min=1)
    ratio, log_ratio = ratio.detach(), log_ratio.detach()
    unclipped, clipped = unclipped.detach(), clipped.detach()
    stats = {
        # share of tokens whose clipped term is the binding one (their gradient is zero)
        "clip_fraction": float(((clipped < unclipped).to(mask.dtype) * mask).sum() / tokens),
        "approx_kl_old": float((((ratio - 1) - log_ratio) * mask).sum() / tokens),
        "ratio_mean": float((ratio * mask).sum() / tokens),
    }
    if config.kl_coef > 0:
        if ref_logp is None:
            raise ValueError("kl_coef > 0 needs the reference policy's log-probabilities")
        delta = ref_logp - new_logp
        kl = torch.exp(delta) - delta - 1
        weighted = kl if kl_weights is None else kl * kl_weights.to(kl.dtype).unsqueeze(-1)
        kl_term = _aggregate(weighted, mask, config.aggregation, denominator)
        loss = loss + config.kl_coef * kl_term
        # the KL summed over the completion tokens: the update reports it per token over all
        # of its micro-batches, whatever the aggregation (`update_stats._combine`)
        stats["kl_ref_sum"] = float((kl.detach() * mask).sum())
        stats["kl_ref_rows"] = (kl.detach() * mask).sum(-1)  # each sample's, a tensor
    if config.entropy_coef > 0:
        if entropy is None:
            raise ValueError("entropy_coef > 0 needs each token's entropy")
        bonus = _aggregate(entropy.to(new_logp.dtype), mask, config.aggregation, denominator)
        loss = loss - config.entropy_coef * bonus
    return loss, stats
