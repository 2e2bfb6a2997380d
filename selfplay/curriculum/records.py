"""Records the task pool takes and gives: provenance, pool tasks, attempts, solver batches."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, get_args

from selfplay.curriculum.difficulty import Estimate
from selfplay.types import Task, Verdict

# Where a task came from (see `Provenance`); the one list of origins the pool knows.
Origin = Literal["proposed", "seed", "labeled"]
ORIGINS: tuple[Origin, ...] = get_args(Origin)


@dataclass(frozen=True)
class Provenance:
    """Where a task came from.

    origin: `proposed` (written by the model during a run), `seed` (imported, e.g. AZR seeds)
    or `labeled` (an imported set that anchors a semi-supervised run).
    references: ids of the pool tasks the proposer was shown when it wrote this one.
    """

    origin: Origin = "proposed"
    step: int = 0
    model_version: str = ""
    source: str = ""  # "proposer", or the imported file's name
    source_id: str = ""  # the record's id or line in that source
    references: tuple[int, ...] = ()


@dataclass(frozen=True)
class PoolTask:
    """A task as the pool holds it."""

    id: int
    task: Task
    hash: str
    provenance: Provenance
    estimate: Estimate | None = None


@dataclass(frozen=True)
class AddResult:
    """Ids of the added tasks, in input order; `added[i]` is False for a duplicate.
    `relabeled`: the duplicates held as `seed` or `proposed` that came with origin `labeled`
    and are labeled now (ids, ascending)."""

    ids: tuple[int, ...]
    added: tuple[bool, ...]
    relabeled: tuple[int, ...] = ()

    @property
    def n_added(self) -> int:
        return sum(self.added)

    @property
    def n_duplicates(self) -> int:
        return len(self.added) - self.n_added


@dataclass(frozen=True)
class TaskAttempts:
    """n answers to one task in one step, `correct` of them verified correct."""

    task_id: int
    n: int
    correct: int


@dataclass(frozen=True)
class RecordResult:
    recorded: int  # (task, step, model version) keys written now
    already_recorded: int  # keys that were there before (a replayed step): ignored


@dataclass(frozen=True)
class SolverBatch:
    """A frontier draw: the tasks and numbers about how they were chosen."""

    tasks: tuple[PoolTask, ...]
    step: int
    requested: int
    metrics: dict[str, float]
    selection: object = None  # the `Selection` applied to the draw (curriculum.selection=trapo)

    def __len__(self) -> int:
        return len(self.tasks)


def content_hash(task: Task) -> str:
    """What defines a task for the solver, hashed: the first 128 bits of its SHA-256, in hex.
    Equal hashes are duplicates in a run; 128 bits make an accidental collision among a
    billion tasks a 1-in-10^20 event, and keep the dedup index small.

    Line endings and trailing blanks of the program and message are normalised; inputs and
    outputs are already canonical text (the executor's), so equal values hash equally.
    """
    parts = [
        task.type,
        _normalise(task.program),
        str(len(task.inputs)),
        *task.inputs,
        *task.outputs,
        _normalise(task.message),
        str(task.n_visible if task.type == "induction" else 0),
    ]
    # Each part is prefixed by its length, so no two different tasks give the same text.
    blob = "".join(f"{len(part)}:{part}" for part in parts)
    return hashlib.sha256(blob.encode("utf-8", "surrogatepass")).hexdigest()[:32]


def _normalise(text: str) -> str:
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    return "\n".join(line.rstrip() for line in lines).strip("\n")


def verification_record(verdicts: Sequence[Verdict], isolation: dict | None = None) -> dict:
    """What the store keeps of a task's validation: one entry per validated case."""
    return {
        "ok": all(v.ok for v in verdicts),
        "validated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "cpu_s": max((v.cpu_s for v in verdicts), default=0.0),
        "cases": len(verdicts),
        "reasons": sorted({v.reason for v in verdicts}),
        "isolation": dict(isolation or {}),
    }
