"""Small task factories shared by the pool tests."""

from __future__ import annotations

from selfplay.types import Task


def task(i: int, kind: str = "deduction") -> Task:
    program = f"def f(x):\n    return x * {i} + {i % 7}"
    if kind == "induction":
        inputs = ("1", "2", "3")
        return Task(
            kind,
            program,
            inputs,
            tuple(str(int(x) * i + i % 7) for x in inputs),
            "linear",
            n_visible=2,
        )
    return Task(kind, program, ("3",), (str(3 * i + i % 7),))
