"""Curves of several runs side by side, from their `metrics.jsonl`.

    .venv/bin/python scripts/compare_runs.py store/cmp-semi store/cmp-zero
    .venv/bin/python scripts/compare_runs.py store/a store/b --metric solve/accuracy --json
    .venv/bin/python scripts/compare_runs.py --proposals 5 15 \
        results/learn-seeded results/learn-dupmal \
        results/learn-seeded-seed1 results/learn-dupmal-seed1

Prints one table per metric (a row per step that logged it, a column per run; `.` where a run
has no value) and, with `--json`, the same numbers as one JSON object: {metric: {run: {step:
value}}}, plus each run's totals of counted metrics (proposals, valid, new tasks).

With `--proposals LO HI` it counts instead, over steps LO-HI of each run, the proposals, the
valid ones, the new tasks and the valid proposals that were no new work, in all and per kind
(each step's share times its valid proposals, rounded); the runs are read as pairs (a baseline,
then the changed run: one seed each), and each pair gets Fisher's exact test (two-sided) on
the no-new-work and copy counts against the valid proposals; more than one pair also gets the
Cochran-Mantel-Haenszel test stratified by pair (continuity-corrected, one degree of freedom).
These are the figures of docs/results.md on a run's proposals.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from selfplay.eval.paired import cmh, fisher_exact  # noqa: E402
from selfplay.eval.report import no_new_work_counts  # noqa: E402
from selfplay.trainer.metrics import read_metrics  # noqa: E402
from selfplay.types import NO_NEW_WORK  # noqa: E402

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
    "update/propose_share",
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


def proposal_counts(folder: Path, lo: int, hi: int) -> dict[str, int]:
    """Steps lo-hi of a run: proposals, valid, new tasks, and the valid proposals that were
    no new work (`no_new_work`) and of each kind (`repeat`, `copy`, ...)."""
    rows = [
        m
        for m in read_metrics(folder)
        if lo <= m.get("step", -1) <= hi and _number(m.get("propose/valid"))
    ]
    out = {k.split("/")[-1]: round(sum(r.get(k, 0.0) for r in rows)) for k in COUNTS}
    out.update({name: round(count) for name, (count, _) in no_new_work_counts(rows).items()})
    return out


def proposal_tests(counts: list[dict], kinds=("no_new_work", "copy")) -> dict:
    """Per pair of runs (baseline, changed) Fisher's p on each kind against the valid
    proposals, and over all pairs the Cochran-Mantel-Haenszel p."""
    pairs = list(zip(counts[::2], counts[1::2], strict=True))
    out: dict = {"fisher": [], "cmh": {}}
    for base, changed in pairs:
        out["fisher"].append({k: fisher_exact(*_table(changed, base, k)) for k in kinds})
    if len(pairs) > 1:
        out["cmh"] = {k: cmh([_table(c, b, k) for b, c in pairs]) for k in kinds}
    return out


def _table(changed: dict, base: dict, kind: str) -> tuple[int, int, int, int]:
    return (
        changed[kind],
        changed["valid"] - changed[kind],
        base[kind],
        base["valid"] - base[kind],
    )


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
    parser.add_argument(
        "--proposals",
        nargs=2,
        type=int,
        metavar=("LO", "HI"),
        help="count proposals over steps LO-HI; runs in pairs (baseline, changed) are tested",
    )
    args = parser.parse_args(argv)
    missing = [str(f) for f in args.runs if not (f / "metrics.jsonl").is_file()]
    if missing:
        parser.error(f"no metrics.jsonl in {', '.join(missing)}")
    if args.proposals:
        return _print_proposals(args.runs, *args.proposals, as_json=args.json)
    table = curves(args.runs, tuple(args.metric or CURVES))
    if args.json:
        print(json.dumps({"curves": table, "totals": totals(args.runs)}, indent=1))
        return 0
    print_tables(table)
    print("\ntotals over the steps")
    for run, sums in totals(args.runs).items():
        print(f"  {run}: " + ", ".join(f"{k.split('/')[-1]} {v:g}" for k, v in sums.items()))
    return 0


def _print_proposals(folders: list[Path], lo: int, hi: int, as_json: bool) -> int:
    counts = [proposal_counts(f, lo, hi) for f in folders]
    tests = proposal_tests(counts) if len(counts) % 2 == 0 else None
    if as_json:
        runs = {str(f): c for f, c in zip(folders, counts, strict=True)}
        print(json.dumps({"steps": [lo, hi], "runs": runs, "tests": tests}, indent=1))
        return 0
    for f, c in zip(folders, counts, strict=True):
        share = c["no_new_work"] / c["valid"] if c["valid"] else math.nan
        kinds = ", ".join(f"{k} {c[k]}" for k in NO_NEW_WORK)
        print(
            f"{f}: steps {lo}-{hi}: proposals {c['proposals']}, valid {c['valid']}, new tasks "
            f"{c['new_tasks']}, no new work {c['no_new_work']} ({share:.0%}; {kinds})"
        )
    if tests is None:
        print("(an odd number of runs: no pairs to test)")
        return 0
    for k, p in enumerate(tests["fisher"]):
        pair = f"{folders[2 * k]} -> {folders[2 * k + 1]}"
        print(f"Fisher, {pair}: " + ", ".join(f"{n} p = {v:.2g}" for n, v in p.items()))
    if tests["cmh"]:
        cmh_p = ", ".join(f"{n} p = {v:.2g}" for n, v in tests["cmh"].items())
        print(f"CMH over the pairs: {cmh_p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
