"""LoRA through peft (`trainer.lora.rank > 0`): only low-rank adapters train.

A targeted linear layer W (out x in) gets two trainable matrices A (rank x in) and B
(out x rank, zero at the start) and computes x W^T + (alpha / rank) x (B A)^T, so the model
starts as the base model and the optimizer holds only A and B (a few MiB instead of twice the
model for AdamW's moments).

The engine never sees adapters: vLLM receives each targeted weight merged,
W' = W + (alpha / rank) B A, under the base model's parameter names (`merged_weights`), and a
checkpoint's `model/` folder holds the same merged weights, so evaluation and export load a
plain model. The transformers engine generates with the adapted training model itself.

The KL term's reference is the base model, which the wrapped model still holds: with the
adapters disabled it computes exactly the initial policy, so no second copy is kept
(`AdapterlessReference`).
"""

from __future__ import annotations

from collections.abc import Iterator

import torch

from selfplay.config import ConfigError, LoraConfig

__all__ = ["wrap", "is_lora", "merged_weights", "engine_weights", "AdapterlessReference"]


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
    return get_peft_model(model, peft_config)


def is_lora(model) -> bool:
    from peft import PeftModel

    return isinstance(model, PeftModel)


@torch.no_grad()
def merged_weights(model) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) of the base model with every adapter merged in, W + scaling x B A,
    under the base model's own names (no `base_model.model.` prefix, no `.base_layer`, no
    adapter tensors). Merged tensors are made one at a time, as they are asked for;
    untargeted tensors are the model's own, detached, not copied."""
    from peft.tuners.lora import LoraLayer

    base = model.get_base_model()
    layers = {f"{path}.weight": m for path, m in base.named_modules() if isinstance(m, LoraLayer)}
    for key, tensor in base.state_dict().items():
        if ".lora_" in key:
            continue
        name = key.replace(".base_layer.", ".")
        layer = layers.get(name)
        yield name, tensor.detach() if layer is None else _merged(layer)


def _merged(layer) -> torch.Tensor:
    """The base weight plus peft's own delta of the adapter (scaling x B A, transposed for
    fan-in-fan-out layers)."""
    (adapter,) = layer.active_adapters
    weight = layer.base_layer.weight
    return weight + layer.get_delta_weight(adapter).to(weight.dtype)


def engine_weights(model) -> Iterator[tuple[str, torch.Tensor]]:
    """What an engine that keeps its own weights loads: the merged weights of a LoRA model,
    else the model's tensors under checkpoint names, detached, without copies."""
    if is_lora(model):
        yield from merged_weights(model)
        return
    for name, tensor in model.state_dict(keep_vars=False).items():
        yield name, tensor.detach()


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
