"""Recomputing the difficulty state from the recorded attempts alone.

The state in `task_stats` and `abilities` is a function of `attempts` and the configuration
(discount, priors, Rasch settings). Replaying the attempts in the groups they were recorded in (one
`record_attempts` call each, numbered by `attempts.batch`), in that order, through the same
online updates rebuilds it exactly: after a
migration from a schema without it, or after a change of those settings, and after a rollback
(`roll_back`: a resumed run takes its pool back to its checkpoint's step, so that the steps it
runs again draw from the pool the lost ones drew from).
"""

from __future__ import annotations

import numpy as np
from sqlalchemy import delete, func, insert, select

from selfplay.config import CurriculumConfig
from selfplay.curriculum import database, difficulty
from selfplay.curriculum.database import StoreError
from selfplay.curriculum.migrations import rebuild_mark
from selfplay.curriculum.schema import (
    Ability,
    Attempt,
    Meta,
    RunRow,
    TaskReference,
    TaskRow,
    TaskStats,
)
from selfplay.curriculum.writes import COUNTS, STATE, write_state


def rebuild_estimates(engine, run_id: int, cfg: CurriculumConfig) -> None:
    """Reset the run's difficulty state and abilities and replay its attempts, in one
    transaction (a reader sees the old state or the new one, never a mix). Only the database
    changes: a store reloads its in-memory state afterwards."""
    with database.write(engine) as s:
        _rebuild(s, run_id, cfg)


def roll_back(engine, run_id: int, cfg: CurriculumConfig, step: int) -> tuple[int, int]:
    """Take the run's pool back to where it stood after `step`: the tasks added at a later
    step and the attempts recorded at one are deleted and the difficulty state is replayed
    from the attempts that remain, in one transaction. Returns how many tasks and attempts
    were deleted; with none, nothing is rewritten. Ids of deleted tasks are given again on
    SQLite (max + 1), not on PostgreSQL (a sequence)."""
    with database.write(engine) as s:
        later = (Attempt.run_id == run_id) & (Attempt.step > step)
        attempts = s.scalar(select(func.count()).select_from(Attempt).where(later))
        gone = select(TaskRow.id).where((TaskRow.run_id == run_id) & (TaskRow.step > step))
        tasks = s.scalar(select(func.count()).select_from(gone.subquery()))
        if not attempts and not tasks:
            return 0, 0
        s.execute(delete(Attempt).where(later))
        _delete_tasks(s, gone)  # a kept task never names a later one
        _rebuild(s, run_id, cfg)
    return tasks, attempts


def keep_only_run(engine, name: str) -> int:
    """Delete every run of the store but `name`, with its tasks, answers, estimates and
    `selfplay_meta` marks, in one transaction; returns how many runs were deleted. For a copy
    of a pool that is to hold one run (`selfplay pool fork`)."""
    with database.write(engine) as s:
        run_id = s.scalar(select(RunRow.id).where(RunRow.name == name))
        if run_id is None:
            raise StoreError(f"the store has no run named {name!r}")
        others = s.scalars(select(RunRow.id).where(RunRow.id != run_id)).all()
        for table in (Attempt, Ability):
            s.execute(delete(table).where(table.run_id != run_id))
        _delete_tasks(s, select(TaskRow.id).where(TaskRow.run_id != run_id))
        for other in others:
            s.execute(delete(Meta).where(Meta.key == rebuild_mark(other)))
        s.execute(delete(RunRow).where(RunRow.id != run_id))
    return len(others)


def _delete_tasks(s, gone) -> None:
    """Delete the tasks `gone` (a select of ids) with what names them, child rows first, one
    statement each: a pool migrated from an older schema may not cascade, and a cascade would
    look up `task_references.reference_id` (no index) once per task. Their attempts are the
    caller's to delete first."""
    s.execute(delete(TaskReference).where(TaskReference.task_id.in_(gone)))
    s.execute(delete(TaskReference).where(TaskReference.reference_id.in_(gone)))
    s.execute(delete(TaskStats).where(TaskStats.task_id.in_(gone)))
    s.execute(delete(TaskRow).where(TaskRow.id.in_(gone)))


def _rebuild(s, run_id: int, cfg: CurriculumConfig) -> None:
    """`rebuild_estimates` inside the caller's transaction `s`."""
    ids = np.array(s.scalars(select(TaskRow.id).where(TaskRow.run_id == run_id)).all())
    ids = np.sort(ids).astype(np.int64)
    state = {name: np.zeros(len(ids)) for name in (*COUNTS, *STATE)}
    touched = np.zeros(len(ids), dtype=bool)
    s.execute(delete(TaskStats).where(TaskStats.run_id == run_id))
    s.execute(delete(Ability).where(Ability.run_id == run_id))
    s.execute(delete(Meta).where(Meta.key == rebuild_mark(run_id)))  # rebuilt with this commit
    abilities: dict[int, tuple[float, float, int]] = {}
    query = (
        select(
            Attempt.task_id,
            Attempt.step,
            Attempt.model_version,
            Attempt.n,
            Attempt.correct,
            Attempt.batch,
        )
        .where(Attempt.run_id == run_id)
        .order_by(Attempt.batch, Attempt.step, Attempt.id)
    )
    for (step, _), group in _groups(s.execute(query).all()):
        pos = np.searchsorted(ids, [a.task_id for a in group])
        n = np.array([a.n for a in group], dtype=np.float64)
        k = np.array([a.correct for a in group], dtype=np.float64)
        part = {name: column[pos] for name, column in state.items()}
        new = difficulty.apply_batch(cfg, part, step, n, k, _prior(cfg, abilities, step))
        values = (new.succ, new.fail, new.last_step, new.difficulty, new.precision)
        for name, value in zip(STATE, values, strict=True):
            state[name][pos] = value
        state["n_answers"][pos] += n
        state["n_correct"][pos] += k
        touched[pos] = True
        answers = abilities.get(step, (0, 0, 0))[2] + int(n.sum())
        abilities[step] = (new.theta, new.theta_precision, answers)
    write_state(s, run_id, ids[touched], {c: v[touched] for c, v in state.items()})
    rows = [
        {"run_id": run_id, "step": st, "theta": t, "precision": p, "n_answers": a}
        for st, (t, p, a) in sorted(abilities.items())
    ]
    if rows:
        s.execute(insert(Ability), rows)


def _groups(attempts):
    """Runs of consecutive attempts of one recording call: the same (step, model version,
    batch); attempts from schema version 1 (batch 0) group by (step, model version)."""
    group, key = [], None
    for a in attempts:
        if (a.step, a.model_version, a.batch) != key and group:
            yield key[:2], group
            group = []
        key = (a.step, a.model_version, a.batch)
        group.append(a)
    if group:
        yield key[:2], group


def _prior(cfg, abilities: dict, step: int) -> tuple[float, float]:
    if step in abilities:
        return abilities[step][:2]
    earlier = [st for st in abilities if st < step]
    previous = None
    if earlier:
        last = max(earlier)
        previous = (last, *abilities[last][:2])
    return difficulty.ability_prior(cfg, previous, step)
