"""How much of CRUXEval's score moves with answers that copy the published prompt's worked example.

    .venv/bin/python scripts/example_drift.py results/cruxeval-direct

For every evaluation folder under the given one (`selfplay eval cruxeval --out`, the published
direct format: subsets `cruxeval_o` and `cruxeval_i`; a record per sample, so with several
samples per problem the counts are that many times larger), per subset: the answers that are a
worked example's (`17` on CRUXEval-O, `["mq", "px", "zy"]` on CRUXEval-I:
`selfplay.eval.cruxeval.row_copies_example`; over all items), the replies among them that write
the prompt's few-shot document over again from its first example (`row_restarts`; from records
without the reply a lower bound, CRUXEval-O only) and the non-trivial items right.
A folder named `base` is the baseline and is left out of the correlation. The summary, per
subset: Spearman's rank correlation of the two counts over the other folders (ties get their
mean rank), and the range of non-trivial items right over the folders with at most `--at-most`
copying answers, beside the baseline's. A solver that drifts to the example answers many
problems alike, so the correlation says how much of the spread between runs that drift explains.

Prints one JSON object per folder; the last line is the summary.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from selfplay.eval.cruxeval import row_copies_example, row_restarts  # noqa: E402
from selfplay.files import BadLine, read_jsonl  # noqa: E402

SUBSETS = ("cruxeval_o", "cruxeval_i")


def counts(folder: Path) -> dict[str, dict[str, int]]:
    """Per published-format subset: items, non-trivial items, those right, answers copying,
    replies restarting the prompt's document."""
    fields = ("items", "non_trivial", "non_trivial_right", "copies", "restarts")
    out = {s: dict.fromkeys(fields, 0) for s in SUBSETS}
    for number, row in read_jsonl(folder / "samples.jsonl"):
        if isinstance(row, BadLine):
            raise SystemExit(f"{folder}/samples.jsonl line {number}: {row.error}")
        tally = out.get(row.get("subset"))
        if tally is None:
            continue
        tally["items"] += 1
        tally["copies"] += bool(row_copies_example(row))
        tally["restarts"] += bool(row_restarts(row))
        if not row.get("trivial"):
            tally["non_trivial"] += 1
            tally["non_trivial_right"] += bool(row.get("correct"))
    return out


def ranks(values) -> np.ndarray:
    """Ranks from 0, ties at their mean rank."""
    values = np.asarray(values, dtype=float)
    order = values.argsort(kind="stable").argsort().astype(float)
    for value in np.unique(values):
        same = values == value
        order[same] = order[same].mean()
    return order


def spearman(a, b) -> float | None:
    """Spearman's rho (Pearson's on the ranks); None with fewer than 3 pairs or a constant."""
    if len(a) < 3:
        return None
    ra, rb = ranks(a), ranks(b)
    if ra.std() == 0 or rb.std() == 0:
        return None
    return float(np.corrcoef(ra, rb)[0, 1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root", type=Path, help="a folder of evaluation folders")
    parser.add_argument("--at-most", type=int, default=100, help="copying answers, low group")
    args = parser.parse_args()
    folders = sorted(p.parent for p in args.root.glob("*/samples.jsonl"))
    if not folders:
        raise SystemExit(f"no evaluation folder (with samples.jsonl) under {args.root}")
    table = {}
    for folder in folders:
        table[folder.name] = counts(folder)
        print(json.dumps({"folder": folder.name, **table[folder.name]}))
    summary: dict[str, object] = {"folders": len(table) - ("base" in table)}
    for subset in SUBSETS:
        runs = {k: v[subset] for k, v in table.items() if k != "base" and v[subset]["items"]}
        copies = [v["copies"] for v in runs.values()]
        right = [v["non_trivial_right"] for v in runs.values()]
        rho = spearman(copies, right)
        low = [v["non_trivial_right"] for v in runs.values() if v["copies"] <= args.at_most]
        summary[subset] = {
            "spearman_copies_vs_non_trivial_right": None if rho is None else round(rho, 3),
            "folders_at_most": len(low),
            "non_trivial_right_range_at_most": [min(low), max(low)] if low else None,
            "base_non_trivial_right": table["base"][subset]["non_trivial_right"]
            if "base" in table
            else None,
        }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
