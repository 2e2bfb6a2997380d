"""Where the external data sets live and how to read them.

The data sets (CRUXEval, HumanEval, MBPP, MATH-500, GSM8K, AZR seed pools) are never copied
into the project. They are read from `$SELFPLAY_DATA`, or by default from `shared/data` beside
the repository (`<repo>/../shared/data`). The executor's commands, the pool's importers, the
evaluation and the labeled sets all read through this module, which imports nothing else of
the project. It also trims a run's JSONL logs on resume (`keep_steps`), and tells whether the
process named in a temporary file's name still runs (`process_runs`), for the clean-ups of
what a killed process left. And it names the run folder's seeding record (`SEEDING_FILE`,
written by `selfplay.self_seed`, copied by `selfplay pool fork`).
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
#: the seeding's record in a run folder: the rounds done and their metrics (`self_seed`)
SEEDING_FILE = "seeding.json"


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
    """A line of a JSONL file that is not a JSON object of text."""

    line: int
    error: str


def read_jsonl(path: str | Path) -> Iterator[tuple[int, dict | BadLine]]:
    """(line number, record) per non-blank line; a broken line (not UTF-8, not JSON, not an
    object, or with a string that is not text: `text_error`) yields a `BadLine`, not an error,
    and the lines after it are read as usual.

    Each line is decoded on its own, strictly: a byte that is not UTF-8 (a Latin-1 `é`) makes
    its line a `BadLine`, where a replacement character would have let a changed record pass
    for a good one. Lines end at `\\n`. Reads `.gz` files transparently; `-` is standard input.
    """
    if str(path) == "-":
        yield from _parse_lines(sys.stdin.buffer)
        return
    path = Path(path)
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rb") as stream:
        yield from _parse_lines(stream)


def _parse_lines(stream) -> Iterator[tuple[int, dict | BadLine]]:
    for number, raw in enumerate(stream, start=1):
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            yield number, BadLine(number, f"not UTF-8: {err}")
            continue
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as err:
            yield number, BadLine(number, f"not JSON: {err}")
            continue
        if not isinstance(record, dict):
            yield number, BadLine(number, "a record must be a JSON object")
        elif "\\u" in line and (error := text_error(record)):  # only an escape writes one
            yield number, BadLine(number, error)
        else:
            yield number, record


def text_error(value, where: str = "the record", *, undecoded: bool = False) -> str:
    """Why a parsed JSON value is not text that can be stored, or "" when it is: a string that
    holds a lone surrogate (`"\\ud83d"`, an emoji's escape pair cut in half). JSON's `\\u`
    escapes can write one, but UTF-8 cannot encode it, so a database insert or a file write of
    the record would fail later, far from its line and with the good records written beside it.

    `undecoded`: the JSON text was decoded with `surrogateescape`, which keeps each byte that is
    not UTF-8 as a surrogate U+DC80-U+DCFF; the message names the byte."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as err:
            char = value[err.start]
            if undecoded and 0xDC80 <= ord(char) <= 0xDCFF:
                return f"{where} holds byte 0x{ord(char) - 0xDC00:02x}, which is not UTF-8"
            return f"{where} holds a lone surrogate {char!r} (half of a \\u escape pair), not text"
        return ""
    if isinstance(value, dict):
        items = [(key, f"a field name of {where}") for key in value]
        items += [(item, f"field {key!r}") for key, item in value.items()]
    else:
        items = [(item, where) for item in value] if isinstance(value, list) else []
    for item, place in items:
        if error := text_error(item, place, undecoded=undecoded):
            return error
    return ""


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


def process_runs(pid: int) -> bool:
    """Whether a process `pid` runs on this machine (whoever owns it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True
