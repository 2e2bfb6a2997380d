"""The task pool's database work: each function is one transaction, fast at a million tasks.

Bulk statements go through SQLAlchemy's ORM bulk INSERT/UPDATE (executemany, batched into
multi-row VALUES with RETURNING where the back-end allows), never one round trip per task.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

import numpy as np
from sqlalchemy import insert, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert

from selfplay.curriculum import database, difficulty
from selfplay.curriculum.database import StoreError
from selfplay.curriculum.pool import ORIGINS, PoolIndex
from selfplay.curriculum.records import (
    AddResult,
    PoolTask,
    Provenance,
    RecordResult,
    content_hash,
)
from selfplay.curriculum.schema import Ability, Attempt, Run, TaskReference, TaskRow
from selfplay.types import TASK_TYPES, Task

CHUNK = 5000  # ids per IN (...) list: below every back-end's parameter limit
STATE = ("succ", "fail", "last_step", "difficulty", "difficulty_precision")


def _chunks(items: Sequence, size: int = CHUNK):
    for start in range(0, len(items), size):
        yield items[start : start + size]


def find_or_create_run(engine, name: str, create: bool) -> int:
    with database.write(engine) as s:
        run_id = s.scalar(select(Run.id).where(Run.name == name))
        if run_id is None:
            if not create:
                raise StoreError(f"the store has no run named {name!r}")
            run_id = s.scalar(insert(Run).returning(Run.id), [{"name": name}])
        return run_id


# -- tasks ------------------------------------------------------------------------------------


def _row(run_id: int, task: Task, digest: str, prov: Provenance, verification, now) -> dict:
    if prov.origin not in ORIGINS:
        raise ValueError(f"origin must be one of {ORIGINS}, not {prov.origin!r}")
    return {
        "run_id": run_id,
        "hash": digest,
        "type": task.type,
        "program": task.program,
        "inputs": list(task.inputs),
        "outputs": list(task.outputs),
        "message": task.message,
        "n_visible": task.n_visible,
        "cpu_s": task.cpu_s,
        "origin": prov.origin,
        "source": prov.source,
        "source_id": prov.source_id,
        "step": prov.step,
        "model_version": prov.model_version,
        "verification": verification,
        "created_at": now,
        **dict.fromkeys(("n_answers", "n_correct", *STATE), 0),
    }


def add_tasks(store, tasks, provenance, verifications) -> tuple[AddResult, dict]:
    """Insert the tasks not yet in the run; returns the result and the index rows to append."""
    hashes = [content_hash(t) for t in tasks]
    first: dict[str, int] = {}
    for i, digest in enumerate(hashes):
        first.setdefault(digest, i)
    now = datetime.now(UTC)
    with database.write(store.engine) as s:
        ids: dict[str, int] = {}
        for chunk in _chunks(list(first)):
            query = select(TaskRow.hash, TaskRow.id).where(
                TaskRow.run_id == store.run_id, TaskRow.hash.in_(chunk)
            )
            ids.update(s.execute(query).tuples().all())
        new = [i for digest, i in first.items() if digest not in ids]
        rows = [
            _row(store.run_id, tasks[i], hashes[i], provenance[i], verifications[i], now)
            for i in new
        ]
        if rows:
            returning = insert(TaskRow).returning(TaskRow.id, sort_by_parameter_order=True)
            new_ids = s.scalars(returning, rows).all()
            ids.update(zip((hashes[i] for i in new), new_ids, strict=True))
            refs = [
                {"task_id": ids[hashes[i]], "position": pos, "reference_id": ref}
                for i in new
                for pos, ref in enumerate(provenance[i].references)
            ]
            if refs:
                s.execute(insert(TaskReference), refs)
    fresh = set(new)
    result = AddResult(tuple(ids[h] for h in hashes), tuple(i in fresh for i in range(len(hashes))))
    return result, _index_rows(ids, hashes, new, tasks, provenance)


def _index_rows(ids, hashes, new, tasks, provenance) -> dict:
    count = len(new)
    rows = {
        "id": np.fromiter((ids[hashes[i]] for i in new), dtype=np.int64, count=count),
        "type": np.fromiter((TASK_TYPES.index(tasks[i].type) for i in new), np.int8, count),
        "origin": np.fromiter((ORIGINS.index(provenance[i].origin) for i in new), np.int8, count),
        "step": np.fromiter((provenance[i].step for i in new), np.int64, count),
    }
    for name in ("n_answers", "n_correct", "last_step"):
        rows[name] = np.zeros(count, dtype=np.int64)
    for name in ("succ", "fail", "difficulty", "difficulty_precision"):
        rows[name] = np.zeros(count, dtype=np.float64)
    return rows


# -- attempts ---------------------------------------------------------------------------------


def _insert_attempts(s, store, step: int, model_version: str, ids, n, k) -> set[int]:
    """Insert attempt rows, skipping keys already there; returns the task ids inserted."""
    backend = store.engine.dialect.name
    dialect_insert = pg_insert if backend == "postgresql" else sqlite_insert
    statement = (
        dialect_insert(Attempt)
        .on_conflict_do_nothing(index_elements=["task_id", "step", "model_version"])
        .returning(Attempt.task_id)
    )
    now = datetime.now(UTC)
    rows = [
        {
            "run_id": store.run_id,
            "task_id": int(t),
            "step": step,
            "model_version": model_version,
            "n": int(a),
            "correct": int(c),
            "created_at": now,
        }
        for t, a, c in zip(ids, n, k, strict=True)
    ]
    return set(s.scalars(statement, rows).all()) if rows else set()


def record_attempts(store, step: int, model_version: str, ids, n, k) -> RecordResult:
    with database.write(store.engine) as s:
        inserted = _insert_attempts(s, store, step, model_version, ids, n, k)
        keep = np.fromiter((t in inserted for t in ids.tolist()), dtype=bool, count=len(ids))
        if keep.any():
            ability = _step_ability(s, store, step)
            update_rows = _apply(s, store, step, ids[keep], n[keep], k[keep], ability)
    if keep.any():
        _apply_to_index(store, ids[keep], n[keep], k[keep], update_rows)
    return RecordResult(int(keep.sum()), int(len(ids) - keep.sum()))


def _step_ability(s, store, step: int) -> tuple[float, float]:
    """The prior of this step's theta: its own belief so far, else the latest earlier one's."""
    rows = s.execute(
        select(Ability.step, Ability.theta, Ability.precision)
        .where(Ability.run_id == store.run_id, Ability.step <= step)
        .order_by(Ability.step.desc())
        .limit(1)
    ).first()
    if rows is not None and rows.step == step:
        return rows.theta, rows.precision
    return difficulty.ability_prior(store.config, tuple(rows) if rows else None, step)


def _apply(s, store, step: int, ids, n, k, ability) -> difficulty.BatchUpdate:
    """Read the tasks' state in the transaction, apply both models, write it back."""
    names = ("n_answers", "n_correct", *STATE)
    columns = [TaskRow.id, *(getattr(TaskRow, c) for c in names)]
    found: dict[int, tuple] = {}
    for chunk in _chunks(ids.tolist()):
        query = select(*columns).where(TaskRow.id.in_(chunk))
        found.update((r[0], r[1:]) for r in s.execute(query).tuples())
    table = np.array([found[i] for i in ids.tolist()], dtype=np.float64).reshape(-1, len(names))
    state = {name: table[:, j] for j, name in enumerate(names)}
    new = difficulty.apply_batch(store.config, state, step, n, k, ability)
    answers, correct = state["n_answers"] + n, state["n_correct"] + k
    rows = [
        {
            "id": i,
            "n_answers": int(a),
            "n_correct": int(c),
            "succ": float(su),
            "fail": float(fa),
            "last_step": int(la),
            "difficulty": float(b),
            "difficulty_precision": float(lam),
        }
        for i, a, c, su, fa, la, b, lam in zip(
            ids.tolist(),
            answers,
            correct,
            new.succ,
            new.fail,
            new.last_step,
            new.difficulty,
            new.precision,
            strict=True,
        )
    ]
    s.execute(update(TaskRow), rows)
    _upsert_ability(s, store, step, new.theta, new.theta_precision, int(n.sum()))
    return new


def _upsert_ability(s, store, step: int, theta: float, precision: float, answers: int) -> None:
    row = s.get(Ability, (store.run_id, step))
    if row is None:
        s.add(
            Ability(
                run_id=store.run_id, step=step, theta=theta, precision=precision, n_answers=answers
            )
        )
    else:
        row.theta, row.precision, row.n_answers = theta, precision, row.n_answers + answers
    s.flush()
    store.abilities[step] = (theta, precision, row.n_answers if row else answers)


def _apply_to_index(store, ids, n, k, new: difficulty.BatchUpdate) -> None:
    ix = store.index
    pos = ix.positions(ids)
    ix["n_answers"][pos] += n
    ix["n_correct"][pos] += k
    ix["succ"][pos], ix["fail"][pos], ix["last_step"][pos] = new.succ, new.fail, new.last_step
    ix["difficulty"][pos], ix["difficulty_precision"][pos] = new.difficulty, new.precision


# -- reading ----------------------------------------------------------------------------------


def load_index(engine, run_id: int) -> PoolIndex:
    """The per-task state of a run, read in id order straight into numpy columns."""
    index = PoolIndex()
    names = ["id", "type", "origin", "step", "n_answers", "n_correct", *STATE]
    columns = [getattr(TaskRow, c) for c in names]
    query = select(*columns).where(TaskRow.run_id == run_id).order_by(TaskRow.id)
    with database.read(engine) as s:
        result = s.execute(query.execution_options(yield_per=100_000))
        for part in result.partitions():
            rows = list(zip(*part, strict=True))
            batch = {name: np.asarray(col) for name, col in zip(names, rows, strict=True)}
            batch["type"] = _codes(batch["type"], TASK_TYPES)
            batch["origin"] = _codes(batch["origin"], ORIGINS)
            index.append(batch)
    return index


def _codes(values: np.ndarray, names: Sequence[str]) -> np.ndarray:
    codes = np.full(len(values), -1, dtype=np.int8)
    for i, name in enumerate(names):
        codes[values == name] = i
    if (codes < 0).any():
        raise StoreError(f"unknown value in the pool: {values[codes < 0][0]!r}")
    return codes


def load_rows(engine, ids: Sequence[int]) -> tuple[dict[int, TaskRow], dict[int, tuple]]:
    """Task rows and their references (ordered) by id."""
    rows: dict[int, TaskRow] = {}
    refs: dict[int, list[tuple[int, int]]] = {}
    with database.read(engine) as s:
        for chunk in _chunks(list(ids)):
            rows.update((r.id, r) for r in s.scalars(select(TaskRow).where(TaskRow.id.in_(chunk))))
            query = select(TaskReference).where(TaskReference.task_id.in_(chunk))
            for ref in s.scalars(query):
                refs.setdefault(ref.task_id, []).append((ref.position, ref.reference_id))
        s.expunge_all()
    return rows, {t: tuple(r for _, r in sorted(v)) for t, v in refs.items()}


def pool_task(row: TaskRow, references: tuple[int, ...], estimate) -> PoolTask:
    task = Task(
        row.type,
        row.program,
        tuple(row.inputs),
        tuple(row.outputs),
        row.message,
        row.n_visible,
        row.cpu_s,
    )
    prov = Provenance(
        row.origin, row.step, row.model_version, row.source, row.source_id, references
    )
    return PoolTask(row.id, task, row.hash, prov, estimate)


# -- replay -----------------------------------------------------------------------------------


def rebuild_estimates(store) -> None:
    """Reset the difficulty state and abilities of the run and replay its attempts, grouped by
    (step, model version) in the order they were recorded, in one transaction."""
    cfg = store.config
    with database.write(store.engine) as s:
        ids = np.array(s.scalars(select(TaskRow.id).where(TaskRow.run_id == store.run_id)).all())
        ids.sort()
        state = {name: np.zeros(len(ids)) for name in ("n_answers", "n_correct", *STATE)}
        s.execute(Ability.__table__.delete().where(Ability.run_id == store.run_id))
        abilities: dict[int, tuple[float, float, int]] = {}
        query = (
            select(Attempt.task_id, Attempt.step, Attempt.model_version, Attempt.n, Attempt.correct)
            .where(Attempt.run_id == store.run_id)
            .order_by(Attempt.step, Attempt.id)
        )
        attempts = s.execute(query).all()
        for (step, _), group in _groups(attempts):
            pos = np.searchsorted(ids, [a.task_id for a in group])
            n = np.array([a.n for a in group], dtype=np.float64)
            k = np.array([a.correct for a in group], dtype=np.float64)
            prior = _replay_prior(cfg, abilities, step)
            part = {name: column[pos] for name, column in state.items()}
            new = difficulty.apply_batch(cfg, part, step, n, k, prior)
            for name, value in zip(
                STATE,
                (new.succ, new.fail, new.last_step, new.difficulty, new.precision),
                strict=True,
            ):
                state[name][pos] = value
            state["n_answers"][pos] += n
            state["n_correct"][pos] += k
            answers = abilities.get(step, (0, 0, 0))[2] + int(n.sum())
            abilities[step] = (new.theta, new.theta_precision, answers)
        _write_state(s, ids, state)
        rows = [
            {"run_id": store.run_id, "step": st, "theta": t, "precision": p, "n_answers": a}
            for st, (t, p, a) in sorted(abilities.items())
        ]
        if rows:
            s.execute(insert(Ability), rows)


def _groups(attempts):
    """Consecutive attempts with the same (step, model version)."""
    group, key = [], None
    for a in attempts:
        if (a.step, a.model_version) != key and group:
            yield key, group
            group = []
        key = (a.step, a.model_version)
        group.append(a)
    if group:
        yield key, group


def _replay_prior(cfg, abilities: dict, step: int) -> tuple[float, float]:
    if step in abilities:
        return abilities[step][:2]
    earlier = [st for st in abilities if st < step]
    previous = None
    if earlier:
        last = max(earlier)
        previous = (last, *abilities[last][:2])
    return difficulty.ability_prior(cfg, previous, step)


def _write_state(s, ids: np.ndarray, state: dict[str, np.ndarray]) -> None:
    ints = ("n_answers", "n_correct", "last_step")
    for chunk in _chunks(range(len(ids)), 20_000):
        rows = [
            {"id": int(ids[i]), **{n: (int if n in ints else float)(state[n][i]) for n in state}}
            for i in chunk
        ]
        s.execute(update(TaskRow), rows)
