"""GSM8K and MATH-500, with the math checker as the judge.

The model is asked to end with its answer in `\\boxed{}` inside `<answer>` (the solver's math
prompt); `extract_answer` also reads `#### 42`, "the answer is ..." and a last number, so a model
that ignores the format is still judged on what it wrote. Gold answers: GSM8K's text after
`####` without commas, MATH-500's `answer` field. An answer is correct when math-verify finds it
equal to the gold (`selfplay.mathcheck`); a check that overruns its time limit counts as wrong.

pass@1 with n samples per problem is the mean share of correct samples; pass@k is the unbiased
estimator (`passk.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from selfplay.data import DataError, data_root, records
from selfplay.eval.passk import pass_at_k_metrics
from selfplay.mathcheck import extract_answer, gsm8k_gold, math500_gold

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


def evaluate(engine, checker, problems, roles, params, ks=(1,), name="math"):
    """(metrics, per-sample records): `params` are the SamplingParams (generation stops at the
    end of the answer section unless they name their own stop strings)."""
    from selfplay.extract import ANSWER_STOP
    from selfplay.solver import math_prompt

    params = replace(params, stop=params.stop or ANSWER_STOP)
    generations = engine.generate([math_prompt(p.question, roles) for p in problems], params)
    answers = [[extract_answer(c.text) for c in g.completions] for g in generations]
    pairs = [(p.gold, a) for p, row in zip(problems, answers, strict=True) for a in row]
    verdicts = iter(checker.check_many(pairs))
    items, counts = [], []
    for problem, row in zip(problems, answers, strict=True):
        judged = [next(verdicts) for _ in row]
        for sample, (answer, verdict) in enumerate(zip(row, judged, strict=True)):
            items.append(
                {
                    "benchmark": name,
                    "id": problem.id,
                    "sample": sample,
                    "gold": problem.gold,
                    "answer": answer,
                    "correct": verdict.ok,
                    "reason": verdict.reason,
                }
            )
        counts.append((len(row), sum(v.ok for v in judged)))
    return pass_at_k_metrics(name, counts, ks), items
