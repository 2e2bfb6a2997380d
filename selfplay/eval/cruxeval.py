"""CRUXEval-O and CRUXEval-I, with the sandboxed executor as the judge.

CRUXEval-O (output prediction) is a deduction task: given the function and the input, predict
the output; an answer is correct when its canonical value equals the gold output's. CRUXEval-I
(input prediction) is an abduction task: given the function and the output, write an input;
an answer is correct when the function, run on it in the sandbox, returns the gold output.
Inputs are read in expression mode (`dict(a=1)` and lambdas occur in the data and in answers),
compiled under the same policy as programs and evaluated only inside the sandbox.

With n samples per problem (temperature > 0), pass@1 is the mean share of correct samples and
pass@k the unbiased estimator; with n = 1 at temperature 0 it is greedy pass@1.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from selfplay.data import data_root, records
from selfplay.eval.passk import mean_pass_at_k
from selfplay.types import Answer, Task

__all__ = ["Problem", "load_problems", "evaluate"]

SUBSETS = {"cruxeval_o": "deduction", "cruxeval_i": "abduction"}


@dataclass(frozen=True)
class Problem:
    id: str
    output_task: Task  # CRUXEval-O
    input_task: Task  # CRUXEval-I


def default_path() -> Path:
    return data_root() / "cruxeval" / "cruxeval.jsonl"


def load_problems(executor, path: str | Path | None = None, limit: int = 0) -> list[Problem]:
    """The problems, with gold outputs recomputed (and checked) by the executor."""
    rows = records(path or default_path())
    rows = rows[:limit] if limit else rows
    verdicts = executor.validate([(r["code"], r["input"]) for r in rows], inputs="expression")
    problems = []
    for row, v in zip(rows, verdicts, strict=True):
        if not v.ok:
            raise ValueError(f"CRUXEval {row['id']} does not validate: {v.reason} {v.detail}")
        pair = ((v.input,), (v.output,))
        problems.append(
            Problem(
                row["id"],
                Task("deduction", row["code"], *pair, cpu_s=v.cpu_s),
                Task("abduction", row["code"], *pair, cpu_s=v.cpu_s),
            )
        )
    return problems


def evaluate(
    engine, executor, problems: list[Problem], roles, params, ks: tuple[int, ...] = (1,)
) -> tuple[dict[str, float], list[dict]]:
    """(metrics, per-sample records) for both subsets; `params` are the SamplingParams
    (generation stops at the end of the answer unless they name their own stop strings)."""
    from selfplay.extract import ANSWER_STOP
    from selfplay.solver import parse_answer, solver_prompt

    params = replace(params, stop=params.stop or ANSWER_STOP)

    metrics, items = {}, []
    for subset, kind in SUBSETS.items():
        tasks = [p.output_task if kind == "deduction" else p.input_task for p in problems]
        generations = engine.generate([solver_prompt(t, roles) for t in tasks], params)
        verify_items, answers_of = [], []
        for task, generation in zip(tasks, generations, strict=True):
            parsed = [
                parse_answer(c.text, kind, c.finish_reason == "length")
                for c in generation.completions
            ]
            answers_of.append(parsed)
            texts = [a.text for a in parsed if isinstance(a, Answer)]
            verify_items.append((task, texts))
        verdicts = executor.verify_many(verify_items, inputs="expression")
        counts = []
        for problem, parsed, judged in zip(problems, answers_of, verdicts, strict=True):
            judged, rows = iter(judged), []
            for a in parsed:
                v = next(judged) if isinstance(a, Answer) else None
                rows.append(
                    {
                        "subset": subset,
                        "id": problem.id,
                        "answer": a.text if v is not None else None,
                        "correct": bool(v is not None and v.ok),
                        "reason": v.reason if v is not None else a.reason,
                    }
                )
            items.extend(rows)
            counts.append((len(rows), sum(r["correct"] for r in rows)))
        for k in ks:
            if all(n >= k for n, _ in counts):
                metrics[f"{subset}/pass@{k}"] = mean_pass_at_k(counts, k)
    return metrics, items
