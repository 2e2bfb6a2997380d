"""`selfplay validate` and `selfplay verify`: the executor on JSONL files, a stable contract.

validate  reads records with `program` (or `code`, `snippet`), `input`, optional `output` and
          `id`; prints `{"id", "valid", "output", "reason", "matches_given_output"}` per record.
verify    reads records with `id`, `type`, `program`, `input`, `output`, `answer` (for
          induction: the answer is a program and `inputs`/`outputs` hold the hidden pairs);
          prints `{"id", "correct", "score", "reason"}` per record. The task itself is first
          validated (which also measures its run time for the answer's time limit); a task
          whose given output differs from what its program returns gets `task:output_mismatch`.

One output line per input line, in order. A malformed line gets `reason: "malformed_record"`
with its `line` number and a `detail`, and the rest goes on. Unknown fields are ignored. The exit
status is non-zero only for the tool's own failures (unreadable file, sandbox unavailable).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from selfplay import config as config_module
from selfplay.executor import values
from selfplay.files import BadLine, read_jsonl
from selfplay.types import Task, Verdict

BATCH = 1024


@dataclass(frozen=True)
class _Malformed:
    line: int
    detail: str
    id: object = None  # the record's own id, when it is an object that has one


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("validate", help="validate (program, input) records from a JSONL file")
    p.add_argument("file", nargs="?", help="JSONL file, or - for standard input")
    p.add_argument("--examples", action="store_true", help="validate the built-in examples")
    p.add_argument("--inputs", choices=("literal", "expression"), default="literal")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    p.set_defaults(handler=validate_command)

    p = sub.add_parser("verify", help="verify answers to tasks from a JSONL file")
    p.add_argument("file", help="JSONL file, or - for standard input")
    p.add_argument("--inputs", choices=("literal", "expression"), default="literal")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    p.set_defaults(handler=verify_command)


def _executor(overrides: list[str]):
    from selfplay.executor.api import Executor

    cfg = config_module.load(
        None, [o if "." in o.split("=")[0] else "executor." + o for o in overrides]
    )
    return Executor(cfg.executor)


def _records(path: str) -> Iterator[tuple[int, object]]:
    """(line number, record or _Malformed) for each non-blank line."""
    for number, record in read_jsonl(path):
        yield number, _Malformed(number, record.error) if isinstance(record, BadLine) else record


def _batches(path: str) -> Iterator[list[tuple[int, object]]]:
    batch = []
    for item in _records(path):
        batch.append(item)
        if len(batch) >= BATCH:
            yield batch
            batch = []
    if batch:
        yield batch


def _text(record: dict, *names: str, required: bool = True) -> str | None:
    for name in names:
        if name in record:
            value = record[name]
            if not isinstance(value, str):
                raise ValueError(f"field {name!r} must be a string")
            return value
    if required:
        raise ValueError(f"missing field {' or '.join(repr(n) for n in names)}")
    return None


def _emit(obj: dict) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")


def _malformed(bad: _Malformed, keys: dict) -> dict:
    print(f"line {bad.line}: malformed record: {bad.detail}", file=sys.stderr)
    return {
        **keys,
        "id": bad.id,
        "reason": "malformed_record",
        "line": bad.line,
        "detail": bad.detail,
    }


# ---------------------------------------------------------------------------------------------
# validate


def validate_command(args: argparse.Namespace) -> int:
    if args.examples:
        return _examples(args)
    if not args.file:
        print(
            "selfplay validate: give a JSONL file (or - for stdin), or --examples", file=sys.stderr
        )
        return 2
    with _executor(args.overrides) as executor:
        for batch in _batches(args.file):
            _validate_batch(executor, batch, args.inputs)
            sys.stdout.flush()
    return 0


def _validate_batch(executor, batch, mode: str) -> None:
    parsed = []
    for number, record in batch:
        if isinstance(record, _Malformed):
            parsed.append(record)
            continue
        try:
            program = _text(record, "program", "code", "snippet")
            given = _text(record, "output", required=False)
            parsed.append((record.get("id"), program, _text(record, "input"), given))
        except ValueError as err:
            parsed.append(_Malformed(number, str(err), record.get("id")))
    cases = [(p[1], p[2]) for p in parsed if not isinstance(p, _Malformed)]
    verdicts = iter(executor.validate(cases, inputs=mode))
    empty = {"id": None, "valid": False, "output": None, "matches_given_output": None}
    for item in parsed:
        if isinstance(item, _Malformed):
            _emit(_malformed(item, empty))
            continue
        record_id, _, _, given = item
        verdict = next(verdicts)
        matches = None
        if given is not None:
            matches = verdict.ok and _canonical_or_none(executor, given) == verdict.output
        _emit(
            {
                "id": record_id,
                "valid": verdict.ok,
                "output": verdict.output,
                "reason": verdict.reason,
                "matches_given_output": matches,
            }
        )


def _canonical_or_none(executor, text: str) -> str | None:
    try:
        return values.canonical_from_text(text, executor.limits)
    except values.ValueRejected:
        return None


def _examples(args: argparse.Namespace) -> int:
    import time

    from selfplay.executor.examples import EXAMPLES

    started = time.perf_counter()
    with _executor(args.overrides) as executor:
        ready = time.perf_counter() - started
        print(f"sandbox ready in {ready:.2f} s with {executor.pool.size} workers")
        for layer, status in executor.isolation.items():
            print(f"  {layer:<11} {status}")
        probe = executor.probe([str(Path.home())])
        print("  escape attempts from inside a hardened worker: "
              + ", ".join(f"{k} {v}" for k, v in probe.items()))  # fmt: skip
        t0 = time.perf_counter()
        verdicts = executor.validate([(e.program, e.input) for e in EXAMPLES])
        elapsed = time.perf_counter() - t0
    print(f"\n{'example':<20} {'verdict':<28} {'expected':<24} output")
    agree = 0
    for example, verdict in zip(EXAMPLES, verdicts, strict=True):
        got = "valid" if verdict.ok else verdict.reason
        want = "valid" if example.expect == "ok" else example.expect
        agree += got == want
        output = (verdict.output or verdict.detail or "")[:40]
        mark = "" if got == want else "   <-- unexpected"
        print(f"{example.name:<20} {got:<28} {want:<24} {output}{mark}")
    print(f"\n{agree}/{len(EXAMPLES)} examples as expected; validated in {elapsed:.2f} s")
    return 0 if agree == len(EXAMPLES) else 1


# ---------------------------------------------------------------------------------------------
# verify


@dataclass(frozen=True)
class _VerifyRecord:
    id: object
    type: str
    program: str | None
    input: str | None
    output: str | None
    answer: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]


def _parse_verify(record: dict) -> _VerifyRecord:
    kind = record.get("type")
    if kind not in ("deduction", "abduction", "induction"):
        raise ValueError("field 'type' must be deduction, abduction or induction")
    pairs: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
    if kind == "induction":
        inputs, outputs = record.get("inputs"), record.get("outputs")
        ok = isinstance(inputs, list) and isinstance(outputs, list) and len(inputs) == len(outputs)
        if not ok or not inputs or not all(isinstance(x, str) for x in inputs + outputs):
            raise ValueError(
                "induction needs equally long non-empty string lists 'inputs', 'outputs'"
            )
        pairs = (tuple(inputs), tuple(outputs))
    program = _text(record, "program", "code", "snippet", required=kind != "induction")
    if kind == "deduction" or (kind == "abduction" and "output" not in record):
        _text(record, "input")
    return _VerifyRecord(
        id=record.get("id"),
        type=kind,
        program=program,
        input=_text(record, "input", required=False),
        output=_text(record, "output", required=kind == "abduction"),
        answer=_text(record, "answer"),
        inputs=pairs[0],
        outputs=pairs[1],
    )


def verify_command(args: argparse.Namespace) -> int:
    with _executor(args.overrides) as executor:
        for batch in _batches(args.file):
            _verify_batch(executor, batch, args.inputs)
            sys.stdout.flush()
    return 0


def _cases_of(rec: _VerifyRecord) -> list[tuple[str, str]]:
    """The (program, input) cases to validate for a record's task."""
    if rec.type == "induction":
        return [(rec.program, i) for i in rec.inputs] if rec.program is not None else []
    return [(rec.program, rec.input)] if rec.input is not None else []


def _task_for(executor, rec: _VerifyRecord, verdicts: list[Verdict]) -> tuple[Task | None, str]:
    """The task of a record from its validated cases, or (None, reason)."""
    bad = next((v for v in verdicts if not v.ok), None)
    if bad is not None:
        return None, f"task:{bad.reason}"
    given = [rec.output] if rec.type != "induction" else list(rec.outputs)
    given = [None if g is None else _canonical_or_none(executor, g) for g in given]
    if any(g is None for g in given) and (rec.type != "deduction" or rec.output is not None):
        return None, "task:output_not_literal"
    if verdicts and any(g is not None and g != v.output for g, v in zip(given, verdicts)):
        return None, "task:output_mismatch"
    cpu = max((v.cpu_s for v in verdicts), default=0.0)
    if rec.type == "induction":
        return Task("induction", rec.program or "", rec.inputs, tuple(given), cpu_s=cpu), "ok"
    output = verdicts[0].output if verdicts else given[0]
    task_input = verdicts[0].input if verdicts else ""  # abduction given without its input
    return Task(rec.type, rec.program, (task_input,), (output,), cpu_s=cpu), "ok"


def _verify_batch(executor, batch, mode: str) -> None:
    items: list = []
    for number, record in batch:
        try:
            items.append(record if isinstance(record, _Malformed) else _parse_verify(record))
        except ValueError as err:
            items.append(_Malformed(number, str(err), record.get("id")))
    records = [item for item in items if isinstance(item, _VerifyRecord)]
    cases = [_cases_of(rec) for rec in records]
    flat = executor.validate([c for group in cases for c in group], inputs=mode)
    tasks, start = {}, 0
    for rec, group in zip(records, cases, strict=True):
        tasks[id(rec)] = _task_for(executor, rec, flat[start : start + len(group)])
        start += len(group)
    jobs = [(tasks[id(r)][0], [r.answer]) for r in records if tasks[id(r)][0] is not None]
    verdicts = iter(executor.verify_many(jobs, inputs=mode))
    empty = {"id": None, "correct": False, "score": 0.0}
    for item in items:
        if isinstance(item, _Malformed):
            _emit(_malformed(item, empty))
            continue
        task, reason = tasks[id(item)]
        verdict = next(verdicts)[0] if task is not None else Verdict(False, reason)
        _emit(
            {"id": item.id, "correct": verdict.ok, "score": verdict.score, "reason": verdict.reason}
        )
