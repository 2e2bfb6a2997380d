"""The weights an engine that keeps its own copy loads (vLLM) and a merged adapter saves: a plain
model's tensors, or a LoRA model's with its active adapter merged in (`trainer.lora`; with
one adapter per role, the role's that `trainer.lora.activate` chose), under the base model's
names, so that neither the engine nor an exported checkpoint sees adapters."""

from __future__ import annotations

from collections.abc import Iterator

import torch

__all__ = ["is_lora", "merged_weights", "engine_weights"]


def is_lora(model) -> bool:
    from peft import PeftModel

    return isinstance(model, PeftModel)


@torch.no_grad()
def merged_weights(model) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) of the base model with its active adapter merged in, W + scaling x B A,
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
