"""Validation of many cases at once: compilation overlaps the sandbox runs, and the verdicts are
those of each case validated alone, whatever the batch sizes and however the runs are spread."""

from __future__ import annotations

import pytest

from selfplay.config import ExecutorConfig
from selfplay.executor import Executor, validate

KINDS = [
    ("def f(x):\n    return sorted(x)[::-1]", "[3, 1, 2]"),  # valid
    ("def f(x):\n    return list({str(i) for i in range(x)})", "30"),  # nondeterministic
    ("def f(x):\n    return x // 0", "1"),  # crashes
    ("import os\ndef f(x):\n    return x", "1"),  # refused by the policy
    ("def f(x):\n    return x +", "1"),  # does not parse
    ("def f(x):\n    return x", "undefined_name"),  # not a literal input
    ("def f(x):\n    while x:\n        pass", "1"),  # times out
]


def _cases(count: int) -> list[tuple[str, str]]:
    """`count` distinct cases (a comment makes each program text new), all kinds mixed."""
    out = []
    for i in range(count):
        program, input_text = KINDS[i % len(KINDS)]
        if i % len(KINDS) == len(KINDS) - 1 and i > len(KINDS):
            program, input_text = KINDS[0]  # one timeout is enough; keep the test fast
        out.append((f"{program}\n# case {i}\n", input_text))
    return out


def _summary(verdicts) -> list[tuple]:
    return [(v.ok, v.reason, v.output, v.input) for v in verdicts]


@pytest.mark.parametrize("compilers", [0, 2])
@pytest.mark.parametrize("chunk, min_batch", [(5, 4), (32, 128)])
def test_a_large_batch_judges_each_case_as_alone(monkeypatch, chunk, min_batch, compilers):
    """Small chunks and batches make workers take batches while compiling goes on (in this
    process, or in the compile helpers), and the second runs of early cases share batches with
    the first runs of later ones."""
    monkeypatch.setattr(validate, "_CHUNK", chunk)
    monkeypatch.setattr(validate, "_MIN_BATCH", min_batch)
    monkeypatch.setattr(validate, "_MIN_BATCH_HELPED", min_batch)
    cases = _cases(300)
    config = ExecutorConfig(workers=3, runs_per_child=7, run_timeout_s=0.2, compilers=compilers)
    with Executor(config) as ex:
        together = _summary(ex.validate(cases))
        alone = [_summary(ex.validate([case]))[0] for case in cases[:60]]
        again = _summary(ex.validate(cases))
    assert together[:60] == alone
    assert again == together
    reasons = {reason for _, reason, _, _ in together}
    assert {"ok", "nondeterministic", "crash:ZeroDivisionError", "timeout"} <= reasons
    assert sum(ok for ok, *_ in together) == sum(1 for c in cases if c[0].startswith(KINDS[0][0]))


def test_the_pool_runs_submitted_batches_and_returns_each_once(executor):
    compiled = executor.compile_input("2", "literal")
    job = executor.batch([("def f(x):\n    return x * 3", compiled, 1.0, None)] * 5)
    executor.pool.submit({0: job, 1: job})
    assert executor.pool.busy == {0, 1}
    results: dict = {}
    while executor.pool.busy:
        results.update(executor.pool.collect(None))
    assert sorted(results) == [0, 1]
    assert all(r.ok and r.output == "6" for batch in results.values() for r in batch)
    assert executor.pool.collect(0) == {}
