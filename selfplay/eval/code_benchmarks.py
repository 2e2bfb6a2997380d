"""HumanEval and MBPP, judged by running each benchmark's own tests in the sandbox.

The model writes a function (HumanEval: completes a signature and docstring; MBPP: writes it
from a description and the three asserts, MBPP's own prompt format). The last Python block of
its answer, preferring one that defines the function, is joined with the tests into a program
whose `f()` runs them (`code_tests.py`); the executor validates that program with the input
`""`, and the answer is correct exactly when it returns True. A failing test, a crash, a
timeout or code the sandbox refuses (`policy:...`) is wrong, with the executor's reason.

MBPP is evaluated on its test split, tasks 11-510 (the split its README names). Benchmark tests
may use `random` and `hashlib` and some run for seconds: the executor used here admits those
modules and at least `CODE_RUN_TIMEOUT_S` CPU seconds a run, whatever the configuration says
below that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from selfplay import extract
from selfplay.config import ExecutorConfig
from selfplay.data import DataError, data_root, records
from selfplay.eval.code_tests import humaneval_program, mbpp_program
from selfplay.eval.passk import pass_at_k_metrics

__all__ = [
    "CODE_BENCHMARKS",
    "CodeProblem",
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


def _prompt(problem: CodeProblem, roles):
    from selfplay.solver import humaneval_prompt, mbpp_prompt

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


def evaluate(engine, executor, problems, roles, params, ks=(1,), name="code"):
    """(metrics, per-sample records); `executor` should use `executor_config(...)`."""
    from selfplay.extract import ANSWER_STOP

    params = replace(params, stop=params.stop or ANSWER_STOP)
    generations = engine.generate([_prompt(p, roles) for p in problems], params)
    codes = [
        [extract_code(c.text, p.entry_point) for c in g.completions]
        for p, g in zip(problems, generations, strict=True)
    ]
    cases = [(_program(p, c), "") for p, row in zip(problems, codes, strict=True) for c in row if c]
    verdicts = iter(executor.validate(cases))
    items, counts = [], []
    for problem, row in zip(problems, codes, strict=True):
        correct = 0
        for sample, code in enumerate(row):
            verdict = next(verdicts) if code else None
            ok = verdict is not None and verdict.ok and verdict.output == "True"
            correct += ok
            reason = "no_code" if verdict is None else verdict.reason
            items.append(
                {
                    "benchmark": name,
                    "id": problem.id,
                    "sample": sample,
                    "answer": code,
                    "correct": ok,
                    "reason": reason if ok or reason != "ok" else "wrong_output",
                }
            )
        counts.append((len(row), correct))
    return pass_at_k_metrics(name, counts, ks), items
