"""The LoRA section of the configuration (`trainer.lora`): peft low-rank adapters."""

from __future__ import annotations

from dataclasses import dataclass

from selfplay.config.fields import Checked, ConfigError, knob

__all__ = ["LORA_TARGETS", "LoraConfig"]

#: the attention and MLP projections of Llama and Qwen2 models
LORA_TARGETS = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


@dataclass(frozen=True)
class LoraConfig(Checked):
    """Low-rank adapters (peft LoRA): only the adapters train; the engine gets merged weights."""

    rank: int = knob(0, "rank of the adapters (0 = off: every parameter trains)")
    alpha: float = knob(32.0, "scale numerator: an adapter adds (alpha / rank) x B @ A")
    dropout: float = knob(0.0, "dropout on the adapters' input while training")
    target_modules: tuple[str, ...] = knob(
        LORA_TARGETS, "names of the linear layers that get adapters (module name endings)"
    )
    init_seed: int = knob(
        -1,
        "seed of the adapters' initial weights, drawn from a generator of their own, so that "
        "a seed study can vary them apart from what `run.seed` seeds (sampling, topics, the "
        "update's order), which stays as it would be (-1: drawn as part of `run.seed`'s "
        "stream). A resumed run's adapters come from its checkpoint",
    )
    per_role: bool = knob(
        False,
        "two adapters on the one base model: the proposer's rollouts train one, the solver's "
        "the other, and each role generates with its own, so that neither role's update "
        "reaches the other's policy (a checkpoint's model/ is the solver's; one process only)",
    )

    @property
    def enabled(self) -> bool:
        return self.rank > 0

    def check(self) -> None:
        if self.rank < 0:
            raise ConfigError("trainer.lora.rank must be 0 (off) or positive")
        if self.alpha <= 0:
            raise ConfigError("trainer.lora.alpha must be positive")
        if self.per_role and self.rank == 0:
            raise ConfigError("trainer.lora.per_role needs adapters: set trainer.lora.rank")
        if self.init_seed < -1:
            raise ConfigError("trainer.lora.init_seed must be -1 (run.seed's stream) or a seed")
        if not 0 <= self.dropout < 1:
            raise ConfigError("trainer.lora.dropout must be in [0, 1)")
        if not self.target_modules or not all(self.target_modules):
            raise ConfigError(
                "trainer.lora.target_modules: name at least one module, no empty names"
            )
