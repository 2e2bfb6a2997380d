"""A frozen held-out set of self-play-shaped tasks as a benchmark: the held-out split of the
generated family (`selfplay.datasets.generated`), easy level, deduction and abduction, with no
trivial task in it.

The tasks are programs like those self-play proposes early on, and none of them can be in a
run's pool by design (the held-out split is never seeded), so a run's accuracy on them before
and after training says whether its solver got better at the kind of task it trains on, with
no human data. They are answered with the solver's own prompt (`roles`) and judged by the
self-play judge. The set is the same on every machine for a given `limit`.

`VERSION` names the set; every record carries it (`set`). `generated-v2` holds no task that
copying solves (an identity program such as AZR's seed, an output equal to its input, an
abduction output that is its own input: `s.upper()` of 'CAT'), none whose function ignores its
input and none whose output does not move with its input (`selfplay.trivial`): such items are
drawn again. The first version held the seed program itself (10 of 200 deduction items) and
copying alone solved 50 of its 200 deduction and 55 of its 200 abduction items.

Metrics: `generated_deduction/pass@k` and `generated_abduction/pass@k`; one record per sample
with `subset`, `id`, `sample`, `set`, the task (`program`, `input`, `output`), `trivial`,
`answer`, `correct`, `reason` and `failure`, as CRUXEval's.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from selfplay.datasets.generated import generated_tasks
from selfplay.eval import harness
from selfplay.solver import parse_answer, reply, solver_prompt, solver_stop
from selfplay.trivial import copy_solves
from selfplay.types import Answer, ParseFailure, Task

__all__ = ["DEFAULT_PROBLEMS", "KINDS", "VERSION", "Problem", "evaluate", "load_problems"]

KINDS = ("deduction", "abduction")
DEFAULT_PROBLEMS = 200  # per kind, when no limit is given
LEVEL = "easy"  # one operation: the level small models answer at all
VERSION = "generated-v2"


@dataclass(frozen=True)
class Problem:
    id: str
    task: Task
    trivial: bool = False  # the copy answer solves it (never, in this version of the set)


def load_problems(executor, limit: int = 0, seed: int = 0) -> list[Problem]:
    """`limit` held-out tasks of each kind (DEFAULT_PROBLEMS when 0), outputs run by
    `executor`, none of them trivial."""
    count = limit or DEFAULT_PROBLEMS
    tasks = [
        (f"{kind}/{i}", task)
        for kind in KINDS
        for i, task in enumerate(
            generated_tasks(executor, count, "heldout", seed, kind, LEVEL, nontrivial=True)
        )
    ]
    trivial = copy_solves(executor, [task for _, task in tasks])
    return [Problem(i, task, copy) for (i, task), copy in zip(tasks, trivial, strict=True)]


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
            row=lambda s, subset=subset: _record(subset, s),
        )
        metrics.update(scores)
        items.extend(rows)
    return metrics, items


def _record(subset: str, sample: harness.Sample) -> dict:
    task = sample.problem.task
    return {
        "subset": subset,
        "id": sample.problem.id,
        "sample": sample.index,
        "set": VERSION,
        "program": task.program,
        "input": task.input,
        "output": task.output,
        "trivial": sample.problem.trivial,
        "answer": sample.answer,
        "correct": sample.verdict.ok,
        "reason": sample.verdict.reason,
        "failure": harness.failure(sample.answer, sample.verdict),
    }
