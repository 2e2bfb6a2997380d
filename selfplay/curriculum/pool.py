"""`PoolIndex`: the per-task numbers the sampler needs, held in memory as numpy columns.

The database is the record; this is a cache of it, so that a frontier draw over a million
tasks is a few vectorised passes instead of a million-row query. It is loaded when a store
opens and updated by the same store's writes after they commit. Task ids only grow, so the
columns stay sorted by id and an id is found by binary search.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from selfplay.types import TASK_TYPES, TaskType

COLUMNS: dict[str, type] = {
    "id": np.int64,
    "type": np.int8,  # index into TASK_TYPES
    "origin": np.int8,  # index into records.ORIGINS
    "step": np.int64,  # step that produced the task
    "guessable": np.int8,  # 1: a stock input solves it, 0: none does, -1: not judged
    "n_answers": np.int64,
    "n_correct": np.int64,
    "succ": np.float64,
    "fail": np.float64,
    "last_step": np.int64,
    "difficulty": np.float64,
    "difficulty_precision": np.float64,
}


class PoolIndex:
    def __init__(self) -> None:
        self.size = 0
        self._data = {name: np.empty(0, dtype=dtype) for name, dtype in COLUMNS.items()}
        self._groups: list[np.ndarray] | None = None
        self._derived: dict[tuple, object] = {}  # masks and flags of the fixed columns

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, name: str) -> np.ndarray:
        """A column (a view: writes through)."""
        return self._data[name][: self.size]

    def append(self, rows: dict[str, np.ndarray]) -> None:
        """Add tasks (all columns, equally long); keeps the columns sorted by id."""
        count = len(rows["id"])
        if count == 0:
            return
        if self.size + count > len(self._data["id"]):
            capacity = max(1024, 2 * (self.size + count))
            for name, column in self._data.items():
                grown = np.empty(capacity, dtype=column.dtype)
                grown[: self.size] = column[: self.size]
                self._data[name] = grown
        for name, column in self._data.items():
            column[self.size : self.size + count] = rows[name]
        self.size += count
        ids = self["id"]
        if count and self.size > count and ids[self.size - count] <= ids[self.size - count - 1]:
            order = np.argsort(ids, kind="stable")  # another writer's ids arrived late
            for name in self._data:
                self._data[name][: self.size] = self[name][order]
        self._groups = None
        self._derived = {}

    def take(self, positions: np.ndarray, names=COLUMNS) -> dict[str, np.ndarray]:
        """The `names` columns at `positions` (copies)."""
        return {name: self[name][positions] for name in names}

    def put(self, positions: np.ndarray, columns: dict[str, np.ndarray]) -> None:
        """Overwrite the given columns at `positions` (after a write has committed)."""
        for name, values in columns.items():
            self[name][positions] = values
        if not {"type", "origin", "step", "guessable"}.isdisjoint(columns):
            self._groups = None
            self._derived = {}
        attempted = self._derived.get(("attempted",))
        if attempted is not None and "n_answers" in columns:
            positions = np.asarray(positions)
            now = self["n_answers"][positions] > 0
            kept = np.setdiff1d(attempted, positions[~now], assume_unique=True)
            merged = np.union1d(kept, positions[now])
            merged.flags.writeable = False
            self._derived[("attempted",)] = merged

    def relabel(self, ids, origin: int) -> None:
        """Set the `origin` of the tasks of `ids` (after the write has committed); ids this
        index does not hold (tasks another process added since it was loaded) wait for a
        reload, which reads them as they are."""
        ids = np.asarray(ids, dtype=np.int64)
        ids = ids[np.isin(ids, self["id"])]
        if len(ids):
            self.put(self.positions(ids), {"origin": np.full(len(ids), origin, dtype=np.int8)})

    def positions(self, ids) -> np.ndarray:
        """Positions of task ids; KeyError for ids this index does not hold."""
        ids = np.asarray(ids, dtype=np.int64)
        found = np.searchsorted(self["id"], ids)
        found = np.minimum(found, max(self.size - 1, 0))
        if self.size == 0 or not np.array_equal(self["id"][found], ids):
            missing = ids[(self.size == 0) | (self["id"][found] != ids)] if self.size else ids
            raise KeyError(f"task ids not in this pool: {missing[:5].tolist()}")
        return found

    def groups(self, types: Sequence[TaskType] | None = None) -> list[np.ndarray]:
        """Positions of each task type, in TASK_TYPES order (cached until the next append);
        with `types`, the groups of the other types are empty."""
        if self._groups is None:
            column = self["type"]
            self._groups = [np.flatnonzero(column == i) for i in range(len(TASK_TYPES))]
        if types is None:
            return self._groups
        unknown = set(types) - set(TASK_TYPES)
        if unknown:
            raise ValueError(f"unknown task types {sorted(unknown)}; know {TASK_TYPES}")
        return [g if t in types else g[:0] for t, g in zip(TASK_TYPES, self._groups, strict=True)]

    def equal(self, name: str, value: int) -> np.ndarray:
        """`self[name] == value` for a fixed column (type, origin, step, guessable; cached
        until the next append). Read only."""
        key = ("equal", name, value)
        if key not in self._derived:
            mask = self[name] == value
            mask.flags.writeable = False
            self._derived[key] = mask
        return self._derived[key]

    def attempted(self) -> np.ndarray:
        """Positions of the tasks with answers (`n_answers > 0`), ascending; cached, and kept
        up to date by `put`. Read only."""
        key = ("attempted",)
        if key not in self._derived:
            positions = np.flatnonzero(self["n_answers"] > 0)
            positions.flags.writeable = False
            self._derived[key] = positions
        return self._derived[key]

    def created_after(self, step: int) -> np.ndarray:
        """Positions of the tasks created after `step`, ascending. Tasks are mostly added in
        step order, and then these are a tail of the index, found by binary search."""
        key = ("step_sorted",)
        if key not in self._derived:
            column = self["step"]
            self._derived[key] = bool(np.all(column[1:] >= column[:-1]))
        if self._derived[key]:
            return np.arange(np.searchsorted(self["step"], step, side="right"), self.size)
        return np.flatnonzero(self["step"] > step)

    @property
    def max_step(self) -> int:
        if self.size == 0:
            return 0
        return int(max(self["step"].max(), self["last_step"].max()))
