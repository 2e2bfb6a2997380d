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
        assert conn.exec_driver_sql("SELECT value FROM selfplay_meta").scalar() == "1"
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
