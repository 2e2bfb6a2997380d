"""Learning trajectories: each task's solve rate per step over the last steps of a run.

A trajectory is derived from the `attempts` table (answers and correct answers per task, step
and model version), never stored: a step's solve rate of a task is its correct answers over
its answers in that step, summed over model versions. `TrajectoryWindow` keeps the attempts of
the last `window` steps in memory as numpy columns; it is read with one grouped query when a
store opens and extended by the store's own `record_attempts`, so judging trajectories costs
no query per step. `matrix` lays them out as a (tasks x steps) table with NaN where a task got
no answers in a step.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from sqlalchemy import func, select

from selfplay.curriculum import database
from selfplay.curriculum.schema import Attempt


@dataclass(frozen=True)
class Trajectories:
    """Solve rates of `ids` (rows) in `steps` (columns); `answers` holds the counts behind them."""

    ids: np.ndarray
    steps: np.ndarray
    answers: np.ndarray  # (tasks, steps) answers
    correct: np.ndarray  # (tasks, steps) correct answers

    @property
    def rates(self) -> np.ndarray:
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(self.answers > 0, self.correct / self.answers, np.nan)


class TrajectoryWindow:
    """Attempts of the last `window` steps, as parallel columns (task, step, n, correct)."""

    def __init__(self, window: int) -> None:
        self.window = window
        self.columns = np.empty((0, 4), dtype=np.int64)
        self.version = 0  # counts changes, so that a judgement can be cached until the next

    def load(self, engine, run_id: int) -> None:
        """Read the last `window` steps with answers from the database."""
        self.version += 1
        with database.read(engine) as s:
            last = s.scalar(select(func.max(Attempt.step)).where(Attempt.run_id == run_id))
            if last is None:
                self.columns = np.empty((0, 4), dtype=np.int64)
                return
            sums = (func.sum(Attempt.n), func.sum(Attempt.correct))
            query = (
                select(Attempt.task_id, Attempt.step, *sums)
                .where(Attempt.run_id == run_id, Attempt.step > last - self.window)
                .group_by(Attempt.task_id, Attempt.step)
            )
            rows = s.execute(query).all()
        self.columns = np.array(list(map(tuple, rows)), dtype=np.int64).reshape(-1, 4)

    def add(self, step: int, ids: np.ndarray, n: np.ndarray, correct: np.ndarray) -> None:
        """Attempts just recorded for `step`; steps that fall out of the window are dropped."""
        self.version += 1
        new = np.column_stack([ids, np.full(len(ids), step), n, correct]).astype(np.int64)
        columns = np.concatenate([self.columns, new])
        last = int(columns[:, 1].max()) if len(columns) else step
        self.columns = columns[columns[:, 1] > last - self.window]

    def matrix(self, step: int) -> Trajectories:
        """The trajectories of every task with answers in the `window` steps up to `step`."""
        first = step - self.window + 1
        rows = self.columns[(self.columns[:, 1] >= first) & (self.columns[:, 1] <= step)]
        ids, row = np.unique(rows[:, 0], return_inverse=True)
        col = rows[:, 1] - first
        answers = np.zeros((len(ids), self.window))
        correct = np.zeros((len(ids), self.window))
        np.add.at(answers, (row, col), rows[:, 2])
        np.add.at(correct, (row, col), rows[:, 3])
        return Trajectories(ids, np.arange(first, step + 1), answers, correct)
