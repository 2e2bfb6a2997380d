"""A LoRA checkpoint's `model/` folder: the solver's adapter, merged into its base on demand.

A LoRA run's checkpoint keeps the solver's adapter in peft's own format
(`adapter_model.safetensors` and `adapter_config.json`, whose `base_model_name_or_path` is
the run's `model.name`: an embedded model's name, a folder or a hub id) beside the tokenizer
(`selfplay.trainer.checkpoint` writes it): 35 MB for the 0.5B coder at rank 16, where its
merged float32 weights were 2.5 GB a checkpoint. peft loads it onto its base as any adapter
(`PeftModel.from_pretrained`).

Evaluation, vLLM and `from_pretrained` want a plain model: `merged(folder)` (which
`selfplay.engine.model.resolve` calls for such a folder) loads the base in float32, merges
the adapter with the function that gives vLLM its weights during the run
(`selfplay.engine.weights.merged_weights`), and writes the result once to `folder/merged/`,
through a work folder renamed into place, as a prepared embedded model is; later loads find
it there, and pruning the checkpoint removes it with the rest. Merging holds the base and the
merged tensors at once (about twice the model in float32), and needs the folder writable.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import replace
from pathlib import Path

from selfplay.config import ModelConfig

__all__ = ["ADAPTER_CONFIG", "ADAPTER_WEIGHTS", "is_adapter_folder", "merged"]

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
MERGED = "merged"


def is_adapter_folder(folder: Path) -> bool:
    """Whether `folder` holds an adapter without the weights it applies to."""
    folder = Path(folder)
    return (folder / ADAPTER_CONFIG).is_file() and not (folder / "config.json").is_file()


def merged(folder: Path, model: ModelConfig | None = None) -> Path:
    """The plain model an adapter folder stands for: `folder/merged/`, made the first time it
    is asked for. The base is found as `model` (its cache folder; by default the default
    one) with the adapter's base as its name."""
    from selfplay.engine.model import remove_stale_work, work_folder

    folder = Path(folder)
    target = folder / MERGED
    remove_stale_work(folder)  # what a merge killed midway left
    if (target / "config.json").is_file():
        return target
    work = work_folder(folder)
    try:
        _merge_into(folder, work, model or ModelConfig())
        try:
            work.rename(target)
        except OSError:  # another process merged it first: the same weights
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _merge_into(folder: Path, out: Path, model_config: ModelConfig) -> None:
    import torch
    from peft import PeftModel
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    from selfplay.engine.model import load_tokenizer, resolve
    from selfplay.engine.weights import merged_weights

    base_name = json.loads((folder / ADAPTER_CONFIG).read_text())["base_model_name_or_path"]
    try:
        source = resolve(replace(model_config, name=base_name))
        base = AutoModelForCausalLM.from_pretrained(source, dtype=torch.float32)
    except OSError as error:
        raise FileNotFoundError(
            f"{folder} is an adapter of the model {base_name!r}, which is not here: {error}"
        ) from error
    model = PeftModel.from_pretrained(base, str(folder))
    tensors, seen = {}, set()
    for name, tensor in merged_weights(model):
        if tensor.data_ptr() not in seen:  # tied embeddings: once, under the first name
            seen.add(tensor.data_ptr())
            tensors[name] = tensor.contiguous()
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    base.config.save_pretrained(out)
    if getattr(base, "generation_config", None) is not None:
        base.generation_config.save_pretrained(out)
    # the checkpoint's tokenizer, else the base's (a hub id's from the hub); a bare model has none
    origin = folder if (folder / "tokenizer_config.json").is_file() else Path(source)
    if not origin.is_dir() or (origin / "tokenizer_config.json").is_file():
        load_tokenizer(str(origin)).save_pretrained(out)
