"""`PoolStats`: what a pool holds, as numbers for the loop's metrics and as readable tables."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np
from sqlalchemy import func, select

from selfplay.curriculum import database
from selfplay.curriculum.records import ORIGINS
from selfplay.curriculum.schema import Attempt
from selfplay.proposer.complexity import loops, statements
from selfplay.trivial import converted_copy
from selfplay.types import TASK_TYPES, WRITTEN_TYPES, Task

BINS = 10


class Growth(NamedTuple):
    """One span of steps of the growth table. `again` counts the answers to tasks that had
    answers at an earlier step of the run (the solver revisiting its pool), `correct` and
    `again_correct` the right ones among all and among those: a solver that fits its pool is
    right more and more often again while no more often on the tasks it answers first."""

    first: int
    last: int
    added: int  # tasks added in the span
    total: int  # tasks in the pool at its end
    answers: int
    correct: int = 0
    again: int = 0
    again_correct: int = 0


@dataclass(frozen=True)
class PoolStats:
    run: str
    step: int
    tasks: int
    by_type_origin: dict[tuple[str, str], int]
    histogram: tuple[int, ...]  # attempted tasks per solve-rate bin [i/BINS, (i+1)/BINS)
    never_attempted: int
    frontier: int  # attempted tasks with band[0] <= p <= band[1]
    growth: tuple[Growth, ...]
    answers: int
    correct: int
    ability: tuple[float, float]
    # per span of steps: (first, last step, deduction and abduction tasks proposed, their
    # median statements, the share with a loop or comprehension, the share that are copies up
    # to type: `trivial.converted_copy`); `programs=True` of `pool_stats`
    programs: tuple[tuple[int, int, int, float, float, float], ...] = ()

    def metrics(self) -> dict[str, float]:
        attempted = max(self.tasks - self.never_attempted, 1)
        return {
            "curriculum/pool_size": float(self.tasks),
            "curriculum/pool_frontier_fraction": self.frontier / attempted,
            "curriculum/pool_never_attempted": float(self.never_attempted),
            "curriculum/solver_ability": self.ability[0],
        }

    def table(self) -> str:
        """The statistics as plain-text tables."""
        lines = [
            f"run {self.run!r} at step {self.step}: {self.tasks} tasks, "
            f"{self.answers} answers ({self.correct} correct), "
            f"solver ability {self.ability[0]:+.2f} +- {self.ability[1]:.2f} logits",
            "",
        ]
        lines += _type_origin_table(self.by_type_origin)
        lines += ["", "estimated solve rate   tasks"]
        peak = max(self.histogram, default=0) or 1
        for i, count in enumerate(self.histogram):
            bar = "#" * round(30 * count / peak)
            lines.append(
                f"  [{i / BINS:.1f}, {(i + 1) / BINS:.1f}{']' if i == BINS - 1 else ')'}"
                f"    {count:>8}  {bar}"
            )
        lines.append(f"  never attempted {self.never_attempted:>9}")
        if self.growth:
            lines += ["", _GROWTH_HEADER]
        for g in self.growth:
            span = f"{g.first}" if g.first == g.last else f"{g.first}-{g.last}"
            first = g.answers - g.again
            lines.append(
                f"{span:>13} {g.added:>9} {g.total:>9} {g.answers:>10} {_share(g.again, g.answers)}"
                f" {_share(g.correct - g.again_correct, first)} {_share(g.again_correct, g.again)}"
            )
        if self.programs:
            lines += ["", "deduction and abduction programs proposed (proposer/complexity.py)"]
            lines.append(
                f"{'steps':>13} {'tasks':>9} {'statements':>11} {'with a loop':>12} "
                f"{'copy up to type':>16}"
            )
            for first, last, count, median, looped, converted in self.programs:
                span = f"{first}" if first == last else f"{first}-{last}"
                lines.append(
                    f"{span:>13} {count:>9} {median:>11g} {looped:>12.0%} {converted:>16.0%}"
                )
        return "\n".join(lines)


_GROWTH_HEADER = (
    f"{'steps':>13} {'added':>9} {'total':>9} {'answers':>10} {'again':>8} "
    f"{'right new':>10} {'right again':>12}"
)


def _share(part: int, whole: int, width: int = 8) -> str:
    return f"{part / whole:>{width}.0%}" if whole else f"{'-':>{width}}"


def _type_origin_table(counts: dict[tuple[str, str], int]) -> list[str]:
    header = f"{'type':<11}" + "".join(f"{o:>10}" for o in ORIGINS) + f"{'total':>10}"
    lines = [header]
    for t in (*TASK_TYPES, "total"):
        row = [
            sum(c for (tt, oo), c in counts.items() if (t == "total" or tt == t) and oo == o)
            for o in ORIGINS
        ]
        lines.append(f"{t:<11}" + "".join(f"{c:>10}" for c in row) + f"{sum(row):>10}")
    return lines


def pool_stats(store, step: int, growth: bool = True, programs: bool = False) -> PoolStats:
    """The pool's statistics, its estimates at `step`; `growth` adds the growth table (it
    reads the attempts table), `programs` the shape of the proposed programs over steps (it
    reads every proposed deduction and abduction task's program); both cover every step."""
    ix = store.index
    p, attempted = store.solve_rates(step)
    by = {}
    for ti, t in enumerate(TASK_TYPES):
        for oi, o in enumerate(ORIGINS):
            count = int(np.count_nonzero((ix["type"] == ti) & (ix["origin"] == oi)))
            if count:
                by[t, o] = count
    bins = np.minimum((p[attempted] * BINS).astype(np.int64), BINS - 1)
    histogram = tuple(int(c) for c in np.bincount(bins, minlength=BINS))
    low, high = store.config.band
    frontier = int(np.count_nonzero(attempted & (p >= low) & (p <= high)))
    return PoolStats(
        store.run,
        step,
        len(ix),
        by,
        histogram,
        int(np.count_nonzero(~attempted)),
        frontier,
        _growth(store) if growth else (),
        int(ix["n_answers"].sum()),
        int(ix["n_correct"].sum()),
        store.ability(step),
        _programs(store) if programs else (),
    )


def _spans(top: int, rows: int) -> list[tuple[int, int]]:
    """Steps 0..`top` cut into at most `rows` spans of equal width."""
    width = max(1, -(-(top + 1) // rows))
    return [(first, min(first + width - 1, top)) for first in range(0, top + 1, width)]


def written_tasks(store) -> tuple[np.ndarray, list[Task]]:
    """The steps and tasks of the deduction and abduction tasks the model proposed into the
    pool (not induction tasks, whose program was given, nor imported ones), in id order."""
    ix = store.index
    written = np.isin(ix["type"], [TASK_TYPES.index(t) for t in WRITTEN_TYPES])
    written &= ix["origin"] == ORIGINS.index("proposed")
    ids = ix["id"][written]
    tasks = [t.task for t in store.get(ids.tolist())] if len(ids) else []
    return ix["step"][written], tasks


def _programs(store, rows: int = 12) -> tuple:
    """Per span of steps, the deduction and abduction tasks proposed then: how many, their
    median statement count, the share with a loop or a comprehension, and the share whose
    output is its input written in another type (`converted_copy`). An induction task's
    program was given to its proposer, and an imported task (a seed, a labeled one) was not
    proposed: neither is a program the model wrote."""
    steps, tasks = written_tasks(store)
    if not tasks:
        return ()
    counts = np.array([statements(t.program) or 0 for t in tasks])
    looped = np.array([bool(loops(t.program)) for t in tasks])
    converted = np.array([converted_copy(t) for t in tasks])
    out = []
    for first, last in _spans(int(steps.max()), rows):
        here = (steps >= first) & (steps <= last)
        if here.any():
            median = float(np.median(counts[here]))
            shares = float(looped[here].mean()), float(converted[here].mean())
            out.append((first, last, int(here.sum()), median, *shares))
    return tuple(out)


def _growth(store, rows: int = 12) -> tuple[Growth, ...]:
    """Tasks added and answers recorded per span of steps, at most `rows` spans; the answers
    split by whether their task had answers at an earlier step (`Growth`), in one grouped
    query."""
    steps = store.index["step"]
    mine = Attempt.run_id == store.run_id
    first = (
        select(Attempt.task_id, func.min(Attempt.step).label("step"))
        .where(mine)
        .group_by(Attempt.task_id)
        .subquery()
    )
    again = Attempt.step > first.c.step
    per_step: dict[int, list[int]] = {}  # step -> [answers, correct, again, again correct]
    with database.read(store.engine) as s:
        grouped = s.execute(
            select(Attempt.step, again, func.sum(Attempt.n), func.sum(Attempt.correct))
            .join(first, first.c.task_id == Attempt.task_id)
            .where(mine)
            .group_by(Attempt.step, again)
        ).all()
    for step, repeat, n, correct in grouped:
        counts = per_step.setdefault(int(step), [0, 0, 0, 0])
        counts[0] += int(n)
        counts[1] += int(correct)
        if repeat:
            counts[2] += int(n)
            counts[3] += int(correct)
    if not len(steps) and not per_step:
        return ()
    top = max([int(steps.max()) if len(steps) else 0, *per_step])
    out, total = [], 0
    for first_step, last_step in _spans(top, rows):
        added = int(np.count_nonzero((steps >= first_step) & (steps <= last_step)))
        total += added
        spans = [c for st, c in per_step.items() if first_step <= st <= last_step]
        summed = [sum(c[i] for c in spans) for i in range(4)]
        if added or summed[0]:
            out.append(Growth(first_step, last_step, added, total, *summed))
    return tuple(out)
