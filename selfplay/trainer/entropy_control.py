"""The weight of the token-entropy bonus, held fixed or adapted toward a target entropy.

The loss gains -c x H, with H the mean entropy of the policy's next-token distribution over
the completion tokens (aggregated as the policy term is: `trainer.aggregation`), so that the
gradient pushes the distribution wider. With `trainer.entropy_target` > 0 the weight follows
Skywork-OR1's adaptive entropy control (He et al. 2025, "Skywork Open Reasoner 1 Technical
Report", section 4): with e the mean token entropy of a step's update (`update/entropy`),

    alpha <- max(0, alpha + entropy_step)   if e < entropy_target
    alpha <- max(0, alpha - entropy_step)   otherwise
    c     =  alpha if e < entropy_target else 0

so the bonus grows while the policy stays collapsed, fades once it is back above the target,
and is off while it is above. The entropy is that of the step's rollouts under the policy
that sampled them, known only after the step's update: the weight a step uses comes from
the step before (the first step's is `trainer.entropy_coef`).

Why a second guard beside the adaptive KL (`kl_control.py`): the KL controller changes its
coefficient by at most 20% / `kl_horizon` a step and first lowers it (the KL is 0 at the first
step). In a 20-step run (results/learn20-solveonly-props4-examples-seed1) it fell from 0.2
to 0.11 by step 7, then rose back only to 0.37 while the KL was 2-4x its target and the
entropy 0.15-0.28 under its floor of 0.25 for the last ten steps. This one acts on the
entropy itself. `alpha` travels with the checkpoints, so a resumed run goes on with it.

What it did (results/learn20-solveonly-props4-examples-entropy-seed1, docs/results.md): that
run again with `entropy_target` 0.5 and `entropy_step` 0.02 is the same run to the last digit
until the bonus first acts (step 9), and then holds the entropy higher, 0.25-0.37 against
0.15-0.28 over steps 16-20, still rising at step 20 (weight 0.24); a 20-step run wants a larger
step. It did not stop the CRUXEval-O drift the collapse came with, so it is off by default and
not in the recipes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

__all__ = ["EntropyControl"]


@dataclass
class EntropyControl:
    alpha: float  # the adapted weight
    target: float = 0.0  # mean token entropy to steer toward; 0: the weight stays `alpha`
    step: float = 0.01  # change of `alpha` per step
    below: bool = True  # whether the last step's entropy was below the target

    @classmethod
    def of(cls, trainer, saved: dict | None = None) -> EntropyControl:
        """The controller of a `TrainerConfig`: with a target, from a checkpoint's `state()`
        where one is `saved`; otherwise from its entropy_coef."""
        control = cls(trainer.entropy_coef, trainer.entropy_target, trainer.entropy_step)
        if trainer.entropy_target > 0 and saved and "entropy_alpha" in saved:
            control.alpha = float(saved["entropy_alpha"])
            control.below = bool(saved.get("entropy_below", True))
        return control

    def state(self) -> dict:
        """What a checkpoint keeps of an adapted weight (nothing of a fixed one)."""
        return {"entropy_alpha": self.alpha, "entropy_below": self.below} if self.target else {}

    @property
    def coef(self) -> float:
        """The weight the next update uses."""
        return self.alpha if self.target <= 0 or self.below else 0.0

    def apply(self, trainer):
        """The `TrainerConfig` of the next update: with this weight."""
        return replace(trainer, entropy_coef=self.coef)

    def adapt(self, trainer, stats: dict) -> None:
        """After an update run with `trainer` (`apply`'s): log its weight in `stats` and adapt
        to the entropy they report. Silent where no bonus is on or adapting."""
        if trainer.entropy_coef > 0 or self.target > 0:
            stats["entropy_coef"] = trainer.entropy_coef
            self.update(stats.get("entropy"))

    def update(self, entropy: float | None) -> None:
        """Adapt after an update whose mean token entropy was `entropy` (None: none ran)."""
        if self.target <= 0 or entropy is None or not math.isfinite(entropy):
            return
        self.below = entropy < self.target
        change = self.step if self.below else -self.step
        self.alpha = max(0.0, self.alpha + change)
