"""Validation of proposed (program, input) cases: is this a real, deterministic program run?

A case is valid when the program parses, passes the policy, defines `f`, the input is an
argument list (literal, unless the caller asks for expression inputs), and `f(input)` returns a
canonical value within the limits, in a fresh run. Every run starts from the same state (a fresh
namespace in a child of the worker's zygote, `random` reseeded, the clock refused), so what can
still differ between two runs is what differs between two processes: the hash seed (the order of
a set of strings) and memory addresses (a default `repr` or `hash`). A case that can reach
either (a set display or a word of `reruns.PROCESS_WORDS`, such as `set`, `hash`, `object`,
`class` or a dict view's `keys`: `CompiledProgram.rerun`; an input holding a set:
`CompiledInput.rerun`; an output that shows an address, `0x...`: `_shows_address`) runs a second
time, on another worker with another hash seed, and is valid when both runs return the same
canonical output. Every case runs once, spread over all workers; the survivors that need it run
again, so that a failing case costs one run and so does one that cannot differ (93% of
CRUXEval's literal-input cases: validation ~20% faster; `executor.always_rerun` reruns every
case; `docs/executor.md`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

from selfplay.executor.policy import CompiledInput, PolicyRejection
from selfplay.executor.runner import RunResult
from selfplay.types import Verdict

__all__ = ["validate_cases"]


#: Cases compiled between two looks at the workers, and the fewest runs worth a batch of their
#: own while compilation goes on: in the calling process, or in the compile helpers, which
#: keep every core busy, so that runs started early only compete with them, while each batch
#: costs a round trip and at least one sandbox child (~2-4 ms of CPU): CRUXEval's 788
#: validations on 2 cores went from 0.97x to 1.06x AZR's rate with the larger batches, and
#: without helpers from 0.82x to 0.77x (`benchmarks/executor_bench.py`).
_CHUNK = 32
_MIN_BATCH = 128
_MIN_BATCH_HELPED = 512


class _Ready(NamedTuple):
    """A case that passed the policy, waiting for its runs."""

    case: int  # its index in the caller's list
    program: str
    call: CompiledInput
    rerun: bool  # a second run, unless its first fails (or shows an address: `_shows_address`)


def validate_cases(executor, cases: Sequence[tuple[str, str]], mode: str) -> list[Verdict]:
    """Compilation (trusted side) and the runs (sandbox) overlap: every `_CHUNK` cases, idle
    workers get the runs queued for them, first runs and second runs of cases whose first run
    succeeded alike. While compiling goes on a batch is a whole number of sandbox children's
    worth of runs (`runs_per_child`, at least `_MIN_BATCH`, `_MIN_BATCH_HELPED` while the
    compile helpers work): a worker forks a child per batch
    and per `runs_per_child` runs, and a child costs about as much as a hundred short runs,
    so splitting the work into more batches than children must not add any. In a large
    validation the compile helpers (`compiler.py`) compile the chunks ahead of this loop, which
    then finds every chunk's results in the executor's caches. Once everything is compiled a
    batch is at most one child's worth of runs, so that a worker that finishes early gets the
    second runs of its peer's first batch instead of waiting for the peer's whole share, and
    the cases whose runs are back are judged, a chunk at a time, while the workers run (judging
    after the last run left a core idle: CRUXEval's 788 validations took ~3% less time)."""
    verdicts: list[Verdict | None] = [None] * len(cases)
    ready: list[_Ready] = []
    pool, n, cpu = executor.pool, executor.pool.size, executor.config.run_timeout_s
    per_child = max(1, executor.config.runs_per_child)
    always = executor.config.always_rerun
    queued: dict[int, list[tuple[int, int]]] = {w: [] for w in range(n)}  # (case, round)
    in_flight: dict[int, list[tuple[int, int]]] = {}
    results: tuple[dict[int, RunResult], dict[int, RunResult]] = ({}, {})
    complete: list[int] = []  # cases whose runs are all back, in that order
    judged = 0  # how many of them have their verdict

    def dispatch(unit: int, most: int | None = None) -> None:
        """Idle workers get their queued runs, a multiple of `unit` of them, at most `most`."""
        jobs = {}
        for worker, runs in queued.items():
            size = min(len(runs) // unit * unit, most or len(runs))
            if size and worker not in in_flight:
                items = [(ready[k].program, ready[k].call, cpu, None) for k, _ in runs[:size]]
                jobs[worker] = executor.batch(items)
                in_flight[worker], queued[worker] = runs[:size], runs[size:]
        pool.submit(jobs)

    def take(finished: dict[int, list[RunResult]]) -> None:
        for worker, batch in finished.items():
            for (k, second), result in zip(in_flight.pop(worker), batch, strict=True):
                results[second][k] = result
                if not second and result.ok and (ready[k].rerun or _shows_address(result.output)):
                    queued[(k + 1) % n].append((k, 1))  # the second run, on another worker
                else:
                    complete.append(k)

    def judge(count: int) -> None:
        nonlocal judged
        for k in complete[judged : judged + count]:
            case, call = ready[k].case, ready[k].call
            verdicts[case] = _judge(executor, call.text, results[0][k], results[1].get(k))
        judged = min(len(complete), judged + count)

    ahead = executor.precompile(cases, mode, _CHUNK)  # compile helpers, ahead of this loop
    try:
        fewest = _MIN_BATCH if ahead is None else _MIN_BATCH_HELPED
        unit = per_child * -(-fewest // per_child)
        for start in range(0, len(cases), _CHUNK):
            if ahead is not None:
                while pool.busy and not ahead.done(start // _CHUNK):
                    take(pool.collect(0.002))  # the sandbox's results while the helpers compile
                    dispatch(unit)
                ahead.wait(start // _CHUNK)
            for i in range(start, min(start + _CHUNK, len(cases))):
                program, input_text = cases[i]
                compiled = executor.compile(program)
                call = (
                    compiled
                    if isinstance(compiled, PolicyRejection)
                    else executor.compile_input(input_text, mode)
                )
                if isinstance(call, PolicyRejection):
                    verdicts[i] = Verdict(False, call.reason, detail=call.detail)
                else:
                    queued[len(ready) % n].append((len(ready), 0))
                    rerun = always or compiled.rerun or call.rerun  # can the runs differ?
                    ready.append(_Ready(i, program, call, rerun))
            take(pool.collect(0))
            dispatch(unit)
        while in_flight or any(queued.values()):
            dispatch(1, per_child)
            finished = pool.collect(0)
            while not finished and judged < len(complete):
                judge(_CHUNK)  # while the workers run, a slice at a time
                finished = pool.collect(0)
            take(finished or pool.collect(None))
    finally:
        if ahead is not None:
            ahead.cancel()
        while pool.busy:  # after an exception: leave no batch pending for the next caller
            pool.collect(None)
    judge(len(complete))
    return verdicts


def _shows_address(output: str | None) -> bool:
    """A default `repr` (`<map object at 0x7f...>`), in either case (`.upper()`)."""
    return output is not None and ("0x" in output or "0X" in output)


def _judge(executor, input_text: str, a: RunResult, b: RunResult | None) -> Verdict:
    """The verdict of a case from its first run and its second (None where it had none)."""
    if not a.ok:
        return Verdict(False, a.reason, input=input_text, cpu_s=a.cpu_s, detail=a.detail)
    if b is None:  # one run tells all (see the module's docstring)
        output = executor.recanonical(a.output)
        if output is None:
            return Verdict(False, "crash:protocol", input=input_text, detail="unparseable output")
        return Verdict(True, "ok", output=output, input=input_text, cpu_s=a.cpu_s)
    cpu = max(a.cpu_s, b.cpu_s)
    if not b.ok:
        if b.reason in ("timeout", "crash:worker", "memory", "input:timeout", "input:memory"):
            return Verdict(False, b.reason, input=input_text, cpu_s=cpu, detail=b.detail)
        detail = f"first run returned, second failed with {b.reason}: {b.detail}"
        return Verdict(False, "nondeterministic", input=input_text, cpu_s=cpu, detail=detail)
    out_a = executor.recanonical(a.output)
    out_b = out_a if b.output == a.output else executor.recanonical(b.output)  # same text
    if out_a is None or out_b is None:
        return Verdict(False, "crash:protocol", input=input_text, detail="unparseable output")
    if out_a != out_b:
        detail = f"outputs differ between hash seeds: {out_a[:80]} vs {out_b[:80]}"
        return Verdict(False, "nondeterministic", input=input_text, cpu_s=cpu, detail=detail)
    return Verdict(True, "ok", output=out_a, input=input_text, cpu_s=cpu)
