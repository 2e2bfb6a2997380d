"""The records passed between stages are frozen and plain: no stage can change a record it was
given, and every record can be pickled and sent to another process."""

from __future__ import annotations

import dataclasses
import inspect
import pickle
import typing

import pytest

from selfplay import types
from selfplay.types import (
    Answer,
    Attempted,
    Judged,
    ParseFailure,
    Proposal,
    Proposed,
    Rollout,
    Stored,
    Task,
    Validated,
    Verdict,
)

RECORDS = [
    cls for _, cls in inspect.getmembers(types, inspect.isclass) if cls.__module__ == types.__name__
]


def test_every_record_is_a_frozen_dataclass():
    assert {Proposed, Validated, Stored, Attempted, Judged, Rollout} <= set(RECORDS)
    for cls in RECORDS:
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls


def _containers(hint) -> set:
    """The container types a type hint names, however deeply nested."""
    origin = typing.get_origin(hint)
    found = {origin or hint} & {list, dict, set}
    for arg in typing.get_args(hint):
        found |= _containers(arg)
    return found


@pytest.mark.parametrize("cls", RECORDS, ids=lambda cls: cls.__name__)
def test_no_record_holds_a_mutable_container(cls):
    for name, hint in typing.get_type_hints(cls).items():
        assert not _containers(hint), (cls, name)


def step_records() -> list:
    """One record of each stage's output, chained as a step chains them."""
    task = Task("deduction", "def f(a):\n    return a", ("1",), ("1",))
    proposed = Proposed(
        "deduction", 0, (1, 2), (3,), (-0.5,), (7,), Proposal(task.type, task.program, task.inputs)
    )
    validated = Validated(proposed, (Verdict(True, output="1", input="1"),), task)
    stored = Stored(validated, 8, True)
    malformed = Stored(Validated(dataclasses.replace(proposed, parsed=ParseFailure("no_input"))))
    attempted = Attempted(8, task, "train", 0, (1,), (2,), (-0.1,), Answer("deduction", "1"))
    judged = Judged(attempted, Verdict(True, score=1.0))
    rollout = Rollout("solve", "deduction", 1, (1,), (2,), (-0.1,), 1.0, advantage=0.5)
    return [proposed, validated, stored, malformed, attempted, judged, rollout]


def test_records_round_trip_through_pickle_and_refuse_changes():
    for record in step_records():
        assert pickle.loads(pickle.dumps(record)) == record
        field = dataclasses.fields(record)[0].name
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(record, field, None)
    stored, malformed, judged = step_records()[2], step_records()[3], step_records()[5]
    assert (stored.outcome, malformed.outcome, judged.outcome) == ("valid", "malformed", "correct")
