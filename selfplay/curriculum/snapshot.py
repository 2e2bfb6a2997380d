"""A pool opened from a copy, for readers that must leave the run's file as it is.

    with opened_copy("store/learn/pool.sqlite", "learn", config) as store:
        tasks = store.get(store.index["id"].tolist())

Opening a pool of an older schema migrates it, and a run's first look-up gives its tasks the
keys they lack (`TaskStore.fill_keys`): both write. A benchmark or a script that only reads a
pool opens a copy of the SQLite file (SQLite's online backup: what the run last committed) in
a temporary folder, so the run's own file is never changed, and a run writing it meanwhile is
neither disturbed nor read half-written.
"""

from __future__ import annotations

import sqlite3
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from selfplay.config import CurriculumConfig
from selfplay.curriculum.database import StoreError

__all__ = ["opened_copy"]


@contextmanager
def opened_copy(path: str | Path, run: str, config: CurriculumConfig | None = None) -> Iterator:
    """The `TaskStore` of `run` in the SQLite file `path`, opened from a temporary copy that
    is deleted on leaving. A missing file or run is an error (nothing is created); a database
    URL is refused, since there is no file to copy."""
    if "://" in str(path):
        raise StoreError(f"{path}: a copy can be opened of a SQLite file only, not a URL")
    path = Path(path)
    if not path.is_file():
        raise StoreError(f"{path}: no such SQLite file")
    from selfplay.curriculum.store import TaskStore

    config = replace(config or CurriculumConfig(), run=run)
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / "pool.sqlite"
        _backup(path, copy)
        runs = TaskStore.runs(str(copy), config)
        if run not in runs:
            raise StoreError(f"{path} holds no run {run!r}; its runs: {', '.join(runs) or 'none'}")
        with TaskStore.open(str(copy), run, config, create=False) as store:
            yield store


def _backup(path: Path, copy: Path) -> None:
    """A consistent copy of the database at `path`, what its last commit left, made by SQLite
    (its online backup): copying the file and then its write-ahead log could pair a file the
    run's checkpointer has just written with a log restarted after it, a malformed copy."""
    # read-only: a connection that could write folds a write-ahead log a killed run left into
    # the file when it closes, and removes the log
    source = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True)
    target = sqlite3.connect(copy)
    try:
        source.backup(target)
    except sqlite3.DatabaseError as err:
        raise StoreError(f"{path}: not a readable SQLite database ({err})") from None
    finally:
        target.close()
        source.close()
