"""Crash safety (a writer killed with SIGKILL) and schema versions, on both back-ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
import sqlalchemy as sa
from pool_helpers import task

from selfplay.curriculum import Provenance, TaskStore
from selfplay.curriculum.database import StoreError, resolve_url
from selfplay.curriculum.schema import SCHEMA_VERSION
from selfplay.new_work import canonical_key, io_key
from selfplay.types import Task

WRITER = textwrap.dedent("""
    import sys
    from selfplay.curriculum import Provenance, TaskStore
    from selfplay.types import Task
    store = TaskStore.open(sys.argv[1], run="crash")
    for b in range(10_000):
        tasks = [Task("deduction", f"def f(x):\\n    return x + {b * 1000 + j}", ("1",), ("2",))
                 for j in range(200)]
        ids = store.add_tasks(tasks, Provenance(source_id=str(b), step=b)).ids
        store.record_attempts(b, "v", [(i, 4, j % 5) for j, i in enumerate(ids)])
        print(b, flush=True)
""")


def test_a_writer_killed_mid_write_loses_nothing_committed(store_url):
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, store_url], stdout=subprocess.PIPE, text=True
    )
    committed = -1
    deadline = time.monotonic() + 60
    while committed < 5 and time.monotonic() < deadline:
        committed = int(proc.stdout.readline())
    time.sleep(0.05)  # land the kill inside a later transaction
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert committed >= 5
    with TaskStore.open(store_url, run="crash") as store:
        batches = {}
        for t in store.get(store.index["id"].tolist()):
            batches.setdefault(int(t.provenance.source_id), []).append(t)
        assert set(range(committed + 1)) <= set(batches)  # every acknowledged batch is there
        for b, tasks in batches.items():
            assert len(tasks) == 200, f"batch {b} half-written"
            estimates = [t.estimate for t in tasks]
            # a batch's tasks and its attempts were separate transactions: all or none
            assert len({e.n_answers for e in estimates}) == 1
        if store.engine.dialect.name == "sqlite":
            with store.engine.connect() as conn:
                assert conn.exec_driver_sql("PRAGMA integrity_check").scalar() == "ok"


V1 = [
    "CREATE TABLE selfplay_meta (key VARCHAR(64) PRIMARY KEY, value TEXT NOT NULL)",
    "INSERT INTO selfplay_meta VALUES ('schema_version', '1')",
    "CREATE TABLE runs (id INTEGER PRIMARY KEY, name VARCHAR(200) UNIQUE NOT NULL, "
    "created_at TIMESTAMP, config JSON)",
    "CREATE TABLE tasks (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id), "
    "hash VARCHAR(64) NOT NULL, type VARCHAR(16) NOT NULL, program TEXT NOT NULL, "
    "inputs JSON NOT NULL, outputs JSON NOT NULL, message TEXT NOT NULL, n_visible INTEGER "
    "NOT NULL, cpu_s FLOAT NOT NULL, origin VARCHAR(16) NOT NULL, source TEXT NOT NULL, "
    "source_id TEXT NOT NULL, step INTEGER NOT NULL, model_version VARCHAR(200) NOT NULL, "
    "verification JSON, created_at TIMESTAMP, n_answers INTEGER NOT NULL, n_correct INTEGER "
    "NOT NULL, succ FLOAT NOT NULL, fail FLOAT NOT NULL, last_step INTEGER NOT NULL, "
    "CONSTRAINT uq_tasks_run_hash UNIQUE (run_id, hash))",
    "CREATE TABLE task_references (task_id INTEGER NOT NULL REFERENCES tasks(id), position "
    "INTEGER NOT NULL, reference_id INTEGER NOT NULL REFERENCES tasks(id), "
    "PRIMARY KEY (task_id, position))",
    "CREATE TABLE attempts (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id),"
    " task_id INTEGER NOT NULL REFERENCES tasks(id), step INTEGER NOT NULL, model_version "
    "VARCHAR(200) NOT NULL, n INTEGER NOT NULL, correct INTEGER NOT NULL, created_at TIMESTAMP,"
    " CONSTRAINT uq_attempts_task_step_model UNIQUE (task_id, step, model_version))",
    "INSERT INTO runs (id, name) VALUES (1, 'old')",
    "INSERT INTO tasks VALUES (1, 1, 'h1', 'deduction', 'def f(x):\n    return x', '[\"1\"]', "
    "'[\"1\"]', '', 0, 0.0, 'seed', 'f.jsonl', 'line 1', 0, '', NULL, NULL, 16, 12, 12.0, 4.0, 2)",
    "INSERT INTO attempts VALUES (1, 1, 1, 1, 'v1', 8, 5, NULL)",
    "INSERT INTO attempts VALUES (2, 1, 1, 2, 'v2', 8, 7, NULL)",
]


def _engine(store_url):
    return sa.create_engine(resolve_url(store_url, "old"))


def _older_pool(store_url, statements=()) -> None:
    """A pool of schema version 1 (`V1`, then `statements`) at `store_url`."""
    engine = _engine(store_url)
    postgres = engine.dialect.name == "postgresql"
    with engine.begin() as conn:
        for statement in [*V1, *statements]:
            if postgres:  # as SQLAlchemy made them there: ids from sequences
                statement = statement.replace("id INTEGER PRIMARY KEY", "id BIGSERIAL PRIMARY KEY")
            conn.exec_driver_sql(statement.replace("%", "%%"))
        if postgres:
            for table in ("runs", "tasks", "attempts"):
                conn.exec_driver_sql(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), 4)")
    engine.dispose()


def test_an_older_schema_is_migrated_and_its_estimates_rebuilt(store_url):
    _older_pool(store_url)
    with TaskStore.open(store_url, run="old") as store:
        [e] = store.estimates([1])
        assert (e.n_answers, e.n_correct) == (16, 12)  # replayed from the attempts
        assert e.difficulty < 0 and len(store.abilities) == 2  # the Rasch model was fitted
        assert store.get([1])[0].provenance.source == "f.jsonl"
        assert store.index["guessable"].tolist() == [-1]  # an older task: not judged
        store.add_tasks([task(1)], Provenance())  # and the migrated pool takes new tasks
        # an older task has no canonical key until one is looked up; then it has, once
        [old] = store.get([1])
        key = canonical_key(old.task)
        assert store.keyed_tasks("canonical", [key], 0, canonical_key) == {
            key: [(1, "h1", old.task.program)]
        }
        assert store.keyed_tasks("canonical", ["none"], 0, lambda t: 1 / 0) == {"none": []}
        assert store.keyed_tasks("io", [io_key(old.task)], 0, io_key)[io_key(old.task)][0][0] == 1
        without = store.keyed_tasks("canonical", [key], 0, canonical_key, programs=False)
        assert without == {key: [(1, "h1", "")]}
        # filled, a column is not asked again (no query) until a task enters without its key
        statements = []
        sa.event.listen(store.engine, "before_cursor_execute", lambda *a: statements.append(a))
        assert store.fill_keys("canonical", lambda t: 1 / 0) == 0 and statements == []
        store.add_tasks([task(2)], Provenance(), keys={"io": [io_key(task(2))]})
        assert store.fill_keys("io", lambda t: 1 / 0) == 0
        assert store.fill_keys("canonical", canonical_key) == 1
        assert store.fill_keys("canonical", lambda t: 1 / 0) == 0
    with _engine(store_url).connect() as conn:
        version = conn.exec_driver_sql(
            "SELECT value FROM selfplay_meta WHERE key = 'schema_version'"
        ).scalar()
        columns = {c["name"] for c in sa.inspect(conn).get_columns("tasks")}
        keys = conn.exec_driver_sql("SELECT canonical, io FROM tasks ORDER BY id").all()
    assert version == str(SCHEMA_VERSION) and "succ" not in columns and "guessable" in columns
    assert keys == [(canonical_key(t), io_key(t)) for t in (old.task, task(1), task(2))]


OTHER_RUN = [
    "INSERT INTO runs (id, name) VALUES (2, 'other')",
    "INSERT INTO tasks VALUES (2, 2, 'h2', 'deduction', 'def f(x):\n    return x + 1', "
    "'[\"1\"]', '[\"2\"]', '', 0, 0.0, 'seed', 'g.jsonl', 'line 1', 0, '', NULL, NULL, 8, 2, "
    "2.0, 6.0, 1)",
    "INSERT INTO attempts VALUES (3, 2, 2, 1, 'v1', 8, 2, NULL)",
]


def test_every_runs_estimates_are_rebuilt_whoever_migrated_the_pool(store_url):
    """The migration that drops the difficulty state marks every run of the database for a
    rebuild, in its own transaction, and the rebuild clears a run's mark in its own: a pool
    migrated by a reader that opens no run (listing the runs, as `selfplay pool` and a resumed
    run do first), or by a process killed before the rebuild, still gets each run's estimates
    back when that run is opened, and only once."""
    _older_pool(store_url, OTHER_RUN)
    assert TaskStore.runs(store_url) == ["old", "other"]  # migrates, opens no run
    with _engine(store_url).connect() as conn:
        marks = conn.exec_driver_sql(
            "SELECT key FROM selfplay_meta WHERE key <> 'schema_version' ORDER BY key"
        ).scalars()
        assert list(marks) == ["rebuild_estimates:1", "rebuild_estimates:2"]
    with TaskStore.open(store_url, run="old") as store:
        [e] = store.estimates([1])
        assert (e.n_answers, e.n_correct) == (16, 12) and len(store.abilities) == 2
    with TaskStore.open(store_url, run="other") as store:
        [e] = store.estimates([2])
        assert (e.n_answers, e.n_correct) == (8, 2) and len(store.abilities) == 1
    with _engine(store_url).connect() as conn:  # both rebuilt: no mark is left
        rows = conn.exec_driver_sql("SELECT key, value FROM selfplay_meta").all()
    assert rows == [("schema_version", str(SCHEMA_VERSION))]
    # a pool a build without the marks migrated: attempts, and no state fitted from them
    engine = _engine(store_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM task_stats")
        conn.exec_driver_sql("DELETE FROM abilities")
    engine.dispose()
    with TaskStore.open(store_url, run="old") as store:
        [e] = store.estimates([1])
        assert (e.n_answers, e.n_correct) == (16, 12) and len(store.abilities) == 2


def test_an_older_pools_keys_are_computed_once_before_the_first_step(store_url, tmp_path, capsys):
    from types import SimpleNamespace

    from selfplay.config import load
    from selfplay.runs import _prepare_pool

    _older_pool(store_url)
    config = load(None, ["curriculum.decontaminate=[]"])
    with TaskStore.open(store_url, run="old") as store:
        # what a run does with its pool before step 1 (no labeled sets, no abduction to judge)
        run = SimpleNamespace(
            config=config,
            store=SimpleNamespace(local=store),
            executor=None,
            folder=tmp_path,
            math_checker=None,
            benchmarks=None,
        )
        _prepare_pool(run, [], start=1)
        assert "pool: 1 tasks of an older pool keyed in" in capsys.readouterr().err
        _prepare_pool(run, [], start=1)  # keyed already: nothing to say, nothing to compute
        assert "keyed" not in capsys.readouterr().err
    with _engine(store_url).connect() as conn:
        keys = conn.exec_driver_sql("SELECT canonical, io FROM tasks").all()
    assert all(all(pair) for pair in keys) and len(keys) == 1


def _abduction(task_id: int, given: str, output: str) -> str:
    return (
        f"INSERT INTO tasks VALUES ({task_id}, 1, 'h{task_id}', 'abduction', "
        f"'def f(n):\n    return n * 3', '[\"{given}\"]', '[\"{output}\"]', '', 1, 0.0, "
        "'seed', 'f.jsonl', '', 0, '', NULL, NULL, 0, 0, 1.0, 1.0, 0)"
    )


def test_an_older_pools_abductions_are_judged_for_stock_inputs_once(store_url, capsys):
    """An abduction task of a pool older than the `guessable` column is not judged (NULL); the
    run judges such tasks when it opens (`runs._judge_older_abductions`), once."""
    from selfplay.executor import Executor
    from selfplay.runs import _judge_older_abductions

    _older_pool(store_url, [_abduction(2, "4", "12"), _abduction(3, "37", "111")])
    with TaskStore.open(store_url, run="old") as store, Executor() as executor:
        assert store.index["guessable"].tolist() == [-1, -1, -1]
        _judge_older_abductions(store, executor)
        assert "pool: 2 abduction tasks of an older pool judged" in capsys.readouterr().err
        index = store.index  # 4 is a stock input, 37 is not, the deduction is not judged
        assert index["guessable"][index.positions([1, 2, 3])].tolist() == [-1, 1, 0]
        statements = []
        listen = ("before_cursor_execute", lambda *a: statements.append(a[2]))
        sa.event.listen(store.engine, *listen)
        assert store.judge_guessable(lambda tasks: 1 / 0) == 0  # nothing left to judge,
        assert statements == []  # and the index says so without a query
        sa.event.remove(store.engine, *listen)
        # a task added without a mark (as by an older writer) is judged at the next call
        late = Task("abduction", "def f(s):\n    return s + s", ("'q'",), ("'qq'",))
        [late_id] = store.add_tasks([late], Provenance()).ids
        assert store.index["guessable"][store.index.positions([late_id])].tolist() == [-1]
        assert store.judge_guessable(lambda tasks: [True] * len(tasks)) == 1
        assert store.index["guessable"][store.index.positions([late_id])].tolist() == [1]
    with _engine(store_url).connect() as conn:
        marks = dict(conn.exec_driver_sql("SELECT id, guessable FROM tasks").all())
    assert marks == {1: None, 2: True, 3: False, late_id: True}


def test_a_newer_schema_or_a_foreign_database_is_refused(store_url):
    TaskStore.open(store_url, run="r").close()
    engine = _engine(store_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE selfplay_meta SET value = '99'")
    with pytest.raises(StoreError, match="newer selfplay"):
        TaskStore.open(store_url, run="r")
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP TABLE selfplay_meta")
    with pytest.raises(StoreError, match="not a selfplay task pool"):
        TaskStore.open(store_url, run="r")
    engine.dispose()
