"""What a run did, read from its folder: `selfplay report <run folder>`.

Two parts, as JSON:

- `proposals`: the proposer's parse and valid rates per task type (`propose/parse_rate/<type>`,
  `propose/valid_rate/<type>` of `metrics.jsonl`), averaged over the first and the last
  quarter of the run's steps (at least one step each), with the new tasks added per step.
- `benchmarks`: each benchmark of the in-loop evaluation (`eval/<benchmark>-step<N>.jsonl`)
  scored at its first and its last evaluated step, per subset (CRUXEval-O and -I, the generated
  deduction and abduction tasks, ...), with the exact McNemar test on the items evaluated at
  both (`paired.mcnemar_exact`, two-sided): before, after, delta, gained, lost, p-value.

A run evaluated once (or never) has no `benchmarks` comparison; the report says so. A line of
`metrics.jsonl` that cannot be read is skipped and counted (`unreadable_metric_lines`).

`selfplay report --compare BEFORE AFTER` pairs two evaluations made outside a run (the
`samples.jsonl` that `selfplay eval --out` writes, or its folder) the same way, per subset: the
base model and a run's checkpoint on a whole benchmark, say.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path

from selfplay.eval.paired import mcnemar_exact

__all__ = ["report", "compare"]

_EVAL_FILE = re.compile(r"^(?P<benchmark>.+)-step(?P<step>\d+)\.jsonl$")
_RATE = re.compile(r"^propose/(?P<rate>parse_rate|valid_rate)/(?P<kind>\w+)$")


def report(folder: str | Path) -> dict:
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"no run folder at {folder}")
    rows, unreadable = _metrics(folder / "metrics.jsonl")
    return {
        "run": str(folder),
        "steps": max((r["step"] for r in rows), default=0),
        "proposals": _proposals(rows),
        "benchmarks": _benchmarks(folder / "eval"),
        "unreadable_metric_lines": unreadable,
    }


def _metrics(path: Path) -> tuple[list[dict], int]:
    """The step records of `metrics.jsonl` (step >= 1), and how many lines could not be read."""
    rows, unreadable = [], 0
    if not path.exists():
        return rows, unreadable
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            unreadable += 1
            continue
        if isinstance(row, dict) and isinstance(row.get("step"), int) and row["step"] >= 1:
            rows.append(row)
    return rows, unreadable


def _proposals(rows: list[dict]) -> dict:
    """Per task type: mean parse and valid rates over the first and the last quarter of steps."""
    steps = [r for r in rows if any(_RATE.match(k) for k in r)]
    if not steps:
        return {}
    quarter = max(1, len(steps) // 4)
    first, last = steps[:quarter], steps[-quarter:]
    out: dict = {"first_steps": [first[0]["step"], first[-1]["step"]]}
    out["last_steps"] = [last[0]["step"], last[-1]["step"]]
    kinds = sorted({m["kind"] for r in steps for k in r if (m := _RATE.match(k))})
    for kind in kinds:
        for rate in ("parse_rate", "valid_rate"):
            key = f"propose/{rate}/{kind}"
            out[f"{kind}/{rate}"] = [_mean(first, key), _mean(last, key)]
    out["new_tasks"] = [_mean(first, "propose/new_tasks"), _mean(last, "propose/new_tasks")]
    out["new_tasks_total"] = sum(r.get("propose/new_tasks", 0) for r in steps)
    return out


def _mean(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if isinstance(r.get(key), int | float)]
    return round(sum(values) / len(values), 4) if values else None


def _benchmarks(folder: Path) -> dict:
    """Per benchmark subset: first and last evaluation, paired on their shared items."""
    files: dict[str, dict[int, Path]] = defaultdict(dict)
    for path in folder.glob("*.jsonl") if folder.is_dir() else ():
        if m := _EVAL_FILE.match(path.name):
            files[m["benchmark"]][int(m["step"])] = path
    out = {}
    for benchmark, by_step in sorted(files.items()):
        if len(by_step) < 2:
            out[benchmark] = {"note": f"evaluated only at step {min(by_step)}: nothing to compare"}
            continue
        first, last = min(by_step), max(by_step)
        for subset, row in _paired(_items(by_step[first]), _items(by_step[last])).items():
            out[subset] = {"steps": [first, last], **row}
    return out


def compare(before: str | Path, after: str | Path) -> dict:
    """Two per-sample evaluation files (or the folders holding `samples.jsonl`), paired per
    subset on the items both evaluated."""
    paths = []
    for given in (before, after):
        path = Path(given)
        path = path / "samples.jsonl" if path.is_dir() else path
        if not path.is_file():
            raise FileNotFoundError(f"no per-sample evaluation at {path}")
        paths.append(path)
    first, last = _items(paths[0]), _items(paths[1])
    if not first.keys() & last.keys():
        raise ValueError(f"{paths[0]} and {paths[1]} share no evaluated item")
    return {"before": str(paths[0]), "after": str(paths[1]), **_paired(first, last)}


def _paired(before: dict[tuple, bool], after: dict[tuple, bool]) -> dict:
    """Per subset: accuracy before and after on the shared items, and the McNemar test."""
    out = {}
    for subset in sorted({k[0] for k in before} | {k[0] for k in after}):
        keys = sorted(k for k in before if k[0] == subset and k in after)
        b, a = [before[k] for k in keys], [after[k] for k in keys]
        gained, lost, p = mcnemar_exact(b, a)
        n = max(1, len(keys))
        out[subset] = {
            "n": len(keys),
            "before": round(sum(b) / n, 4),
            "after": round(sum(a) / n, 4),
            "delta": round((sum(a) - sum(b)) / n, 4),
            "gained": gained,
            "lost": lost,
            "p_value": float(f"{p:.3g}"),
        }
    return out


def _items(path: Path) -> dict[tuple, bool]:
    """(subset, problem id, sample index) -> correct, from one per-sample file."""
    items = {}
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        subset = row.get("subset") or row.get("benchmark") or path.stem
        items[(subset, str(row.get("id")), row.get("sample", 0))] = bool(row.get("correct"))
    return items
