"""Checkpoints: model, optimizer, scheduler, RNG states and the step, written atomically.

`checkpoints/step-000010/` holds `state/` (accelerate's `save_state`: model, optimizer,
scheduler and every RNG state), `model/` (the weights with config and tokenizer, loadable by
`from_pretrained` and by vLLM; the weight file is a hard link to the one in `state/`, or for
a LoRA run the weights with the adapters merged in) and
`checkpoint.json` (the step and whatever the loop adds). It is written under a `.partial`
name and renamed when complete, so a run killed at any moment, SIGKILL included, leaves either
the whole checkpoint or none of it; `latest()` ignores partial ones.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

from selfplay.trainer.lora import is_lora, merged_weights

__all__ = ["Checkpoints"]

_NAME = re.compile(r"step-(\d{6,})\Z")


class Checkpoints:
    def __init__(self, run_dir: Path, keep_last: int = 2):
        self.root = Path(run_dir) / "checkpoints"
        self.keep_last = max(1, keep_last)

    def completed(self) -> list[Path]:
        if not self.root.is_dir():
            return []
        found = [
            p
            for p in self.root.iterdir()
            if _NAME.match(p.name) and (p / "checkpoint.json").exists()
        ]
        return sorted(found, key=lambda p: int(_NAME.match(p.name).group(1)))

    def latest(self) -> Path | None:
        done = self.completed()
        return done[-1] if done else None

    def save(self, accelerator, model, tokenizer, step: int, extra: dict | None = None) -> Path:
        final = self.root / f"step-{step:06d}"
        partial = final.with_name(final.name + ".partial")
        if accelerator.is_main_process:
            shutil.rmtree(partial, ignore_errors=True)
        accelerator.wait_for_everyone()
        accelerator.save_state(str(partial / "state"))
        # every rank's part (its RNG states, its shards) is written before the rename makes
        # the checkpoint complete: a rank killed while saving leaves only a partial one
        accelerator.wait_for_everyone()
        full = None
        if not (partial / "state" / "model.safetensors").exists():
            # sharded (FSDP) states: gathering the whole weights is collective, every rank
            # takes part; rank 0 writes them
            full = accelerator.get_state_dict(model)
        if accelerator.is_main_process:
            self._write_model_folder(accelerator, model, tokenizer, partial, full)
            (partial / "checkpoint.json").write_text(json.dumps({"step": step, **(extra or {})}))
            _fsync_tree(partial)
            shutil.rmtree(final, ignore_errors=True)
            os.replace(partial, final)
            self._prune()
        accelerator.wait_for_everyone()
        return final

    @staticmethod
    def _write_model_folder(accelerator, model, tokenizer, folder: Path, full=None) -> None:
        target = folder / "model"
        target.mkdir(parents=True, exist_ok=True)
        unwrapped = accelerator.unwrap_model(model)
        lora = is_lora(unwrapped)
        base = unwrapped.get_base_model() if lora else unwrapped
        base.config.save_pretrained(target)
        if getattr(base, "generation_config", None) is not None:
            base.generation_config.save_pretrained(target)
        if tokenizer is not None:
            tokenizer.save_pretrained(target)
        weights = folder / "state" / "model.safetensors"
        if lora:  # the merged model, loadable without peft
            _save_merged(unwrapped, target / "model.safetensors")
        elif weights.exists() and model is unwrapped:  # one process: the same file
            os.link(weights, target / "model.safetensors")
        else:
            # DDP's state names every weight `module.<name>`, FSDP's is sharded: write the
            # weights once more, under the model's own names, in the standard format
            unwrapped.save_pretrained(target, state_dict=full)

    def load(self, accelerator, path: Path) -> dict:
        """Restore the state saved in `path` into the prepared objects; returns its metadata."""
        accelerator.load_state(str(Path(path) / "state"))
        return json.loads((Path(path) / "checkpoint.json").read_text())

    def _prune(self) -> None:
        for old in self.completed()[: -self.keep_last]:
            shutil.rmtree(old, ignore_errors=True)


def _save_merged(model, path: Path) -> None:
    """A LoRA model's merged weights as one safetensors file under the base model's names; a
    tensor shared by two names (tied embeddings) is written once, under its first name, as
    `save_pretrained` does."""
    from safetensors.torch import save_file

    tensors, seen = {}, set()
    for name, tensor in merged_weights(model):
        if tensor.data_ptr() not in seen:
            seen.add(tensor.data_ptr())
            tensors[name] = tensor.contiguous()
    save_file(tensors, str(path), metadata={"format": "pt"})


def _fsync_tree(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file():
            with open(path, "rb") as f:
                os.fsync(f.fileno())
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
