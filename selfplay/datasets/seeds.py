"""Seed files: records of CRUXEval, MBPP, the AZR seed sets, a generic JSONL and math problems
(GSM8K, MATH-500), read as candidates.

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
exported).

Math problems with a final answer become `math` tasks without a program:

  GSM8K            {"question", "answer"}        the gold answer follows the last `####`
  MATH-500         {"problem", "answer" | "solution", "unique_id"?}
                                                  `answer`, else the last `\\boxed{}` of `solution`
  generic math     {"type": "math", "message", "output" | "outputs", "program"?: ""}
                                                  (what a labeled math task exports)

The problem text is the task's message and the gold answer (read by
`selfplay.mathcheck.gsm8k_gold` / `math500_gold`) its output: LaTeX for the math checker, not
a canonical Python value, and there is nothing for the executor to run (`MathCandidate`). A
record with no readable gold answer is a counted `math:no_gold` reject. A record that is
neither a program nor a math problem is a `malformed_record` that says what was expected.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

from selfplay.datasets import mbpp
from selfplay.datasets.candidates import Candidate, MathCandidate, Reject
from selfplay.files import BadLine, read_jsonl, text_error
from selfplay.mathcheck.extract import gsm8k_gold, math500_gold
from selfplay.types import TASK_TYPES


def read_records(path: Path) -> Iterator[tuple[int, dict | Reject]]:
    """(line number, record) per non-blank line; a malformed line gives a Reject instead."""
    if path.suffix == ".parquet":
        yield from _parquet_records(path)
        return
    if path.suffix == ".json":
        yield from _array_records(path)
        return
    for number, record in read_jsonl(path):
        if isinstance(record, BadLine):
            record = Reject(number, f"line {number}", None, "malformed_record", record.error)
        yield number, record


def _parquet_records(path: Path) -> Iterator[tuple[int, dict | Reject]]:
    import pyarrow.parquet as pq

    number = 0
    for batch in pq.ParquetFile(path).iter_batches(batch_size=4096):
        try:
            rows = batch.to_pylist()
        except UnicodeDecodeError:  # a string that is not UTF-8: find its rows one by one
            rows = [_parquet_row(batch, i) for i in range(batch.num_rows)]
        for record in rows:
            number += 1
            if isinstance(record, str):
                yield number, Reject(number, f"record {number}", None, "malformed_record", record)
            else:
                yield number, _checked(number, record)


def _parquet_row(batch, i: int) -> dict | str:
    """Row `i` of a Parquet batch, or why it cannot be read (a field that is not UTF-8)."""
    record = {}
    for name, column in zip(batch.schema.names, batch.columns, strict=True):
        try:
            record[name] = column[i].as_py()
        except UnicodeDecodeError as err:
            return f"field {name!r} is not UTF-8: {err}"
    return record


def _array_records(path: Path) -> Iterator[tuple[int, dict | Reject]]:
    """A JSON array of records; record i (from 1) stands where a JSONL file has line i. A byte
    that is not UTF-8 makes its record a reject, as it makes its line one in a JSONL file."""
    raw = path.read_bytes()
    try:
        text, undecoded = raw.decode("utf-8"), False
    except UnicodeDecodeError:  # kept as surrogates, which `text_error` finds in their record
        text, undecoded = raw.decode("utf-8", "surrogateescape"), True
    try:
        data = json.loads(text)
    except ValueError as err:
        yield 1, Reject(1, "file", None, "malformed_record", f"not a JSON array: {err}")
        return
    if not isinstance(data, list):
        yield 1, Reject(1, "file", None, "malformed_record", "a .json file must hold an array")
        return
    for number, record in enumerate(data, start=1):
        yield number, _checked(number, record, undecoded)


def _checked(number: int, record, undecoded: bool = False) -> dict | Reject:
    """Record `number` of a .json or Parquet file, checked as `read_jsonl` checks a line: a
    JSON object whose strings are text (`text_error`), else a `malformed_record` reject."""
    if isinstance(record, dict):
        error = text_error(record, undecoded=undecoded)
    else:
        error = "a record must be a JSON object"
    if error:
        return Reject(number, f"record {number}", None, "malformed_record", error)
    return record


MATH_FORMATS = ("gsm8k", "math500", "generic_math")  # formats whose records are math problems


def math_format(record: dict) -> str | None:
    """`gsm8k` or `math500` when the record is a math problem, else None."""
    if "question" in record and "answer" in record:
        return "gsm8k"
    if "problem" in record and ("answer" in record or "solution" in record):
        return "math500"
    return None


def math_candidate(record: dict, fmt: str, line: int) -> MathCandidate | Reject:
    """The labeled math task of a GSM8K or MATH-500 record; a `math:no_gold` reject when its
    gold answer cannot be read; ValueError when the problem text is missing."""
    field_name = "question" if fmt == "gsm8k" else "problem"
    problem = record.get(field_name)
    if not isinstance(problem, str) or not problem.strip():
        raise ValueError(f"field {field_name!r} must be a non-empty string")
    ident = record.get("unique_id", record.get("id"))
    source_id = str(ident) if ident is not None else f"line {line}"
    try:
        gold = gsm8k_gold(record) if fmt == "gsm8k" else math500_gold(record)
    except ValueError as err:
        return Reject(line, source_id, "math", "math:no_gold", str(err))
    if not gold:
        return Reject(line, source_id, "math", "math:no_gold", "the gold answer is empty")
    return MathCandidate(line, source_id, problem.strip(), gold)


def candidates(
    record: dict, line: int, visible_fraction: float
) -> list[Candidate | MathCandidate | Reject]:
    """The candidates of one record (an MBPP record may also give counted rejects, see
    `mbpp.py`, a math problem without a readable gold answer a `math:no_gold` reject);
    ValueError (with the reason) when it is malformed."""
    fmt = math_format(record)
    if fmt is not None:
        return [math_candidate(record, fmt, line)]
    if mbpp.is_mbpp(record):
        return mbpp.candidates(record, line)
    source_id = str(record["id"]) if record.get("id") is not None else f"line {line}"
    kind = record.get("type")
    if kind is not None and kind not in TASK_TYPES:
        raise ValueError(f"field 'type' must be one of {TASK_TYPES}, not {kind!r}")
    if kind == "math":
        return [_generic_math(record, line, source_id)]
    program = _program(record)
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


def _generic_math(record: dict, line: int, source_id: str) -> MathCandidate | Candidate:
    """A generic record of type `math`, as the pool exports one: a problem (`message`) with
    its gold answer (`output` or `outputs`) and no program (a labeled problem), or with the
    program whose `f()` computes the answer (a proposed one: the program runs again, and a
    given answer must be what it returns)."""
    message = _string(record, "message", "")
    if not message.strip():
        raise ValueError("a math record needs a non-empty 'message' (the problem)")
    outputs = record.get("outputs", [record.get("output")])
    if not isinstance(outputs, list) or len(outputs) != 1:
        raise ValueError("a math record has one gold answer: 'output' (or 'outputs')")
    if any(str(record.get(name) or "").strip() for name in ("program", "code", "snippet")):
        if outputs[0] is not None and not isinstance(outputs[0], str):
            raise ValueError("field 'output' must be text")
        return Candidate(line, source_id, "math", _program(record), ("",), (outputs[0],), message)
    if not isinstance(outputs[0], str) or not outputs[0].strip():
        raise ValueError("a math record without a program needs its gold answer as text")
    return MathCandidate(line, source_id, message.strip(), outputs[0].strip())


def _program(record: dict) -> str:
    for name in ("program", "code", "snippet"):
        if name in record:
            program = _string(record, name, None)
            break
    else:
        raise ValueError(
            "neither a program (fields 'program', 'code' or 'snippet') nor a math problem "
            "(GSM8K 'question' and 'answer', MATH-500 'problem' and 'answer' or 'solution')"
        )
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


def guess_format(path: Path) -> str:
    """A name for the report: what the file's first record looks like."""
    for _, record in read_records(path):
        if isinstance(record, Reject):
            continue
        if "code" in record and "test_list" in record:
            return "mbpp"
        if fmt := math_format(record):
            return fmt
        if record.get("type") == "math":
            return "generic_math"
        if "code" in record and "input" in record:
            return "cruxeval"
        if "snippet" in record:
            return "azr_induction" if "inputs" in record else "azr_triplets"
        return "generic"
    return "empty"
