"""Checkpoints: model, optimizer, scheduler, RNG states and the step, written atomically.

`checkpoints/step-000010/` holds `state/` (accelerate's `save_state`: model, optimizer,
scheduler and every RNG state), `model/` and `checkpoint.json` (the step and whatever the
loop adds). `model/` is the weights with config and tokenizer, loadable by `from_pretrained`
and by vLLM (the weight file is a hard link to the one in `state/`); for a LoRA run it is the
solver's adapter in peft's format, naming the run's `model.name` as its base, which
`selfplay.engine.model.resolve` (every `--model` and `model.name`) merges into a plain model
once, on first use (`selfplay.engine.adapters`). A LoRA run's `state/` keeps only the
trainable tensors (the adapters): the frozen base weights are the model the run starts from,
which resuming loads anyway. A checkpoint of the 0.5B coder with LoRA rank 16 is so 146 MB
(the adapters twice, AdamW's two moments of them, the tokenizer) where the whole wrapped model
made it 4.9 GB and the merged weights in `model/` (2.5 GB) 2.6 GB.
A checkpoint is written under a `.partial` name and renamed when complete, so a run killed at
any moment, SIGKILL included, leaves either the whole checkpoint or none of it; `latest()`
ignores partial ones, and the next save removes them.

A checkpoint resumes on another number of processes (DDP, or one process): the weights,
optimizer, scheduler and step carry over (DDP's state names every tensor `module.<name>`, one
process's under the model's own names; the load hook reads either into either), and the pool
is rank 0's anyway. RNG states are one file per rank (`random_states_<rank>.pkl`): a rank
without one keeps the state `run.seed` gave it, and those of ranks that no longer exist are
left unused; `load` says which in one line. FSDP's sharded states have not been resumed on
another number of processes.
"""

from __future__ import annotations

import copy
import json
import math
import os
import re
import shutil
import sys
from pathlib import Path

import torch

from selfplay.engine.adapters import ADAPTER_WEIGHTS
from selfplay.engine.model import EMBEDDED_MODELS
from selfplay.engine.weights import is_lora
from selfplay.trainer.lora import ROLES, per_role

__all__ = ["Checkpoints", "configured_rates"]

_NAME = re.compile(r"step-(\d{6,})\Z")
_PARTIAL = re.compile(r"step-\d{6,}\.partial\Z")


class Checkpoints:
    def __init__(self, run_dir: Path, keep_last: int = 2, base_model: str | None = None):
        self.root = Path(run_dir) / "checkpoints"
        self.keep_last = max(1, keep_last)
        # what a LoRA checkpoint's adapter names as its base (the run's model.name); else the
        # folder the model was loaded from
        self.base_model = base_model

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
        hook = accelerator.register_save_state_pre_hook(_keep_only_trainable)
        try:
            accelerator.save_state(str(partial / "state"))
        finally:
            hook.remove()
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

    def _write_model_folder(self, accelerator, model, tokenizer, folder: Path, full=None) -> None:
        target = folder / "model"
        target.mkdir(parents=True, exist_ok=True)
        unwrapped = accelerator.unwrap_model(model)
        if tokenizer is not None:
            tokenizer.save_pretrained(target)
        if is_lora(unwrapped):  # the solver's adapter; merged when loaded (engine.adapters)
            base = self.base_model or unwrapped.get_base_model().config.name_or_path
            _save_adapter(unwrapped, target, base)
            return
        unwrapped.config.save_pretrained(target)
        if getattr(unwrapped, "generation_config", None) is not None:
            unwrapped.generation_config.save_pretrained(target)
        weights = folder / "state" / "model.safetensors"
        if weights.exists() and model is unwrapped:  # one process: the same file
            os.link(weights, target / "model.safetensors")
        else:
            # DDP's state names every weight `module.<name>`, FSDP's is sharded: write the
            # weights once more, under the model's own names, in the standard format
            unwrapped.save_pretrained(target, state_dict=full)

    def load(self, accelerator, path: Path) -> dict:
        """Restore the state saved in `path` into the prepared objects; returns its metadata.

        The checkpoint may come from another number of processes (see the module doc); what
        does not carry over is said on standard error, in one line, by rank 0."""
        state = Path(path) / "state"
        hook = accelerator.register_load_state_pre_hook(_load_models)
        try:
            accelerator.load_state(str(state))
        finally:
            hook.remove()
        note = world_change(saved_world(state), accelerator.num_processes)
        if note and accelerator.is_main_process:
            print(note, file=sys.stderr)
        return json.loads((Path(path) / "checkpoint.json").read_text())

    def _prune(self) -> None:
        for old in self.completed()[: -self.keep_last]:
            shutil.rmtree(old, ignore_errors=True)
        # what a prune raced by an evaluation's merge left, and what a save killed before its
        # rename left (only the one just renamed was being written)
        for shell in self.root.iterdir():
            raced = _NAME.match(shell.name) and not (shell / "checkpoint.json").exists()
            if raced or _PARTIAL.match(shell.name):
                shutil.rmtree(shell, ignore_errors=True)


def configured_rates(optimizer, scheduler, lr: float, weight_decay: float) -> str | None:
    """Give a resumed run's optimizer the configured learning rate, weight decay and schedule.

    Loading a checkpoint restores the saving session's rate and weight decay in every parameter
    group, and the scheduler's base rates: a resume with another `trainer.lr` or
    `trainer.weight_decay` would record the new value in the run's config.yaml and train with
    the old one, and one with a schedule of another length (a decay over another `run.steps`)
    would use the old schedule's rate until its next optimizer step. The optimizer's moments
    and the schedule's position are kept; the rate is the configured schedule's at that
    position. Returns a line saying what changed (None: nothing)."""
    inner = getattr(scheduler, "scheduler", scheduler)  # accelerate wraps it
    groups = optimizer.param_groups
    if not groups:
        return None
    base, decay, rate = inner.base_lrs[0], groups[0]["weight_decay"], groups[0]["lr"]
    factors = [f(inner.last_epoch) for f in inner.lr_lambdas]  # the schedule's (LambdaLR)
    for group, factor in zip(groups, factors, strict=True):
        group.update(lr=lr * factor, initial_lr=lr, weight_decay=weight_decay)
    inner.base_lrs = [lr] * len(groups)
    inner._last_lr = [group["lr"] for group in groups]
    changed = []
    if (base, decay) != (lr, weight_decay):
        changed.append(
            f"trainer.lr {base:g} -> {lr:g}, trainer.weight_decay {decay:g} -> {weight_decay:g}"
        )
    if not math.isclose(rate, base * factors[0], rel_tol=1e-6, abs_tol=1e-15):
        changed.append(
            f"the rate at optimizer step {inner.last_epoch} {rate:g} -> {groups[0]['lr']:g}"
        )
    if not changed:
        return None
    kept = "the optimizer's moments and the schedule's position kept"
    return f"resumed with {'; '.join(changed)} ({kept})"


def _trainable(model) -> set[str] | None:
    """The names of a LoRA model's trainable tensors as its state dict names them (under a
    DDP wrapper too); None for a model without adapters."""
    from accelerate.utils import extract_model_from_parallel

    if not is_lora(extract_model_from_parallel(model)):
        return None
    # every adapter's: a per-role model's inactive adapter has requires_grad off for the while
    return {name for name, p in model.named_parameters() if p.requires_grad or ".lora_" in name}


def _keep_only_trainable(models, weights, _output_dir) -> None:
    """accelerate's save hook: a LoRA model's state dict loses its frozen tensors."""
    for model, state in zip(models, weights):
        keep = _trainable(model)
        if keep is not None:
            for name in [n for n in state if n not in keep]:
                del state[name]


def saved_world(state: Path) -> int:
    """How many processes saved the accelerate state in `state`: one RNG file each."""
    return len(list(Path(state).glob("random_states_*.pkl")))


def world_change(saved: int, world: int) -> str | None:
    """The line that says what a resume on `world` processes from a checkpoint of `saved`
    leaves behind; None when the numbers agree (or the checkpoint's is unknown)."""
    if saved in (0, world):
        return None

    def ranks(numbers: range) -> str:
        return f"rank{'s' if len(numbers) > 1 else ''} {', '.join(map(str, numbers))}"

    lost, new = range(world, saved), range(saved, world)
    if lost:
        rest = f"the RNG states of {ranks(lost)} do not"
    else:
        verbs = ("have", "start") if len(new) > 1 else ("has", "starts")
        rest = f"{ranks(new)} {verbs[0]} no saved RNG state and {verbs[1]} from run.seed's"
    return (
        f"resuming on {world} process{'es' if world > 1 else ''} from a checkpoint of {saved}: "
        f"the weights, optimizer, scheduler, step and pool carry over; {rest}"
    )


def _prefixed(names) -> bool:
    """Whether state names are a DDP wrapper's (`module.<name>`)."""
    return next(iter(names), "").startswith("module.")


def _named_as(saved: dict, prefixed: bool) -> dict:
    """`saved` under a DDP wrapper's names (`module.<name>`) or the model's own."""
    if _prefixed(saved) == prefixed:
        return saved
    if prefixed:
        return {f"module.{name}": tensor for name, tensor in saved.items()}
    return {name.removeprefix("module."): tensor for name, tensor in saved.items()}


def _load_models(models, input_dir) -> None:
    """accelerate's load hook, for a state saved by another number of processes and for LoRA:
    one process's model has its own names and a DDP-wrapped one `module.<name>`, and accelerate
    loads the saved names strictly. A model whose saved names are another wrapping's is loaded
    here under its own names and taken off accelerate's list (a plain model's sharing of tied
    weights as in accelerate's loader); LoRA models as `_load_lora_models` says."""
    from safetensors import safe_open
    from safetensors.torch import load_model

    numbered = list(enumerate(models))  # the index names the file
    _load_lora_models(models, input_dir)
    for index, model in numbered:
        path = Path(input_dir) / (
            "model.safetensors" if index == 0 else f"model_{index}.safetensors"
        )
        if not any(m is model for m in models) or not path.exists():
            continue  # loaded already (LoRA), or not saved by accelerate's safetensors writer
        with safe_open(str(path), "pt") as f:
            saved_prefixed = _prefixed(f.keys())
        prefixed = _prefixed(model.state_dict())
        if saved_prefixed == prefixed:
            continue  # accelerate's own loader
        if prefixed:  # saved by one process, loaded under DDP
            target = model.module
        else:  # saved under DDP, loaded by one process: the names of a wrapper around it
            target = torch.nn.Module()
            target.module = model
        load_model(target, str(path), strict=True, device=str(next(model.parameters()).device))
        models[:] = [m for m in models if m is not model]


def _load_lora_models(models, input_dir) -> None:
    """accelerate's load hook: a LoRA model loads its saved tensors over the base weights it
    already holds, and is taken off the list accelerate loads strictly. A state that misses
    one adapter tensor or names a tensor the model lacks is refused. A state saved under DDP
    loads into one process's model and the other way round."""
    from safetensors.torch import load_file

    for index, model in reversed(list(enumerate(models))):
        trainable = _trainable(model)
        if trainable is None:
            continue
        name = "model.safetensors" if index == 0 else f"model_{index}.safetensors"
        path = Path(input_dir) / name
        device = next(model.parameters()).device
        saved = _named_as(load_file(str(path), device=str(device)), _prefixed(trainable))
        changed = f"{path}: not this LoRA model's state"
        try:
            missing, unexpected = model.load_state_dict(saved, strict=False)
        except RuntimeError as err:  # tensors of other shapes: another rank
            first = str(err).split("size mismatch for ", 1)[-1].split("\n")[0]
            raise ValueError(f"{changed} ({first}); was the run's trainer.lora changed?") from None
        lacking = sorted(trainable & set(missing))
        if unexpected or lacking:
            raise ValueError(
                f"{changed} (adapter tensors missing: {lacking[:3]}, "
                f"unknown tensors: {sorted(unexpected)[:3]}); was the run's trainer.lora changed?"
            )
        del models[index]


def _save_adapter(model, folder: Path, base: str) -> None:
    """Write the (unwrapped) peft `model`'s policy adapter (the solver's of a per-role model)
    to `folder` in peft's format, as an adapter of `base` (an embedded model's name, a hub id,
    or a folder, recorded absolute); the model's active adapter is left as it was."""
    from peft.utils import get_peft_model_state_dict
    from safetensors.torch import save_file

    adapter = ROLES[0] if per_role(model) else model.active_adapter
    # no embedding layers asked about: peft would look the base up on the hub to decide
    tensors = get_peft_model_state_dict(model, adapter_name=adapter, save_embedding_layers=False)
    save_file(
        {name: t.detach().contiguous() for name, t in tensors.items()},
        str(folder / ADAPTER_WEIGHTS),
        metadata={"format": "pt"},
    )
    if base not in EMBEDDED_MODELS and Path(base).expanduser().exists():
        base = str(Path(base).expanduser().resolve())
    config = copy.deepcopy(model.peft_config[adapter])
    config.base_model_name_or_path, config.inference_mode = base, True
    config.save_pretrained(str(folder))  # adapter_config.json


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
