"""What a policy update reports (`update.policy_update`): its statistics summed over
micro-batches and optimizer steps, combined over ranks, and the proposer's share of the loss."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from selfplay.distributed import Ranks
from selfplay.trainer.loss import zero_advantage_adds_nothing

if TYPE_CHECKING:
    from selfplay.config import TrainerConfig

__all__ = ["Statistics", "loss_weight", "propose_share", "solve_shares"]


class Statistics:
    """What an update reports, summed over its micro-batches and optimizer steps."""

    def __init__(self, lr: float):
        # summed over ranks: the mini-batch's loss; the KL's sum over tokens, and the tokens
        self.parts = {"loss": 0.0, "kl_sum": 0.0, "kl_tokens": 0.0}
        self.parts.update(kl_sum_propose=0.0, kl_tokens_propose=0.0)  # the proposals' part
        self.parts.update(entropy_sum=0.0, entropy_tokens=0.0)  # over the real micro-batches
        self.means: dict[str, float] = {}  # per-micro-batch statistics, summed
        self.micro_count = self.real_count = self.steps = 0
        self.grad_norms: dict[str, float] = {}  # summed, weighted by micro-batches
        self.lr = lr  # the rate of the last optimizer step (the current one until a step)

    def micro_batch(self, loss, stats, entropy, batch, per_step: int, real: bool) -> None:
        self.micro_count += 1
        # the loss of a micro-batch is a part of the mini-batch's (same denominator; with one
        # adapter per role, of its role's): scaled so that its average over micro-batches is
        # the whole (the sum of the roles'). The KL is reported per token whatever the loss's
        # aggregation (what `trainer.kl_target` is a target for).
        self.parts["loss"] += float(loss.detach()) * per_step
        self.parts["kl_sum"] += stats.pop("kl_ref_sum", 0.0)
        self.parts["kl_tokens"] += float(batch.mask.sum())
        rows = stats.pop("kl_ref_rows", None)
        if rows is not None:
            proposal = batch.proposal.to(rows.device)
            self.parts["kl_sum_propose"] += float(rows[proposal].sum())
            self.parts["kl_tokens_propose"] += float(batch.mask[proposal].sum())
        if not real:
            return
        # the entropy per token over the whole update, as the KL (what the controllers read)
        self.parts["entropy_sum"] += float((entropy * batch.mask).sum())
        self.parts["entropy_tokens"] += float(batch.mask.sum())
        for name, value in stats.items():
            self.means[name] = self.means.get(name, 0.0) + value
        self.real_count += 1

    def optimizer_step(self, grad_norms: dict[str, float], lr: float, per_step: int) -> None:
        self.lr = lr
        for name, norm in grad_norms.items():
            self.grad_norms[name] = self.grad_norms.get(name, 0.0) + norm * per_step
        self.steps += 1

    def result(self, share: Ranks, rollouts, config: TrainerConfig, skipped: int) -> dict:
        kl = config.kl_coef > 0
        out = _combine(share, self.parts, self.means, self.micro_count, self.real_count, kl)
        if self.steps:
            out.update({name: norm / self.micro_count for name, norm in self.grad_norms.items()})
        out["optimizer_steps"] = float(self.steps)
        out["zero_advantage_skipped"] = float(skipped)
        out.update(_token_counts(rollouts, zero_advantage_adds_nothing(config)))
        proposer = propose_share(rollouts, config.aggregation)
        if proposer is not None:
            out["propose_share"] = proposer
        for task_type, part in solve_shares(rollouts, config.aggregation).items():
            out[f"solve_share/{task_type}"] = part
        out["lr"] = self.lr
        return out


def _token_counts(rollouts, skippable: bool) -> dict[str, float]:
    """Completion tokens of the batch, and those that carried a gradient (`signal_tokens`:
    zero-advantage rollouts are skipped where they add nothing)."""
    signal = (r for r in rollouts if r.advantage != 0 or not skippable)
    return {
        "tokens": float(sum(len(r.completion_ids) for r in rollouts)),
        "signal_tokens": float(sum(len(r.completion_ids) for r in signal)),
    }


def propose_share(
    rollouts: Sequence, aggregation: str, propose_weight: float = 1.0
) -> float | None:
    """The proposer's share of the loss's advantage weight: sum |A| x w over its rollouts
    against over all, w a rollout's weight in the loss (`loss_weight`), a proposal's advantage
    multiplied by `propose_weight` (`trainer.propose_weight`; `policy_update` passes rollouts
    it has already scaled); None where no rollout has an advantage. A proxy for its share of
    the policy gradient (it leaves out clipping and the size of each token's gradient). By
    token, a proposal of 80 tokens weighs as much as five answers of 16: in `learn-long` the
    proposals were 13% of the rollouts and 48% of this weight."""
    parts = _advantage_weight(rollouts, aggregation, lambda r: r.role, propose_weight)
    total = sum(parts.values())
    return parts.get("propose", 0.0) / total if total else None


def solve_shares(rollouts: Sequence, aggregation: str) -> dict[str, float]:
    """Each task type's share of the solver's advantage weight (sum |A| x w over the answers
    of that type, w as in `propose_share`); empty where no answer has an advantage. CRUXEval's
    output prediction is deduction and its input prediction abduction; by token an induction
    answer, a function of 60-200 tokens, weighs as much as ten deduction answers: in
    `learn40-solveonly-props4-examples-bare-seed1` induction was 75% of the solver's weight
    and deduction 13%."""
    answers = [r for r in rollouts if r.role == "solve"]
    parts = _advantage_weight(answers, aggregation, lambda r: r.task_type)
    total = sum(parts.values())
    return {t: part / total for t, part in sorted(parts.items())} if total else {}


def _advantage_weight(rollouts, aggregation: str, key, propose_weight: float = 1.0) -> dict:
    """Sum |A| x w per `key(rollout)`, w a rollout's weight in the loss (`loss_weight`), a
    proposal's advantage multiplied by `propose_weight`."""
    parts: dict[str, float] = {}
    for r in rollouts:
        scale = propose_weight if r.role == "propose" else 1.0
        weight = abs(r.advantage) * scale * loss_weight(r, aggregation)
        parts[key(r)] = parts.get(key(r), 0.0) + weight
    return parts


def loss_weight(rollout, aggregation: str) -> int:
    """A rollout's weight in the loss's denominator: its completion tokens under token
    aggregation, 1 under sequence aggregation (`loss.policy_loss`)."""
    if aggregation == "token":
        return len(rollout.completion_ids)
    if aggregation == "sequence":
        return 1
    raise ValueError(f"unknown loss aggregation {aggregation!r}; use 'token' or 'sequence'")


def _combine(
    share: Ranks, parts: dict, means: dict, micro_count: int, real_count: int, kl: bool
) -> dict[str, float]:
    """The statistics of the whole update from every rank's: the loss's parts summed over
    ranks / `micro_count`; the KL as the sum over ranks of `kl_sum` / of `kl_tokens`, and so
    per role (`kl_ref_propose`, `kl_ref_solve`); the entropy per token likewise, over the
    real micro-batches; other per-micro-batch statistics averaged over every rank's real
    micro-batches. Every rank runs `micro_count` micro-batches."""
    gathered = share.gather((parts, means, real_count))
    if not micro_count:
        return {}
    out = {}
    out["loss"] = sum(p["loss"] for p, _, _ in gathered) / micro_count
    if kl:  # the mean KL per token over every token of the update, on every rank
        tokens = sum(p["kl_tokens"] for p, _, _ in gathered)
        out["kl_ref"] = sum(p["kl_sum"] for p, _, _ in gathered) / max(1.0, tokens)
        # and per role, where the role has tokens in the update
        proposed = sum(p["kl_tokens_propose"] for p, _, _ in gathered)
        proposed_kl = sum(p["kl_sum_propose"] for p, _, _ in gathered)
        if proposed:
            out["kl_ref_propose"] = proposed_kl / proposed
        if tokens - proposed:
            solved_kl = sum(p["kl_sum"] for p, _, _ in gathered) - proposed_kl
            out["kl_ref_solve"] = solved_kl / (tokens - proposed)
    tokens = sum(p["entropy_tokens"] for p, _, _ in gathered)
    if tokens:  # the mean token entropy over every real token of the update
        out["entropy"] = sum(p["entropy_sum"] for p, _, _ in gathered) / tokens
    real = sum(count for _, _, count in gathered)
    # every rank's names: a rank whose micro-batches were all padding has none of its own
    for name in sorted({name for _, m, _ in gathered for name in m}):
        out[name] = sum(m.get(name, 0.0) for _, m, _ in gathered) / max(1, real)
    return out
