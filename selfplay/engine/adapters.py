"""A LoRA checkpoint's `model/` folder: the solver's adapter, merged into its base on demand.

A LoRA run's checkpoint keeps the solver's adapter in peft's own format
(`adapter_model.safetensors` and `adapter_config.json`, whose `base_model_name_or_path` is
the run's `model.name`: an embedded model's name, a folder or a hub id) beside the tokenizer:
a few MiB where the merged float32 weights of the 0.5B coder were 2.5 GB a checkpoint. peft
loads it onto its base as any adapter (`PeftModel.from_pretrained`).

Evaluation, vLLM and `from_pretrained` want a plain model: `merged(folder)` (which
`selfplay.engine.model.resolve` calls for such a folder) loads the base in float32, merges
the adapter with the function that gives vLLM its weights during the run
(`selfplay.engine.weights.merged_weights`), and writes the result once to `folder/merged/`,
through a work folder renamed into place, as a prepared embedded model is; later loads find
it there, and pruning the checkpoint removes it with the rest.
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

__all__ = ["ADAPTER_CONFIG", "is_adapter_folder", "save_adapter", "merged"]

ADAPTER_CONFIG = "adapter_config.json"
ADAPTER_WEIGHTS = "adapter_model.safetensors"
MERGED = "merged"


def is_adapter_folder(folder: Path) -> bool:
    """Whether `folder` holds an adapter without the weights it applies to."""
    folder = Path(folder)
    return (folder / ADAPTER_CONFIG).is_file() and not (folder / "config.json").is_file()


def save_adapter(model, folder: Path, base: str, adapter: str | None = None) -> None:
    """Write the (unwrapped) peft `model`'s adapter (`adapter`, else the solver's of a
    per-role model, else its only one) to `folder`, in peft's format, as an adapter of
    `base`. The model's active adapter is left as it was."""
    from peft.utils import get_peft_model_state_dict
    from safetensors.torch import save_file

    from selfplay.trainer.lora import ROLES, per_role

    adapter = adapter or (ROLES[0] if per_role(model) else model.active_adapter)
    tensors = get_peft_model_state_dict(model, adapter_name=adapter)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_file(
        {name: t.detach().contiguous() for name, t in tensors.items()},
        str(folder / ADAPTER_WEIGHTS),
        metadata={"format": "pt"},
    )
    if Path(base).expanduser().exists():  # a folder: found from wherever the checkpoint is read
        base = str(Path(base).expanduser().resolve())
    config = copy.deepcopy(model.peft_config[adapter])
    config.base_model_name_or_path, config.inference_mode = base, True
    config.save_pretrained(str(folder))  # adapter_config.json


def merged(folder: Path) -> Path:
    """The plain model an adapter folder (`save_adapter`) stands for: `folder/merged/`, made
    the first time it is asked for."""
    from selfplay.engine.model import remove_stale_work, work_folder

    folder = Path(folder)
    target = folder / MERGED
    if (target / "config.json").is_file():
        return target
    remove_stale_work(folder)
    work = work_folder(folder)
    try:
        _merge_into(folder, work)
        try:
            work.rename(target)
        except OSError:  # another process merged it first: the same weights
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def _merge_into(folder: Path, out: Path) -> None:
    import torch
    from peft import PeftModel
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    from selfplay.config import ModelConfig
    from selfplay.engine.model import load_tokenizer, resolve
    from selfplay.engine.weights import merged_weights

    base_name = json.loads((folder / ADAPTER_CONFIG).read_text())["base_model_name_or_path"]
    try:
        source = resolve(ModelConfig(name=base_name))
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
