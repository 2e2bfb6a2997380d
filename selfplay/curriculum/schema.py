"""The database schema of the task pool (SQLAlchemy 2 ORM), version `SCHEMA_VERSION`.

    selfplay_meta   key/value: `schema_version`, and `rebuild_estimates:<run id>` for a run
                    whose difficulty state a migration dropped until it is replayed
                    (see `migrations.py`)
    runs            one row per run; tasks are deduplicated within a run
    tasks           a verified task, its provenance, and whether a stock input solves it
    task_stats      the difficulty state of each attempted task
    task_references which pool tasks the proposer was shown when it wrote a task (ordered)
    attempts        per (task, step, model version): answers and correct answers, once
    abilities       the solver's Rasch ability per (run, step)

The difficulty state in `task_stats` (discounted success/failure counts, Rasch difficulty and
its precision) and `abilities` are derived from `attempts`; they are updated in the same transaction
that inserts the attempts, so a reader never sees one without the other, and
`TaskStore.rebuild_estimates()` can recompute them from `attempts` alone.

Values are stored as the executor's canonical text (inputs, outputs are JSON lists of strings),
never as pickled objects.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

SCHEMA_VERSION = 4
#: the task keys other than `hash` (`TaskStore.keyed_tasks`), each an indexed column
KEY_COLUMNS = ("canonical", "io")

# SQLite only makes INTEGER PRIMARY KEY an alias of its rowid (fast, autoincrementing) for the
# exact type INTEGER; PostgreSQL gets BIGINT so a long run never runs out of ids.
Id = BigInteger().with_variant(Integer(), "sqlite")


class Base(DeclarativeBase):
    pass


class Meta(Base):
    __tablename__ = "selfplay_meta"

    key: Mapped[str] = mapped_column(String(64), primary_key=True)
    value: Mapped[str] = mapped_column(Text)


class RunRow(Base):
    __tablename__ = "runs"

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    name: Mapped[str] = mapped_column(String(200), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    # The resolved configuration of the run that created it, for provenance of exports.
    config: Mapped[dict | None] = mapped_column(JSON, default=None)
    # How many record_attempts calls wrote attempts: numbers each call's attempts (`batch`).
    batches: Mapped[int] = mapped_column(Integer, default=0, server_default="0")


class TaskRow(Base):
    __tablename__ = "tasks"
    __table_args__ = (
        # The only secondary indexes: every insert pays for each one, and queries by type, step
        # or difficulty go through the store's in-memory columns instead.
        UniqueConstraint("run_id", "hash", name="uq_tasks_run_hash"),
        Index("ix_tasks_run_canonical", "run_id", "canonical"),
        Index("ix_tasks_run_io", "run_id", "io"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    hash: Mapped[str] = mapped_column(String(32))  # see records.content_hash
    # the same hash of the task with its program in canonical text (names a program binds
    # renamed, comments and layout dropped: `new_work.canonical_key`), so that a proposal that
    # renames a pooled task's variables is found a repeat; NULL until computed (tasks added
    # without one, an older pool's: `TaskStore.fill_keys` fills them, when a run opens the pool)
    canonical: Mapped[str | None] = mapped_column(String(32), default=None)
    # the same hash of the task without its program (type, inputs, outputs, message:
    # `new_work.io_key`), to find the pooled tasks a proposal may behave as
    io: Mapped[str | None] = mapped_column(String(32), default=None)
    type: Mapped[str] = mapped_column(String(16))
    program: Mapped[str] = mapped_column(Text)
    inputs: Mapped[list] = mapped_column(JSON)
    outputs: Mapped[list] = mapped_column(JSON)
    message: Mapped[str] = mapped_column(Text, default="")
    n_visible: Mapped[int] = mapped_column(Integer, default=0)
    cpu_s: Mapped[float] = mapped_column(Float, default=0.0)
    # provenance
    origin: Mapped[str] = mapped_column(String(16))  # one of records.ORIGINS
    source: Mapped[str] = mapped_column(Text, default="")  # proposer, or the imported file
    source_id: Mapped[str] = mapped_column(Text, default="")  # id or line in the source
    step: Mapped[int] = mapped_column(Integer, default=0)  # training step that produced it
    model_version: Mapped[str] = mapped_column(String(200), default="")
    verification: Mapped[dict | None] = mapped_column(JSON(none_as_null=True), default=None)
    # an abduction task one of its stock inputs solves (`selfplay.trivial.stock_inputs`):
    # answerable by guessing rather than working back; NULL where not judged (other task types,
    # and an older pool's abduction tasks until a run opens it: `TaskStore.judge_guessable`)
    guessable: Mapped[bool | None] = mapped_column(Boolean, default=None)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class TaskStats(Base):
    """The difficulty state of a task that has been attempted (see difficulty.py).

    Kept apart from `tasks` so that a step's update rewrites short rows, not programs; a task
    without a row here has never been attempted (all zeros).
    """

    __tablename__ = "task_stats"

    task_id: Mapped[int] = mapped_column(
        ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True
    )
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), index=True)
    n_answers: Mapped[int] = mapped_column(Integer)  # raw totals, never discounted
    n_correct: Mapped[int] = mapped_column(Integer)
    succ: Mapped[float] = mapped_column(Float)  # discounted successes, as of last_step
    fail: Mapped[float] = mapped_column(Float)
    last_step: Mapped[int] = mapped_column(Integer)
    difficulty: Mapped[float] = mapped_column(Float)  # Rasch b, logits
    difficulty_precision: Mapped[float] = mapped_column(Float)  # 1 / variance of b


class TaskReference(Base):
    __tablename__ = "task_references"

    task_id: Mapped[int] = mapped_column(
        ForeignKey("tasks.id", ondelete="CASCADE"), primary_key=True
    )
    position: Mapped[int] = mapped_column(Integer, primary_key=True)
    reference_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"))


class Attempt(Base):
    __tablename__ = "attempts"
    # The key of idempotency: a resumed run that records a step again changes nothing.
    __table_args__ = (
        UniqueConstraint("task_id", "step", "model_version", name="uq_attempts_task_step_model"),
    )

    id: Mapped[int] = mapped_column(Id, primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"))
    task_id: Mapped[int] = mapped_column(ForeignKey("tasks.id", ondelete="CASCADE"))
    step: Mapped[int] = mapped_column(Integer)
    model_version: Mapped[str] = mapped_column(String(200), default="")
    n: Mapped[int] = mapped_column(Integer)
    correct: Mapped[int] = mapped_column(Integer)
    # the recording call, so that a replay applies the online updates in the same groups
    batch: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class Ability(Base):
    __tablename__ = "abilities"

    run_id: Mapped[int] = mapped_column(ForeignKey("runs.id", ondelete="CASCADE"), primary_key=True)
    step: Mapped[int] = mapped_column(Integer, primary_key=True)
    theta: Mapped[float] = mapped_column(Float)  # Rasch ability, logits
    precision: Mapped[float] = mapped_column(Float)  # 1 / variance of theta
    n_answers: Mapped[int] = mapped_column(Integer, default=0)
