"""The KL coefficient of a run, held fixed or adapted toward a target KL.

With `trainer.kl_target` > 0 the coefficient follows PPO's adaptive KL controller (Ziegler et
al. 2019, "Fine-Tuning Language Models from Human Preferences"; verl's
`AdaptiveKLController`): after each update, with KL the step's mean k3 estimate per token of
KL(policy || initial policy) (per token under either `trainer.aggregation`; of the role that
drifted most where both train, below: `update/kl_steered`),

    e = clip(KL / kl_target - 1, -0.2, 0.2)
    kl_coef <- kl_coef * (1 + e / kl_horizon)

so a policy that drifts past the target is pulled back harder, and one that stays near the
initial model is let go. The KL is that of the weights the update started from (all of a
step's log-probabilities are taken before its optimizer step, with one mini-batch and one
epoch): 0 at the first step, so the coefficient first moves down.

Where both roles train, the KL steered on is by default the higher of the two roles' means
(`update/kl_ref_solve`, `update/kl_ref_propose`; `trainer.kl_steer=worst_role`), logged as
`update/kl_steered`. The mean over every token would be dominated by the role with more
tokens: with per-role adapters (`trainer.lora.per_role`) the proposer's long proposals were
68-80% of an update's tokens over the first seven steps, at a KL of 0.02-0.04, so that mean
stayed under a target of 0.15 and the coefficient fell (0.2 -> 0.11) while the solver's own KL
passed the target from the fourth step on (0.24-0.53). `trainer.kl_steer=all_tokens` steers on that
mean, as runs did before the knob: give it to reproduce an earlier run that trained both
roles. A run that trains one role steers on its KL either way.

`trainer.kl_steer=per_role` gives each role a coefficient of its own, each adapted by the rule
above on its role's KL: `kl_coef` the solver's (on `update/kl_ref_solve`), and the proposer's
(`update/kl_coef_propose`, on `update/kl_ref_propose`), which the update applies as the
proposer's weight in the KL term (the configured `propose_kl_weight` times its coefficient /
the solver's). With one coefficient steered on the worse role, a solver past the target
raises the pull on a proposer far under it (KL 0.02-0.07 against the solver's 0.12-0.53 in
the per-role run of docs/results.md); per role, the solver's pull rises while the proposer's
falls. A role with no rollouts in an update keeps its coefficient.

The controller guards against the collapse a self-play run falls into: as the policy drifts
its token entropy falls and its proposals turn into copies (observed without a KL term:
docs/results.md). It also watches the
entropy: while the step's mean token entropy (`update/entropy`) is below
`trainer.entropy_floor`, the error is taken as +20%, whatever the KL, so the coefficient rises
until the policy is pulled back toward the initial model. The horizon counts steps (verl
counts samples), and at most 20% / `kl_horizon` is changed per step. The coefficient travels
with the checkpoints, so a resumed run goes on with it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

__all__ = ["KLControl"]

_MAX_ERROR = 0.2


@dataclass
class KLControl:
    coef: float  # the coefficient the next update uses
    target: float = 0.0  # mean k3 KL per token to steer toward; 0: keep `coef` fixed
    horizon: float = 1.0  # steps over which a 20% error changes the coefficient by 20%
    entropy_floor: float = 0.0  # below this mean token entropy the coefficient rises
    steer: str = "worst_role"  # which KL: the higher role's, or all tokens' (trainer.kl_steer)
    propose_coef: float | None = None  # the proposer's own coefficient (steer == "per_role")

    @classmethod
    def of(cls, trainer, saved: dict | None = None) -> KLControl:
        """The controller of a `TrainerConfig`: with a target, going on from the coefficient a
        checkpoint's `state()` adapted (`saved`); otherwise from its kl_coef. A checkpoint of
        a session that held the coefficient fixed, or ran no KL term, gives nothing to go on
        from: a run resumed with a target starts from the configured kl_coef."""
        start = propose = trainer.kl_coef
        if trainer.kl_target > 0 and saved and _adapted(saved):
            start = float(saved["kl_coef"])
            own = saved.get("kl_coef_propose")  # none from a single coefficient's checkpoint
            propose = float(own) if own is not None and own > 0 else start
        return cls(
            start,
            trainer.kl_target,
            trainer.kl_horizon,
            trainer.entropy_floor,
            trainer.kl_steer,
            propose if trainer.kl_steer == "per_role" else None,
        )

    def state(self) -> dict:
        """What a checkpoint keeps: the coefficient (and the proposer's own, per role), and the
        target it was adapted toward (0: held fixed)."""
        state = {"kl_coef": self.coef, "kl_target": self.target}
        if self.propose_coef is not None:
            state["kl_coef_propose"] = self.propose_coef
        return state

    def apply(self, trainer):
        """The `TrainerConfig` of the next update: with this coefficient (per role, the
        solver's, and the proposer's as its weight in the KL term)."""
        if self.propose_coef is None:
            return replace(trainer, kl_coef=self.coef)
        weight = trainer.propose_kl_weight * self.propose_coef / self.coef
        return replace(trainer, kl_coef=self.coef, propose_kl_weight=weight)

    def adapt(self, trainer, stats: dict) -> None:
        """After an update run with `trainer` (`apply`'s): log its coefficient in `stats` and
        adapt to the KL and entropy they report. Off where no KL term ran."""
        if trainer.kl_coef <= 0:
            return
        stats["kl_coef"] = trainer.kl_coef
        entropy = stats.get("entropy")
        if self.propose_coef is not None:  # per role: each on its own KL, where it had one
            stats["kl_coef_propose"] = self.propose_coef
            self.coef = self._adapted(self.coef, stats.get("kl_ref_solve"), entropy)
            self.propose_coef = self._adapted(
                self.propose_coef, stats.get("kl_ref_propose"), entropy
            )
            return
        kl = self.steered(stats)
        if self.target > 0 and kl is not None:
            stats["kl_steered"] = kl
        self.update(kl, entropy)

    def steered(self, stats: dict) -> float | None:
        """The KL of an update's `stats` that the coefficient adapts to: with `worst_role`
        the higher of the roles' own (`kl_ref_solve`, `kl_ref_propose`, those the update
        had), else, or where it reports neither, the mean over every token (`kl_ref`). None
        where a role's KL is not a finite number: the coefficient stays as it is."""
        if self.steer == "worst_role":
            roles = [stats[k] for k in ("kl_ref_solve", "kl_ref_propose") if k in stats]
            if roles:
                return max(roles) if all(math.isfinite(kl) for kl in roles) else None
        return stats.get("kl_ref")

    def update(self, kl: float | None, entropy: float | None = None) -> None:
        """Adapt after an update whose mean KL per token was `kl` and mean token entropy
        `entropy` (None: no update ran)."""
        self.coef = self._adapted(self.coef, kl, entropy)

    def _adapted(self, coef: float, kl: float | None, entropy: float | None) -> float:
        """`coef` after an update whose mean KL per token was `kl` (of a role, per role)."""
        if self.target <= 0 or kl is None or not math.isfinite(kl):
            return coef
        error = min(_MAX_ERROR, max(-_MAX_ERROR, kl / self.target - 1.0))
        if entropy is not None and entropy < self.entropy_floor:
            error = _MAX_ERROR
        return coef * (1.0 + error / self.horizon)


def _adapted(saved: dict) -> bool:
    """Whether a checkpoint's coefficient was adapted, so a resumed run goes on from it. A
    checkpoint from before `kl_target` was saved holds the coefficient alone: taken where it
    is above 0 (a 0 is a session without the KL term, which no target adapts)."""
    if saved.get("kl_coef") is None:
        return False
    if "kl_target" in saved:
        return saved["kl_target"] > 0 and saved["kl_coef"] > 0
    return saved["kl_coef"] > 0
