"""Speed of the task pool at scale, against a plain in-memory list sampler in the same run.

    python benchmarks/store_bench.py                    # 1,000,000 tasks on SQLite (a temp file)
    python benchmarks/store_bench.py --tasks 100000 --store postgresql://user@127.0.0.1/db

Phases, one JSON line each:
  insert    add `--tasks` synthetic tasks (all three types) in batches of `--batch`
  steps     `--steps` training steps, each recording 4,096 attempts (simulated Rasch answers)
            and then drawing a 512-task frontier batch; the draw pays for recomputing every
            task's estimate, since the attempts changed them
  baseline  the same draws from a Python list of per-task counts: learnability of every task
            in a loop, then weighted sampling without replacement (exponential keys)
  lookup    the new-work check of a step (`new_work.renamed_repeats`): the canonical keys of
            256 proposals, half of them pooled tasks, looked up in the pool; before the first,
            the keys of every task (inserted without, as an older pool's) are computed once
  attempted (with --attempt-all) every task gets answers, then draws are timed again: the
            worst case, where no task shares the never-attempted estimate
The last line is the summary: inserts_per_s, draw_512_ms, record_4096_ms, lookup_256_ms
(medians), baseline_draw_512_ms and keys_filled_per_s. Targets on SQLite at 1M tasks: >= 20,000
inserts/s, <= 50 ms per draw, <= 100 ms per 4,096-attempt update.

Where a draw's time goes (cProfile and per-part CPU clocks, 1M tasks of which ~80k attempted,
each draw right after a step's attempts; medians while another job held the cores, so CPU
milliseconds and shares; before -> after the changes they led to):
  solve_rates      ~12 -> ~10 ms  combined p of the attempted tasks: gathers of five columns
                                  at scattered positions, then ~25 array operations; the
                                  attempted positions are now kept by the index, not found by
                                  comparing and scanning a million answer counts each draw
  learnability     ~4 -> ~2.5 ms  one million-long fill, the shape on the attempted tasks
  sampler.draw     ~12 -> ~11 ms  per task type: a gather and a cumulative sum over ~333k
                                  weights (the sums must be sequential for the same draws);
                                  drawable counts were counted twice
  get (512 rows)   ~13 -> ~10 ms  the SQL query ~5 ms (SQLAlchemy's per-row work and JSON
                                  decoding about half), rows to pool tasks ~6 -> ~3 ms (a Row
                                  attribute look-up costs several tuple look-ups), estimates
  the rest         ~7 -> ~2 ms    masks recomputed per draw (labeled tasks, recent tasks) are
                                  cached in the index until the next append
  total            ~50 -> ~44 ms
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import random
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from selfplay.config import CurriculumConfig
from selfplay.curriculum import Provenance, TaskAttempts, TaskStore
from selfplay.types import Task


def synthetic_task(i: int) -> Task:
    program = f"def f(x):\n    y = x * {i % 97} + {i // 97}\n    return y % {1 + i % 13}"
    if i % 3 == 2:
        inputs = tuple(str(j) for j in range(4))
        outputs = tuple(str((j * (i % 97) + i // 97) % (1 + i % 13)) for j in range(4))
        return Task("induction", program, inputs, outputs, "arithmetic", n_visible=2)
    kind = "deduction" if i % 3 == 0 else "abduction"
    return Task(kind, program, ("7",), (str((7 * (i % 97) + i // 97) % (1 + i % 13)),))


def emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


def insert_phase(store: TaskStore, total: int, batch: int) -> float:
    started = time.perf_counter()
    for start in range(0, total, batch):
        tasks = [synthetic_task(i) for i in range(start, min(start + batch, total))]
        store.add_tasks(tasks, Provenance("proposed", step=start * 20 // total, source="bench"))
    seconds = time.perf_counter() - started
    emit(
        {
            "phase": "insert",
            "tasks": total,
            "seconds": round(seconds, 2),
            "inserts_per_s": round(total / seconds),
        }
    )
    return total / seconds


def steps_phase(store: TaskStore, steps: int, rng: np.random.Generator):
    difficulty = rng.normal(0, 1, len(store))
    ids = store.index["id"].copy()
    record_ms, draw_ms = [], []
    for step in range(21, 21 + steps):
        theta = -1 + 2 * (step - 21) / max(steps, 1)
        chosen = rng.choice(len(ids), 4096, replace=False)
        p = 1 / (1 + np.exp(difficulty[chosen] - theta))
        correct = rng.binomial(8, p)
        outcomes = [
            TaskAttempts(int(ids[c]), 8, int(k)) for c, k in zip(chosen, correct, strict=True)
        ]
        t0 = time.perf_counter()
        store.record_attempts(step, f"v{step}", outcomes)
        t1 = time.perf_counter()
        batch = store.sample(512, step)
        t2 = time.perf_counter()
        record_ms.append(1000 * (t1 - t0))
        draw_ms.append(1000 * (t2 - t1))
        assert len(batch) == 512
    emit(
        {
            "phase": "steps",
            "steps": steps,
            "record_4096_ms": _summary(record_ms),
            "draw_512_ms": _summary(draw_ms),
            "frontier_fraction": batch.metrics["curriculum/frontier_fraction"],
        }
    )
    return statistics.median(record_ms), statistics.median(draw_ms)


def attempted_phase(store: TaskStore, rng: np.random.Generator) -> float:
    ids = store.index["id"].copy()
    for start in range(0, len(ids), 50_000):
        chunk = ids[start : start + 50_000]
        correct = rng.binomial(8, 0.5, len(chunk))
        store.record_attempts(
            41, "all", list(zip(chunk.tolist(), [8] * len(chunk), correct.tolist()))
        )
    times = []
    for step in range(42, 52):  # a new step each time: every estimate is recomputed
        t0 = time.perf_counter()
        store.sample(512, step)
        times.append(1000 * (time.perf_counter() - t0))
    emit({"phase": "attempted", "tasks": len(ids), "draw_512_ms": _summary(times)})
    return statistics.median(times)


def baseline_phase(store: TaskStore, draws: int) -> float:
    """A plain list sampler: per-task [succ, fail] counts in Python lists, AZR shape."""
    pool = [
        [int(i), float(s), float(f)]
        for i, s, f in zip(store.index["id"], store.index["succ"], store.index["fail"], strict=True)
    ]
    rng = random.Random(0)
    times = []
    for _ in range(draws):
        t0 = time.perf_counter()
        keys = []
        for task_id, s, f in pool:
            p = (s + 1) / (s + f + 2)
            w = (1 - p) - (1 - p) ** store.answers if s + f > 0 else 1.0
            if w > 0:
                keys.append((math.log(rng.random()) / w, task_id))
        picked = heapq.nlargest(512, keys)
        times.append(1000 * (time.perf_counter() - t0))
        assert len(picked) == 512
    emit({"phase": "baseline", "draw_512_ms": _summary(times)})
    return statistics.median(times)


def lookup_phase(store: TaskStore, total: int, rng: np.random.Generator) -> tuple[float, float]:
    from selfplay.new_work import canonical_key

    t0 = time.perf_counter()
    store.keyed_tasks("canonical", [], 0, canonical_key)  # fills every task's key
    fill_s = time.perf_counter() - t0
    times = []
    for _ in range(10):
        drawn = rng.choice(2 * total, 256, replace=False).tolist()  # half not in the pool
        keys = [canonical_key(synthetic_task(i)) for i in drawn]
        t0 = time.perf_counter()
        found = store.keyed_tasks("canonical", keys, 20, canonical_key)
        times.append(1000 * (time.perf_counter() - t0))
        assert [bool(found[k]) for k in keys] == [i < total for i in drawn]
    emit(
        {
            "phase": "lookup",
            "keys_filled": total,
            "fill_s": round(fill_s, 2),
            "lookup_256_ms": _summary(times),
        }
    )
    return statistics.median(times), total / fill_s


def _summary(values: list[float]) -> dict:
    ordered = sorted(values)
    return {
        "median": round(statistics.median(ordered), 2),
        "p90": round(ordered[int(0.9 * (len(ordered) - 1))], 2),
        "max": round(ordered[-1], 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=1_000_000)
    parser.add_argument("--batch", type=int, default=10_000, help="tasks per add_tasks call")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--baseline-draws", type=int, default=3)
    parser.add_argument("--store", help="SQLite path or database URL (default: a temp file)")
    parser.add_argument("--attempt-all", action="store_true", help="also time the worst case")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        target = args.store or str(Path(tmp) / "bench.sqlite")
        with TaskStore.open(
            target, run=f"bench-{time.time_ns()}", config=CurriculumConfig()
        ) as store:
            emit({"phase": "setup", "store": store.engine.dialect.name, "tasks": args.tasks})
            inserts = insert_phase(store, args.tasks, args.batch)
            rng = np.random.default_rng(0)
            record, draw = steps_phase(store, args.steps, rng)
            baseline = baseline_phase(store, args.baseline_draws)
            lookup, filled = lookup_phase(store, args.tasks, rng)
            extra = {}
            if args.attempt_all:
                extra["draw_512_all_attempted_ms"] = round(attempted_phase(store, rng), 2)
    emit(
        {
            "inserts_per_s": round(inserts),
            "draw_512_ms": round(draw, 2),
            "record_4096_ms": round(record, 2),
            "lookup_256_ms": round(lookup, 2),
            "baseline_draw_512_ms": round(baseline, 2),
            "keys_filled_per_s": round(filled),
            **extra,
        }
    )


if __name__ == "__main__":
    main()
