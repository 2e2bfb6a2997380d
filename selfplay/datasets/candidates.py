"""What a data-set record becomes before the executor sees it: a task to validate
(`Candidate`), a labeled math problem (`MathCandidate`) or a counted rejection (`Reject`).

The readers of each format (`seeds.py`, `mbpp.py`) make them and the importer consumes them;
they live here so that neither reader imports the other for them.
"""

from __future__ import annotations

from dataclasses import dataclass


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
class MathCandidate:
    """A labeled math problem: no program, its gold answer (LaTeX) is checked by the math
    checker instead of computed by the executor."""

    line: int
    source_id: str
    problem: str
    gold: str
    type: str = "math"


@dataclass(frozen=True)
class Reject:
    """A record or candidate that did not become a task, and why."""

    line: int
    source_id: str
    type: str | None
    reason: str
    detail: str = ""
