"""Reading the pool: the in-memory index of a run, and task rows by id."""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter

import numpy as np
from sqlalchemy import BigInteger, Row, String, Text, case, literal, select

from selfplay.curriculum import database
from selfplay.curriculum.database import StoreError
from selfplay.curriculum.migrations import ensure_schema
from selfplay.curriculum.pool import PoolIndex
from selfplay.curriculum.records import ORIGINS, PoolTask, Provenance
from selfplay.curriculum.schema import Ability, Attempt, RunRow, TaskReference, TaskRow, TaskStats
from selfplay.curriculum.writes import COUNTS, STATE, among, chunks
from selfplay.types import TASK_TYPES, Task


def load_index(engine, run_id: int) -> PoolIndex:
    """The per-task state of a run, read in id order straight into numpy columns: the tasks'
    fixed columns (types as small integers, computed by the database), then the stats rows.
    A task not judged for stock inputs (`guessable` NULL) is -1 there: not guessable to the
    sampler, and found without a query by `TaskStore.judge_guessable`."""
    index = PoolIndex()
    query = (
        select(
            TaskRow.id,
            _code(TaskRow.type, TASK_TYPES),
            _code(TaskRow.origin, ORIGINS),
            TaskRow.step,
            case((TaskRow.guessable.is_(True), 1), (TaskRow.guessable.is_(False), 0), else_=-1),
        )
        .where(TaskRow.run_id == run_id)
        .order_by(TaskRow.id)
    )
    stats = [TaskStats.task_id, *(getattr(TaskStats, c) for c in (*COUNTS, *STATE))]
    with database.read(engine) as s:
        conn = s.connection()
        for part in conn.execute(query.execution_options(yield_per=200_000)).partitions():
            table = np.array(list(map(tuple, part)), dtype=np.int64).reshape(-1, 5)
            if (table[:, 1:3] < 0).any():
                raise StoreError("the pool holds a task type or origin this version does not know")
            batch = {
                "id": table[:, 0],
                "type": table[:, 1],
                "origin": table[:, 2],
                "step": table[:, 3],
                "guessable": table[:, 4],
            }
            for name in (*COUNTS, *STATE):
                batch[name] = np.zeros(len(table))
            index.append(batch)
        rows = conn.execute(select(*stats).where(TaskStats.run_id == run_id)).all()
    if rows:
        table = np.array(list(map(tuple, rows)), dtype=np.float64)
        pos = index.positions(table[:, 0].astype(np.int64))
        for j, name in enumerate((*COUNTS, *STATE), start=1):
            index[name][pos] = table[:, j]
    return index


def _code(column, names: Sequence[str]):
    return case({name: i for i, name in enumerate(names)}, value=column, else_=-1)


def load_rows(
    engine, ids: Sequence[int], full: bool = False
) -> tuple[dict[int, Row], dict[int, tuple]]:
    """Task rows (as plain rows) and their references, by id; `full` adds the verification
    record and creation time, which a draw does not need."""
    rows: dict[int, Row] = {}
    refs: dict[int, list[tuple[int, int]]] = {}
    table = TaskRow.__table__
    columns = [c for c in table.c if full or c.name not in ("verification", "created_at")]
    with database.read(engine) as s:
        for chunk in chunks(list(ids)):
            query = select(*columns).where(among(s, table.c.id, chunk, BigInteger))
            rows.update((r.id, r) for r in s.execute(query).all())
            query = select(
                TaskReference.task_id, TaskReference.position, TaskReference.reference_id
            )
            for task_id, position, ref in s.execute(
                query.where(among(s, TaskReference.task_id, chunk, BigInteger))
            ):
                refs.setdefault(task_id, []).append((position, ref))
    return rows, {t: tuple(r for _, r in sorted(v)) for t, v in refs.items()}


_POOL_TASK_FIELDS = """id hash type program inputs outputs message n_visible cpu_s origin step
    model_version source source_id""".split()


def pool_tasks(rows: Sequence[Row], refs: dict[int, tuple], estimates) -> list[PoolTask]:
    """Rows (of one query) as pool tasks, with their references and estimates."""
    if not rows:
        return []
    # one tuple look-up per field: a Row attribute look-up is several times slower
    fields = itemgetter(*(rows[0]._fields.index(name) for name in _POOL_TASK_FIELDS))
    tasks = []
    for row, estimate in zip(rows, estimates, strict=True):
        values = fields(row)
        tasks.append(pool_task(values, refs.get(values[0], ()), estimate))
    return tasks


def pool_task(values: tuple, references: tuple[int, ...], estimate) -> PoolTask:
    """A pool task from a row's values in `_POOL_TASK_FIELDS` order."""
    (
        task_id,
        content_hash,
        task_type,
        program,
        inputs,
        outputs,
        message,
        n_visible,
        cpu_s,
        origin,
        step,
        model_version,
        source,
        source_id,
    ) = values
    task = Task(task_type, program, tuple(inputs), tuple(outputs), message, n_visible, cpu_s)
    prov = Provenance(origin, step, model_version, source, source_id, references)
    return PoolTask(task_id, task, content_hash, prov, estimate)


def induction_inputs(
    engine, run_id: int, programs: Sequence[str], before_step: int
) -> dict[str, list[frozenset[str]]]:
    """Per program text, the input sets of the run's induction tasks on it that entered the
    pool before step `before_step` (an empty list for a program with none)."""
    found: dict[str, list[frozenset[str]]] = {p: [] for p in programs}
    query = select(TaskRow.program, TaskRow.inputs).where(
        TaskRow.run_id == run_id, TaskRow.type == "induction", TaskRow.step < before_step
    )
    with database.read(engine) as s:
        for chunk in chunks(sorted(found)):
            for program, inputs in s.execute(query.where(among(s, TaskRow.program, chunk, Text))):
                found[program].append(frozenset(inputs))
    return found


def abilities(
    engine, run_id: int
) -> tuple[dict[int, tuple[float, float, int]], set[tuple[int, str]]]:
    """The run's fitted abilities (step -> theta, precision, answers) and the (step, model
    version) keys that have recorded attempts."""
    columns = (Ability.step, Ability.theta, Ability.precision, Ability.n_answers)
    keys = select(Attempt.step, Attempt.model_version).where(Attempt.run_id == run_id)
    with database.read(engine) as s:
        rows = s.execute(select(*columns).where(Ability.run_id == run_id))
        fitted = {step: (theta, precision, n) for step, theta, precision, n in rows}
        recorded = {tuple(r) for r in s.execute(keys.distinct()).all()}
    return fitted, recorded


def keyed_tasks(
    engine, run_id: int, column: str, keys: Sequence[str], up_to_step: int, programs: bool = True
) -> dict[str, list[tuple[int, str, str]]]:
    """Per key in `column` (one of `KEY_COLUMNS`), the (id, content hash, program) of the
    run's tasks with it that entered the pool at step `up_to_step` or before (an empty list for
    a key with none); without `programs`, the program's text is not read ("")."""
    found: dict[str, list[tuple[int, str, str]]] = {k: [] for k in keys}
    target = getattr(TaskRow, column)
    program = TaskRow.program if programs else literal("").label("program")
    query = select(target, TaskRow.id, TaskRow.hash, program).where(
        TaskRow.run_id == run_id, TaskRow.step <= up_to_step
    )
    with database.read(engine) as s:
        for chunk in chunks(sorted(found)):
            for key, task_id, digest, program in s.execute(
                query.where(among(s, target, chunk, String)).order_by(TaskRow.id)
            ):
                found[key].append((task_id, digest, program))
    return found


def run_names(store: str, config) -> list[str]:
    """The runs a store holds, oldest first; a SQLite file that does not exist holds none and
    is not created."""
    url = database.resolve_url(store, config.run)
    if database.missing_file(url):
        return []
    engine = database.create(url, config)
    try:
        ensure_schema(engine)
        with database.read(engine) as s:
            return list(s.scalars(select(RunRow.name).order_by(RunRow.id)))
    finally:
        engine.dispose()
