"""Several paired evaluations read as one: `selfplay report --compare B1 A1 --compare B2 A2`.

A learning claim needs more than one seed, and the seeds' checkpoints are evaluated on the same
items: the items, not the checkpoints, are the independent units. So the pairs (each a before
and an after, say the base model and seed s's checkpoint, or seed s's run without and with a
change) are pooled per problem: for every problem that all the pairs evaluated, with the same
task, the change is the number of its right answers after minus before, summed over the pairs
(and over the samples of a problem answered several times). The sign test (`paired.sign_test`)
counts the problems whose change is positive against those whose change is negative; a problem
that one pair gained and another lost counts for neither. Accuracies are the means over the
pairs. A problem is non-trivial when no pair's records say that the copy answer solves it.

Each pair keeps its own report (`report.compare`) under `pairs`; `pooled` holds, per subset,
`all` and `non_trivial` (None when the records do not say which items copying solves) with
`n` (problems), `before`, `after`, `delta`, `improved`, `worsened`, `p_value`, and the gained and
lost answers summed over the pairs (`gained`, `lost`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

from selfplay.eval.paired import sign_test
from selfplay.eval.report import compare, differ, figure_lines, read_items, render

__all__ = ["compare_pairs", "render_pairs"]


def compare_pairs(pairs: Sequence[tuple[str | Path, str | Path]]) -> dict:
    """Each pair's report and the pooled one (module docstring)."""
    if len(pairs) < 2:
        raise ValueError("pooling needs at least two pairs (--compare BEFORE AFTER, twice)")
    reports = [compare(before, after) for before, after in pairs]
    sides = [(read_items(Path(r["before"]))[0], read_items(Path(r["after"]))[0]) for r in reports]
    subsets = sorted({key[0] for before, _ in sides for key in before})
    pooled = {}
    for subset in subsets:
        keys = set.intersection(
            *({k for k in before if k[0] == subset and k in after} for before, after in sides)
        )
        keys = {k for k in keys if not any(differ(b[k], a[k]) for b, a in sides)}
        if not keys:
            pooled[subset] = {"note": "no problem evaluated by every pair"}
            continue
        known = all(
            b[k].trivial is not None or a[k].trivial is not None for b, a in sides for k in keys
        )
        trivial = {k[1] for k in keys if any(b[k].trivial or a[k].trivial for b, a in sides)}
        pooled[subset] = {
            "all": _pool(sorted(keys), sides),
            "non_trivial": _pool(sorted(k for k in keys if k[1] not in trivial), sides)
            if known
            else None,
        }
    return {"pairs": reports, "pooled": pooled}


def _pool(keys: list[tuple], sides: list[tuple[dict, dict]]) -> dict:
    change: dict[str, int] = defaultdict(int)
    right = [0, 0]
    gained = lost = 0
    for before, after in sides:
        for key in keys:
            b, a = before[key].correct, after[key].correct
            change[key[1]] += a - b
            right[0] += b
            right[1] += a
            gained += a and not b
            lost += b and not a
    up = sum(c > 0 for c in change.values())
    down = sum(c < 0 for c in change.values())
    n = max(1, len(keys) * len(sides))
    return {
        "n": len(change),
        "before": round(right[0] / n, 4),
        "after": round(right[1] / n, 4),
        "delta": round((right[1] - right[0]) / n, 4),
        "improved": up,
        "worsened": down,
        "p_value": float(f"{sign_test(up, down):.3g}"),
        "gained": gained,
        "lost": lost,
    }


def render_pairs(result: dict) -> str:
    """Each pair's table, then the pooled one."""
    lines = []
    for i, one in enumerate(result["pairs"], 1):
        lines += [f"pair {i}", render(one), ""]
    lines.append(
        f"pooled over {len(result['pairs'])} pairs, per problem (the change in right answers "
        "summed over the pairs; sign test)"
    )
    lines.append(
        f"{'set':<28}{'n':>6}{'before':>8}{'after':>8}{'delta':>8}{'up':>6}{'down':>6}{'p':>10}"
    )
    for subset, row in result["pooled"].items():
        if "note" in row:
            lines.append(f"{subset:<28}{row['note']}")
            continue
        lines.append(subset)
        for label in ("all", "non_trivial"):
            s = row[label]
            if s is None:
                lines.append("    (the records do not say which items copying solves)")
                continue
            lines.append(
                f"  {label.replace('_', '-'):<26}{s['n']:>6}{s['before']:>8.3f}{s['after']:>8.3f}"
                f"{s['delta']:>+8.3f}{s['improved']:>6}{s['worsened']:>6}{s['p_value']:>10.3g}"
            )
    return "\n".join(lines + figure_lines(result))
