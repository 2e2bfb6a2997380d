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
* Checkpoints (copying the log back into the database file, which syncs to disk) run on a
  background thread (`WalCheckpointer`, `curriculum.sqlite_background_checkpoint`) instead of
  inside whichever commit crosses SQLite's threshold, so a training step's write stays short.
  A checkpoint never changes what a reader sees, and one cut short by a kill is redone on open.

PostgreSQL needs no such care (its WAL and MVCC give the same guarantees); `postgresql://` URLs
use the psycopg 3 driver.
"""

from __future__ import annotations

import sqlite3
import threading
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


def shown(url: str) -> str:
    """A database URL as it may be printed or logged: its password hidden."""
    return make_url(url).render_as_string(hide_password=True)


def missing_file(url: str) -> bool:
    """Whether `url` names a SQLite file that does not exist (yet)."""
    parsed = make_url(url)
    database = parsed.database or ""
    if parsed.get_backend_name() != "sqlite" or database in ("", ":memory:"):
        return False
    return not Path(database).exists()


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
        if config.sqlite_background_checkpoint:
            cursor.execute("PRAGMA wal_autocheckpoint=0")
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


class WalCheckpointer:
    """Checkpoints a SQLite database's write-ahead log from a daemon thread.

    `poke()` after a commit wakes it; it checkpoints (PASSIVE: never waits for, nor blocks,
    readers and writers) once the log has grown past `pages` pages, and at least every
    `interval_s` seconds. Python's sqlite3 releases the GIL while SQLite works, so the copy
    runs beside the training loop.
    """

    def __init__(self, path: str, pages: int = 1000, interval_s: float = 5.0):
        self.path, self.pages, self.interval_s = path, pages, interval_s
        self._wake = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="wal-checkpoint", daemon=True)
        self._thread.start()

    def poke(self) -> None:
        self._wake.set()

    def _run(self) -> None:
        conn = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        try:
            while not self._stop:
                self._wake.wait(self.interval_s)
                self._wake.clear()
                wal = Path(self.path + "-wal")
                if wal.exists() and wal.stat().st_size > self.pages * 4096 or self._stop:
                    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            conn.close()

    def close(self) -> None:
        self._stop = True
        self._wake.set()
        self._thread.join()


def checkpointer(engine: Engine, config: CurriculumConfig) -> WalCheckpointer | None:
    """A background checkpointer for a SQLite engine (None for other back-ends or when off)."""
    if engine.dialect.name != "sqlite" or not config.sqlite_background_checkpoint:
        return None
    return WalCheckpointer(engine.url.database)
