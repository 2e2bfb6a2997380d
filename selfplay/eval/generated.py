"""A frozen held-out set of self-play-shaped tasks as a benchmark: the held-out split of the
generated family (`selfplay.datasets.generated`), easy level, deduction and abduction.

The tasks are programs like those self-play proposes early on, and none of them can be in a
run's pool by design (the held-out split is never seeded), so a run's accuracy on them before
and after training says whether its solver got better at the kind of task it trains on, with
no human data. They are answered with the solver's own prompt (`roles`) and judged by the
self-play judge. The set is the same on every machine for a given `limit`.

Metrics: `generated_deduction/pass@k` and `generated_abduction/pass@k`; one record per sample
with `subset`, `id`, `answer`, `correct` and `reason`, as CRUXEval's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from selfplay.datasets.generated import generated_tasks
from selfplay.eval import harness
from selfplay.solver import parse_answer, reply, solver_prompt, solver_stop
from selfplay.types import Answer, ParseFailure, Task

__all__ = ["DEFAULT_PROBLEMS", "KINDS", "Problem", "evaluate", "load_problems"]

KINDS = ("deduction", "abduction")
DEFAULT_PROBLEMS = 200  # per kind, when no limit is given
LEVEL = "easy"  # one operation: the level small models answer at all


@dataclass(frozen=True)
class Problem:
    id: str
    task: Task


def load_problems(executor, limit: int = 0, seed: int = 0) -> list[Problem]:
    """`limit` held-out tasks of each kind (DEFAULT_PROBLEMS when 0), outputs run by
    `executor`."""
    count = limit or DEFAULT_PROBLEMS
    return [
        Problem(f"{kind}/{i}", task)
        for kind in KINDS
        for i, task in enumerate(generated_tasks(executor, count, "heldout", seed, kind, LEVEL))
    ]


def evaluate(
    engine, judge, problems: list[Problem], roles, params, ks: tuple[int, ...] = (1,)
) -> tuple[dict[str, float], list[dict]]:
    """(metrics, per-sample records) for both kinds; `params` are the SamplingParams."""
    params = replace(params, stop=solver_stop(roles))
    metrics, items = {}, []
    for kind in KINDS:
        own = [p for p in problems if p.task.type == kind]
        if not own:
            continue
        subset = f"generated_{kind}"

        def read(problem: Problem, completion) -> str | ParseFailure:
            prompt = solver_prompt(problem.task, roles)
            answer = parse_answer(reply(prompt, completion.text), problem.task.type, completion.cut)
            return answer.text if isinstance(answer, Answer) else answer

        scores, rows = harness.evaluate(
            own,
            lambda p: solver_prompt(p.task, roles),
            judge,
            engine=engine,
            params=params,
            read=read,
            task=lambda p: p.task,
            name=subset,
            ks=ks,
            row=lambda s, subset=subset: {
                "subset": subset,
                "id": s.problem.id,
                "answer": s.answer,
                "correct": s.verdict.ok,
                "reason": s.verdict.reason,
            },
        )
        metrics.update(scores)
        items.extend(rows)
    return metrics, items
