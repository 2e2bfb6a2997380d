"""HumanEval and MBPP, judged by running each benchmark's own tests in the sandbox.

The model writes a function (HumanEval: completes a signature and docstring; MBPP: writes it
from a description and the three asserts, MBPP's own prompt format). The last Python block of
its answer, preferring one that defines the function, is joined with the tests into a program
whose `f()` runs them (`code_tests.py`); the executor validates that program with the input
`""`, and the answer is correct exactly when it returns True (`CodeTestJudge`). A failing
test, a crash, a timeout, a guard the code trips while it runs (`crash:policy`) or code the
sandbox refuses to compile (`policy:...`) is wrong, with the executor's reason; an answer
without code is `no_code`. Generation, judging and pass@k are the
harness's (`harness.py`).

MBPP is evaluated on its test split, tasks 11-510 (the split its README names). Benchmark tests
may use `random` and `hashlib` and some run for seconds: the executor used here admits those
modules and at least `CODE_RUN_TIMEOUT_S` CPU seconds a run, whatever the configuration says
below that.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from selfplay import extract
from selfplay.config import ExecutorConfig
from selfplay.eval import harness
from selfplay.eval.code_tests import humaneval_program, mbpp_program
from selfplay.executor.policy import PolicyRejection
from selfplay.executor.verify import tripped_guard
from selfplay.files import DataError, data_root, records
from selfplay.solver import humaneval_prompt, mbpp_prompt
from selfplay.types import ParseFailure, Verdict

__all__ = [
    "CODE_BENCHMARKS",
    "CodeProblem",
    "CodeTestJudge",
    "executor_config",
    "extract_code",
    "load_problems",
    "evaluate",
]

CODE_BENCHMARKS = {"humaneval": "humaneval/HumanEval.jsonl.gz", "mbpp": "mbpp/mbpp.jsonl"}
MBPP_TEST_IDS = range(11, 511)
CODE_RUN_TIMEOUT_S = 10.0
_CODE_LANGS = ("python", "py", "python3", "")


@dataclass(frozen=True)
class CodeProblem:
    id: str
    benchmark: str
    record: dict  # the benchmark's own record: prompt/test/entry_point, or text/test_list
    entry_point: str | None  # the function's name where the benchmark states it


def executor_config(config: ExecutorConfig) -> ExecutorConfig:
    """`config` widened for benchmark test code (see the module docstring)."""
    modules = tuple(sorted(set(config.extra_modules) | {"random", "hashlib"}))
    timeout = max(config.run_timeout_s, CODE_RUN_TIMEOUT_S)
    return replace(config, extra_modules=modules, run_timeout_s=timeout)


def load_problems(benchmark: str, path: str | Path | None = None, limit: int = 0):
    path = path or data_root() / CODE_BENCHMARKS[benchmark]
    needed = ("task_id", "text", "test_list")
    if benchmark == "humaneval":
        needed = ("task_id", "prompt", "test", "entry_point")
    problems = []
    for number, row in enumerate(records(path), start=1):
        missing = [key for key in needed if key not in row]
        if missing:
            raise DataError(f"{path}:{number}: a {benchmark} record needs {', '.join(missing)}")
        if benchmark == "mbpp" and row["task_id"] not in MBPP_TEST_IDS:
            continue
        entry = row.get("entry_point")
        problems.append(CodeProblem(str(row["task_id"]), benchmark, row, entry))
    return problems[:limit] if limit else problems


def extract_code(text: str, entry_point: str | None = None) -> str | None:
    """The code of an answer: the last Python block of the answer section (else of the whole
    text) that defines `entry_point`, else the last Python block; None when there is none."""
    defining = (
        re.compile(rf"^\s*def\s+{re.escape(entry_point)}\s*\(", re.M) if entry_point else None
    )
    for where in (extract.answer_region(text), text):
        blocks = [
            b.body for b in extract.fenced_blocks(where) if b.lang in _CODE_LANGS and b.body.strip()
        ]
        if defining:
            blocks = [b for b in blocks if defining.search(b)] or blocks
        if blocks:
            return blocks[-1]
    return None


class CodeTestJudge:
    """Judges code answers by running each benchmark's own tests on them in the sandbox: an
    answer is right exactly when its test program's `f()` returns True (a run that returns
    anything else is `wrong_output`). Items are (problem, codes), the judge protocol of the
    harness; the executor should use `executor_config(...)`."""

    def __init__(self, executor) -> None:
        self.executor = executor

    def judge(self, items: Sequence[tuple[CodeProblem, Sequence[str]]]) -> list[list[Verdict]]:
        cases = [(_program(problem, code), "") for problem, codes in items for code in codes]
        verdicts = iter(self.executor.validate(cases))
        programs = iter(program for program, _ in cases)
        return [[self._passed(next(programs), next(verdicts)) for _ in codes] for _, codes in items]

    def _passed(self, program: str, verdict: Verdict) -> Verdict:
        """The verdict on an answer from its test program's: a run that returns anything but
        True is `wrong_output`, and a guard the program trips while it runs is a failure of
        the program's (`crash:policy`), apart from code the sandbox refuses to compile
        (`policy:<rule>`, an answer that is no runnable code)."""
        if verdict.ok and verdict.output != "True":
            return replace(verdict, ok=False, reason="wrong_output")
        if verdict.reason.startswith("policy:") and not isinstance(
            self.executor.compile(program),
            PolicyRejection,  # compiled: refused while running
        ):
            reason, detail = tripped_guard(verdict.reason, verdict.detail)
            return replace(verdict, reason=reason, detail=detail)
        return verdict


def _prompt(problem: CodeProblem, roles):
    if problem.benchmark == "humaneval":
        return humaneval_prompt(problem.record["prompt"], roles)
    return mbpp_prompt(problem.record["text"], problem.record["test_list"], roles)


def _program(problem: CodeProblem, code: str) -> str:
    if problem.benchmark == "mbpp":
        return mbpp_program(problem.record, code)
    # A whole function replaces the prompt's definition (which keeps its imports); a bare
    # body continues the prompt's signature.
    defines = re.search(rf"^def\s+{re.escape(problem.entry_point)}\s*\(", code, re.M)
    return humaneval_program(problem.record, "\n" + code if defines else code)


def _read(problem: CodeProblem, completion) -> str | ParseFailure:
    code = extract_code(completion.text, problem.entry_point)
    return ParseFailure("no_code") if code is None else code


def evaluate(engine, judge: CodeTestJudge, problems, roles, params, ks=(1,), name="code"):
    """(metrics, per-sample records); `params` are the SamplingParams."""
    return harness.evaluate(
        problems,
        lambda problem: _prompt(problem, roles),
        judge,
        engine=engine,
        params=params,
        read=_read,
        task=lambda problem: problem,
        name=name,
        ks=ks,
    )
