"""`Executor`: the one object the rest of the system uses to validate tasks and verify answers."""

from __future__ import annotations

import functools
import marshal
from collections.abc import Sequence

from selfplay.config import ExecutorConfig
from selfplay.executor import values
from selfplay.executor.policy import (
    CompiledInput,
    CompiledProgram,
    PolicyRejection,
    compile_input,
    compile_program,
)
from selfplay.executor.runner import ProgramRun, RunResult, WorkerPool
from selfplay.executor.validate import validate_cases
from selfplay.executor.verify import verify_items
from selfplay.types import Task, Verdict

__all__ = ["Executor"]


@functools.lru_cache(maxsize=8192)
def _compile(
    source: str, max_chars: int, extra: tuple[str, ...]
) -> CompiledProgram | PolicyRejection:
    return compile_program(source, max_chars, extra)


@functools.lru_cache(maxsize=8192)
def _marshal(source: str, max_chars: int, extra: tuple[str, ...]) -> bytes:
    compiled = _compile(source, max_chars, extra)
    assert isinstance(compiled, CompiledProgram), "only compiled programs are sent to workers"
    return marshal.dumps(compiled.code)


@functools.lru_cache(maxsize=16384)
def _compile_input(text: str, mode: str, limits: values.Limits) -> CompiledInput | PolicyRejection:
    return compile_input(text, mode, limits)


@functools.lru_cache(maxsize=16384)
def _marshal_code(code) -> bytes:
    return marshal.dumps(code)


class Executor:
    """Sandboxed validation and verification; start it once, use it for many batches.

    >>> with Executor() as ex:
    ...     [v] = ex.validate([("def f(x):\\n    return sorted(x)", "[3, 1, 2]")])
    ...     v.output
    '[1, 2, 3]'
    """

    def __init__(self, config: ExecutorConfig | None = None):
        self.config = config or ExecutorConfig()
        c = self.config
        self.limits = values.Limits(
            c.max_value_chars, c.max_value_depth, c.max_value_items, c.max_int_digits
        )
        self.pool = WorkerPool(c)

    # -- the interface ---------------------------------------------------------------------------

    def validate(self, cases: Sequence[tuple[str, str]], inputs: str = "literal") -> list[Verdict]:
        """Validate (program, input) cases; `inputs` is an input mode (`policy.INPUT_MODES`)."""
        return validate_cases(self, cases, inputs)

    def verify(self, task: Task, answers: Sequence[str], inputs: str = "literal") -> list[Verdict]:
        """Verify many answers to one task; see `verify.py`."""
        return verify_items(self, [(task, answers)], inputs)[0]

    def verify_many(
        self, items: Sequence[tuple[Task, Sequence[str]]], inputs: str = "literal"
    ) -> list[list[Verdict]]:
        """Verify the answers to many tasks in one batch."""
        return verify_items(self, items, inputs)

    @property
    def isolation(self) -> dict[str, str]:
        """Status of each isolation layer, as the workers reported it."""
        return dict(self.pool.layers)

    def probe(self, paths: Sequence[str] = ()) -> dict[str, str]:
        """Escape attempts from trusted code in a hardened child, and how each was refused;
        `paths` are trusted-side files it should try (and fail) to read."""
        return self.pool.probe(list(paths))

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- helpers for validate.py and verify.py --------------------------------------------------

    def compile(self, source: str) -> CompiledProgram | PolicyRejection:
        if not isinstance(source, str):
            return PolicyRejection("syntax", f"a program must be text, not {type(source).__name__}")
        return _compile(source, self.config.max_program_chars, self.config.extra_modules)

    def marshalled(self, source: str) -> bytes:
        return _marshal(source, self.config.max_program_chars, self.config.extra_modules)

    def recanonical(self, text: str | None) -> str | None:
        """Canonical text re-derived from what a worker wrote (workers are not trusted)."""
        if text is None:
            return None
        try:
            return values.canonical_from_text(text, self.limits)
        except values.ValueRejected:
            return None

    def compile_input(self, text: str, mode: str) -> CompiledInput | PolicyRejection:
        return _compile_input(text, mode, self.limits)

    def batch(
        self, items: Sequence[tuple[str, CompiledInput, float, int | None]]
    ) -> tuple[list[bytes], list[ProgramRun]]:
        """One worker's batch of (program source, input, CPU limit, group) runs: each program
        is sent once however many runs it has."""
        programs: list[bytes] = []
        slots: dict[str, int] = {}
        runs = []
        for source, call, cpu, group in items:
            slot = slots.get(source)
            if slot is None:
                slot = slots[source] = len(programs)
                programs.append(self.marshalled(source))
            runs.append(ProgramRun(slot, _marshal_code(call.code), call.expression, cpu, group))
        return programs, runs

    def run_items(
        self, items: Sequence[tuple[str, CompiledInput, int, float, int | None]]
    ) -> list[RunResult]:
        """Run (program source, input, worker, CPU limit, group) items; results in order."""
        per_worker: dict[int, list] = {}
        positions = []
        for source, call, worker, cpu, group in items:
            runs = per_worker.setdefault(worker, [])
            positions.append((worker, len(runs)))
            runs.append((source, call, cpu, group))
        jobs = {worker: self.batch(runs) for worker, runs in per_worker.items()}
        results = self.pool.run(jobs) if items else {}
        return [results[worker][index] for worker, index in positions]
