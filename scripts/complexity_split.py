"""CRUXEval's non-trivial items split by how much their program does, paired with a baseline.

    .venv/bin/python scripts/complexity_split.py results/cruxeval-direct/base \
        results/cruxeval-direct/learn20-solveonly-props4-examples-noind-step20 \
        --pool store/RUN/pool.sqlite RUN

A run whose proposer writes one-statement programs trains its solver on tracing those; this
says where on CRUXEval's range of programs the solver gained and lost. Each problem's program is
put in a bucket by its statements (`selfplay.proposer.complexity.statements`: 1-2, 3-4, 5 or
more) and by whether a function of it has a loop or a comprehension (`complexity.loops`). The
first folder is the baseline; each other is paired with it item by item (McNemar, exact,
two-sided) on the non-trivial items (the copy answer does not solve them) of each subset and
bucket. The records are the `samples.jsonl` of `selfplay eval cruxeval --out`.

`--pool STORE RUN` counts the deduction and abduction tasks RUN proposed into its pool by the
same buckets, to set what the solver trained on beside what the benchmark asks.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import paired_folders  # noqa: E402  (scripts/, beside this file)

from selfplay import files  # noqa: E402
from selfplay.proposer.complexity import loops, statements  # noqa: E402

BUCKETS = ("1-2", "3-4", "5+")
SUBSETS = ("cruxeval_o", "cruxeval_i")
NAMES = (*(f"statements {b}" for b in BUCKETS), "loop", "no loop")


def bucket(program: str) -> str | None:
    """The statements bucket of `program`; None if it does not parse."""
    found = statements(program)
    if found is None:
        return None
    return BUCKETS[0] if found <= 2 else BUCKETS[1] if found <= 4 else BUCKETS[2]


def groups(program: str) -> list[str]:
    """The groups an item's program counts in: its statements bucket and loop or no loop."""
    found, looped = bucket(program), loops(program)
    if found is None:
        return []
    return [f"statements {found}", "loop" if looped else "no loop"]


def records(folder: Path) -> dict[tuple[str, str, int], dict]:
    """The CRUXEval records of an evaluation folder, by (subset, problem, sample)."""
    rows = files.records(folder / "samples.jsonl")
    return {(r["subset"], r["id"], r.get("sample", 0)): r for r in rows if r["subset"] in SUBSETS}


def paired(base: dict, other: dict) -> dict[str, dict[str, dict]]:
    """Per subset and group: items, right before and after, gained, lost and McNemar's p, on
    the non-trivial items both folders answered."""
    result: dict[str, dict[str, dict]] = {}
    for subset in SUBSETS:
        keys = [k for k in base if k[0] == subset and k in other and not base[k]["trivial"]]
        of = {k: groups(base[k]["program"]) for k in keys}  # each program parsed once
        rows = {}
        for name in NAMES:
            split = [k for k in keys if name in of[k]]
            rows[name] = paired_folders.paired_row(base, other, split)
        result[subset] = rows
    return result


def pool_programs(store: str, run: str) -> dict[str, int]:
    """The deduction and abduction tasks RUN proposed into STORE, counted by group."""
    from selfplay.curriculum import TaskStore
    from selfplay.curriculum.stats import written_tasks

    with TaskStore.open(store, run, create=False) as pool:
        _, tasks = written_tasks(pool)
    programs = [task.program for task in tasks]
    counts = Counter(name for program in programs for name in groups(program))
    return {"tasks": len(programs), **{name: counts[name] for name in NAMES}}


def main(argv: list[str] | None = None) -> int:
    args = paired_folders.parser(
        __doc__, "also count the deduction and abduction tasks RUN proposed into STORE by group"
    ).parse_args(argv)
    base = records(args.base)
    problems = {k[:2]: r["program"] for k, r in base.items() if not r["trivial"]}
    benchmark = {}
    for subset in SUBSETS:
        counts = Counter(n for (s, _), p in problems.items() if s == subset for n in groups(p))
        benchmark[subset] = {name: counts[name] for name in NAMES}
    result = {
        "benchmark": benchmark,
        "pools": {run: pool_programs(store, run) for store, run in args.pool},
        "runs": {str(f): paired(base, records(f)) for f in args.others},
    }
    if args.json:
        print(json.dumps(result))
        return 0
    for run, counts in result["pools"].items():
        shown = ", ".join(f"{k} {v}" for k, v in counts.items() if k != "tasks")
        print(f"pool of {run}: {counts['tasks']} proposed deduction and abduction tasks ({shown})")
    for folder, subsets in result["runs"].items():
        print(f"{folder} against {args.base}, non-trivial items")
        for subset, rows in subsets.items():
            for name, s in rows.items():
                print(
                    f"  {subset:<11} {name:<15} {s['items']:>4} items, right {s['before']} -> "
                    f"{s['after']} ({s['gained']} / {s['lost']}, p = {s['p']:.2g})"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
