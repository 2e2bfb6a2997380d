"""Worked examples for the solver's prompts (`roles.worked_examples`).

A solver trained on prompts that show no solved example learns nothing about prompts that do:
the coder model, after 20 steps of self-play, answered up to 231 of CRUXEval-O's 800 problems
with `17`, the answer of the published prompt's first worked example (base model: 37), and the
count ranks with the items it gets right at rho -0.72 over 30 trained checkpoints
(results/example-drift.txt). Showing, above each deduction/abduction task, pool tasks of the
same type solved with their verified answers, answers that are never the task's own, makes a
copy of a shown answer a wrong answer the update learns from, with values that change from
prompt to prompt, so that no one value can be learnt instead. Measured, it does not carry
over to the published layout: on one of two seeds the solver stopped copying shown answers in
training and still answered 318 CRUXEval-O problems with `17` (docs/results.md). Those replies
do not copy the example's value: they write the published prompt's few-shot document over
again from its first example (`[PYTHON]`, `def f(n): return n`, `assert f(17) == 17`), whose
answer the extraction then reads (`eval.cruxeval_formats.restarts`); the solver's `assert`
layout (`roles.solver_layouts`) asks for a reply the prompt does not begin, so that such a
restart is a wrong answer in training too.

The examples are the store's references for the task's type (frontier tasks, no two near
duplicates; `TaskStore.references`), drawn with the step's seed and a salt of their own, less
any that shares the task's program, input or output, is longer than a reference may be
(`roles.reference_chars`), or whose answer the run's judge finds right for the task (an
abduction example's input can give the task's output under the task's own `f`). The examples
follow the references' knobs (`curriculum.reference_candidates`, `reference_max_similarity`),
and `curriculum.reference_dropout` leaves that share of solver prompts without one. The answers
of new tasks (`selfplay.attempts`, their solve rate: the proposer's reward) are asked with
examples too, so that a solve rate is measured on the prompts the solver trains on. Induction
and math tasks get none.
"""

from __future__ import annotations

from collections.abc import Sequence

from selfplay.executor.values import ValueRejected, canonical_from_text
from selfplay.types import Task

__all__ = ["EXAMPLE_TYPES", "copies_shown", "worked_examples", "shown_answer"]

#: The task types whose prompts show worked examples.
EXAMPLE_TYPES = ("deduction", "abduction")

# Salts of the examples' draws: apart from the proposer's references (0, 1, ...) and the
# induction programs (101, ...), so that turning examples on changes no other draw.
_SALT = 301
# References drawn per prompt for each example wanted: some are dropped (the task itself,
# one with the same answer).
_SPARE = 2


def shown_answer(task: Task) -> str:
    """What a solved example shows as its answer, and what a copy of it would answer: the
    output of a deduction, the input of an abduction."""
    return task.output if task.type == "deduction" else task.input


def copies_shown(answer: str, task_type: str, shown: Sequence[str]) -> bool:
    """Whether `answer` (a deduction's output or an abduction's argument list) is one of the
    `shown` answers, compared as values (`[1,2]` copies `[1, 2]`, `'a'` copies `"a"`); an
    answer that is not a literal is compared as written, spaces at its ends aside."""
    key = _value_key(answer, task_type)
    return any(key == _value_key(s, task_type) for s in shown)


def _value_key(text: str, task_type: str) -> str:
    text = text.strip()
    try:  # an abduction's arguments as one tuple, so that `1, 2` reads as a value
        return canonical_from_text(f"({text},)" if task_type == "abduction" else text)
    except ValueRejected:
        return text


def worked_examples(
    store,
    tasks: Sequence[Task],
    k: int,
    step: int,
    call: int = 0,
    max_chars: int | None = None,
    judge=None,
) -> list[tuple[Task, ...]]:
    """Up to `k` solved pool tasks to show with each of `tasks`, of its type, none with the
    task's program, input or output, none longer than `max_chars` (if given); none for
    induction and math tasks, or when `k` is 0. A step's calls (the solve stage's first group
    number) draw apart. With `judge` (the run's `Judge`), an example whose answer, given to
    the task, is judged right is dropped too: another `f` can map an abduction example's input
    to the task's output, and a deduction output can be written another way."""
    chosen: list[tuple[Task, ...]] = [()] * len(tasks)
    if k <= 0:
        return chosen
    for salt, task_type in enumerate(EXAMPLE_TYPES):
        where = [i for i, t in enumerate(tasks) if t.type == task_type]
        if not where:
            continue
        drawn = store.references(
            len(where),
            step,
            k=k * _SPARE,
            types=[task_type],
            salt=_SALT + len(EXAMPLE_TYPES) * call + salt,
        )
        for i, candidates in zip(where, drawn, strict=True):
            task = tasks[i]
            chosen[i] = tuple(
                c.task
                for c in candidates
                if (max_chars is None or len(c.task.program) <= max_chars)
                and c.task.program.strip() != task.program.strip()
                and c.task.input != task.input
                and c.task.output != task.output
            )
    if judge is not None:
        chosen = _not_right(judge, tasks, chosen)
    return [examples[:k] for examples in chosen]


def _not_right(judge, tasks, chosen) -> list[tuple[Task, ...]]:
    """`chosen` less every example whose answer the judge finds right for its task (one
    batched call)."""
    asked = [i for i, examples in enumerate(chosen) if examples]
    items = [(tasks[i], [shown_answer(e) for e in chosen[i]]) for i in asked]
    out = list(chosen)
    for i, verdicts in zip(asked, judge.judge(items) if items else [], strict=True):
        out[i] = tuple(e for e, v in zip(chosen[i], verdicts, strict=True) if not v.ok)
    return out
