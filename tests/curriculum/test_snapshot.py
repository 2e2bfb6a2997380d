"""`opened_copy`: a reader opens a pool from a copy, so the run's own file is never migrated,
keyed or otherwise written."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from selfplay.curriculum.database import StoreError
from selfplay.curriculum.schema import SCHEMA_VERSION
from selfplay.curriculum.snapshot import opened_copy
from selfplay.new_work import canonical_key
from tests.curriculum.test_pool_durability import _engine, _older_pool


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_an_older_pool_is_read_from_a_copy_and_left_as_it_was(tmp_path):
    path = tmp_path / "pool.sqlite"
    _older_pool(str(path))
    before = _digest(path)
    with opened_copy(path, "old") as store:
        [old] = store.get([1])
        assert old.provenance.source == "f.jsonl"
        assert old.estimate.n_answers == 16  # migrated and replayed, in the copy
        key = canonical_key(old.task)
        assert store.keyed_tasks("canonical", [key], 0, canonical_key)[key][0][0] == 1
        copy = store.engine.url.database
    assert _digest(path) == before
    assert not (tmp_path / "pool.sqlite-wal").exists()
    with _engine(str(path)).connect() as conn:
        version = "SELECT value FROM selfplay_meta WHERE key = 'schema_version'"
        assert conn.exec_driver_sql(version).scalar() == "1"
    assert SCHEMA_VERSION > 1
    assert not Path(copy).exists()  # the copy is gone on leaving


def test_a_missing_run_file_or_a_url_is_an_error_that_creates_nothing(tmp_path):
    path = tmp_path / "pool.sqlite"
    _older_pool(str(path))
    before = _digest(path)
    with (
        pytest.raises(StoreError, match="holds no run 'new'; its runs: old"),
        opened_copy(path, "new"),
    ):
        pass
    assert _digest(path) == before
    with (
        pytest.raises(StoreError, match="no such SQLite file"),
        opened_copy(tmp_path / "none.sqlite", "old"),
    ):
        pass
    assert not (tmp_path / "none.sqlite").exists()
    with (
        pytest.raises(StoreError, match="SQLite file only"),
        opened_copy("postgresql://localhost/pool", "old"),
    ):
        pass


def test_the_copy_holds_what_a_run_still_writing_has_committed(tmp_path):
    """A run keeps its pool open and its last commits in the write-ahead log: the copy holds
    every committed task, and the run writes on undisturbed."""
    from pool_helpers import task

    from selfplay.curriculum import Provenance, TaskStore

    path = tmp_path / "pool.sqlite"
    with TaskStore.open(str(path), "r") as run:
        run.add_tasks([task(i) for i in range(100)], Provenance("seed", 0))
        with opened_copy(path, "r") as store:
            assert len(store) == 100
            run.add_tasks([task(1000 + i) for i in range(5)], Provenance("proposed", 1))
            assert len(store) == 100  # a copy: what was committed when it was made
        assert len(run) == 105
    with opened_copy(path, "r") as store:
        assert len(store) == 105


def test_a_log_a_killed_run_left_is_read_and_left_where_it_is(tmp_path):
    """A run killed with tasks in its write-ahead log leaves the file and the log: the copy
    holds those tasks, and both files stay as they were (a reader that could write would
    fold the log into the file as it closed)."""
    import shutil

    from pool_helpers import task

    from selfplay.curriculum import Provenance, TaskStore

    path, kept = tmp_path / "pool.sqlite", tmp_path / "killed"
    kept.mkdir()
    with TaskStore.open(str(path), "r") as run:
        run.add_tasks([task(i) for i in range(50)], Provenance("seed", 0))
        for name in ("pool.sqlite", "pool.sqlite-wal"):  # the files as a SIGKILL leaves them
            shutil.copy(tmp_path / name, kept / name)
    killed = kept / "pool.sqlite"
    before = {p.name: _digest(p) for p in kept.iterdir()}
    assert "pool.sqlite-wal" in before
    with opened_copy(killed, "r") as store:
        assert len(store) == 50
    assert {p.name: _digest(p) for p in kept.iterdir() if p.suffix != ".sqlite-shm"} == before
