"""The evaluation a run does before its first step, every `run.eval_every` steps and after its
last.

Each benchmark of `run.eval_benchmarks` (CRUXEval by default; the generated family's frozen
held-out tasks, GSM8K, MATH-500, MBPP and HumanEval as well) is scored greedily (pass@1) on its
first `run.eval_problems` problems, with the run's engine, so the numbers follow the weights
being trained, through the harness (`harness.py`) and with the judges of `selfplay eval`: a
`Judge` over the run's executor (for CRUXEval) and its math checker (for GSM8K and MATH-500),
and for MBPP and HumanEval a `CodeTestJudge` over a second executor widened for benchmark test
code (`code_benchmarks.executor_config`), started at the first evaluation that needs it.
Problems are loaded once.

CRUXEval is asked in each of `run.eval_prompt_formats`: the published `direct` format by
default (its subsets `cruxeval_o`, `cruxeval_i`), the solver's own beside it where a recipe asks
(`cruxeval_o_selfplay`, ...).

Metrics are `eval/<name>/pass@1` (`eval/cruxeval_o/pass@1`, `eval/cruxeval_i/pass@1`,
`eval/generated_deduction/pass@1`, `eval/gsm8k/pass@1`, ...); per-sample results go to
`eval/<benchmark>-step<N>.jsonl` in the run folder. A benchmark whose data is missing stops the
run at its first evaluation, saying which file.

In a run of several processes every rank evaluates: each answers and judges its share of the
problems with its own engine and judges (`sharded.py`), every rank gets all records, in the
order one process makes them, and rank 0 writes them.
"""

from __future__ import annotations

import json
from pathlib import Path

from selfplay.distributed import Ranks
from selfplay.engine import SamplingParams
from selfplay.eval import code_benchmarks, cruxeval, generated, math_benchmarks, sharded
from selfplay.executor import Executor
from selfplay.judge import Judge

__all__ = ["InLoopEval"]


class InLoopEval:
    """Scores a run's current weights on `run.eval_benchmarks`; `close` stops what it started."""

    def __init__(self, config, executor, math_checker, ranks: Ranks | None = None) -> None:
        self.config = config
        self.ranks = ranks or Ranks()  # every rank answers its share; rank 0 writes
        self.executor = executor
        self.judge = Judge(executor, math_checker)
        self.problems: dict[str, list] = {}
        self.code_executor = None

    def __call__(self, engine, folder: Path, step: int) -> dict[str, float]:
        cfg = self.config
        params = SamplingParams(n=1, temperature=0.0, max_tokens=cfg.generation.max_new_tokens)
        out = folder / "eval"
        out.mkdir(exist_ok=True)
        metrics: dict[str, float] = {}
        for benchmark in cfg.run.eval_benchmarks:
            with sharded.across(self.ranks):
                scores, items = self._evaluate(benchmark, engine, params)
            metrics.update({f"eval/{name}": value for name, value in scores.items()})
            if not self.ranks.is_main:
                continue
            with (out / f"{benchmark}-step{step:06d}.jsonl").open("w") as f:
                for item in items:
                    f.write(json.dumps(item) + "\n")
        return metrics

    def _evaluate(self, benchmark: str, engine, params):
        cfg, roles = self.config, self.config.roles
        limit = cfg.run.eval_problems
        if benchmark == "cruxeval":
            if benchmark not in self.problems:
                path = cfg.run.eval_data or None
                self.problems[benchmark] = cruxeval.load_problems(self.executor, path, limit)
            problems, metrics, items = self.problems[benchmark], {}, []
            for prompt_format in cfg.run.eval_prompt_formats:
                scores, rows = cruxeval.evaluate(
                    engine, self.judge, problems, roles, params, prompt_format=prompt_format
                )
                metrics.update(scores)
                items += rows
            return metrics, items
        if benchmark == "generated":
            if benchmark not in self.problems:
                self.problems[benchmark] = generated.load_problems(self.executor, limit)
            return generated.evaluate(engine, self.judge, self.problems[benchmark], roles, params)
        if benchmark in math_benchmarks.MATH_BENCHMARKS:
            if benchmark not in self.problems:
                self.problems[benchmark] = math_benchmarks.load_problems(benchmark, None, limit)
            problems = self.problems[benchmark]
            return math_benchmarks.evaluate(
                engine, self.judge, problems, roles, params, name=benchmark
            )
        if benchmark not in self.problems:
            self.problems[benchmark] = code_benchmarks.load_problems(benchmark, None, limit)
        if self.code_executor is None:
            self.code_executor = Executor(code_benchmarks.executor_config(cfg.executor))
        problems = self.problems[benchmark]
        judge = code_benchmarks.CodeTestJudge(self.code_executor)
        return code_benchmarks.evaluate(engine, judge, problems, roles, params, name=benchmark)

    def close(self) -> None:
        if self.code_executor is not None:
            self.code_executor.close()
            self.code_executor = None
