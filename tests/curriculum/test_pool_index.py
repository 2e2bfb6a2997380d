"""The index's cached masks and positions agree with the columns they are derived from, after
appends (in and out of id order) and after writes of the answer counts."""

from __future__ import annotations

import numpy as np

from selfplay.curriculum.pool import COLUMNS, PoolIndex


def _rows(ids, steps, origin=0) -> dict[str, np.ndarray]:
    rows = {name: np.zeros(len(ids), dtype=dtype) for name, dtype in COLUMNS.items()}
    rows["id"] = np.asarray(ids)
    rows["step"] = np.asarray(steps)
    rows["type"] = np.asarray(ids) % 3
    rows["origin"] = np.full(len(ids), origin)
    return rows


def _check(index: PoolIndex) -> None:
    assert np.array_equal(index.attempted(), np.flatnonzero(index["n_answers"] > 0))
    for step in (-1, 0, 2, 3, 5, 99):
        assert np.array_equal(index.created_after(step), np.flatnonzero(index["step"] > step))
    for origin in (0, 1):
        assert np.array_equal(index.equal("origin", origin), index["origin"] == origin)


def test_cached_positions_follow_appends_and_writes():
    rng = np.random.default_rng(0)
    index = PoolIndex()
    index.append(_rows(range(0, 50), np.repeat(np.arange(5), 10)))
    _check(index)
    for _ in range(20):
        positions = np.sort(rng.choice(len(index), 7, replace=False))
        counts = index["n_answers"][positions] + rng.integers(0, 3, len(positions))
        index.put(positions, {"n_answers": counts, "n_correct": counts // 2})
        _check(index)
    index.append(_rows(range(50, 60), [5] * 10, origin=1))  # later steps, in order
    _check(index)
    index.append(_rows(range(45, 47), [0, 0]) | {"id": np.array([-2, -1])})  # out of id order
    _check(index)
    index.put(np.array([0, 3]), {"n_answers": np.array([0, 4]), "n_correct": np.array([0, 1])})
    _check(index)
