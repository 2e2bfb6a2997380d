"""The policy update's section of the configuration (`trainer`): the loss, its KL term and
entropy bonus with their controllers, batching and precision, and the LoRA adapters."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from selfplay.config.fields import Checked, ConfigError, knob, not_negative, positive, section
from selfplay.config.lora import LoraConfig

__all__ = ["AdvantageEstimator", "LrSchedule", "TrainerConfig"]

#: the estimators of `selfplay.trainer.advantages.ESTIMATORS` (a test keeps them equal)
AdvantageEstimator = Literal["trr++", "grpo", "reinforce++"]
#: the schedules of `selfplay.trainer.schedule.SCHEDULES` (a test keeps them equal)
LrSchedule = Literal["constant", "linear", "cosine"]


@dataclass(frozen=True)
class TrainerConfig(Checked):
    """The policy update (see selfplay/trainer/__init__.py for the exact algorithm)."""

    lr: float = knob(1e-6, "AdamW learning rate")
    weight_decay: float = knob(0.0, "AdamW weight decay")
    warmup_steps: int = knob(
        0,
        "optimizer steps of linear learning-rate warm-up (a step takes mini_batches x ppo_epochs)",
    )
    lr_schedule: LrSchedule = knob(
        "constant",
        "the rate after warm-up: constant, or decayed from lr toward lr x min_lr_ratio over the "
        "rest of the run's run.steps x mini_batches x ppo_epochs optimizer steps, linearly or "
        "on a half cosine (selfplay/trainer/schedule.py)",
    )
    min_lr_ratio: float = knob(
        0.0, "where a decaying lr_schedule ends, as a share of lr (0 to 1; 0: toward 0)"
    )
    advantage: AdvantageEstimator = knob("trr++", "advantage estimator (see trainer/advantages.py)")
    clip_low: float = knob(0.2, "PPO clip range below 1 (ratio >= 1 - clip_low)")
    clip_high: float = knob(0.28, "PPO clip range above 1 (ratio <= 1 + clip_high)")
    aggregation: Literal["token", "sequence"] = knob(
        "token", "loss aggregation: token = every token counts; sequence = every answer does"
    )
    kl_coef: float = knob(
        0.0, "weight of the k3 KL penalty to the initial model (0 = off); the start with kl_target"
    )
    kl_target: float = knob(
        0.0,
        "adapt kl_coef toward this mean KL per token after each step (PPO's adaptive KL "
        "controller, selfplay/trainer/kl_control.py); 0: kl_coef stays fixed",
    )
    kl_horizon: float = knob(
        5.0, "steps over which the adaptive controller changes kl_coef by its error (<= 20%)"
    )
    kl_steer: Literal["worst_role", "all_tokens", "per_role"] = knob(
        "worst_role",
        "the KL kl_target steers on: worst_role = the higher of the trained roles' mean KL per "
        "token (update/kl_ref_solve, update/kl_ref_propose), so that no role drifts past the "
        "target unseen; all_tokens = the mean over every token of the update (update/kl_ref; "
        "how runs steered before this knob: a role with many low-KL tokens hides the other's "
        "drift); per_role = a coefficient per role, each adapted on its role's own KL "
        "(kl_coef the solver's, update/kl_coef_propose the proposer's, which the update "
        "applies through the proposer's weight in the KL term, times propose_kl_weight)",
    )
    entropy_floor: float = knob(
        0.0,
        "with kl_target: while the mean token entropy of a step's update is below this, "
        "kl_coef rises as for a KL 20% over the target",
    )
    entropy_coef: float = knob(
        0.0,
        "weight of a token-entropy bonus in the loss (0 = off); the start with entropy_target",
    )
    entropy_target: float = knob(
        0.0,
        "adapt entropy_coef toward this mean token entropy (Skywork-OR1's adaptive entropy "
        "control, selfplay/trainer/entropy_control.py): it rises by entropy_step after a step "
        "below the target, falls by it after one above, and acts only below; 0: it stays fixed",
    )
    entropy_step: float = knob(0.01, "what entropy_coef changes by after each step")
    propose_weight: float = knob(
        1.0,
        "the proposer's rollouts' weight in the policy-gradient term: their advantages are "
        "multiplied by it in the update (the KL term and the entropy bonus are not, and their "
        "tokens stay in a token mean's denominator, so the solver's gradient is unchanged; at 0 "
        "they are skipped as zero-advantage rollouts where neither is on). "
        "update/propose_share logs the proposer's share after it",
    )
    propose_kl_weight: float = knob(
        1.0,
        "the proposer's rollouts' weight in the KL term (with kl_coef > 0): their per-token KL "
        "is multiplied by it in the loss; give it propose_weight's value to scale a proposal's "
        "whole loss, so that a stronger pull is also held back more. The KL that kl_target "
        "aims at (kl_steer) stays unweighted",
    )
    micro_batch: int = knob(4, "rollouts per forward/backward pass")
    share_prompts: bool = knob(
        True, "run a prompt through the model once for all of its completions (exact)"
    )
    mini_batches: int = knob(1, "optimizer steps per pass over a step's rollouts")
    ppo_epochs: int = knob(1, "passes over a step's rollouts")
    max_grad_norm: float = knob(1.0, "gradient clipping by global norm")
    mixed_precision: Literal["auto", "no", "bf16", "fp16"] = knob(
        "auto",
        "mixed precision of the update; auto: bf16 on GPUs that have it, float32 on CPUs; bf16 "
        "on a CPU without native bfloat16 (AVX512-BF16, AMX) stops the run at start",
    )
    gradient_checkpointing: bool = knob(False, "recompute activations to save memory")
    lora: LoraConfig = section(LoraConfig, "LoRA adapters instead of full fine-tuning")

    def check(self) -> None:
        positive(self, "lr", "micro_batch", "mini_batches", "ppo_epochs", "max_grad_norm")
        if not self.kl_horizon > 0.2:  # a 20% error must not take a coefficient to 0 or below
            raise ConfigError("trainer.kl_horizon must be above 0.2 (steps)")
        if not 0 <= self.min_lr_ratio <= 1:
            raise ConfigError("trainer.min_lr_ratio must be in [0, 1]")
        not_negative(self, "weight_decay", "warmup_steps", "clip_low", "clip_high")
        if not (math.isfinite(self.propose_weight) and self.propose_weight >= 0):
            raise ConfigError("trainer.propose_weight must be a finite number >= 0")
        if not (math.isfinite(self.propose_kl_weight) and self.propose_kl_weight >= 0):
            raise ConfigError("trainer.propose_kl_weight must be a finite number >= 0")
        if self.kl_steer == "per_role" and self.kl_target == 0:
            raise ConfigError("trainer.kl_steer=per_role adapts two coefficients: set kl_target")
        if self.propose_kl_weight != 1.0 and self.kl_coef == 0:
            raise ConfigError("trainer.propose_kl_weight weighs the KL term: set trainer.kl_coef")
        if self.kl_coef < 0 or self.kl_target < 0:
            raise ConfigError("trainer.kl_coef and trainer.kl_target must be >= 0")
        if self.kl_target > 0 and self.kl_coef == 0:
            raise ConfigError("trainer.kl_target adapts kl_coef: give it a start above 0")
        if self.entropy_floor > 0 and self.kl_target == 0:
            raise ConfigError("trainer.entropy_floor acts through kl_target: set that too")
        if not all(math.isfinite(v) and v >= 0 for v in (self.entropy_coef, self.entropy_target)):
            raise ConfigError("trainer.entropy_coef and trainer.entropy_target must be >= 0")
        if self.entropy_target > 0:
            positive(self, "entropy_step")
