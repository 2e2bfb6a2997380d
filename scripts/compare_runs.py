"""Curves of several runs side by side, from their `metrics.jsonl`.

    .venv/bin/python scripts/compare_runs.py store/cmp-semi store/cmp-zero
    .venv/bin/python scripts/compare_runs.py store/a store/b --metric solve/accuracy --json

Prints one table per metric (a row per step that logged it, a column per run; `.` where a run
has no value) and, with `--json`, the same numbers as one JSON object: {metric: {run: {step:
value}}}, plus each run's totals of counted metrics (proposals, valid, new tasks).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from selfplay.trainer.metrics import read_metrics  # noqa: E402

CURVES = (
    "propose/valid_rate/deduction",
    "propose/valid_rate/abduction",
    "propose/valid_rate/induction",
    "propose/valid_rate/math",
    "solve/accuracy",
    "solve/accuracy/deduction",
    "solve/accuracy/abduction",
    "solve/accuracy/induction",
    "solve/accuracy/math",
    "curriculum/labeled_share",
    "curriculum/trapo_judged",
    "curriculum/trapo_admitted",
    "curriculum/pool_size",
    "update/entropy",
    "eval/cruxeval_o/pass@1",
    "eval/cruxeval_i/pass@1",
    "eval/gsm8k/pass@1",
    "eval/math500/pass@1",
    "eval/mbpp/pass@1",
    "eval/humaneval/pass@1",
)
COUNTS = ("propose/proposals", "propose/valid", "propose/new_tasks")


def curves(folders: list[Path], names: tuple[str, ...]) -> dict:
    """{metric: {run: {step: value}}} for the metrics some run logged (NaN left out)."""
    runs = {f.name: read_metrics(f) for f in folders}
    out: dict = {}
    for name in names:
        table = {
            run: {m["step"]: m[name] for m in lines if _number(m.get(name))}
            for run, lines in runs.items()
        }
        if any(table.values()):
            out[name] = table
    return out


def totals(folders: list[Path]) -> dict:
    """Each run's sums of the counted metrics over its steps."""
    return {
        f.name: {
            name: sum(m.get(name, 0.0) for m in read_metrics(f) if _number(m.get(name)))
            for name in COUNTS
        }
        for f in folders
    }


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not math.isnan(value)


def print_tables(table: dict, stream=sys.stdout) -> None:
    for name, runs in table.items():
        steps = sorted({s for values in runs.values() for s in values})
        stream.write(f"\n{name}\n  step " + "".join(f"{r[:14]:>15}" for r in runs) + "\n")
        for step in steps:
            cells = "".join(
                f"{runs[r][step]:>15.3f}" if step in runs[r] else f"{'.':>15}" for r in runs
            )
            stream.write(f"  {step:>4} {cells}\n")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders (with metrics.jsonl)")
    parser.add_argument("--metric", nargs="+", help="metrics to show (default: the curves)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    args = parser.parse_args(argv)
    missing = [str(f) for f in args.runs if not (f / "metrics.jsonl").is_file()]
    if missing:
        parser.error(f"no metrics.jsonl in {', '.join(missing)}")
    table = curves(args.runs, tuple(args.metric or CURVES))
    if args.json:
        print(json.dumps({"curves": table, "totals": totals(args.runs)}, indent=1))
        return 0
    print_tables(table)
    print("\ntotals over the steps")
    for run, sums in totals(args.runs).items():
        print(f"  {run}: " + ", ".join(f"{k.split('/')[-1]} {v:g}" for k, v in sums.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
