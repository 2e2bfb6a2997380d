"""What a run resumed from its folder's last checkpoint checks and restores (`runs.open_run`).

Before the model loads, the pool its steps wrote must be there (`check_pool`). The checkpoint
restores the model, optimizer, scheduler, RNG states and step (`restore`); the settings a
resume may change take effect over what it restored (the learning rate and weight decay:
`trainer.checkpoint.configured_rates`), and only then is the folder's `config.yaml` rewritten,
so a refused resume leaves the run's configuration as it was (`save_config` keeps a changed
one's predecessor). The pool goes back to the checkpoint's step (`roll_back`).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import yaml

from selfplay.config import Config, to_dict
from selfplay.trainer.checkpoint import Checkpoints, configured_rates

__all__ = ["check_pool", "restore", "roll_back", "save_config"]


def restore(accelerator, optimizer, scheduler, config: Config, folder: Path, latest, ranks) -> dict:
    """Load the checkpoint `latest` into the prepared objects, give the optimizer the configured
    rate and weight decay, then record the configuration; returns the checkpoint's metadata."""
    saved = Checkpoints(folder).load(accelerator, latest)
    t = config.trainer
    changed = configured_rates(optimizer, scheduler, t.lr, t.weight_decay)
    if ranks.is_main:
        save_config(config, folder)
        if changed:
            print(changed, file=sys.stderr)
    return saved


def save_config(config: Config, folder: Path) -> None:
    """Write config.yaml; a resumed run with a changed configuration keeps the old one too."""
    path = folder / "config.yaml"
    text = yaml.safe_dump(to_dict(config), sort_keys=False)
    if path.exists() and path.read_text() != text:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        path.rename(folder / f"config.before-{stamp}.yaml")
    path.write_text(text)


def check_pool(config: Config, folder: Path) -> None:
    """A run resuming from a checkpoint needs the pool its steps wrote. A store without the run
    (another `curriculum.store`, or a run folder copied under a new name) is refused, not given
    a new empty pool under a model trained for many steps."""
    from selfplay.curriculum import StoreError, TaskStore, database

    name, store = config.curriculum.run, config.curriculum.store
    held = TaskStore.runs(store, config.curriculum)
    if name in held:
        return
    url = database.resolve_url(store, name)
    where = database.shown(url)
    path = Path(url.removeprefix("sqlite:///"))
    if url.startswith("sqlite:///") and path.is_relative_to(folder.resolve()) and held:
        copied = held[0] if len(held) == 1 else "RUN"
        fix = (
            "a run folder copied under a new name: rename the run in its pool "
            f"(selfplay pool rename --store {path} --run {copied} {name})"
        )
    else:
        fix = (
            "point curriculum.store at the run's pool; a pool outside the run folder is not "
            "copied with it (copy it too, and point curriculum.store at the copy)"
        )
    raise StoreError(
        f"{folder} has checkpoints but the pool {where} has no run named {name!r} (it holds: "
        f"{', '.join(held) or 'none'}); {fix}"
    )


def roll_back(store, step: int) -> None:
    """Take the pool back to the checkpoint's step: what lost steps added after it goes, so
    that the steps run again draw what the lost ones drew. Without a checkpoint (`step` 0)
    the pool is left as it is: it may be shared with a run elsewhere, or its checkpoints
    moved, and deleting a whole run's tasks is not a resume's call to make."""
    if step == 0:
        if store.last_step > 0:
            print(
                f"pool: run {store.run} holds tasks or answers up to step {store.last_step} "
                "but this folder has no checkpoint; they stay, and step 1 starts from them",
                file=sys.stderr,
            )
        return
    tasks, attempts = store.roll_back(step)
    if tasks or attempts:
        print(
            f"pool: {tasks} tasks and {attempts} attempts recorded after step {step} removed; "
            f"the run goes on from step {step + 1}",
            file=sys.stderr,
        )
