"""Across evaluations (checkpoints), how a subset's non-trivial score goes with the number of
its answers of a wrong type (`selfplay.eval.answer_types`: an input answer whose arguments are
not of the gold input's types, an output answer not of the gold output's type).

    .venv/bin/python scripts/wrong_types.py results/cruxeval-direct/*/

One JSON line per folder (the `samples.jsonl` of `selfplay eval --out`): the non-trivial items
(the copy answer does not solve them), the right ones, the wrong answers of a wrong type and
those of the right type. The last line: Spearman's rank correlation between right and
wrong-typed answers over the folders, with a two-sided permutation p-value (all rank orders
when there are at most 8 folders, else 20,000 seeded shuffles, whose smallest p is 5e-5); null
where a column does not vary. Checkpoints of one run are not independent draws, so the p-value
is a guide, not a test of a method.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from selfplay.eval.answer_types import wrong_type  # noqa: E402
from selfplay.files import records  # noqa: E402

_SHUFFLES = 20_000


def counts(folder: Path, subset: str) -> dict:
    n = right = typed = same_type = 0
    for record in records(folder / "samples.jsonl"):
        if record.get("subset") != subset or record.get("trivial") is not False:
            continue
        n += 1
        right += bool(record.get("correct"))
        verdict = wrong_type(record)
        typed += verdict is True
        same_type += verdict is False
    if not n:
        raise SystemExit(
            f"{folder}: no non-trivial record of subset {subset} (records without `trivial`, "
            "or another subset: cruxeval_i_selfplay in the solver's own format)"
        )
    return {
        "folder": folder.name,
        "non_trivial": n,
        "right": right,
        "wrong_type": typed,
        "wrong_of_right_type": same_type,
    }


def ranks(values: list[float]) -> list[float]:
    """Ranks from 1, ties given their mean rank."""
    order = sorted(range(len(values)), key=values.__getitem__)
    out = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        for i in order[start : end + 1]:
            out[i] = (start + end) / 2 + 1
        start = end + 1
    return out


def pearson(x: list[float], y: list[float]) -> float:
    mx, my = sum(x) / len(x), sum(y) / len(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y, strict=True))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return sxy / (sxx * syy) ** 0.5 if sxx and syy else float("nan")


def spearman(x: list[float], y: list[float]) -> tuple[float, float]:
    """Spearman's rho and its two-sided permutation p-value."""
    rx, ry = ranks(x), ranks(y)
    rho = pearson(rx, ry)
    if rho != rho:  # a column without spread: no correlation to test
        return rho, float("nan")
    if len(x) <= 8:
        orders = list(itertools.permutations(ry))
    else:
        rng = random.Random(0)
        orders = [rng.sample(ry, len(ry)) for _ in range(_SHUFFLES)]
    extreme = sum(abs(pearson(rx, list(o))) >= abs(rho) - 1e-12 for o in orders)
    if len(x) <= 8:  # every order counted, the observed one among them
        return rho, extreme / len(orders)
    return rho, (extreme + 1) / (len(orders) + 1)  # the observed order counts as one shuffle


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", type=Path)
    parser.add_argument("--subset", default="cruxeval_i")
    args = parser.parse_args()
    rows = [counts(folder, args.subset) for folder in args.folders]
    for row in rows:
        print(json.dumps(row))
    summary: dict = {"subset": args.subset, "folders": len(rows)}
    if len(rows) >= 3:
        rho, p = spearman([r["right"] for r in rows], [r["wrong_type"] for r in rows])
        if rho == rho:
            summary |= {"spearman_right_vs_wrong_type": round(rho, 4), "p_value": float(f"{p:.3g}")}
        else:
            summary |= {"spearman_right_vs_wrong_type": None, "p_value": None}
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
