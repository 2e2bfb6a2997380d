"""Where the external data sets live and how to read them.

The data sets (CRUXEval, HumanEval, MBPP, MATH-500, GSM8K, AZR seed pools) are never copied
into the project. They are read from `$SELFPLAY_DATA`, or by default from `shared/data` beside
the repository (`<repo>/../shared/data`). The executor's commands, the pool's importers, the
evaluation and the labeled sets all read through this module, which imports nothing else of
the project. It also trims a run's JSONL logs on resume (`keep_steps`).
"""

from __future__ import annotations

import gzip
import json
import math
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

DATA_ENV = "SELFPLAY_DATA"


def data_root() -> Path:
    """The folder holding one sub-folder per data set."""
    override = os.environ.get(DATA_ENV)
    if override:
        return Path(override)
    return Path(__file__).resolve().parents[2] / "shared" / "data"


class DataError(ValueError):
    """A data file that does not hold what it should (a broken line, a missing field)."""


@dataclass(frozen=True)
class BadLine:
    """A line of a JSONL file that is not a JSON object."""

    line: int
    error: str


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict | BadLine]]:
    """(line number, record) per non-blank line; a broken line yields a `BadLine`, not an error.

    Reads `.gz` files transparently; `-` is standard input.
    """
    if str(path) == "-":
        yield from _parse_lines(sys.stdin)
        return
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8", errors="replace") as stream:
        yield from _parse_lines(stream)


def _parse_lines(stream) -> Iterator[tuple[int, dict | BadLine]]:
    for number, line in enumerate(stream, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as err:
            yield number, BadLine(number, f"not JSON: {err}")
            continue
        if isinstance(record, dict):
            yield number, record
        else:
            yield number, BadLine(number, "a record must be a JSON object")


def records(path: str | Path) -> list[dict]:
    """All records of a JSONL file; raises `DataError` naming the first broken line."""
    out = []
    for number, record in read_jsonl(path):
        if isinstance(record, BadLine):
            raise DataError(f"{path}:{number}: {record.error}")
        out.append(record)
    return out


def keep_steps(path: Path, step: int) -> None:
    """Keep only the lines of a run's JSONL log whose `step` is <= `step` (and drop a
    half-written last line): what a resumed run does to the logs of the steps it runs again."""
    if not path.exists():
        return
    kept = []
    for line in path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and record.get("step", math.inf) <= step:
            kept.append(line)
    tmp = path.with_suffix(".tmp")
    tmp.write_text("".join(line + "\n" for line in kept))
    os.replace(tmp, path)
