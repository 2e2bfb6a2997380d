"""Export of a pool: JSONL, Parquet, or a folder that `datasets.load_from_disk` reads.

One record per task, in task id order (the order they entered the pool), with the task, its
full provenance and its difficulty estimates at the export step:

  id ("run/task id"), task_id, run, hash, type, program, inputs, outputs, message, n_visible,
  cpu_s, origin, source, source_id, step, model_version, created_at, references (content
  hashes of the tasks the proposer was shown: they identify tasks across pools),
  reference_ids, verification (the validation record, as JSON text), guessable (whether a
  stock input solves the abduction task; null where not judged), n_answers, n_correct,
  p, posterior_mean, effective_answers, irt_p, difficulty, difficulty_sd, ability,
  estimated_at_step

Filters: types, origins, a range of the estimated solve rate p, a minimum number of answers,
and `verified_only` (tasks whose stored validation record says the executor accepted them).
A proposed task that reproduces a benchmark's program (`ExportFilter.benchmarks`, see
`contamination.py`; `selfplay pool export` checks CRUXEval, HumanEval and MBPP) is never
exported: a run keeps such proposals out of its pool, and a pool from before it did is
cleaned here. Imported tasks (seeds, labeled sets) are exported as imported.
The JSONL form is the generic seed format, so an export imports back (`selfplay pool import`).
"""

from __future__ import annotations

import glob
import json
import os
import re
import secrets
import shutil
import socket
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from selfplay.curriculum import reads
from selfplay.curriculum.records import ORIGINS
from selfplay.datasets.contamination import BenchmarkPrograms
from selfplay.files import process_runs
from selfplay.types import TASK_TYPES

FORMATS = ("jsonl", "parquet", "hf")
CHUNK = 2000


@dataclass(frozen=True)
class ExportFilter:
    types: tuple[str, ...] = ()  # empty: all
    origins: tuple[str, ...] = ()
    min_p: float = 0.0
    max_p: float = 1.0
    min_answers: int = 0
    verified_only: bool = False
    benchmarks: BenchmarkPrograms | None = None  # proposed tasks matching one are left out

    def __post_init__(self) -> None:
        for name, values, known in (
            ("type", self.types, TASK_TYPES),
            ("origin", self.origins, ORIGINS),
        ):
            unknown = sorted(set(values) - set(known))
            if unknown:
                raise ValueError(f"unknown {name} {unknown[0]!r}; know {', '.join(known)}")
        if not 0 <= self.min_p <= self.max_p <= 1:
            raise ValueError("need 0 <= min_p <= max_p <= 1")


def selected_positions(store, flt: ExportFilter, step: int) -> np.ndarray:
    """Index positions of the tasks that pass the filter's numeric parts, in id order."""
    ix = store.index
    keep = np.ones(len(ix), dtype=bool)
    if flt.types:
        keep &= np.isin(ix["type"], [TASK_TYPES.index(t) for t in flt.types])
    if flt.origins:
        keep &= np.isin(ix["origin"], [ORIGINS.index(o) for o in flt.origins])
    p, _ = store.solve_rates(step)
    keep &= (p >= flt.min_p) & (p <= flt.max_p) & (ix["n_answers"] >= flt.min_answers)
    return np.flatnonzero(keep)


def records(store, flt: ExportFilter, step: int | None = None) -> Iterator[dict]:
    """The export records, in task id order."""
    step = store.last_step if step is None else step
    positions = selected_positions(store, flt, step)
    ids = store.index["id"]
    for start in range(0, len(positions), CHUNK):
        chunk = positions[start : start + CHUNK]
        task_ids = ids[chunk].tolist()
        rows, refs = reads.load_rows(store.engine, task_ids, full=True)
        ref_hashes = _hashes(store, {r for v in refs.values() for r in v})
        for task_id, estimate in zip(task_ids, store.estimates(task_ids, step), strict=True):
            row = rows[task_id]
            if flt.verified_only and not (row.verification or {}).get("ok"):
                continue
            if flt.benchmarks and row.origin == "proposed" and flt.benchmarks.match(row.program):
                continue
            yield _record(store, row, refs.get(task_id, ()), ref_hashes, estimate, step)


def _hashes(store, ids: set[int]) -> dict[int, str]:
    if not ids:
        return {}
    rows, _ = reads.load_rows(store.engine, sorted(ids))
    return {i: r.hash for i, r in rows.items()}


def _record(store, row, refs, ref_hashes, e, step: int) -> dict:
    return {
        "id": f"{store.run}/{row.id}",
        "task_id": row.id,
        "run": store.run,
        "hash": row.hash,
        "type": row.type,
        "program": row.program,
        "inputs": list(row.inputs),
        "outputs": list(row.outputs),
        "message": row.message,
        "n_visible": row.n_visible,
        "cpu_s": row.cpu_s,
        "origin": row.origin,
        "source": row.source,
        "source_id": row.source_id,
        "step": row.step,
        "model_version": row.model_version,
        "created_at": row.created_at.isoformat() if row.created_at else None,
        "references": [ref_hashes[r] for r in refs],
        "reference_ids": list(refs),
        "verification": json.dumps(row.verification, sort_keys=True),
        "guessable": row.guessable,
        "n_answers": e.n_answers,
        "n_correct": e.n_correct,
        "p": e.p,
        "posterior_mean": e.posterior_mean,
        "effective_answers": e.effective_answers,
        "irt_p": e.irt_p,
        "difficulty": e.difficulty,
        "difficulty_sd": e.difficulty_sd,
        "ability": e.ability,
        "estimated_at_step": step,
    }


def arrow_schema():
    import pyarrow as pa

    text, ints, floats = pa.string(), pa.int64(), pa.float64()
    fields = {
        "id": text,
        "task_id": ints,
        "run": text,
        "hash": text,
        "type": text,
        "program": text,
        "inputs": pa.list_(text),
        "outputs": pa.list_(text),
        "message": text,
        "n_visible": ints,
        "cpu_s": floats,
        "origin": text,
        "source": text,
        "source_id": text,
        "step": ints,
        "model_version": text,
        "created_at": text,
        "references": pa.list_(text),
        "reference_ids": pa.list_(ints),
        "verification": text,
        "guessable": pa.bool_(),
        "n_answers": ints,
        "n_correct": ints,
        "p": floats,
        "posterior_mean": floats,
        "effective_answers": floats,
        "irt_p": floats,
        "difficulty": floats,
        "difficulty_sd": floats,
        "ability": floats,
        "estimated_at_step": ints,
    }
    return pa.schema(list(fields.items()))


def export(
    store,
    fmt: str,
    out: str | Path,
    flt: ExportFilter,
    step: int | None = None,
    *,
    force: bool = False,
) -> int:
    """Write the filtered pool to `out` in `fmt`; returns the number of tasks written.

    The export goes to a temporary sibling of `out` that replaces it only once complete: an
    interrupted export leaves no truncated file that looks whole (a JSONL prefix, a Parquet
    file with fewer rows), and nothing of an earlier `out`'s is lost. What a killed export of
    the same `out` left behind is removed first. An existing `out` is refused unless `force`."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; know {FORMATS}")
    out = Path(out)
    refuse_existing(out, force)
    out.parent.mkdir(parents=True, exist_ok=True)
    items = records(store, flt, step)
    _remove_stale_partials(out)
    partial = out.with_name(f".{out.name}.{_host()}.{os.getpid()}.{secrets.token_hex(4)}.partial")
    try:
        if fmt == "jsonl":
            count = _jsonl(items, partial)
        elif fmt == "parquet":
            count = _parquet(items, partial)
        else:
            count = _hf(items, partial)
        _replace(partial, out)
    except BaseException:
        _remove(partial)
        raise
    return count


def refuse_existing(out: str | Path, force: bool) -> None:
    """An export replaces no file or folder unasked: an hf folder would get the dataset's
    files beside the user's own, a file would be overwritten."""
    if not force and (Path(out).exists() or Path(out).is_symlink()):
        raise FileExistsError(f"{out} exists: choose another --out, or pass --force to replace it")


def _replace(partial: Path, out: Path) -> None:
    """Put the complete export in `out`'s place. A folder (hf) cannot replace another in one
    step: the old one is moved aside first and removed once the new one is in place."""
    if not partial.is_dir() or not out.is_dir():
        os.replace(partial, out)
        return
    old = partial.with_name(partial.name + ".old")
    os.replace(out, old)
    try:
        os.replace(partial, out)
    except BaseException:
        os.replace(old, out)
        raise
    _remove(old)


def _host() -> str:
    """This machine's name as it may appear in a file name (no dots: they separate the parts)."""
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in socket.gethostname()) or "host"


def _remove_stale_partials(out: Path) -> None:
    """Remove what an export of `out` killed on this machine (SIGKILL, a power cut) left: its
    `.partial` sibling, named by the host and process that wrote it. One whose process still
    runs, or that another machine wrote (a shared file system), is left alone; so is a moved-
    aside earlier `out` (`.partial.old`) while `out` is missing: it is then the only copy."""
    name = re.compile(
        rf"\.{re.escape(out.name)}\.{re.escape(_host())}\.(\d+)\.[0-9a-f]{{8}}\.partial(\.old)?"
    )
    for path in out.parent.glob(f".{glob.escape(out.name)}.*.partial*"):
        match = name.fullmatch(path.name)
        if not match or process_runs(int(match[1])):
            continue
        if not match[2] or out.exists():
            _remove(path)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def _jsonl(items, out: Path) -> int:
    count = 0
    with out.open("x", encoding="utf-8") as stream:
        for record in items:
            stream.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
    return count


def _batches(items: Iterator[dict]):
    import pyarrow as pa

    schema, batch = arrow_schema(), []
    for record in items:
        batch.append(record)
        if len(batch) >= CHUNK:
            yield pa.Table.from_pylist(batch, schema=schema)
            batch = []
    yield pa.Table.from_pylist(batch, schema=schema)


def _parquet(items, out: Path) -> int:
    import pyarrow.parquet as pq

    count = 0
    with pq.ParquetWriter(out, arrow_schema()) as writer:
        for table in _batches(items):
            writer.write_table(table)
            count += table.num_rows
    return count


def _hf(items, out: Path) -> int:
    try:
        import datasets
    except ModuleNotFoundError:
        raise RuntimeError(
            "--format hf needs the `datasets` package: pip install 'selfplay[hf]'"
        ) from None
    import pyarrow as pa

    table = pa.concat_tables(list(_batches(items)))
    out.mkdir()
    datasets.Dataset(datasets.table.InMemoryTable(table)).save_to_disk(str(out))
    return table.num_rows
