"""Opening a task pool database: SQLite files by default, any SQLAlchemy URL (PostgreSQL) too.

`--store` and `curriculum.store` take either a database URL (`postgresql://user@host/db`) or a
path to a SQLite file (`store/run.sqlite`); `{run}` in either is replaced by the run name.

SQLite is opened for crash safety and one writer with many readers:
* `journal_mode=WAL`: a commit appends to the write-ahead log; a process killed mid-write
  leaves an unfinished log tail that the next opener ignores, so committed transactions survive
  and a half-written one never appears. Readers (an export, `pool stats`) do not block the
  writer, nor it them.
* `synchronous` (`curriculum.sqlite_synchronous`): NORMAL (the default) survives a killed
  process with every committed transaction; FULL also syncs each commit to disk, so that a
  power loss cannot take back the last commits (at the cost of a disk flush per commit).
* Write transactions start with `BEGIN IMMEDIATE`, taking the write lock before reading, so
  two writers queue (up to `busy_timeout_s`) instead of failing on a lock upgrade.
* `foreign_keys=ON`, which SQLite leaves off by default.

PostgreSQL needs no such care (its WAL and MVCC give the same guarantees); `postgresql://` URLs
use the psycopg 3 driver.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.orm import Session

from selfplay.config import CurriculumConfig


class StoreError(RuntimeError):
    """A task pool that cannot be opened or used: bad URL, newer schema, not a task pool, ..."""


def resolve_url(store: str, run: str) -> str:
    """A database URL for `store` (a URL or a SQLite file path), with `{run}` filled in."""
    if not store:
        raise StoreError("no store given: pass a SQLite file path or a database URL")
    store = store.replace("{run}", run)
    if "://" not in store:
        return "sqlite:///" + str(Path(store).expanduser().resolve())
    try:
        url = make_url(store)
    except ArgumentError as err:
        raise StoreError(f"not a database URL: {store!r} ({err})") from None
    if url.drivername in ("postgresql", "postgres"):
        url = url.set(drivername="postgresql+psycopg")
    return url.render_as_string(hide_password=False)


def create(url: str, config: CurriculumConfig) -> Engine:
    """An engine for `url`, configured as the module docstring says."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        return _sqlite_engine(parsed, config)
    try:
        return create_engine(url, pool_pre_ping=True)
    except ModuleNotFoundError as err:
        raise StoreError(
            f"the driver for {parsed.drivername} is not installed ({err.name}); for PostgreSQL "
            "install the extra: pip install 'selfplay[postgres]'"
        ) from None


def _sqlite_engine(url, config: CurriculumConfig) -> Engine:
    if url.database in (None, "", ":memory:"):
        raise StoreError("an in-memory SQLite database cannot hold a task pool; give a file")
    path = Path(url.database)
    path.parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(url, connect_args={"timeout": config.busy_timeout_s})

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:
        # Leave transaction control to the "begin" hook below (pysqlite's own is unreliable).
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute(f"PRAGMA synchronous={config.sqlite_synchronous}")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={int(config.busy_timeout_s * 1000)}")
        # A cache that holds the dedup index keeps inserts of random hashes off the disk.
        cursor.execute(f"PRAGMA cache_size={-1024 * config.sqlite_cache_mb}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection) -> None:
        immediate = connection.get_execution_options().get("selfplay_write", False)
        connection.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


@contextmanager
def write(engine: Engine):
    """A session in one write transaction: committed on success, rolled back on error."""
    with Session(engine.execution_options(selfplay_write=True)) as session, session.begin():
        yield session


@contextmanager
def read(engine: Engine):
    """A session in one read transaction (a consistent snapshot on both back-ends)."""
    with Session(engine) as session, session.begin():
        yield session
