"""Importing seed files into a pool: every candidate is validated again by the executor.

For each candidate task (see `seeds.py`):

1. Each (program, input) case runs in the sandbox, twice, in `literal` input mode: the mode
   the solver's answers are checked in, so every stored input must be a literal.
2. An input that is not a literal (CRUXEval has `dict(a=1)`, AZR `-1 * (10 ** 9)`) is
   evaluated in the sandbox in `expression` mode by a capture program that returns the
   arguments, keeping dict insertion order (which can change what a program does); the
   literal text rebuilt from them replaces the input, and step 1 runs on it. An argument that
   has no literal (a lambda) rejects the candidate.
3. A given output must equal the computed one canonically; a given output that is itself an
   expression is evaluated in the sandbox first.

A candidate that fails anywhere is a `Reject` with the executor's reason (`syntax`,
`policy:<rule>`, `timeout`, `nondeterministic`, `input:<why>`, `output_mismatch`, ...) and its
line; a malformed record (not JSON, or with a string that is not text, `files.text_error`) is
a `malformed_record` reject; an MBPP assert that cannot become a task is one reject per task
type with an `mbpp:<why>` reason (see `mbpp.py`). Nothing is dropped without a reason.

Math problems (GSM8K, MATH-500; `candidates.MathCandidate`) take another path: they have no
program, so the executor is not involved. Their gold answer must parse with the math checker
and be judged equal to itself (else no answer could ever be judged correct); a gold answer that
fails is a `math:gold_<reason>` reject (`math:gold_unparsable`, `math:gold_not_self_equal`,
`math:gold_timeout`, ...), one without a gold answer a `math:no_gold` reject. An accepted one
is `Task("math", "", ("",), (gold,), problem)`: an empty program marks a labeled math task,
and its content hash covers the problem text and the gold answer. A proposed math task, as the
pool exports it (a problem with the program whose `f()` computes its answer), goes the code
path: `f()` runs again, must return a number (`math:not_a_number`) and, where the record gives
an answer, that answer (`output_mismatch`).
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from selfplay.curriculum.records import Provenance, verification_record
from selfplay.datasets import seeds
from selfplay.datasets.candidates import Candidate, MathCandidate, Reject
from selfplay.executor import values
from selfplay.new_work import task_keys
from selfplay.trivial import stock_solves
from selfplay.types import Task, Verdict

CAPTURE = """

def encode_value(v):
    if type(v) is dict:
        return ['d', [[encode_value(k), encode_value(x)] for k, x in v.items()]]
    if type(v) is list or type(v) is tuple:
        return ['l' if type(v) is list else 't', [encode_value(x) for x in v]]
    return ['v', v]

def f(*args, **kwargs):
    return [[encode_value(a) for a in args], [[k, encode_value(v)] for k, v in kwargs.items()]]
"""
# Evaluates a given output expression in the sandbox: its value comes back canonical.
OUTPUT_EVALUATOR = "def f(x):\n    return x\n"


@dataclass
class ImportReport:
    file: str
    format: str
    labeled: bool
    records: int = 0
    sampled_from: int = 0  # records in the file when `limit` kept a sample of them
    candidates: int = 0
    added: int = 0
    duplicates: int = 0  # valid, but already in the pool
    relabeled: int = 0  # of the duplicates, those held as seed or proposed, labeled now
    by_type: Counter = field(default_factory=Counter)  # accepted candidates per type
    rejects: list[Reject] = field(default_factory=list)

    @property
    def accepted(self) -> int:
        return self.added + self.duplicates

    @property
    def acceptance_rate(self) -> float:
        return self.accepted / self.candidates if self.candidates else 0.0

    def reasons(self) -> Counter:
        return Counter(r.reason for r in self.rejects)

    def summary(self) -> dict:
        return {
            "file": self.file,
            "format": self.format,
            "labeled": self.labeled,
            "records": self.records,
            **({"sampled_from": self.sampled_from} if self.sampled_from else {}),
            "candidates": self.candidates,
            "accepted": self.accepted,
            "added": self.added,
            "duplicates": self.duplicates,
            "relabeled": self.relabeled,
            "acceptance_rate": round(self.acceptance_rate, 4),
            "by_type": dict(self.by_type),
            "rejected": len(self.rejects),
            "reasons": dict(self.reasons().most_common()),
        }


def import_file(
    store,
    path: str | Path,
    executor,
    *,
    labeled: bool = False,
    types=None,
    checker=None,
    mathcheck=None,
    limit: int = 0,
    sample_seed: int = 0,
    benchmarks=None,
):
    """Validate and add the tasks of a seed file; returns an `ImportReport`.

    With `labeled`, the tasks enter with origin `labeled`, and those the pool holds already as
    `seed` or `proposed` (imported before as seeds, say) become labeled (`relabeled` in the
    report, among the duplicates), in the transaction that adds the batch's new tasks.

    With `benchmarks` (a `contamination.BenchmarkPrograms`), a task whose program is one of a
    benchmark's is rejected as `contaminated:<benchmark>` before it runs.

    With `limit`, only that many records of the file are used: a random sample drawn with
    `sample_seed` (the same sample every time, so a re-import adds nothing twice), in file
    order. Math problems are checked by `checker` (a `MathChecker`), or by one started for
    this file with the `mathcheck` configuration when they occur and none is given."""
    path = Path(path)
    report = ImportReport(path.name, seeds.guess_format(path), labeled)
    pending: list[Candidate] = []
    math: list[MathCandidate] = []
    own_checker = None
    seen: dict[str, str] = {}  # program: the benchmark it reproduces, "" for none

    def import_math() -> None:
        nonlocal checker, own_checker
        if checker is None:
            checker = own_checker = _start_checker(mathcheck)
        _import_math_batch(store, checker, math, report)
        math.clear()

    try:
        for number, record in _records(path, limit, sample_seed, report):
            report.records += 1
            if isinstance(record, Reject):
                report.rejects.append(record)
                continue
            try:
                found = seeds.candidates(record, number, store.config.seed_visible_fraction)
            except (ValueError, KeyError) as err:
                report.rejects.append(
                    Reject(number, f"line {number}", None, "malformed_record", str(err))
                )
                continue
            found = [c for c in found if types is None or c.type in types]
            skipped = [c for c in found if isinstance(c, Reject)]
            report.candidates += len(skipped)  # counted as candidates that failed
            report.rejects += skipped
            tasks = [c for c in found if isinstance(c, Candidate)]
            pending += [c for c in tasks if not _contaminated(c, benchmarks, seen, report)]
            math += [c for c in found if isinstance(c, MathCandidate)]
            if len(pending) >= store.config.import_batch:
                _import_batch(store, executor, pending, report)
                pending = []
            if len(math) >= store.config.import_batch:
                import_math()
        if pending:
            _import_batch(store, executor, pending, report)
        if math:
            import_math()
    finally:
        if own_checker is not None:
            own_checker.close()
    return report


def _contaminated(cand: Candidate, benchmarks, seen: dict[str, str], report) -> bool:
    """Whether the candidate's program is a benchmark's (then it is a reported reject); `seen`
    holds the programs looked up so far (a record gives several tasks of one program)."""
    if benchmarks is None:
        return False
    name = seen.get(cand.program)
    if name is None:
        name = seen[cand.program] = benchmarks.match(cand.program)
    if name:
        report.candidates += 1
        detail = f"the program is one of {name}'s, which stay out of training"
        report.rejects.append(
            Reject(cand.line, cand.source_id, cand.type, f"contaminated:{name}", detail)
        )
    return bool(name)


def _records(path: Path, limit: int, seed: int, report: ImportReport):
    """The file's records, or a seeded sample of `limit` of them (in file order)."""
    if limit < 0:
        raise ValueError(f"limit must be 0 (all records) or positive, not {limit}")
    if not limit:
        yield from seeds.read_records(path)
        return
    records = list(seeds.read_records(path))
    if len(records) > limit:
        report.sampled_from = len(records)
        keep = sorted(random.Random(seed).sample(range(len(records)), limit))
        records = [records[i] for i in keep]
    yield from records


def _start_checker(config):
    from selfplay.mathcheck import MathChecker

    return MathChecker(config)


def _import_math_batch(store, checker, batch: list[MathCandidate], report: ImportReport) -> None:
    """Labeled math problems: each gold answer is judged against itself by the math checker."""
    report.candidates += len(batch)
    verdicts = checker.check_many([(c.gold, c.gold) for c in batch])
    tasks, provenance, checks = [], [], []
    origin = "labeled" if report.labeled else "seed"
    for cand, verdict in zip(batch, verdicts, strict=True):
        if not verdict.ok:
            reason = "not_self_equal" if verdict.reason == "not_equal" else verdict.reason
            detail = f"gold answer {cand.gold[:80]!r}"
            if reason not in ("unparsable", "not_self_equal") and verdict.detail:
                detail += f": {verdict.detail}"  # a timeout, a worker's death, an error
            report.rejects.append(
                Reject(cand.line, cand.source_id, "math", f"math:gold_{reason}", detail)
            )
            continue
        tasks.append(Task("math", "", ("",), (cand.gold,), cand.problem))
        provenance.append(Provenance(origin, 0, "", report.file, cand.source_id))
        checks.append(verification_record([verdict], {"checker": "math-verify"}))
    if tasks:
        result = store.add_tasks(tasks, provenance, checks, keys=task_keys(tasks))
        report.added += result.n_added
        report.duplicates += result.n_duplicates
        report.relabeled += len(result.relabeled)
        report.by_type.update(t.type for t in tasks)


def _import_batch(store, executor, batch: list[Candidate], report: ImportReport) -> None:
    report.candidates += len(batch)
    cases = [(c.program, i) for c in batch for i in c.inputs]
    verdicts = _validate_literal(executor, cases)
    given = _given_outputs(executor, [o for c in batch for o in c.outputs])
    tasks, provenance, checks, start = [], [], [], 0
    origin = "labeled" if report.labeled else "seed"
    for cand in batch:
        end = start + len(cand.inputs)
        task = _task(store, cand, verdicts[start:end], given[start:end], report, executor.limits)
        if task is not None:
            tasks.append(task)
            provenance.append(Provenance(origin, 0, "", report.file, cand.source_id))
            checks.append(verification_record(verdicts[start:end], executor.isolation))
        start = end
    if tasks:
        # abduction tasks enter judged for stock inputs, as a run's own do (`new_work.guessable`)
        solves = stock_solves(executor, tasks)
        marks = [s if t.type == "abduction" else None for t, s in zip(tasks, solves, strict=True)]
        keys = task_keys(tasks)  # to find a proposal that repeats one in other words
        result = store.add_tasks(tasks, provenance, checks, marks, keys)
        report.added += result.n_added
        report.duplicates += result.n_duplicates
        report.relabeled += len(result.relabeled)
        report.by_type.update(t.type for t in tasks)


def _task(store, cand: Candidate, verdicts, given, report, limits) -> Task | None:
    def reject(reason: str, detail: str = "") -> None:
        report.rejects.append(Reject(cand.line, cand.source_id, cand.type, reason, detail))

    if cand.type == "math":  # a proposed math task: its f() must return a number
        from selfplay.proposer import math_verdict

        verdicts = [math_verdict(v) for v in verdicts]
    bad = next((v for v in verdicts if not v.ok), None)
    if bad is not None:
        return reject(bad.reason, bad.detail)
    for verdict, want in zip(verdicts, given, strict=True):
        if isinstance(want, Verdict):  # the given output could not be read
            return reject(f"output:{want.reason}", want.detail)
        loose = cand.loose_output and want is not None and _equal(want, verdict.output, limits)
        if want is not None and want != verdict.output and not loose:
            detail = f"given {want[:80]}, the program returns {verdict.output[:80]}"
            return reject("output_mismatch", detail)
    inputs = tuple(v.input for v in verdicts)
    outputs = tuple(v.output for v in verdicts)
    cpu = max(v.cpu_s for v in verdicts)
    if cand.type == "math":
        return Task("math", cand.program, inputs, outputs, cand.message, cpu_s=cpu)
    if cand.type != "induction":
        return Task(cand.type, cand.program, inputs, outputs, cpu_s=cpu)
    pairs = dict(zip(inputs, outputs, strict=True))  # repeated inputs add nothing
    if len(pairs) < 2:
        return reject("induction:too_few_pairs", "needs two different inputs or more")
    try:
        shown = seeds.visible_count(len(pairs), cand.n_visible, store.config.seed_visible_fraction)
    except ValueError as err:
        return reject("malformed_record", str(err))
    return Task(
        "induction", cand.program, tuple(pairs), tuple(pairs.values()), cand.message, shown, cpu
    )


def _equal(given: str, computed: str, limits) -> bool:
    """Python's == on two canonical values, read by the executor's literal parser."""
    try:
        return values.parse_literal(given, limits) == values.parse_literal(computed, limits)
    except values.ValueRejected:
        return False


def _validate_literal(executor, cases: Sequence[tuple[str, str]]) -> list[Verdict]:
    """Validate in literal mode; inputs that are not literals are turned into literals first."""
    verdicts = executor.validate(cases, inputs="literal")
    redo = [i for i, v in enumerate(verdicts) if v.reason == "input:not_literal"]
    if not redo:
        return verdicts
    captured = executor.validate([(cases[i][0] + CAPTURE, cases[i][1]) for i in redo], "expression")
    again, where = [], []
    for i, verdict in zip(redo, captured, strict=True):
        text = _literal_args(verdict, executor.limits)
        if isinstance(text, Verdict):
            verdicts[i] = text
        else:
            again.append((cases[i][0], text))
            where.append(i)
    for i, verdict in zip(where, executor.validate(again, inputs="literal"), strict=True):
        verdicts[i] = verdict
    return verdicts


def _literal_args(captured: Verdict, limits) -> str | Verdict:
    """The literal argument text of a captured call, or a failing verdict."""
    if not captured.ok:
        reason = "input:not_literal" if captured.reason == "unserializable" else captured.reason
        detail = f"evaluating the input: {captured.reason} {captured.detail}".strip()
        return Verdict(
            False, reason if reason.startswith("input:") else f"input:{reason}", detail=detail
        )
    args, kwargs = values.parse_literal(captured.output, limits)
    parts = [_render(a, limits) for a in args]
    parts += [f"{name}={_render(v, limits)}" for name, v in kwargs]
    return ", ".join(parts)


def _render(node, limits) -> str:
    tag, value = node
    if tag == "d":
        return (
            "{" + ", ".join(f"{_render(k, limits)}: {_render(v, limits)}" for k, v in value) + "}"
        )
    if tag in ("l", "t"):
        items = ", ".join(_render(x, limits) for x in value)
        return f"[{items}]" if tag == "l" else f"({items}{',' if len(value) == 1 else ''})"
    return values.canonical(value, limits)


def _given_outputs(executor, outputs: Sequence[str | None]) -> list[str | Verdict | None]:
    """Canonical text of each given output; expressions are evaluated in the sandbox."""
    out: list[str | Verdict | None] = []
    evaluate = []
    for i, text in enumerate(outputs):
        try:
            out.append(None if text is None else values.canonical_from_text(text, executor.limits))
        except values.ValueRejected:
            out.append(None)
            evaluate.append(i)
    verdicts = executor.validate([(OUTPUT_EVALUATOR, outputs[i]) for i in evaluate], "expression")
    for i, verdict in zip(evaluate, verdicts, strict=True):
        out[i] = (
            verdict.output if verdict.ok else Verdict(False, "not_literal", detail=verdict.detail)
        )
    return out
