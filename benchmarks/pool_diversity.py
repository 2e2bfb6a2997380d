"""What a run's pool holds: is it new work, or the seed, copies and one program over and over?

    python benchmarks/pool_diversity.py store/learn/pool.sqlite --run learn
    python benchmarks/pool_diversity.py pool.jsonl          # an export (`selfplay pool export`)

Reads the proposed tasks of a pool (a SQLite store, from a copy that leaves the run's file as
it is, or a JSONL export: export a PostgreSQL pool first) and judges them again with the
project's own checks, in the sandbox:

  trivial        tasks that are no work for a solver (`selfplay.trivial`: copying answers
                 them, their function ignores its input, or their output does not move with
                 it), by reason; a run keeps them out of its pool, so this counts what got in
                 before that rule or by a bug
  contaminated   tasks whose program is one of CRUXEval, HumanEval or MBPP
                 (`selfplay.datasets.contamination`), by benchmark
  renamed        proposed tasks that an earlier task of the pool is with its program's
                 variables renamed (`new_work.canonical_key`): a run keeps them out of its
                 pool since schema 4 (`repeat:renamed`), so this counts what got in before
  alike          proposed deduction and abduction tasks whose program behaves as the program
                 of an earlier task with the same input and output does, on probe inputs
                 (`new_work.behaves_as`, against the 8 oldest such programs, as a run
                 compares; trivial and renamed tasks apart): a run keeps them out since
                 schema 4 (`repeat:behaviour`)
  programs       distinct programs (after `canonical_program`), and how the proposed programs
                 cluster by shape (`trainer/repetition.py`, similarity 0.5): the largest
                 cluster's share says whether the pool is one idea in many variants

Prints one JSON line per part; the last line is the summary: tasks, proposed, trivial,
contaminated, renamed, alike, distinct_programs, clusters, largest_cluster_share.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

from selfplay.config import ExecutorConfig
from selfplay.datasets.contamination import BENCHMARK_FILES, BenchmarkPrograms
from selfplay.distributed import Ranks
from selfplay.executor import Executor
from selfplay.files import records
from selfplay.new_work import ALIKE_CAP, alike_candidates, behaves_as, canonical_key, io_key
from selfplay.proposer.canonical import canonical_program
from selfplay.trainer.repetition import cluster_shares
from selfplay.trivial import trivial_reasons
from selfplay.types import WRITTEN_TYPES, Task


def pool_tasks(path: str, run: str) -> list[tuple[Task, str]]:
    """(task, origin) of every task of a store or a JSONL export."""
    if path.endswith((".jsonl", ".jsonl.gz")):
        return [
            (
                Task(r["type"], r["program"], tuple(r["inputs"]), tuple(r["outputs"]),
                     r.get("message", ""), r.get("n_visible", 0)),
                r.get("origin", "proposed"),
            )
            for r in records(path)
        ]  # fmt: skip
    from selfplay.curriculum.database import StoreError
    from selfplay.curriculum.snapshot import opened_copy

    try:
        with opened_copy(path, run) as store:  # a copy: the run's file is never migrated
            return [(t.task, t.provenance.origin) for t in store.get(store.index["id"].tolist())]
    except StoreError as err:
        raise SystemExit(str(err)) from None


def renamed_repeats(tasks: list[tuple[Task, str]]) -> list[list[str]]:
    """The proposed tasks (in pool order) that an earlier task is with its program's variables
    renamed, each as [its program, the earlier one's]."""
    return [[tasks[k][0].program, earlier] for k, earlier in _renamed(tasks).items()]


def _renamed(tasks: list[tuple[Task, str]]) -> dict[int, str]:
    """Index of each renamed repeat (`renamed_repeats`) -> the earlier task's program."""
    first: dict[str, Task] = {}
    found = {}
    for k, (task, origin) in enumerate(tasks):
        earlier = first.setdefault(canonical_key(task), task)
        if origin == "proposed" and earlier.program != task.program:
            found[k] = earlier.program
    return found


def behaviour_repeats(executor, tasks: list[tuple[Task, str]], out=frozenset()) -> list[list[str]]:
    """The proposed deduction and abduction tasks (in pool order) whose program behaves as the
    program of an earlier task with the same input and output does, each as [its program, the
    earlier ones compared]: a run's `repeat:behaviour` judged again over the pool
    (`new_work.behaviour_repeats`, its cap and candidates). Renamed repeats and the tasks
    `out` names (by index: trivial ones) are neither judged nor compared with, as a run
    keeps them out of its pool before this judgement."""
    out = set(out) | set(_renamed(tasks))
    earlier: dict[str, list[str]] = {}
    others = {}
    for k, (task, origin) in enumerate(tasks):
        if k in out:
            continue
        held = earlier.setdefault(io_key(task), [])
        if origin == "proposed" and task.type in WRITTEN_TYPES:
            others[k] = (task, alike_candidates(task, held[:ALIKE_CAP]))
        held.append(task.program)
    alike = behaves_as(SimpleNamespace(executor=executor, ranks=Ranks()), others)
    return [[others[k][0].program, *others[k][1]] for k in alike]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("pool", help="a pool (SQLite path or database URL) or a JSONL export")
    parser.add_argument("--run", default="default", help="the run (`curriculum.run`)")
    args = parser.parse_args()
    tasks = pool_tasks(args.pool, args.run)
    judged = [k for k, (t, origin) in enumerate(tasks) if origin == "proposed" and t.type != "math"]
    proposed = [tasks[k][0] for k in judged]
    with Executor(ExecutorConfig()) as executor:
        found = trivial_reasons(executor, proposed)
        reasons = Counter(r for r in found if r)
        trivial = {k for k, reason in zip(judged, found, strict=True) if reason}
        alike = behaviour_repeats(executor, tasks, trivial)
    print(json.dumps({"part": "trivial", **reasons}))
    benchmarks = BenchmarkPrograms.load(BENCHMARK_FILES)
    contaminated = Counter(b for t in proposed if (b := benchmarks.match(t.program)))
    missing = sorted(benchmarks.missing)
    print(json.dumps({"part": "contaminated", **contaminated, "unchecked": missing}))
    renamed = renamed_repeats(tasks)
    print(json.dumps({"part": "renamed", "tasks": len(renamed), "examples": renamed[:3]}))
    print(json.dumps({"part": "alike", "tasks": len(alike), "examples": alike[:3]}))
    programs = sorted({canonical_program(t.program) for t in proposed})
    shares = cluster_shares(programs, 0.5)
    clusters = round(sum(1 / (s * len(programs)) for s in shares)) if programs else 0
    largest = max(shares, default=0.0)
    print(json.dumps({"part": "programs", "distinct": len(programs), "clusters": clusters}))
    summary = {
        "pool": str(Path(args.pool)),
        "tasks": len(tasks),
        "proposed": len(proposed),
        "trivial": sum(reasons.values()),
        "contaminated": sum(contaminated.values()),
        "renamed": len(renamed),
        "alike": len(alike),
        "distinct_programs": len(programs),
        "clusters": clusters,
        "largest_cluster_share": round(largest, 4),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
