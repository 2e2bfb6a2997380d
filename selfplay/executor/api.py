"""`Executor`: the one object the rest of the system uses to validate tasks and verify answers."""

from __future__ import annotations

import dataclasses
import functools
import marshal
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence

from selfplay.config import ExecutorConfig
from selfplay.executor import values
from selfplay.executor.compiler import Compilers
from selfplay.executor.policy import (
    INPUT_MODES,
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

#: the fewest programs to compile in one batch for which the helpers are used
_HELPED_CASES = 64


class _Cache:
    """A least-recently-used map that can also be filled from outside (the compile helpers'
    results go in just before they are looked up), which `functools.lru_cache` cannot."""

    def __init__(self, size: int):
        self.size = size
        self.items: OrderedDict = OrderedDict()
        self.lock = threading.Lock()  # as lru_cache, safe for executors used from threads

    def get(self, key):
        with self.lock:
            value = self.items.get(key)
            if value is not None:
                self.items.move_to_end(key)
            return value

    def put(self, key, value) -> None:
        with self.lock:
            self.items[key] = value
            self.items.move_to_end(key)
            if len(self.items) > self.size:
                self.items.popitem(last=False)


_PROGRAMS = _Cache(8192)  # (source, max chars, extra modules): CompiledProgram | PolicyRejection
_INPUTS = _Cache(16384)  # (text, mode, limits): CompiledInput | PolicyRejection


@functools.lru_cache(maxsize=16384)
def _marshal_code(code) -> bytes:
    return marshal.dumps(code)


class _Ahead:
    """Chunks the compile helpers are compiling ahead of the caller."""

    def __init__(self, executor: Executor, futures: list, mode: str):
        self.executor, self.futures, self.mode = executor, futures, mode

    def done(self, k: int) -> bool:
        return self.futures[k].done()

    def cancel(self) -> None:
        """Chunks not started yet are dropped (the caller stopped early)."""
        for future in self.futures:
            future.cancel()

    def wait(self, k: int) -> None:
        """Wait for chunk `k` and put its results in the caches, where the caller's usual
        compile calls find them; a chunk whose helper failed is left to the caller."""
        future = self.futures[k]
        prepared = None if future.cancelled() else future.result()
        if prepared is None:
            return
        compiled, calls = prepared
        for source, result in compiled.items():
            _PROGRAMS.put(self.executor.program_key(source), result)
        for text, result in calls.items():
            _INPUTS.put(self.executor.input_key(text, self.mode), result)


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
        helpers = c.compilers if c.compilers >= 0 else len(os.sched_getaffinity(0))
        self.compilers = Compilers(helpers) if helpers else None

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
        if self.compilers is not None:
            self.compilers.close()

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- helpers for validate.py and verify.py --------------------------------------------------

    def program_key(self, source: str) -> tuple:
        """A program's key in the caches: its text and the settings its compilation reads."""
        return (source, self.config.max_program_chars, self.config.extra_modules)

    def input_key(self, text: str, mode: str) -> tuple:
        return (text, mode, self.limits)

    def compile(self, source: str) -> CompiledProgram | PolicyRejection:
        if not isinstance(source, str):
            return PolicyRejection("syntax", f"a program must be text, not {type(source).__name__}")
        key = self.program_key(source)
        compiled = _PROGRAMS.get(key)
        if compiled is None:
            compiled = compile_program(*key)
            _PROGRAMS.put(key, compiled)
        return compiled

    def marshalled(self, source: str) -> bytes:
        compiled = self.compile(source)
        assert isinstance(compiled, CompiledProgram), "only compiled programs go to workers"
        return compiled.marshalled

    def recanonical(self, text: str | None) -> str | None:
        """Canonical text re-derived from what a worker wrote (workers are not trusted)."""
        if text is None:
            return None
        try:
            return values.canonical_from_text(text, self.limits)
        except values.ValueRejected:
            return None

    def compile_input(self, text: str, mode: str) -> CompiledInput | PolicyRejection:
        key = self.input_key(text, mode)
        compiled = _INPUTS.get(key)
        if compiled is None:
            compiled = compile_input(*key)
            _INPUTS.put(key, compiled)
        return compiled

    def precompile(self, cases: Sequence[tuple[str, str]], mode: str, chunk: int) -> _Ahead | None:
        """The helpers start compiling the cases, `chunk` at a time (programs and inputs not
        cached yet); None when the batch is too small to be worth it or there are none."""
        if self.compilers is None or len(cases) < _HELPED_CASES or mode not in INPUT_MODES:
            return None
        c = self.config
        settings = (c.max_program_chars, c.extra_modules, mode, dataclasses.astuple(self.limits))
        programs_seen: set[str] = set()
        inputs_seen: set[str] = set()
        chunks = []
        for start in range(0, len(cases), chunk):
            programs, inputs = [], []
            for program, text in cases[start : start + chunk]:
                if type(program) is not str or type(text) is not str:
                    continue  # the caller refuses these (marshal would refuse a subclass)
                known = program in programs_seen or _PROGRAMS.get(self.program_key(program))
                if not known:
                    programs_seen.add(program)
                    programs.append(program)
                if text not in inputs_seen and _INPUTS.get(self.input_key(text, mode)) is None:
                    inputs_seen.add(text)
                    inputs.append(text)
            chunks.append((programs, inputs))
        if sum(len(p) for p, _ in chunks) < _HELPED_CASES:
            return None
        return _Ahead(self, self.compilers.prepare(chunks, settings), mode)

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
