"""Schema versions: a new database gets the current schema; an older one is migrated in place.

The version lives in `selfplay_meta` (`schema_version`). On open:

* no tables at all: create the current schema;
* an older version: run each migration step `v -> v + 1` in one transaction (both SQLite and
  PostgreSQL roll DDL back with the transaction, so a failed or killed migration leaves the
  database at its old version, never half-migrated);
* a newer version: refuse with a message that names both versions;
* tables but no version (another program's database): refuse, touching nothing.

History:
  1  runs, tasks (with the discounted solve-rate posterior in columns n_answers, n_correct,
     succ, fail, last_step), task_references, attempts
  2  the Rasch model, and the difficulty state moved to its own narrow table: `task_stats`
     (posterior and Rasch difficulty per attempted task) and `abilities` (per step); the
     migration drops the old columns and replays the recorded attempts to fit both models;
     `attempts.batch` and `runs.batches` number the calls that recorded attempts (0 for
     attempts from version 1), so that a replay groups answers exactly as they were recorded
  3  `tasks.guessable`: whether a stock input solves an abduction task, which
     `curriculum.guessable_weight` draws less often (NULL for the tasks of older pools: not
     judged, until a run opens the pool, `TaskStore.judge_guessable`)
  4  `tasks.canonical` and `tasks.io`, each with its index: the task's hash with its program in
     canonical text, and without its program, to find a proposal that renames a pooled task's
     variables or behaves as its program does (NULL for the tasks of older pools until a run
     opens the pool or the store first looks one up, `TaskStore.fill_keys`)

A migration step is written against the old tables as they were (plain DDL), never against the
current ORM classes, which describe only the newest version.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from sqlalchemy import Connection, Engine, inspect, select, text

from selfplay.curriculum.database import StoreError
from selfplay.curriculum.schema import SCHEMA_VERSION, Ability, Attempt, Base, Meta

log = logging.getLogger(__name__)


def _v1_to_v2(conn: Connection) -> None:
    Base.metadata.tables["task_stats"].create(conn)
    Base.metadata.tables["abilities"].create(conn)
    for column in ("n_answers", "n_correct", "succ", "fail", "last_step"):
        conn.execute(text(f"ALTER TABLE tasks DROP COLUMN {column}"))
    conn.execute(text("ALTER TABLE attempts ADD COLUMN batch INTEGER NOT NULL DEFAULT 0"))
    conn.execute(text("ALTER TABLE runs ADD COLUMN batches INTEGER NOT NULL DEFAULT 0"))


def _v2_to_v3(conn: Connection) -> None:
    conn.execute(text("ALTER TABLE tasks ADD COLUMN guessable BOOLEAN"))


def _v3_to_v4(conn: Connection) -> None:
    for column in ("canonical", "io"):
        conn.execute(text(f"ALTER TABLE tasks ADD COLUMN {column} VARCHAR(32)"))
        conn.execute(text(f"CREATE INDEX ix_tasks_run_{column} ON tasks (run_id, {column})"))


#: version -> the step that migrates a database from it to version + 1
MIGRATIONS: dict[int, Callable[[Connection], None]] = {1: _v1_to_v2, 2: _v2_to_v3, 3: _v3_to_v4}
#: migrations after which the derived difficulty state must be recomputed from `attempts`
REBUILDS_AFTER = {1}


def rebuild_mark(run_id: int) -> str:
    """The `selfplay_meta` key that marks a run whose difficulty state a migration dropped.

    The migration marks every run of the database in its own transaction, and the rebuild of
    a run's state clears that run's mark in its own (`replay.rebuild_estimates`): so a pool
    migrated by a reader that opens no run (`reads.run_names`), by the opening of another run,
    or by a process killed before the rebuild, still has each run rebuilt when it is opened
    (`TaskStore.open`), once."""
    return f"rebuild_estimates:{run_id}"


def rebuild_pending(engine: Engine, run_id: int) -> bool:
    """Whether `run_id`'s difficulty state awaits its rebuild: its mark (`rebuild_mark`), or
    attempts without the abilities that every recording of attempts writes in the same
    transaction (a pool a build without the marks migrated, then lost the rebuild of)."""
    with engine.connect() as conn:
        mark = select(Meta.key).where(Meta.key == rebuild_mark(run_id))
        if conn.execute(mark).first() is not None:
            return True
        attempted = select(Attempt.id).where(Attempt.run_id == run_id).limit(1)
        fitted = select(Ability.step).where(Ability.run_id == run_id).limit(1)
        return conn.execute(attempted).first() is not None and conn.execute(fitted).first() is None


def ensure_schema(engine: Engine) -> None:
    """Create or migrate the schema; a migration that drops the difficulty state marks every
    run for its rebuild (`rebuild_mark`)."""
    with engine.connect().execution_options(selfplay_write=True) as conn, conn.begin():
        version = _version(conn)
        if version is None:
            Base.metadata.create_all(conn)
            conn.execute(Meta.__table__.insert(), [_version_row(SCHEMA_VERSION)])
            return
        if version > SCHEMA_VERSION:
            raise StoreError(
                f"{_where(engine)} has task pool schema version {version}, made by a newer "
                f"selfplay; this one reads versions up to {SCHEMA_VERSION}: upgrade selfplay"
            )
        rebuild = False
        for v in range(version, SCHEMA_VERSION):
            log.warning("migrating task pool %s from schema %d to %d", _where(engine), v, v + 1)
            MIGRATIONS[v](conn)
            rebuild = rebuild or v in REBUILDS_AFTER
        if version < SCHEMA_VERSION:
            conn.execute(
                Meta.__table__.update().where(Meta.key == "schema_version"),
                {"value": str(SCHEMA_VERSION)},
            )
        if rebuild:
            runs = conn.execute(text("SELECT id FROM runs")).scalars().all()
            marks = [{"key": rebuild_mark(r), "value": "1"} for r in runs]
            if marks:
                conn.execute(Meta.__table__.insert(), marks)


def _version(conn: Connection) -> int | None:
    tables = set(inspect(conn).get_table_names())
    if Meta.__tablename__ not in tables:
        if tables:
            raise StoreError(
                f"the database has tables ({', '.join(sorted(tables)[:5])}) but is not a "
                "selfplay task pool (no selfplay_meta table); refusing to touch it"
            )
        return None
    raw = conn.execute(select(Meta.value).where(Meta.key == "schema_version")).scalar()
    if raw is None or not raw.isdigit() or int(raw) < 1:
        raise StoreError(f"selfplay_meta has no valid schema_version (found {raw!r})")
    return int(raw)


def _version_row(version: int) -> dict:
    return {"key": "schema_version", "value": str(version)}


def _where(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=True)
