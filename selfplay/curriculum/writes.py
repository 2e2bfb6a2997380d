"""The task pool's database work: each function is one transaction, fast at a million tasks.

The functions take the run's engine and id and what they need of the in-memory state, and
return what they wrote; `TaskStore` applies that to its own state once they have committed.

Bulk statements are SQLAlchemy Core statements on the ORM's tables, executed as one
executemany each (never one round trip per task); ids of new tasks are reserved up front so
that no statement needs RETURNING, which SQLite would answer one row at a time.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlalchemy import (
    BigInteger,
    String,
    any_,
    bindparam,
    func,
    insert,
    literal_column,
    select,
    text,
    update,
)
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import IntegrityError

from selfplay.config import CurriculumConfig
from selfplay.curriculum import database, difficulty
from selfplay.curriculum.database import StoreError
from selfplay.curriculum.records import (
    ORIGINS,
    AddResult,
    Provenance,
    RecordResult,
    TaskAttempts,
    content_hash,
)
from selfplay.curriculum.schema import (
    KEY_COLUMNS,
    Ability,
    Attempt,
    RunRow,
    TaskReference,
    TaskRow,
    TaskStats,
)
from selfplay.types import TASK_TYPES, Task

CHUNK = 5000  # values per lookup or statement: bounds the size of one SQL parameter
STATE = ("succ", "fail", "last_step", "difficulty", "difficulty_precision")
COUNTS = ("n_answers", "n_correct")


def among(session, column, values: Sequence, kind):
    """`column IN values` as one bound parameter: a JSON array that SQLite unpacks with
    json_each, an array for PostgreSQL's `= ANY`. A plain IN list would bind (and SQLAlchemy
    compile) one parameter per value, which costs more than the lookup itself."""
    if session.get_bind().dialect.name == "postgresql":
        return column == any_(bindparam(None, list(values), type_=ARRAY(kind)))
    items = select(literal_column("value")).select_from(func.json_each(json.dumps(list(values))))
    return column.in_(items.scalar_subquery())


def chunks(items: Sequence, size: int = CHUNK):
    for start in range(0, len(items), size):
        yield items[start : start + size]


def find_or_create_run(engine, name: str, create: bool, config: dict | None = None) -> int:
    with database.write(engine) as s:
        run_id = s.scalar(select(RunRow.id).where(RunRow.name == name))
        if run_id is None:
            if not create:
                raise StoreError(f"the store has no run named {name!r}")
            run = RunRow(name=name, config=config)
            s.add(run)
            s.flush()
            run_id = run.id
        return run_id


def rename_run(engine, old: str, new: str) -> None:
    """Give the run `old` the name `new` (a copied run folder's pool, to go on under `new`)."""
    if not new.strip() or len(new) > RunRow.name.type.length:
        raise StoreError(f"a run's name is 1 to {RunRow.name.type.length} characters")
    try:
        with database.write(engine) as s:
            run = s.scalar(select(RunRow).where(RunRow.name == old))
            if run is None:
                raise StoreError(f"the store has no run named {old!r}")
            if s.scalar(select(RunRow.id).where(RunRow.name == new)) is not None:
                raise StoreError(f"the store already has a run named {new!r}")
            run.name = new
    except IntegrityError:  # another process took the name meanwhile
        raise StoreError(f"the store already has a run named {new!r}") from None


# -- tasks ------------------------------------------------------------------------------------


def _row(
    run_id: int, task: Task, digest: str, prov: Provenance, verification, guessable, keys: dict
) -> dict:
    if prov.origin not in ORIGINS:
        raise ValueError(f"origin must be one of {ORIGINS}, not {prov.origin!r}")
    return {
        "run_id": run_id,
        "hash": digest,
        "type": task.type,
        "program": task.program,
        # JSON text made here: the driver takes it as is (see `executemany`)
        "inputs": json.dumps(task.inputs, ensure_ascii=False),
        "outputs": json.dumps(task.outputs, ensure_ascii=False),
        "message": task.message,
        "n_visible": task.n_visible,
        "cpu_s": task.cpu_s,
        "origin": prov.origin,
        "source": prov.source,
        "source_id": prov.source_id,
        "step": prov.step,
        "model_version": prov.model_version,
        "verification": None if verification is None else json.dumps(verification),
        "guessable": guessable,
        **keys,
    }


def add_arguments(tasks, provenance, verifications, guessable, keys) -> tuple:
    """`TaskStore.add_tasks`'s arguments as lists of one item per task: (provenance,
    verifications, guessable, key rows) and the key columns that some task has no key in;
    ValueError where they do not fit."""
    if isinstance(provenance, Provenance):
        provenance = [provenance] * len(tasks)
    if verifications is None or isinstance(verifications, dict):
        verifications = [verifications] * len(tasks)
    marks = [None] * len(tasks) if guessable is None else guessable
    guessable = [None if g is None else bool(g) for g in marks]  # not numpy's bool
    keys = keys or {}
    if unknown := set(keys) - set(KEY_COLUMNS):
        raise ValueError(f"no task key {sorted(unknown)}: the keys are {KEY_COLUMNS}")
    given = [list(keys.get(c, [None] * len(tasks))) for c in KEY_COLUMNS]
    if len({len(x) for x in (tasks, provenance, verifications, guessable, *given)}) > 1:
        raise ValueError("tasks, provenance, verifications, guessable, keys: unequal")
    rows = [dict(zip(KEY_COLUMNS, k, strict=True)) for k in zip(*given, strict=True)]
    unkeyed = {c for c, column in zip(KEY_COLUMNS, given, strict=True) if None in column}
    return provenance, verifications, guessable, rows, unkeyed


def add_tasks(
    engine, run_id: int, tasks, provenance, verifications, guessable, keys: list[dict]
) -> tuple[AddResult, dict[str, np.ndarray]]:
    """Insert the tasks not yet in the run; returns the result and the index rows to append.
    A task already in the run keeps the `guessable` judgement, the keys (`KEY_COLUMNS`) and
    the provenance it was added with, but one held as `seed` or `proposed` that comes with
    origin `labeled` becomes labeled (`AddResult.relabeled`): a labeled set's tasks are labeled
    however they entered first, else a pool seeded with the set gives a run no labeled task."""
    hashes = [content_hash(t) for t in tasks]
    first: dict[str, int] = {}  # the occurrence whose provenance a task takes: a labeled one
    for i, digest in enumerate(hashes):
        held = first.setdefault(digest, i)
        if provenance[i].origin == "labeled" and provenance[held].origin != "labeled":
            first[digest] = i
    with database.write(engine) as s:
        ids: dict[str, int] = {}
        relabel: list[int] = []
        for chunk in chunks(list(first)):
            query = select(TaskRow.hash, TaskRow.id, TaskRow.origin).where(
                TaskRow.run_id == run_id, among(s, TaskRow.hash, chunk, String)
            )
            for digest, task_id, origin in s.execute(query):
                ids[digest] = task_id
                if origin != "labeled" and provenance[first[digest]].origin == "labeled":
                    relabel.append(task_id)
        for chunk in chunks(sorted(relabel)):
            labeled = update(TaskRow).where(among(s, TaskRow.id, chunk, BigInteger))
            s.connection().execute(labeled.values(origin="labeled"))
        new = [i for digest, i in first.items() if digest not in ids]
        rows = [
            _row(
                run_id,
                tasks[i],
                hashes[i],
                provenance[i],
                verifications[i],
                guessable[i],
                keys[i],
            )
            for i in new
        ]
        if rows:
            new_ids = _reserve_ids(s, len(rows))
            for row, task_id in zip(rows, new_ids, strict=True):
                row["id"] = task_id
            executemany(s, insert(TaskRow.__table__), rows)
            ids.update(zip((hashes[i] for i in new), new_ids, strict=True))
            refs = [
                {"task_id": ids[hashes[i]], "position": pos, "reference_id": ref}
                for i in new
                for pos, ref in enumerate(provenance[i].references)
            ]
            if refs:
                s.execute(insert(TaskReference), refs)
    fresh = set(new)
    added = tuple(i in fresh for i in range(len(hashes)))
    result = AddResult(tuple(ids[h] for h in hashes), added, tuple(sorted(relabel)))
    return result, _index_rows(ids, hashes, new, tasks, provenance, guessable)


def judge_guessable(engine, run_id: int, judge) -> int:
    """Mark the run's abduction tasks never judged for stock inputs (`guessable` NULL: tasks of
    a pool older than schema 3) with `judge(tasks)`, one bool per task; returns how many were
    judged. Each chunk's marks are one transaction: stopped midway, the next call judges the
    rest."""
    columns = (TaskRow.program, TaskRow.inputs, TaskRow.outputs, TaskRow.message)
    query = select(TaskRow.id, *columns, TaskRow.n_visible, TaskRow.cpu_s).where(
        TaskRow.run_id == run_id, TaskRow.type == "abduction", TaskRow.guessable.is_(None)
    )
    with database.read(engine) as s:
        rows = s.execute(query.order_by(TaskRow.id)).all()
    mark = update(TaskRow).where(TaskRow.id == bindparam("task_id"))
    for chunk in chunks(rows):
        tasks = [
            Task("abduction", program, tuple(inputs), tuple(outputs), message, n_visible, cpu_s)
            for _, program, inputs, outputs, message, n_visible, cpu_s in chunk
        ]
        marks = judge(tasks)
        if len(marks) != len(tasks):
            raise ValueError(f"{len(marks)} marks for {len(tasks)} tasks")
        with database.write(engine) as s:
            s.connection().execute(
                mark.values(guessable=bindparam("mark")),
                [{"task_id": row.id, "mark": bool(m)} for row, m in zip(chunk, marks, strict=True)],
            )
    return len(rows)


def fill_keys(engine, run_id: int, column: str, key) -> int:
    """Give the run's tasks without a key in `column` (one of `KEY_COLUMNS`; added without
    one, or an older pool's) `key(task)`; returns how many. Read and written a chunk at a time,
    each chunk's keys one transaction: stopped midway, the next call fills the rest."""
    target = getattr(TaskRow, column)
    columns = (TaskRow.type, TaskRow.program, TaskRow.inputs, TaskRow.outputs, TaskRow.message)
    missing = select(TaskRow.id).where(TaskRow.run_id == run_id, target.is_(None))
    with database.read(engine) as s:
        ids = s.scalars(missing.order_by(TaskRow.id)).all()
    fill = update(TaskRow).where(TaskRow.id == bindparam("task_id"))
    for chunk in chunks(ids):
        query = select(TaskRow.id, *columns, TaskRow.n_visible, TaskRow.cpu_s)
        with database.read(engine) as s:
            rows = s.execute(query.where(among(s, TaskRow.id, chunk, BigInteger))).all()
        keys = [
            {"task_id": task_id, "key": key(Task(kind, program, tuple(given), tuple(out), *rest))}
            for task_id, kind, program, given, out, *rest in rows
        ]
        if keys:  # none where another process deleted them meanwhile
            with database.write(engine) as s:
                s.connection().execute(fill.values({column: bindparam("key")}), keys)
    return len(ids)


def _reserve_ids(s, count: int) -> list[int]:
    """Ids for `count` new tasks, assigned before the insert so that it needs no RETURNING
    (with which SQLite inserts one row per statement). On SQLite the write transaction holds
    the database's only write lock, so max(id) + 1 onwards is free; on PostgreSQL the ids come
    from the table's own sequence, which is safe with concurrent writers."""
    if s.get_bind().dialect.name == "postgresql":
        query = text(
            "SELECT nextval(pg_get_serial_sequence('tasks', 'id')) FROM generate_series(1, :n)"
        )
        return [int(i) for i in s.scalars(query, {"n": count})]
    top = s.scalar(select(func.max(TaskRow.id))) or 0
    return list(range(top + 1, top + count + 1))


def _mark(guessable: bool | None) -> int:
    """The index's `guessable` code: 1, 0, or -1 where not judged (NULL)."""
    return -1 if guessable is None else int(guessable)


def _index_rows(ids, hashes, new, tasks, provenance, guessable) -> dict:
    count = len(new)
    rows = {
        "id": np.fromiter((ids[hashes[i]] for i in new), dtype=np.int64, count=count),
        "type": np.fromiter((TASK_TYPES.index(tasks[i].type) for i in new), np.int8, count),
        "origin": np.fromiter((ORIGINS.index(provenance[i].origin) for i in new), np.int8, count),
        "step": np.fromiter((provenance[i].step for i in new), np.int64, count),
        "guessable": np.fromiter((_mark(guessable[i]) for i in new), np.int8, count),
    }
    for name in ("n_answers", "n_correct", "last_step"):
        rows[name] = np.zeros(count, dtype=np.int64)
    for name in ("succ", "fail", "difficulty", "difficulty_precision"):
        rows[name] = np.zeros(count, dtype=np.float64)
    return rows


# -- attempts ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Recorded:
    """What one `record_attempts` transaction wrote, for the store to mirror in memory."""

    result: RecordResult
    ids: np.ndarray  # the tasks whose difficulty state changed, ascending
    state: dict[str, np.ndarray]  # their new columns (COUNTS and STATE)
    ability: tuple[float, float, int] | None  # the step's (theta, precision, answers) if changed


def record_attempts(
    engine,
    run_id: int,
    config: CurriculumConfig,
    key: tuple[int, str],
    ids,
    n,
    k,
    *,
    current: dict[str, np.ndarray],
    seen: bool,
) -> Recorded:
    """Record n answers, k correct, to each task of `ids` (ascending) at one (step, model
    version) `key`, and the difficulty state they imply, in one transaction.

    `current` holds the tasks' columns (COUNTS and STATE) from the store's index, which
    mirrors the database because one process records attempts for a run (reading them back
    would cost a random lookup per task). `seen`: the run has recorded attempts for `key`
    before, so some may be there already (a replayed step).
    """
    step = key[0]
    with database.write(engine) as s:
        inserted = _insert_attempts(s, run_id, key, ids, n, k, seen)
        keep = np.fromiter((t in inserted for t in ids.tolist()), dtype=bool, count=len(ids))
        state, ability = {}, None
        if keep.any():
            prior = _step_ability(s, run_id, config, step)
            part = {name: column[keep] for name, column in current.items()}
            state, (theta, precision) = _apply(config, step, n[keep], k[keep], part, prior)
            write_state(s, run_id, ids[keep], state, part["n_answers"] > 0)
            answers = _upsert_ability(s, run_id, step, theta, precision, int(n[keep].sum()))
            ability = (theta, precision, answers)
    result = RecordResult(int(keep.sum()), int(len(ids) - keep.sum()))
    return Recorded(result, ids[keep], state, ability)


def _insert_attempts(s, run_id: int, key, ids, n, k, seen: bool) -> set[int]:
    """Insert attempt rows whose (task, step, model version) is new; returns their task ids.

    Existing keys are looked up first, so that the insert is a plain executemany (fast on both
    back-ends); ON CONFLICT DO NOTHING still guards the unique key against a concurrent writer.
    The lookup is skipped for a (step, model version) this run has never recorded (`seen`
    false), the usual case: only a replayed step can collide.
    """
    step, model_version = key
    batch = s.execute(
        update(RunRow)
        .where(RunRow.id == run_id)
        .values(batches=RunRow.batches + 1)
        .returning(RunRow.batches)
    ).scalar_one()
    existing: set[int] = set()
    for chunk in chunks(ids.tolist()) if seen else ():
        query = select(Attempt.task_id).where(
            among(s, Attempt.task_id, chunk, BigInteger),
            Attempt.step == step,
            Attempt.model_version == model_version,
        )
        existing.update(s.scalars(query))
    backend = s.get_bind().dialect.name
    dialect_insert = pg_insert if backend == "postgresql" else sqlite_insert
    statement = dialect_insert(Attempt).on_conflict_do_nothing(
        index_elements=["task_id", "step", "model_version"]
    )
    rows = [
        {
            "run_id": run_id,
            "task_id": t,
            "step": step,
            "model_version": model_version,
            "n": a,
            "correct": c,
            "batch": batch,
        }
        for t, a, c in zip(ids.tolist(), n.tolist(), k.tolist(), strict=True)
        if t not in existing
    ]
    executemany(s, statement, rows)
    return {row["task_id"] for row in rows}


def _step_ability(s, run_id: int, config: CurriculumConfig, step: int) -> tuple[float, float]:
    """The prior of this step's theta: its own belief so far, else the latest earlier one's."""
    rows = s.execute(
        select(Ability.step, Ability.theta, Ability.precision)
        .where(Ability.run_id == run_id, Ability.step <= step)
        .order_by(Ability.step.desc())
        .limit(1)
    ).first()
    if rows is not None and rows.step == step:
        return rows.theta, rows.precision
    return difficulty.ability_prior(config, tuple(rows) if rows else None, step)


def _apply(config, step: int, n, k, current: dict, prior) -> tuple[dict, tuple[float, float]]:
    """Both models' update of the tasks' columns after n answers, k correct, at `step`; returns
    the new columns and the step's new ability belief (theta, precision)."""
    state = {name: column.astype(np.float64) for name, column in current.items()}
    new = difficulty.apply_batch(config, state, step, n, k, prior)
    columns = {
        "n_answers": state["n_answers"] + n,
        "n_correct": state["n_correct"] + k,
        "succ": new.succ,
        "fail": new.fail,
        "last_step": new.last_step,
        "difficulty": new.difficulty,
        "difficulty_precision": new.precision,
    }
    return columns, (new.theta, new.theta_precision)


def executemany(s, statement, rows: list[dict]) -> None:
    """Execute `statement` for many rows of plain numbers and strings through the driver.

    SQLAlchemy compiles the statement for the back-end once; the rows go to the driver's
    executemany as they are, skipping per-row bind processing, which costs more than SQLite's
    own work for narrow rows. Only for columns whose values need no conversion.
    """
    if not rows:
        return
    conn = s.connection()
    compiled = statement.compile(dialect=conn.dialect, column_keys=list(rows[0]))
    if compiled.positional:
        order = compiled.positiontup
        params = [tuple(row[k] for k in order) for row in rows]
    else:
        params = rows
    conn.exec_driver_sql(str(compiled), params)


def write_state(
    s, run_id: int, ids: np.ndarray, state: dict[str, np.ndarray], exists: np.ndarray | None = None
) -> None:
    """Write the task_stats rows of `ids`: UPDATE those whose row `exists`, INSERT the rest
    (each one executemany); without `exists`, all are new."""
    columns = [
        ids.tolist(),
        *(state[c].astype(np.int64).tolist() for c in (*COUNTS, "last_step")),
        *(state[c].tolist() for c in ("succ", "fail", "difficulty", "difficulty_precision")),
    ]
    names = ("task_id", *COUNTS, "last_step", "succ", "fail", "difficulty", "difficulty_precision")
    rows = [dict(zip(names, values, strict=True), run_id=run_id) for values in zip(*columns)]
    exists = np.zeros(len(rows), dtype=bool) if exists is None else exists
    table = TaskStats.__table__
    change = update(table).where(table.c.task_id == bindparam("key"))
    old = [
        {"key": row["task_id"], **{c: row[c] for c in names[1:]}}
        for row, e in zip(rows, exists, strict=True)
        if e
    ]
    new = [row for row, e in zip(rows, exists, strict=True) if not e]
    for chunk in chunks(old, 50_000):
        executemany(s, change.values({c: bindparam(c) for c in names[1:]}), chunk)
    for chunk in chunks(new, 50_000):
        executemany(s, insert(table), chunk)


def _upsert_ability(s, run_id: int, step: int, theta, precision, answers: int) -> int:
    """Set the step's ability belief, adding `answers` to its count; returns the new count."""
    row = s.get(Ability, (run_id, step))
    if row is None:
        row = Ability(run_id=run_id, step=step, theta=theta, precision=precision, n_answers=answers)
        s.add(row)
    else:
        row.theta, row.precision, row.n_answers = theta, precision, row.n_answers + answers
    s.flush()
    return row.n_answers


def aggregate_attempts(attempts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(task ids, answers, correct answers), summed per task, ids ascending."""
    rows = [(a.task_id, a.n, a.correct) if isinstance(a, TaskAttempts) else a for a in attempts]
    table = np.array(rows, dtype=np.int64).reshape(-1, 3)
    bad = (table[:, 1] <= 0) | (table[:, 2] < 0) | (table[:, 2] > table[:, 1])
    if bad.any():
        task_id, n, correct = table[bad][0].tolist()
        raise ValueError(f"task {task_id}: need 0 <= correct <= n and n > 0, got {correct}/{n}")
    ids, where = np.unique(table[:, 0], return_inverse=True)
    n = np.bincount(where, weights=table[:, 1], minlength=len(ids)).astype(np.int64)
    k = np.bincount(where, weights=table[:, 2], minlength=len(ids)).astype(np.int64)
    return ids, n, k
