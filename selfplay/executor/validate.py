"""Validation of proposed (program, input) cases: is this a real, deterministic program run?

A case is valid when the program parses, passes the policy, defines `f`, the input is an
argument list (literal, unless the caller asks for expression inputs), and `f(input)` returns a
canonical value within the limits, twice, in two processes with different hash seeds, with the
same canonical output. Round one runs every case once, spread over all workers; round two runs
the survivors again, each on a different worker than its first run, so that a failing case
costs one run.
"""

from __future__ import annotations

from collections.abc import Sequence

from selfplay.executor.policy import CompiledInput, PolicyRejection
from selfplay.executor.runner import RunResult
from selfplay.types import Verdict

__all__ = ["validate_cases"]


def validate_cases(executor, cases: Sequence[tuple[str, str]], mode: str) -> list[Verdict]:
    verdicts: list[Verdict | None] = [None] * len(cases)
    ready: list[tuple[int, str, CompiledInput]] = []
    for i, (program, input_text) in enumerate(cases):
        compiled = executor.compile(program)
        call = (
            compiled
            if isinstance(compiled, PolicyRejection)
            else executor.compile_input(input_text, mode)
        )
        if isinstance(call, PolicyRejection):
            verdicts[i] = Verdict(False, call.reason, detail=call.detail)
        else:
            ready.append((i, program, call))
    n = executor.pool.size
    cpu = executor.config.run_timeout_s
    first = executor.run_items(
        [(src, call, k % n, cpu, None) for k, (_, src, call) in enumerate(ready)]
    )
    again = [k for k, result in enumerate(first) if result.ok]
    second = executor.run_items([(ready[k][1], ready[k][2], (k + 1) % n, cpu, None) for k in again])
    second_of = dict(zip(again, second, strict=True))
    for k, (case, _, call) in enumerate(ready):
        verdicts[case] = _judge(executor, call.text, first[k], second_of.get(k))
    return verdicts


def _judge(executor, input_text: str, a: RunResult, b: RunResult | None) -> Verdict:
    if not a.ok or b is None:
        return Verdict(False, a.reason, input=input_text, cpu_s=a.cpu_s, detail=a.detail)
    cpu = max(a.cpu_s, b.cpu_s)
    if not b.ok:
        if b.reason in ("timeout", "crash:worker", "memory"):
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
