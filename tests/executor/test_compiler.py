"""The compile helpers (`executor/compiler.py`): a large validation compiled in helper processes
gets the verdicts the calling process would give alone, and a helper that fails or dies costs
time, never a verdict."""

from __future__ import annotations

import marshal

import pytest

from selfplay.config import ConfigError, ExecutorConfig
from selfplay.executor import Executor, api, compiler
from tests.executor.test_validate_batches import _cases, _summary

#: expression inputs: a name the program binds, a call, a refused construct, a rebinding
EXPRESSIONS = ["len('abc')", "[1, 2][0]", "__import__('os')", "(f := 1)", "undefined_name"]


def _validate(config: ExecutorConfig, cases, mode: str = "literal"):
    with Executor(config) as ex:
        verdicts = ex.validate(cases, inputs=mode)
        stats = (ex.compilers.chunks, ex.compilers.failures) if ex.compilers else (0, 0)
    return _summary(verdicts), stats


@pytest.mark.parametrize("mode", ["literal", "expression"])
def test_helpers_give_the_verdicts_of_the_calling_process(mode):
    cases = _cases(200)
    if mode == "expression":
        cases = [(p, EXPRESSIONS[i % len(EXPRESSIONS)]) for i, (p, _) in enumerate(cases)]
    # different program texts for the two executors, so that no cached result answers either
    helped, (chunks, failures) = _validate(
        ExecutorConfig(workers=2, compilers=2, run_timeout_s=0.2),
        [(f"{p}# helped {mode}\n", i) for p, i in cases],
        mode,
    )
    alone, _ = _validate(
        ExecutorConfig(workers=2, compilers=0, run_timeout_s=0.2),
        [(f"{p}# alone {mode}\n", i) for p, i in cases],
        mode,
    )
    assert helped == alone
    assert chunks >= 200 // 32 and failures == 0  # the helpers, not the caller, compiled them
    reasons = {reason for _, reason, _, _ in helped}
    assert "ok" in reasons and "syntax" in reasons and any(r.startswith("policy:") for r in reasons)


def test_the_caller_takes_the_helpers_results_and_compiles_nothing_itself(monkeypatch):
    calls = []
    for name in ("compile_program", "compile_input"):
        real = getattr(api, name)
        monkeypatch.setattr(api, name, lambda *a, _real=real: calls.append(a) or _real(*a))
    cases = [(f"{p}# taken\n", i) for p, i in _cases(100)]
    config = ExecutorConfig(workers=2, compilers=2, run_timeout_s=0.2, max_value_depth=20)
    with Executor(config) as ex:
        helped = _summary(ex.validate(cases))
        assert ex.compilers.chunks >= 100 // 32 and ex.compilers.failures == 0
    assert calls == []  # every program and input came from a helper, under the same keys
    config = ExecutorConfig(workers=2, compilers=0, run_timeout_s=0.2, max_value_depth=20)
    with Executor(config) as ex:
        alone = _summary(ex.validate([(f"{p}# not taken\n", i) for p, i in _cases(100)]))
    assert helped == alone and calls


def test_a_helper_that_fails_or_dies_costs_no_verdict(monkeypatch):
    cases = _cases(150)
    expected, _ = _validate(
        ExecutorConfig(workers=2, compilers=0, run_timeout_s=0.2),
        [(f"{p}# expected\n", i) for p, i in cases],
    )
    with Executor(ExecutorConfig(workers=2, compilers=2, run_timeout_s=0.2)) as ex:
        first = _summary(ex.validate([(f"{p}# first\n", i) for p, i in cases]))
        for helper in ex.compilers._helpers:
            helper.proc.kill()  # died between two batches: started again when needed
        second = _summary(ex.validate([(f"{p}# second\n", i) for p, i in cases]))
        real_ask, calls = compiler._Helper.ask, []

        def flaky(self, request, timeout):  # no reply, then an unreadable one, then real ones
            calls.append(request)
            if len(calls) <= 2:
                return [None, b"not marshal data"][len(calls) - 1]
            return real_ask(self, request, timeout)

        monkeypatch.setattr(compiler._Helper, "ask", flaky)
        failed_before = ex.compilers.failures
        third = _summary(ex.validate([(f"{p}# third\n", i) for p, i in cases]))
        failures = ex.compilers.failures - failed_before
    assert first == second == third == expected
    assert failures == 2  # those two chunks were compiled in the calling process


def test_small_batches_compile_in_the_calling_process():
    with Executor(ExecutorConfig(workers=2, compilers=2)) as ex:
        [verdict] = ex.validate([("def f(x):\n    return x + 1\n# small\n", "1")])
        assert verdict.output == "2"
        assert ex.compilers.chunks == 0 and not ex.compilers._helpers


def test_the_number_of_helpers_is_checked():
    with pytest.raises(ConfigError, match="compilers"):
        ExecutorConfig(compilers=-2)


def test_a_reply_holding_anything_but_marshalled_code_is_refused():
    """The helpers' code goes to the sandbox as bytes: a reply is taken only if each program's
    result is `marshal` bytes of a code object and whether it reruns (else its chunk is
    compiled here)."""
    code = compile("def f(x):\n    return x", "<program>", "exec")
    good = ("ok", marshal.dumps(code), False)
    [decoded] = compiler._decode(marshal.dumps(([good], [])), ["p"], [])[0].values()
    assert decoded.code.co_consts == code.co_consts and decoded.rerun is False
    for result in [
        ("ok", code, False),
        ("ok", marshal.dumps(5), False),
        ("ok", b"", False),
        ("ok", "text", False),
        ("ok", marshal.dumps(code)),
        ("ok", marshal.dumps(code), 0),
    ]:
        assert compiler._decode(marshal.dumps(([result], [])), ["p"], []) is None
