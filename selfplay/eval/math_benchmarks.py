"""GSM8K and MATH-500, with the math checker as the judge.

The model is asked to end with its answer in `\\boxed{}` inside `<answer>` (the solver's math
prompt); `extract_answer` also reads `#### 42`, "the answer is ..." and a last number, so a model
that ignores the format is still judged on what it wrote. Gold answers: GSM8K's text after
`####` without commas, MATH-500's `answer` field. An answer is correct when math-verify finds it
equal to the gold (`selfplay.mathcheck`, through `selfplay.judge`, each problem being a labeled
math task); a check that overruns its time limit counts as wrong, and a text with no answer is
`no_answer`. Generation, judging and pass@k are the harness's (`harness.py`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from selfplay.eval import harness
from selfplay.files import DataError, data_root, records
from selfplay.judge import Judge
from selfplay.mathcheck import extract_answer, gsm8k_gold, math500_gold
from selfplay.solver import math_prompt
from selfplay.types import ParseFailure, Task

__all__ = ["MATH_BENCHMARKS", "MathProblem", "default_path", "load_problems", "evaluate"]

MATH_BENCHMARKS = {
    # name: (file under the data root, question field, gold reader)
    "gsm8k": ("gsm8k/test.jsonl", "question", gsm8k_gold),
    "math500": ("math500/test.jsonl", "problem", math500_gold),
}


@dataclass(frozen=True)
class MathProblem:
    id: str
    question: str
    gold: str

    @property
    def task(self) -> Task:
        """The problem as a labeled math task, for the judge."""
        return Task("math", "", ("",), (self.gold,), self.question)


def default_path(benchmark: str) -> Path:
    return data_root() / MATH_BENCHMARKS[benchmark][0]


def load_problems(benchmark: str, path: str | Path | None = None, limit: int = 0):
    """The first `limit` problems (0 = all); a record without question or gold is an error
    naming its line."""
    _, field, gold_of = MATH_BENCHMARKS[benchmark]
    path = path or default_path(benchmark)
    rows = records(path)
    problems = []
    for number, row in enumerate(rows[:limit] if limit else rows, start=1):
        question = row.get(field)
        if not isinstance(question, str) or not question.strip():
            raise DataError(f"{path}:{number}: no `{field}` text")
        try:
            gold = gold_of(row)
        except ValueError as err:
            raise DataError(f"{path}:{number}: {err}") from None
        problems.append(MathProblem(str(row.get("unique_id", number)), question, gold))
    return problems


def evaluate(engine, judge: Judge, problems, roles, params, ks=(1,), name="math"):
    """(metrics, per-sample records); `params` are the SamplingParams and `judge` needs a math
    checker."""
    return harness.evaluate(
        problems,
        lambda problem: math_prompt(problem.question, roles),
        judge,
        engine=engine,
        params=params,
        read=_read,
        task=lambda problem: problem.task,
        name=name,
        ks=ks,
        row=lambda sample: harness.sample_record(name, sample, gold=sample.problem.gold),
    )


def _read(problem: MathProblem, completion) -> str | ParseFailure:
    answer = extract_answer(completion.text)
    return ParseFailure("no_answer") if answer is None else answer
