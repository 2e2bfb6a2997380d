"""What a run did, read from its folder: `selfplay report <run folder>`.

Two parts:

- `proposals`: the proposer's parse and valid rates per task type (`propose/parse_rate/<type>`,
  `propose/valid_rate/<type>` of `metrics.jsonl`), averaged over the first and the last
  quarter of the run's steps (at least one step each), with the new tasks added per step and
  the share of valid proposals that were no new work (duplicates, copies, trivial tasks);
  and `proposal_log`, from `proposals.jsonl` where the run wrote it: every proposal by outcome,
  how many of each were cut at the token limit, and why the others were not valid.
- `benchmarks`: each benchmark of the in-loop evaluation (`eval/<benchmark>-step<N>.jsonl`)
  scored at its first and its last evaluated step, per subset (CRUXEval-O and -I, the generated
  deduction and abduction tasks, ...), paired on the items evaluated at both; and its
  accuracy at every evaluated step (`curve`). Two evaluations of a run other than the first
  and last pair with `--compare` on their files.

`selfplay report --compare BEFORE AFTER` pairs two evaluations made outside a run (the
`samples.jsonl` that `selfplay eval --out` writes, or its folder) the same way, per subset: the
base model and a run's checkpoint on a whole benchmark, say. Items are (subset, problem,
sample): with several samples per problem every sample is paired, and since the samples of a
problem are not independent, the report adds the sign test on the problems whose accuracy rose
or fell, and the problems with a right sample (pass@n) before and after, paired by McNemar's
test; both on all problems and on the non-trivial ones (`problems`). Items whose recorded task
(program, input, output) differs between the two evaluations are left out and counted in a
warning, as is a difference in prompt format or set version (`--across-formats` pairs one
CRUXEval subset asked in two formats, which the warning then says), or in the setup the
evaluations recorded (precision, machine, libraries: `selfplay.provenance`), which can change
greedy answers without any training; where both evaluated one model and recorded its replies
(CRUXEval) greedily, the warning says on how many paired items the replies differ.

Several seeds against one base: `selfplay report --pooled` (`pooled.py`).

A paired subset reports, on all its items and on its non-trivial ones (those the copy answer
does not solve, `selfplay.trivial`; records without `trivial` have no such split):
before, after, delta, gained, lost and the exact McNemar p-value (`paired.mcnemar_exact`,
two-sided); and how the items changed: the gained items by how the earlier answer failed and
the lost ones by how the later answer failed (`unreadable`, `not_a_value`, `wrong_value`; see
`harness.failure`), so that a gain in notation and a gain in reasoning are two numbers; and,
where the records carry their task, the wrong answers whose type is not the gold's
(`answer_types`: a list given where the function wants a string), before and after, and how
many gained items had such an answer before and lost items after. The report is a table
(`report_table.py`); `--json` prints the same as one object. A line of `metrics.jsonl` or of a
per-sample file that cannot be read is skipped and counted; the table of a comparison, and of a
run's first and last evaluation, warns of the per-sample files' (`unreadable_lines`), which
would otherwise show only as a smaller n. The
counts behind the accuracies (`correct`) are there for the figures' intervals; the command also
draws the figures (`figures.py`) and lists them (`figures`, and `figures_skipped` with why).
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from selfplay.eval.answer_types import wrong_type
from selfplay.eval.cruxeval import format_free, row_copies_example, row_restarts
from selfplay.eval.harness import FAILURES, failure
from selfplay.eval.paired import mcnemar_exact, sign_test
from selfplay.eval.proposal_log import proposal_log
from selfplay.provenance import setup_warning, summary_beside
from selfplay.types import NO_NEW_WORK, Verdict

__all__ = ["report", "compare", "read_metrics", "samples_file"]

_EVAL_FILE = re.compile(r"^(?P<benchmark>.+)-step(?P<step>\d+)\.jsonl$")
_RATE = re.compile(r"^propose/(?P<rate>parse_rate|valid_rate)/(?P<kind>\w+)$")
_WASTE = ("propose/duplicate_share", "propose/trivial_share", "propose/contaminated_share")
_SHAPE = ("propose/statements", "propose/loop_share")  # of the valid written programs
_SETTLED = 5  # the first steps of a zero-data run propose from the seed alone
_REASON_PREFIX = "propose/no_new_work/"


@dataclass(frozen=True)
class Item:
    """One evaluated sample as a report reads it."""

    correct: bool
    failure: str | None  # how it failed (`harness.FAILURES`), None when right
    trivial: bool | None  # the copy answer solves it; None when the record does not say
    tag: str  # prompt format and set version, to tell apart evaluations that differ
    content: tuple | None = None  # the item's (program, input, output) where recorded
    example: bool | None = None  # a CRUXEval answer copied from the prompt's worked example
    wrong_type: bool | None = None  # a wrong answer not of the gold's type (`answer_types`)
    restart: bool | None = None  # a reply that writes the prompt's few-shot document again
    reply: str | None = None  # the model's reply text where recorded (CRUXEval)


def report(folder: str | Path) -> dict:
    folder = Path(folder)
    if not folder.is_dir():
        raise FileNotFoundError(f"no run folder at {folder}")
    if not (folder / "metrics.jsonl").is_file() and not (folder / "eval").is_dir():
        raise FileNotFoundError(f"{folder} is no run folder: it has no metrics.jsonl and no eval/")
    rows, unreadable = read_metrics(folder / "metrics.jsonl")
    return {
        "run": str(folder),
        "steps": max((r["step"] for r in rows), default=0),
        "proposals": _proposals(rows),
        "proposal_log": proposal_log(folder, rows),
        "benchmarks": _benchmarks(folder / "eval"),
        "unreadable_metric_lines": unreadable,
    }


def read_metrics(path: Path) -> tuple[list[dict], int]:
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
    for key in _WASTE + _SHAPE:
        if any(key in r for r in steps):
            out[key.split("/")[1]] = [_mean(first, key), _mean(last, key)]
    out["no_new_work"] = _no_new_work([r for r in steps if r["step"] >= _SETTLED])
    return out


def _no_new_work(rows: list[dict]) -> dict:
    """Over `rows` (the steps from `_SETTLED` on): the valid proposals, and the share of them
    that were no new work, in all and per kind."""
    valid = sum(r.get("propose/valid", 0) for r in rows)
    out: dict = {"steps": [rows[0]["step"], rows[-1]["step"]] if rows else [], "valid": valid}
    for name, (count, weight) in no_new_work_counts(rows).items():
        out["all" if name == "no_new_work" else name] = round(count / weight, 4) if weight else None
    # by task type and reason, where the run logged them (`propose/no_new_work/<type>/<why>`)
    reasons: dict[str, float] = defaultdict(float)
    for r in rows:
        for key, value in r.items():
            if key.startswith(_REASON_PREFIX):
                reasons[key.removeprefix(_REASON_PREFIX)] += value
    if reasons:
        out["reasons"] = {k: int(v) for k, v in sorted(reasons.items(), key=lambda kv: -kv[1])}
    for name in ("retyped", "reinput"):
        if any(f"propose/{name}" in r for r in rows):
            out[name] = int(sum(r.get(f"propose/{name}", 0) for r in rows))
    return out


def no_new_work_counts(rows: list[dict]) -> dict[str, tuple[float, float]]:
    """Over metric rows (one per step): for no new work in all (`no_new_work`) and for each
    kind (`repeat`, `copy`, ...), the valid proposals that were it (each step's share times its
    valid proposals) and the valid proposals of the steps that logged the share."""
    out = {}
    for kind in ("duplicate", *NO_NEW_WORK):
        key = f"propose/{kind}_share"
        weighted = [
            (r.get("propose/valid", 0), r[key])
            for r in rows
            if isinstance(r.get(key), int | float) and r[key] == r[key]  # not NaN
        ]
        name = "no_new_work" if kind == "duplicate" else kind
        out[name] = (sum(n * x for n, x in weighted), sum(n for n, _ in weighted))
    return out


def _mean(rows: list[dict], key: str) -> float | None:
    values = [r[key] for r in rows if isinstance(r.get(key), int | float) and r[key] == r[key]]
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
        read = {step: _items(path) for step, path in sorted(by_step.items())}
        items = {step: found for step, (found, _) in read.items()}
        first, last = min(by_step), max(by_step)
        bad = [read[first][1], read[last][1]]  # lines that could not be read, left out
        for subset, row in _paired(items[first], items[last]).items():
            out[subset] = {"steps": [first, last], **row, "curve": _curve(items, subset)}
            if any(bad):
                out[subset]["unreadable_lines"] = bad
    return out


def _curve(by_step: dict[int, dict[tuple, Item]], subset: str) -> list[dict]:
    """The subset's accuracy at every evaluated step, on all items and on the non-trivial."""
    curve = []
    for step, items in by_step.items():
        own = [item for key, item in items.items() if key[0] == subset]
        hard = [item for item in own if item.trivial is False]
        point = {"step": step, "n": len(own), "accuracy": _share(own), "correct": _right(own)}
        if hard:
            point["non_trivial_accuracy"] = _share(hard)
            point["non_trivial_n"], point["non_trivial_correct"] = len(hard), _right(hard)
        curve.append(point)
    return curve


def _share(items: list[Item]) -> float:
    return round(_right(items) / len(items), 4) if items else 0.0


def _right(items: list[Item]) -> int:
    return sum(i.correct for i in items)


def compare(before: str | Path, after: str | Path, across_formats: bool = False) -> dict:
    """Two per-sample evaluation files (or the folders holding `samples.jsonl`), paired per
    subset on the items both evaluated. `across_formats` pairs a CRUXEval subset asked in one
    prompt format with the same subset in another (`cruxeval_o_cot` with `cruxeval_o`: one
    model asked two ways); each such subset then warns that the formats differ."""
    paths = [samples_file(before), samples_file(after)]
    (first, bad_first), (last, bad_last) = readable_items(paths[0]), readable_items(paths[1])
    free = [_format_free(first), _format_free(last)]
    if across_formats:
        for path, items in zip(paths, free, strict=True):
            if items is None:
                raise ValueError(f"{path} holds a subset in more than one prompt format")
        first, last = free
    if not first.keys() & last.keys():
        hint = ""
        if not across_formats and None not in free and free[0].keys() & free[1].keys():
            hint = " (they ask one subset in two prompt formats: --across-formats pairs them)"
        raise ValueError(f"{paths[0]} and {paths[1]} share no evaluated item{hint}")
    out = {"before": str(paths[0]), "after": str(paths[1]), **_paired(first, last)}
    if across_formats:
        out["across_formats"] = True  # each subset's warning names the two formats
    if warning := setup_warning(*paths):
        out["warning"] = warning + ("" if across_formats else _replies(paths, first, last))
    if bad_first or bad_last:
        out["unreadable_lines"] = [bad_first, bad_last]
    return out


def _replies(paths: list[Path], first: dict, last: dict) -> str:
    """For a setup warning between two greedy evaluations under one model name: on how many
    paired items (same task on both sides) the recorded replies differ, which says whether the
    setup changed anything here ("" where the names differ, either sampled, or the records hold
    no replies). The name is what the summaries record: a checkpoint's path, not its weights."""
    summaries = [summary_beside(path) for path in paths]
    names = [x.get("model") for x in summaries]
    if (
        names[0] is None
        or names[0] != names[1]
        or any(x.get("temperature") != 0 for x in summaries)
    ):
        return ""
    keys = [
        k
        for k in first.keys() & last.keys()
        if None not in (first[k].reply, last[k].reply) and not _differ(first[k], last[k])
    ]
    if not keys:
        return ""
    differ = sum(first[k].reply != last[k].reply for k in keys)
    return f" (the same model name: its replies differ on {differ} of {len(keys)} paired items)"


def _format_free(items: dict[tuple, Item]) -> dict[tuple, Item] | None:
    """Items keyed by their subset without its prompt format; None where a file holds one
    subset in two formats and cannot be keyed so."""
    out = {(format_free(k[0]), *k[1:]): v for k, v in items.items()}
    return out if len(out) == len(items) else None


def samples_file(given: str | Path) -> Path:
    """The per-sample evaluation file `given` names (the file, or the folder holding it)."""
    path = Path(given)
    path = path / "samples.jsonl" if path.is_dir() else path
    if not path.is_file():
        raise FileNotFoundError(f"no per-sample evaluation at {path}")
    return path


def _paired(before: dict[tuple, Item], after: dict[tuple, Item]) -> dict:
    """Per subset: the paired statistics on all shared items and on the non-trivial ones.
    Items whose recorded task differs between the two evaluations (a set that changed under
    the same ids) are left out, and counted."""
    out = {}
    for subset in sorted({k[0] for k in before} | {k[0] for k in after}):
        shared = sorted(k for k in before if k[0] == subset and k in after)
        if not shared:
            out[subset] = {"note": "evaluated on one side only: nothing to pair"}
            continue
        keys = [k for k in shared if not _differ(before[k], after[k])]
        pairs = [(before[k], after[k]) for k in keys]
        row = _stats(pairs)
        warnings = []
        if len(keys) < len(shared):
            warnings.append(f"{len(shared) - len(keys)} items differ in content: left out")
        tags = [sorted({b.tag for b, _ in pairs}), sorted({a.tag for _, a in pairs})]
        if tags[0] != tags[1]:
            warnings.append(
                f"the two evaluations differ: {'/'.join(tags[0])} vs {'/'.join(tags[1])}"
            )
        if warnings:
            row["warning"] = "; ".join(warnings)
        if pairs and all(b.trivial is not None or a.trivial is not None for b, a in pairs):
            hard = [(b, a) for b, a in pairs if not _trivial(b, a)]
            row["trivial_items"] = len(pairs) - len(hard)
            row["non_trivial"] = _stats(hard)
        else:
            row["non_trivial"] = None  # the records do not say which items copying solves
        if any(k[2] for k in keys):  # several samples of a problem: not independent items
            row["problems"] = _per_problem(keys, before, after)
        out[subset] = row
    return out


def _differ(before: Item, after: Item) -> bool:
    return None not in (before.content, after.content) and before.content != after.content


def _per_problem(keys: list[tuple], before: dict, after: dict) -> dict:
    """With several samples per problem the samples of one problem are not independent, and
    McNemar's test on the samples is too confident. Per problem instead, on all problems and
    on the non-trivial ones (`non_trivial`, None where the records do not say): the sign test
    on the problems whose accuracy (the share of right samples) rose or fell; and whether any
    of its samples is right (pass@n, n its paired samples), before and after, with McNemar's
    test (`any_right`)."""
    shares: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    trivial: dict[str, bool] = {}
    for key in keys:
        own = shares[key[1]]
        own[0] += before[key].correct
        own[1] += after[key].correct
        own[2] += 1
        trivial[key[1]] = trivial.get(key[1], False) or _trivial(before[key], after[key])
    known = all(before[k].trivial is not None or after[k].trivial is not None for k in keys)
    hard = [shares[p] for p in shares if not trivial[p]]
    every = list(shares.values())
    return {
        **_sign(every),
        "non_trivial": _sign(hard) if known else None,
        "any_right": {
            "all": _any_right(every),
            "non_trivial": _any_right(hard) if known else None,
        },
    }


def _sign(shares: list[list[int]]) -> dict:
    """The sign test on the problems whose share of right samples rose or fell."""
    up = sum(a > b for b, a, _ in shares)
    down = sum(a < b for b, a, _ in shares)
    return {
        "n": len(shares),
        "improved": up,
        "worsened": down,
        "p_value": float(f"{sign_test(up, down):.3g}"),
    }


def _any_right(shares: list[list[int]]) -> dict:
    """Problems with at least one right sample, before and after, paired (McNemar)."""
    b, a = [right > 0 for right, _, _ in shares], [right > 0 for _, right, _ in shares]
    gained, lost, p = mcnemar_exact(b, a)
    n = max(1, len(shares))
    samples = sorted({count for _, _, count in shares})
    return {
        "n": len(shares),
        "samples": samples[0] if len(samples) == 1 else samples,  # n of pass@n
        "before": round(sum(b) / n, 4),
        "after": round(sum(a) / n, 4),
        "gained": gained,
        "lost": lost,
        "p_value": float(f"{p:.3g}"),
    }


def _trivial(before: Item, after: Item) -> bool:
    return bool(before.trivial if before.trivial is not None else after.trivial)


def _stats(pairs: list[tuple[Item, Item]]) -> dict:
    """Accuracy before and after, the McNemar test, and the changed items by failure."""
    b, a = [x.correct for x, _ in pairs], [y.correct for _, y in pairs]
    gained, lost, p = mcnemar_exact(b, a)
    n = max(1, len(pairs))
    gained_from = Counter(x.failure for x, y in pairs if y.correct and not x.correct)
    lost_to = Counter(y.failure for x, y in pairs if x.correct and not y.correct)
    return {
        "n": len(pairs),
        "before": round(sum(b) / n, 4),
        "after": round(sum(a) / n, 4),
        "delta": round((sum(a) - sum(b)) / n, 4),
        "correct": [sum(b), sum(a)],  # the counts behind before and after
        "gained": gained,
        "lost": lost,
        "p_value": float(f"{p:.3g}"),
        "gained_from": {kind: gained_from[kind] for kind in FAILURES},
        "lost_to": {kind: lost_to[kind] for kind in FAILURES},
        "failures": [
            {kind: sum(x.failure == kind for x in side) for kind in FAILURES}
            for side in ([x for x, _ in pairs], [y for _, y in pairs])
        ],
        # answers that copy the published prompt's worked example (CRUXEval), before and after
        "example_answers": _count(pairs, "example"),
        # of all replies, those that write the prompt's few-shot document over again (CRUXEval)
        "restarts": _count(pairs, "restart"),
        # wrong answers whose type is not the gold's (input or output prediction)
        "wrong_type_answers": _count(pairs, "wrong_type"),
        # of the gained items, those whose earlier answer had a wrong type; of the lost, the later
        "wrong_type_changes": (
            [
                sum(bool(x.wrong_type) for x, y in pairs if y.correct and not x.correct),
                sum(bool(y.wrong_type) for x, y in pairs if x.correct and not y.correct),
            ]
            if any(x.wrong_type is not None for pair in pairs for x in pair)
            else None
        ),
    }


def _count(pairs: list[tuple[Item, Item]], flag: str) -> list[int] | None:
    """How many items of each side have `flag` set; None where no record can say."""
    if all(getattr(x, flag) is None for pair in pairs for x in pair):
        return None
    return [sum(bool(getattr(x, flag)) for x in side) for side in zip(*pairs, strict=True)]


def readable_items(path: Path) -> tuple[dict[tuple, Item], int]:
    """`_items` of a file given to compare: one without a readable record is an error naming
    it, not an empty table or a pairing that finds nothing shared."""
    items, bad = _items(path)
    if not items:
        lines = f" ({bad} unreadable lines)" if bad else " (it is empty)"
        raise ValueError(f"{path} holds no readable evaluation record{lines}")
    return items, bad


def _items(path: Path) -> tuple[dict[tuple, Item], int]:
    """(subset, problem id, sample index) -> Item, from one per-sample file; and how many lines
    could not be read. Records written before the fields existed are read as far as they go:
    the failure from the answer and the reason, `trivial` unknown."""
    items, bad = {}, 0
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            bad += 1
            continue
        if not isinstance(row, dict):
            bad += 1
            continue
        subset = row.get("subset") or row.get("benchmark") or path.stem
        correct = bool(row.get("correct"))
        kind = row.get("failure", "")
        if kind == "":  # an older record: derive it
            verdict = Verdict(correct, str(row.get("reason", "")))
            kind = failure(row.get("answer"), verdict)
        tag = "/".join(str(row[k]) for k in ("prompt_format", "set") if k in row)
        trivial = row.get("trivial")
        fields = ("program", "input", "output")
        content = tuple(str(row[k]) for k in fields) if all(k in row for k in fields) else None
        items[(subset, str(row.get("id")), row.get("sample", 0))] = Item(
            correct,
            kind,
            trivial if isinstance(trivial, bool) else None,
            tag or "unlabelled",
            content,
            row_copies_example(row),
            wrong_type(row),
            row_restarts(row),
            row["reply"] if isinstance(row.get("reply"), str) else None,
        )
    return items, bad
