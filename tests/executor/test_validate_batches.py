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


@pytest.mark.parametrize(
    "program, rerun",
    [
        ("def f(x):\n    return sorted(x)[::-1]", False),
        ("def f(d):\n    return {k: v for k, v in d.copy().popitem()}", False),
        ("def f(x):\n    return f'{x}'", False),
        ("def f(x):\n    return {1, 2}", True),
        ("def f(x):\n    return [c for c in {a for a in x}]", True),
        ("def f(x):\n    return sorted(set(x))", True),
        ("def f(x):\n    return len(frozenset(x))", True),
        ("def f(x):\n    return hash(x)", True),
        ("def f(x):\n    return x.__hash__()", True),
        ("def f(d):\n    return list(getattr(d, 'ke' + 'ys')() | d)", True),
        ("def f(d):\n    return list(d.keys() | {'a'})", True),
        ("def f(d):\n    return [k for k, _ in d.items()]", True),
        ("class A:\n    pass\ndef f(x):\n    return x", True),
        ("def f(x):\n    return str(object())", True),
        ("from typing import AbstractSet\ndef f(x):\n    return x", True),
        ("def f(x):\n    return 'é' + x", True),  # identifiers may be spelt in other scripts
    ],
)
def test_a_program_reruns_when_it_can_tell_two_processes_apart(executor, program, rerun):
    assert executor.compile(program).rerun is rerun


@pytest.mark.parametrize(
    "text, mode, rerun",
    [
        ("[1, 2], 'a'", "literal", False),
        ("{'a': 1, 'b': 2}", "literal", False),
        ("'{set(}'", "literal", True),  # conservative: the words, even inside a string
        ("{'a', 'b'}", "literal", True),
        ("{'k': {1, 2}}", "literal", True),
        ("set(), x=frozenset([1])", "literal", True),
        ("sorted([3, 1])", "expression", False),
        ("sorted({'a', 'b'})", "expression", True),
        ("hash('a')", "expression", True),
    ],
)
def test_an_input_reruns_when_it_can_hold_a_set(executor, text, mode, rerun):
    assert executor.compile_input(text, mode).rerun is rerun


def _runs(ex, monkeypatch, cases) -> tuple[list, int]:
    """The verdicts of the cases and how many runs their validation took."""
    runs = 0
    batch = ex.batch

    def counting(items):
        nonlocal runs
        runs += len(items)
        return batch(items)

    monkeypatch.setattr(ex, "batch", counting)
    return ex.validate(cases), runs


@pytest.mark.parametrize("always", [False, True])
def test_only_cases_that_can_differ_run_twice(monkeypatch, always):
    """A pure program runs once; a set, an input holding a set or an output that shows an
    address runs again on the other worker, whose hash seed differs, unless
    `executor.always_rerun` reruns everything."""
    cases = [
        ("def f(x):\n    return sorted(x)[::-1]", "[3, 1, 2]"),
        ("def f(x):\n    return x // 0", "1"),  # fails: one run either way
        ("def f(x):\n    return list(set(x))", "'abcdefghij'"),
        ("def f(x):\n    return len(x)", "{'a', 'b'}"),
        ("def f(x):\n    return hex(x)", "255"),  # '0x..': reruns, and agrees
    ]
    with Executor(ExecutorConfig(always_rerun=always)) as ex:
        verdicts, runs = _runs(ex, monkeypatch, cases)
    assert [v.reason for v in verdicts] == [
        "ok",
        "crash:ZeroDivisionError",
        "nondeterministic",
        "ok",
        "ok",
    ]
    assert [v.output for v in verdicts[:1] + verdicts[3:]] == ["[3, 2, 1]", "2", "'0xff'"]
    assert runs == (9 if always else 8)
