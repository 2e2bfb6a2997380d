"""One benchmark, by name, from its problems to its scores: what `selfplay eval` and a run's
evaluation (`in_loop.py`) both call.

`evaluate_benchmark` loads a benchmark's problems (unless given them), builds its judge and runs
its evaluator: CRUXEval (once per prompt format) and the generated tasks are judged by the
executor, GSM8K and MATH-500 by the math checker, MBPP and HumanEval by their own tests in an
executor widened for test code. The caller owns those back ends and hands them in as
`Backends`, functions that give each one when a benchmark first needs it: the command starts
and stops them around one benchmark, a run keeps its own for all its evaluations.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from selfplay.eval import code_benchmarks, cruxeval, generated, math_benchmarks
from selfplay.judge import Judge

if TYPE_CHECKING:
    from selfplay.executor import Executor
    from selfplay.mathcheck import MathChecker

__all__ = ["Backends", "evaluate_benchmark"]


@dataclass(frozen=True)
class Backends:
    """What judges the benchmarks, each given by a function called when a benchmark needs it."""

    executor: Callable[[], Executor]  # CRUXEval, the generated tasks
    math_checker: Callable[[], MathChecker]  # GSM8K, MATH-500
    code_executor: Callable[[], Executor]  # MBPP, HumanEval: `code_benchmarks.executor_config`


def evaluate_benchmark(
    benchmark: str,
    engine,
    backends: Backends,
    roles,
    params,
    *,
    problems: list | None = None,
    data: str | None = None,
    limit: int = 0,
    ks: tuple[int, ...] = (1,),
    prompt_formats: Sequence[str] = (cruxeval.DEFAULT_FORMAT,),
) -> tuple[list, dict[str, float], list[dict]]:
    """(problems, metrics, per-sample records) of `benchmark`: its first `limit` problems (0 =
    all) from `data` (default: under $SELFPLAY_DATA) unless `problems` are given, answered by
    `engine` with the SamplingParams `params`, pass@k for each of `ks`."""
    if benchmark == "cruxeval":
        executor = backends.executor()
        if problems is None:
            problems = cruxeval.load_problems(executor, data, limit)
        judge, metrics, items = Judge(executor), {}, []
        for prompt_format in prompt_formats:
            scores, rows = cruxeval.evaluate(
                engine, judge, problems, roles, params, ks, prompt_format
            )
            metrics.update(scores)
            items += rows
        return problems, metrics, items
    if benchmark == "generated":
        executor = backends.executor()
        if problems is None:
            problems = generated.load_problems(executor, limit)
        return problems, *generated.evaluate(engine, Judge(executor), problems, roles, params, ks)
    if benchmark in math_benchmarks.MATH_BENCHMARKS:
        if problems is None:
            problems = math_benchmarks.load_problems(benchmark, data, limit)
        judge = Judge(None, backends.math_checker())
        return problems, *math_benchmarks.evaluate(
            engine, judge, problems, roles, params, ks, benchmark
        )
    if problems is None:
        problems = code_benchmarks.load_problems(benchmark, data, limit)
    judge = code_benchmarks.CodeTestJudge(backends.code_executor())
    return problems, *code_benchmarks.evaluate(
        engine, judge, problems, roles, params, ks, benchmark
    )
