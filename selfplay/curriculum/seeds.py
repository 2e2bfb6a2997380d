"""Seed files: records of CRUXEval, the AZR seed sets and a generic JSONL, read as candidates.

Each record is recognised by its fields (a file may mix them):

  CRUXEval         {"code", "input", "output", "id"}
  MBPP             {"code", "test_list", "text" | "prompt", "task_id", "test_imports"?}
                   (`mbpp.jsonl`, or the JSON array `sanitized-mbpp.json`; see `mbpp.py`)
  AZR triplets     {"snippet", "input", "output", "imports"}        (`*_seed_io.jsonl`)
  AZR induction    {"snippet", "inputs", "outputs", "message", "imports"}
                                                                     (`*_code_f_seed_io.jsonl`)
  generic          {"program", "type"?, "input" | "inputs", "output"? | "outputs"?,
                    "message"?, "n_visible"?, "imports"?, "id"?}

The generic form (also what `selfplay pool export --format jsonl` writes, so exports import
back): `program` (or `code`, `snippet`) defines `f`; an input is the argument text inside
`f(...)`; `type` is deduction, abduction or induction. Without a type, a record with one
input becomes both a deduction and an abduction task (as do CRUXEval and AZR triplets), and
one with several inputs an induction task. Outputs are optional: the executor computes them,
and a given output must equal the computed one. `imports` are lines put before the program
(AZR lists the imports a snippet needs; lines the snippet already has are not repeated).
`n_visible` is how many pairs of an induction task the solver sees (default: the
`curriculum.seed_visible_fraction` of them, at least one, leaving at least one hidden).
Files are JSONL (optionally gzipped), a JSON array of records (`.json`) or Parquet (as
exported). Math problems (GSM8K `{"question", "answer"}`, MATH-500 `{"problem", "answer"}`)
are recognised and refused unless a `math` task type exists (`selfplay.types.TASK_TYPES`).
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from selfplay.types import TASK_TYPES


@dataclass(frozen=True)
class Candidate:
    """One task to validate, read from one record."""

    line: int
    source_id: str
    type: str
    program: str
    inputs: tuple[str, ...]
    outputs: tuple[str | None, ...]  # as given; None where the record gives none
    message: str = ""
    n_visible: int | None = None
    # A given output that is == to the computed one (240 and 240.0) still matches: a test
    # assert (MBPP) checks with ==; the task keeps the computed, type-exact output.
    loose_output: bool = False


@dataclass(frozen=True)
class Reject:
    """A record or candidate that did not become a task, and why."""

    line: int
    source_id: str
    type: str | None
    reason: str
    detail: str = ""


def read_records(path: Path) -> Iterator[tuple[int, dict | Reject]]:
    """(line number, record) per non-blank line; a malformed line gives a Reject instead."""
    if path.suffix == ".parquet":
        yield from _parquet_records(path)
        return
    if path.suffix == ".json":
        yield from _array_records(path)
        return
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as stream:
        for number, line in enumerate(stream, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as err:
                yield number, Reject(number, f"line {number}", None, "malformed_record", str(err))
                continue
            if not isinstance(record, dict):
                yield (
                    number,
                    Reject(
                        number,
                        f"line {number}",
                        None,
                        "malformed_record",
                        "a record must be a JSON object",
                    ),
                )
                continue
            yield number, record


def _parquet_records(path: Path) -> Iterator[tuple[int, dict]]:
    import pyarrow.parquet as pq

    number = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=4096):
        for record in batch.to_pylist():
            number += 1
            yield number, record


def _array_records(path: Path) -> Iterator[tuple[int, dict | Reject]]:
    """A JSON array of records; record i (from 1) stands where a JSONL file has line i."""
    try:
        data = json.loads(path.read_text(encoding="utf-8", errors="replace"))
    except ValueError as err:
        yield 1, Reject(1, "file", None, "malformed_record", f"not a JSON array: {err}")
        return
    if not isinstance(data, list):
        yield 1, Reject(1, "file", None, "malformed_record", "a .json file must hold an array")
        return
    for number, record in enumerate(data, start=1):
        if isinstance(record, dict):
            yield number, record
        else:
            detail = "a record must be a JSON object"
            yield number, Reject(number, f"record {number}", None, "malformed_record", detail)


class MathRecords(ValueError):
    """A file of math problems, which need a task type this version does not have."""


def math_format(record: dict) -> str | None:
    """`gsm8k` or `math500` when the record is a math problem, else None."""
    if "answer" in record and "question" in record:
        return "gsm8k"
    if "answer" in record and "problem" in record:
        return "math500"
    return None


def refuse_math(fmt: str, where: str) -> None:
    """Math records need the `math` task type; without it, refuse them before importing."""
    if "math" not in TASK_TYPES:
        raise MathRecords(
            f"{where} holds math problems ({fmt}); importing them needs the task type 'math', "
            f"which this version does not have (task types: {', '.join(TASK_TYPES)})"
        )
    raise MathRecords(
        f"{where} holds math problems ({fmt}); the task type 'math' exists, but the seed "
        "importer does not read math records yet"
    )


def candidates(record: dict, line: int, visible_fraction: float) -> list[Candidate | Reject]:
    """The candidates of one record (an MBPP record may also give counted rejects, see
    `mbpp.py`); ValueError (with the reason) when it is malformed."""
    from selfplay.curriculum import mbpp

    fmt = math_format(record)
    if fmt is not None:
        refuse_math(fmt, f"line {line}")
    if mbpp.is_mbpp(record):
        return mbpp.candidates(record, line)
    source_id = str(record["id"]) if record.get("id") is not None else f"line {line}"
    program = _program(record)
    kind = record.get("type")
    if kind is not None and kind not in TASK_TYPES:
        raise ValueError(f"field 'type' must be one of {TASK_TYPES}, not {kind!r}")
    if kind == "math":
        raise ValueError("math tasks are written by the proposer; they are not imported")
    inputs, outputs = _pairs(record)
    message = _string(record, "message", "")
    if kind == "induction" or (kind is None and "inputs" in record):
        n_visible = record.get("n_visible")
        if n_visible is not None and (
            not isinstance(n_visible, int) or isinstance(n_visible, bool)
        ):
            raise ValueError("field 'n_visible' must be an integer")
        return [
            Candidate(line, source_id, "induction", program, inputs, outputs, message, n_visible)
        ]
    if len(inputs) != 1:
        raise ValueError(f"a {kind} task has exactly one input, this record has {len(inputs)}")
    kinds = [kind] if kind else ["deduction", "abduction"]
    return [Candidate(line, source_id, k, program, inputs, outputs, message) for k in kinds]


def _program(record: dict) -> str:
    for name in ("program", "code", "snippet"):
        if name in record:
            program = _string(record, name, None)
            break
    else:
        raise ValueError("missing field 'program' (or 'code', 'snippet')")
    imports = record.get("imports") or []
    if not isinstance(imports, list) or not all(isinstance(i, str) for i in imports):
        raise ValueError("field 'imports' must be a list of strings")
    have = {line.strip() for line in program.splitlines()}
    missing = [i.strip() for i in imports if i.strip() and i.strip() not in have]
    return "\n".join(dict.fromkeys(missing)) + "\n" + program if missing else program


def _pairs(record: dict) -> tuple[tuple[str, ...], tuple[str | None, ...]]:
    if "inputs" in record:
        inputs = record["inputs"]
        outputs = record.get("outputs")
        if (
            not isinstance(inputs, list)
            or not inputs
            or not all(isinstance(i, str) for i in inputs)
        ):
            raise ValueError("field 'inputs' must be a non-empty list of strings")
        if outputs is None:
            return tuple(inputs), (None,) * len(inputs)
        if not isinstance(outputs, list) or len(outputs) != len(inputs):
            raise ValueError("field 'outputs' must be a list as long as 'inputs'")
        if not all(isinstance(o, str) for o in outputs):
            raise ValueError("field 'outputs' must hold strings")
        return tuple(inputs), tuple(outputs)
    if "input" not in record:
        raise ValueError("missing field 'input' (or 'inputs')")
    output = record.get("output")
    if output is not None and not isinstance(output, str):
        raise ValueError("field 'output' must be a string")
    return (_string(record, "input", None),), (output,)


def _string(record: dict, name: str, default: str | None) -> str:
    value = record.get(name, default)
    if not isinstance(value, str):
        raise ValueError(f"field {name!r} must be a string")
    return value


def visible_count(n_pairs: int, given: int | None, fraction: float) -> int:
    """Pairs shown to the solver: as given, else the fraction, at least 1, at most n - 1."""
    if given is not None:
        if not 1 <= given < n_pairs:
            raise ValueError(f"n_visible must be in [1, {n_pairs - 1}] for {n_pairs} pairs")
        return given
    return min(max(1, round(fraction * n_pairs)), n_pairs - 1)


def importable_format(path: Path) -> str:
    """The file's format (see `guess_format`); `MathRecords` for a file of math problems that
    this version cannot import, so that a caller can refuse before importing anything."""
    fmt = guess_format(path)
    if fmt in ("gsm8k", "math500"):
        refuse_math(fmt, path.name)
    return fmt


def guess_format(path: Path) -> str:
    """A name for the report: what the file's first record looks like."""
    for _, record in read_records(path):
        if isinstance(record, Reject):
            continue
        if "code" in record and "test_list" in record:
            return "mbpp"
        if math_format(record):
            return math_format(record)
        if "code" in record and "input" in record:
            return "cruxeval"
        if "snippet" in record:
            return "azr_induction" if "inputs" in record else "azr_triplets"
        return "generic"
    return "empty"
