"""CRUXEval-I's non-trivial items split by whether a stock input solves them.

    .venv/bin/python scripts/stock_split.py results/cruxeval-direct/base \
        results/cruxeval-direct/trained results/cruxeval-direct/learn20-seed1-step20

A stock input is one a solver could give without reading the output (`selfplay.trivial.
stock_inputs`: the gold input with every argument replaced by a common value of its type, 0 to
5, 'abc', [1, 2, 3], ['a', 'b', 'c'], ...). An item some stock input solves can be answered by
a guess; the others need working back from the output. The first folder is the baseline; each
other is paired with it item by item (McNemar, exact, two-sided) on the non-trivial items (the
copy answer does not solve them) that a stock input solves and on those it does not, and on how
many of its answers are a stock input of their item. Every program runs in the sandbox (the
executor); the records are the `samples.jsonl` of `selfplay eval cruxeval --out`.

    .venv/bin/python scripts/stock_split.py BASE --pool store/RUN/pool.sqlite RUN

counts the same for the abduction tasks a run proposed into its pool: how many a guess solves.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import paired_folders  # noqa: E402  (scripts/, beside this file)

from selfplay import files  # noqa: E402
from selfplay.config import ExecutorConfig  # noqa: E402
from selfplay.executor import Executor  # noqa: E402
from selfplay.executor.values import canonical_from_text  # noqa: E402
from selfplay.trivial import literal_arguments, stock_inputs  # noqa: E402


def records(folder: Path) -> dict[tuple[str, int], dict]:
    """The CRUXEval-I records of an evaluation folder, by (problem, sample)."""
    rows = files.records(folder / "samples.jsonl")
    return {(r["id"], r.get("sample", 0)): r for r in rows if r["subset"] == "cruxeval_i"}


def literal_text(answer: str) -> str | None:
    """An answer's argument list written as `stock_inputs` writes one (repr of every value), or
    None where it is not a list of literals (or there is no answer)."""
    parsed = literal_arguments(answer) if isinstance(answer, str) else None
    if parsed is None:
        return None
    args, kwargs = parsed
    return ", ".join([repr(a) for a in args] + [f"{k}={v!r}" for k, v in kwargs.items()])


def stock_solved(executor: Executor, items: list[dict]) -> set[str]:
    """The problems (by id) that some stock input of theirs solves, from one executor call."""
    cases, owners = [], []
    for item in items:
        for text in stock_inputs(item["input"]):
            cases.append((item["program"], text))
            owners.append(item)
    verdicts = executor.validate(cases, inputs="literal")
    gold = {item["id"]: canonical_from_text(item["output"]) for item in items}
    return {
        item["id"]
        for item, verdict in zip(owners, verdicts, strict=True)
        if verdict.ok and verdict.output == gold[item["id"]]
    }


def pool_abductions(store: str, run: str) -> list[dict]:
    """The abduction tasks a run proposed into its pool, as CRUXEval-like items."""
    from sqlalchemy import select

    from selfplay.curriculum import TaskStore
    from selfplay.curriculum.schema import TaskRow

    with TaskStore.open(store, run, create=False) as pool:
        query = select(TaskRow.id, TaskRow.program, TaskRow.inputs, TaskRow.outputs).where(
            (TaskRow.run_id == pool.run_id)
            & (TaskRow.type == "abduction")
            & (TaskRow.origin == "proposed")
        )
        with pool.engine.connect() as connection:
            rows = connection.execute(query).all()
    return [{"id": i, "program": p, "input": x[0], "output": y[0]} for i, p, x, y in rows]


def main(argv: list[str] | None = None) -> int:
    args = paired_folders.parser(
        __doc__, "also count the abduction tasks RUN proposed into STORE that a stock input solves"
    ).parse_args(argv)
    with Executor(ExecutorConfig()) as executor:
        for store, run in args.pool:
            items = pool_abductions(store, run)
            solved = stock_solved(executor, items)
            print(f"{run}: {len(solved)} of {len(items)} pooled abduction tasks stock-solvable")
        if args.pool and not args.others:
            return 0
        base = records(args.base)
        problems = list({r["id"]: r for r in base.values()}.values())
        solved = stock_solved(executor, problems)
    stock_of = {p["id"]: set(stock_inputs(p["input"])) for p in problems}
    result = {"stock_solved": len(solved), "problems": len(problems), "runs": {}}
    for folder in [args.base, *args.others]:
        other = records(folder)
        keys = sorted(k for k in base if k in other)
        row = {
            "stock_answers": sum(literal_text(other[k]["answer"]) in stock_of[k[0]] for k in keys)
        }
        for name, wanted in (("stock", True), ("not_stock", False)):
            split = [k for k in keys if not base[k]["trivial"] and (k[0] in solved) is wanted]
            row[name] = paired_folders.paired_row(base, other, split)
        result["runs"][str(folder)] = row
    if args.json:
        print(json.dumps(result))
        return 0
    print(
        f"CRUXEval-I: a stock input solves {result['stock_solved']} of "
        f"{result['problems']} problems"
    )
    for folder, row in result["runs"].items():
        print(f"{folder}: answers that are a stock input {row['stock_answers']}")
        for name in ("stock", "not_stock"):
            s = row[name]
            print(
                f"  non-trivial, {name.replace('_', ' ')}-solvable: {s['items']} items, "
                f"right {s['before']} -> {s['after']} ({s['gained']} / {s['lost']}, "
                f"p = {s['p']:.2g})"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
