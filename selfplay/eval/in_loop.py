"""The evaluation a run does before its first step, every `run.eval_every` steps and after its
last.

Each benchmark of `run.eval_benchmarks` (CRUXEval by default; the generated family's frozen
held-out tasks, GSM8K, MATH-500, MBPP and HumanEval as well) is scored greedily (pass@1) on its
first `run.eval_problems` problems, with the run's engine, so the numbers follow the weights
being trained, through the dispatch `selfplay eval` uses (`dispatch.py`): judged by the run's
executor (CRUXEval, generated tasks) and its math checker (GSM8K and MATH-500), and for MBPP and
HumanEval by a second executor widened for benchmark test code
(`code_benchmarks.executor_config`), started at the first evaluation that needs it. Problems
are loaded once.

CRUXEval is asked in each of `run.eval_prompt_formats`: the published `direct` format by
default (its subsets `cruxeval_o`, `cruxeval_i`), the solver's own beside it where a recipe asks
(`cruxeval_o_selfplay`, ...).

Metrics are `eval/<name>/pass@1` (`eval/cruxeval_o/pass@1`, `eval/cruxeval_i/pass@1`,
`eval/generated_deduction/pass@1`, `eval/gsm8k/pass@1`, ...), and for CRUXEval the shares of
answers that copy the published prompt's example (`example_share`), of replies that write its
few-shot document over again (`restart_share`) and of answers that are wrong and not
of the gold's type (`wrong_type_share`, `answer_types.py`); per-sample results go to
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
from selfplay.eval import code_benchmarks, sharded
from selfplay.eval.dispatch import Backends, evaluate_benchmark
from selfplay.executor import Executor

__all__ = ["InLoopEval"]


class InLoopEval:
    """Scores a run's current weights on `run.eval_benchmarks`; `close` stops what it started."""

    def __init__(self, config, executor, math_checker, ranks: Ranks | None = None) -> None:
        self.config = config
        self.ranks = ranks or Ranks()  # every rank answers its share; rank 0 writes
        self.executor = executor
        self.problems: dict[str, list] = {}
        self.code_executor = None
        self.backends = Backends(lambda: executor, lambda: math_checker, self._code_executor)

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
        cfg = self.config
        data = (cfg.run.eval_data or None) if benchmark == "cruxeval" else None
        problems, metrics, items = evaluate_benchmark(
            benchmark,
            engine,
            self.backends,
            cfg.roles,
            params,
            problems=self.problems.get(benchmark),
            data=data,
            limit=cfg.run.eval_problems,
            prompt_formats=cfg.run.eval_prompt_formats,
        )
        self.problems[benchmark] = problems  # loaded once, kept for the next evaluations
        return metrics, items

    def _code_executor(self) -> Executor:
        """The executor for benchmark test code, started at the first evaluation that needs it."""
        if self.code_executor is None:
            self.code_executor = Executor(code_benchmarks.executor_config(self.config.executor))
        return self.code_executor

    def close(self) -> None:
        if self.code_executor is not None:
            self.code_executor.close()
            self.code_executor = None
