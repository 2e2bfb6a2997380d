"""Several seeds' checkpoints against one base, pooled: `selfplay report --pooled BASE AFTER...`.

Each AFTER is one seed's evaluation (`selfplay eval --out`) of the items BASE evaluated, with the
same prompt format and set. Per subset, on all problems and on the non-trivial ones (the copy
answer does not solve them; the same rule as `report`), it gives the base's accuracy, each
seed's and their mean, each seed's own McNemar test against the base, the problems whose mean
score over the seeds rose or fell (descriptive only: with a shared base these counts lean up
under the null), and the p-value of `paired.exchange_test`: whether these checkpoints, taken
together and held fixed, differ from the base. It is not a test that the training setting
helps (it does not see the variance between seeds; see `paired`). A problem's score is the
share of its samples answered right (1 or 0 with one sample).

Only problems every evaluation answered, with the same recorded task, are pooled; the others
are counted (`dropped`, `differ`), and evaluations that differ in prompt format or set version,
or whose `summary.json` differ in temperature, samples or prompt format, or in the setup they
recorded (`selfplay.provenance`), are named in a warning. Each seed's own paired test is
`--compare BASE AFTER`.
"""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from selfplay.eval.paired import exchange_test, sign_test
from selfplay.eval.report import Item, readable_items, samples_file
from selfplay.eval.report_table import unreadable_warning
from selfplay.provenance import setup_warning

__all__ = ["pooled", "render_pooled"]

DRAWS = 20000  # relabellings of the exchange test: its p-value moves by about 0.002 at 0.05


def pooled(base: str | Path, afters: list[str | Path]) -> dict:
    """The pooled comparison of `afters` (one evaluation per seed) against `base`."""
    if not afters:
        raise ValueError("--pooled needs a base and at least one checkpoint's evaluation")
    paths = [samples_file(given) for given in (base, *afters)]
    read = [readable_items(path) for path in paths]
    out: dict = {"base": str(paths[0]), "after": [str(p) for p in paths[1:]], "draws": DRAWS}
    if any(bad for _, bad in read):
        out["unreadable_lines"] = [bad for _, bad in read]
    evaluations = [items for items, _ in read]
    subsets = sorted({key[0] for items in evaluations for key in items})
    for subset in subsets:
        out[subset] = _subset([_problems(items, subset) for items in evaluations])
    settings = [_settings(path) for path in paths]
    warnings = [setup_warning(*paths)]
    if any(s != settings[0] for s in settings):
        shown = [", ".join(f"{k} {v}" for k, v in s.items()) or "no summary" for s in settings]
        warnings.insert(0, "the evaluations were made differently: " + " vs ".join(shown))
    if found := [w for w in warnings if w]:
        out["warning"] = "; ".join(found)
    return out


def _settings(path: Path) -> dict:
    """What the evaluation's `summary.json` (beside its samples) says of how it sampled."""
    try:
        summary = json.loads((path.parent / "summary.json").read_text())
    except (OSError, ValueError):
        return {}
    keys = ("temperature", "samples", "prompt_format")
    return {k: summary[k] for k in keys if isinstance(summary, dict) and k in summary}


def _problems(items: dict[tuple, Item], subset: str) -> dict[str, dict[int, Item]]:
    """problem id -> sample index -> Item, of one subset."""
    problems: dict[str, dict[int, Item]] = defaultdict(dict)
    for (name, problem, sample), item in items.items():
        if name == subset:
            problems[problem][sample] = item
    return problems


def _subset(evaluations: list[dict[str, dict[int, Item]]]) -> dict:
    every = set.intersection(*(set(e) for e in evaluations))
    anywhere = set.union(*(set(e) for e in evaluations))
    if not every:
        return {"note": "no problem every evaluation answered: nothing to pool"}
    scores, trivial, differ = {}, {}, 0
    for problem in sorted(every):
        samples = set.intersection(*(set(e[problem]) for e in evaluations))
        records = [[e[problem][s] for s in sorted(samples)] for e in evaluations]
        contents = {i.content for side in records for i in side if i.content is not None}
        if not samples or len(contents) > 1:
            differ += 1
            continue
        scores[problem] = [sum(i.correct for i in side) / len(side) for side in records]
        known = [i.trivial for side in records for i in side if i.trivial is not None]
        trivial[problem] = bool(known and known[0])  # the base's where it says, as `report`
    row = _stats(list(scores.values()))
    row["dropped"] = len(anywhere) - len(every)  # answered by some evaluations only
    row["differ"] = differ  # a different recorded task, or no sample in common
    if any(i.trivial is not None for e in evaluations for p in e.values() for i in p.values()):
        row["non_trivial"] = _stats([s for p, s in scores.items() if not trivial[p]])
        row["trivial_items"] = sum(trivial.values())
    else:
        row["non_trivial"] = None  # the records do not say which items copying solves
    tags = [sorted({i.tag for p in e.values() for i in p.values()}) for e in evaluations]
    if any(t != tags[0] for t in tags):
        row["warning"] = "the evaluations differ: " + " vs ".join("/".join(t) for t in tags)
    return row


def _stats(scores: list[list[float]]) -> dict:
    """Accuracies and the exchange test over problems, each [base, seed 1, seed 2, ...]."""
    if not scores:
        return {"n": 0, "before": 0.0, "after": 0.0, "delta": 0.0, "seeds_after": [],
                "seeds_changes": [], "seeds_p": [], "improved": 0, "worsened": 0,
                "p_value": 1.0}  # fmt: skip
    n, columns = len(scores), list(zip(*scores, strict=True))
    base, seeds = sum(columns[0]) / n, [sum(c) / n for c in columns[1:]]
    change = [sum(s[1:]) / (len(s) - 1) - s[0] for s in scores]
    p = exchange_test(columns[0], columns[1:], DRAWS)
    # each seed against the base: McNemar's exact test (the sign test on problems' scores
    # where they have several samples, as `report` does)
    each = [(sum(a > b for b, a in zip(columns[0], c)), sum(a < b for b, a in zip(columns[0], c)))
            for c in columns[1:]]  # fmt: skip
    return {
        "n": n,
        "before": round(base, 4),
        "after": round(sum(seeds) / len(seeds), 4),
        "delta": round(sum(seeds) / len(seeds) - base, 4),
        "seeds_after": [round(a, 4) for a in seeds],
        "seeds_changes": [list(pair) for pair in each],  # per seed: [gained, lost]
        "seeds_p": [float(f"{sign_test(*pair):.3g}") for pair in each],
        "improved": sum(c > 0 for c in change),
        "worsened": sum(c < 0 for c in change),
        "p_value": float(f"{p:.3g}"),
    }


def render_pooled(result: dict) -> str:
    lines = [f"base:    {result['base']}"]
    lines += [f"after {k}: {path}" for k, path in enumerate(result["after"], 1)]
    names = ["base", *(f"after {k}" for k in range(1, len(result["after"]) + 1))]
    lines += unreadable_warning(names, result.get("unreadable_lines"))
    lines.append(
        f"{'set':<24}{'n':>6}{'base':>8}{'seeds':>8}{'delta':>8}{'up':>6}{'down':>6}{'p':>10}"
        "   each seed (gained / lost, its own p)"
    )
    for subset, row in result.items():
        if not isinstance(row, dict):
            continue
        if "note" in row:
            lines.append(f"{subset:<24}{row['note']}")
            continue
        lines.append(f"{subset} ({row['dropped']} dropped, {row['differ']} differ)")
        lines.append(_line("all", row))
        if row.get("non_trivial") is not None:
            lines.append(_line("non-trivial", row["non_trivial"]))
        if "warning" in row:
            lines.append(f"    warning: {row['warning']}")
    if "warning" in result:
        lines.append(f"warning: {result['warning']}")
    floor = 1 / (1 + result["draws"])
    lines.append(
        f"p: exchange test over problems, {result['draws']} relabellings (its floor {floor:.2g}):"
        " whether these checkpoints, held fixed, differ from the base; not a test that the"
        " setting helps (it does not see the spread between seeds). up / down: problems whose"
        " mean over the seeds rose / fell, descriptive only"
    )
    return "\n".join(lines)


def _line(label: str, s: dict) -> str:
    each = ", ".join(
        f"{a:.3f} ({g} / {lost}, {p:.2g})"
        for a, (g, lost), p in zip(s["seeds_after"], s["seeds_changes"], s["seeds_p"], strict=True)
    )
    return (
        f"  {label:<22}{s['n']:>6}{s['before']:>8.3f}{s['after']:>8.3f}{s['delta']:>+8.3f}"
        f"{s['improved']:>6}{s['worsened']:>6}{s['p_value']:>10.3g}   {each}"
    )
