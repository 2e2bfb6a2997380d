"""LoRA through peft (`trainer.lora.rank > 0`): only low-rank adapters train.

A targeted linear layer W (out x in) gets two trainable matrices A (rank x in) and B
(out x rank, zero at the start) and computes x W^T + (alpha / rank) x (B A)^T, so the model
starts as the base model and the optimizer holds only A and B (a few MiB instead of twice the
model for AdamW's moments).

The engine never sees adapters: vLLM receives each targeted weight merged,
W' = W + (alpha / rank) B A, under the base model's parameter names
(`selfplay.engine.weights.merged_weights`). A checkpoint's `model/` folder holds the adapter,
and evaluation and export load the same merged weights, made from it once
(`selfplay.engine.adapters`). The transformers engine generates with the adapted training
model itself.

The KL term's reference is the base model, which the wrapped model still holds: with the
adapters disabled it computes exactly the initial policy, so no second copy is kept
(`AdapterlessReference`).

With `trainer.lora.per_role` the base model carries two adapters, named after the roles
(`ROLES`): one model, two policies. The update runs each micro-batch (one role's rollouts)
through its role's adapter (`activate`), divides it by its role's own denominator and clips
each adapter's gradient on its own, so a role's update changes nothing of the other's policy
(the KL coefficient, adapted on both roles' KL, is still shared); the stages generate each
role's samples with its own adapter merged into the engine's weights (`stages.use_role`). A
checkpoint's `model/` is the solver's policy (what evaluation and export want); its training
state holds both adapters.
"""

from __future__ import annotations

import copy

from selfplay.config import ConfigError, LoraConfig

__all__ = ["wrap", "AdapterlessReference", "ROLES", "per_role", "activate", "role_parameters"]

ROLES = ("solve", "propose")  # the adapters of a per-role model; the first is active at start


def wrap(model, config: LoraConfig):
    """`model` with LoRA adapters on the layers `config.target_modules` names; the base
    weights are frozen. Every name must match a module of the model (a typo trains nothing)."""
    from peft import LoraConfig as PeftLoraConfig
    from peft import get_peft_model

    names = [name for name, _ in model.named_modules()]
    missing = [t for t in config.target_modules if not any(n.endswith(f".{t}") for n in names)]
    if missing:
        raise ConfigError(
            f"trainer.lora.target_modules: {missing} match no module of {type(model).__name__}"
        )
    peft_config = PeftLoraConfig(
        r=config.rank,
        lora_alpha=config.alpha,
        lora_dropout=config.dropout,
        target_modules=list(config.target_modules),
        task_type="CAUSAL_LM",
    )
    if not config.per_role:
        wrapped = get_peft_model(model, peft_config)
    else:
        wrapped = get_peft_model(model, peft_config, adapter_name=ROLES[0])
        for role in ROLES[1:]:  # each its own copy: a change to one role's leaves the other's
            wrapped.add_adapter(role, copy.copy(peft_config))
        wrapped.set_adapter(ROLES[0])
        for name, parameter in wrapped.named_parameters():  # the optimizer holds every adapter
            if ".lora_" in name:
                parameter.requires_grad_(True)
    if config.init_seed >= 0:
        _initialise(wrapped, config.init_seed)
    return wrapped


def _initialise(model, seed: int) -> None:
    """Draw every adapter's initial weights again as peft draws them (A as `nn.Linear`'s
    weights, B zero: the model computes what its base does), from a generator seeded with
    `seed`; the global random state is left as the first draw left it, so that whatever else
    the run seeds draws what it would have drawn."""
    import torch
    from peft.tuners.lora import LoraLayer

    with torch.random.fork_rng(devices=list(range(torch.cuda.device_count()))):
        torch.manual_seed(seed)
        for module in model.modules():
            if isinstance(module, LoraLayer):
                for adapter in sorted(module.lora_A.keys()):
                    module.reset_lora_parameters(adapter, True)


def per_role(model) -> bool:
    """Whether the (unwrapped) `model` holds one adapter per role."""
    return set(getattr(model, "peft_config", None) or ()) == set(ROLES)


def activate(model, role: str) -> None:
    """Make `role`'s adapter the one the (unwrapped) per-role `model` runs with and trains
    (peft then marks only its parameters as needing gradients); a model with one policy
    stays as it is."""
    if per_role(model) and model.active_adapter != role:
        model.set_adapter(role)


def role_parameters(model, role: str) -> list:
    """The parameters of `role`'s adapter in a per-role `model` (a linear layer's adapter is
    `...lora_A.<role>.weight`, an embedding's `...lora_embedding_A.<role>`)."""
    return [
        p
        for name, p in model.named_parameters()
        if ".lora_" in name and (f".{role}." in name or name.endswith(f".{role}"))
    ]


class AdapterlessReference:
    """The KL reference of a LoRA run: the wrapped model called with its adapters disabled
    and in eval mode (no dropout), i.e. the frozen base model the run started from."""

    def __init__(self, model):
        self.model = model

    def __call__(self, **inputs):
        training = self.model.training
        self.model.eval()
        try:
            with self.model.disable_adapter():
                return self.model(**inputs)
        finally:
            self.model.train(training)
