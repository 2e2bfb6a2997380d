"""Whether a valid proposal is new work for the pool (the `store` stage, `stages.store_tasks`).

    kept_out           why a proposal stays out of the pool: a copy of a reference shown in
                       its prompt, a benchmark's program, a trivial task, an induction task that
                       adds nothing on its program (`induction_repeats`)
    duplicates         which proposals that entered the pool are repeats of its tasks

Each function takes the run (`runs.Run`): its configuration, pool, executor and benchmarks.
"""

from __future__ import annotations

from selfplay.proposer.canonical import canonical_program
from selfplay.trivial import trivial_reasons
from selfplay.types import Task, Validated

__all__ = ["duplicates", "induction_repeats", "kept_out"]


def kept_out(run, validated: tuple[Validated, ...], step: int) -> dict[int, str]:
    """Why each valid proposal that stays out of the pool does: `copy`,
    `contaminated:<benchmark>`, `trivial:<why>` or `repeat:<why>` (first that applies), by
    proposal index. An induction task's program was given to the proposer, not written by it:
    never a copy or a benchmark's program."""
    valid = {k: v for k, v in enumerate(validated) if v.task is not None}
    shown = _reference_programs(run, list(valid.values()))
    why: dict[int, str] = {}
    for k, v in valid.items():
        if _copies(v, shown):
            why[k] = "copy"
        elif v.task.type != "induction" and (benchmark := run.benchmarks.match(v.task.program)):
            why[k] = f"contaminated:{benchmark}"
    if not run.config.curriculum.keep_trivial:
        rest = [k for k in valid if k not in why]
        tasks = [valid[k].task for k in rest]
        found = run.ranks.map(lambda part, _: trivial_reasons(run.executor, part), tasks)
        why.update(
            {k: f"trivial:{reason}" for k, reason in zip(rest, found, strict=True) if reason}
        )
    induction = {k: v.task for k, v in valid.items() if k not in why and v.task.type == "induction"}
    if induction:
        why.update(induction_repeats(run, induction, step))
    return why


def induction_repeats(run, tasks: dict[int, Task], step: int) -> dict[int, str]:
    """Induction tasks that add nothing on their program, by proposal index: the same set of
    inputs as a pooled induction task on it or an earlier one of the step (`repeat:inputs`:
    the message aside, the solver must write the same function, checked on the same inputs;
    in another order it is shown other pairs of them, which is not counted as new), or a
    program that holds `curriculum.induction_per_program` of them already (`repeat:program`).
    Only tasks of earlier steps count from the pool, so a resumed run replays its lost step
    as that run played it."""
    cap = run.config.curriculum.induction_per_program
    held = run.store.induction_inputs(sorted({t.program for t in tasks.values()}), step)
    why: dict[int, str] = {}
    for k, task in tasks.items():
        inputs, pooled = frozenset(task.inputs), held[task.program]
        if inputs in pooled:
            why[k] = "repeat:inputs"
        elif cap and len(pooled) >= cap:
            why[k] = "repeat:program"
        else:
            pooled.append(inputs)
    return why


def duplicates(run, result, step: int) -> list[bool]:
    """Which stored proposals are no new work: their task is not the step's own (the pool
    held it before, or an earlier proposal of the step made it).

    A proposed task that the pool holds from this very step is the step's own: a resumed run
    replays the step whose tasks its lost run added, and must reward them as that run did."""
    held = sorted({i for i, added in zip(result.ids, result.added, strict=True) if not added})
    pooled = run.store.get(held) if held else []
    replayed = {
        t.id for t in pooled if t.provenance.origin == "proposed" and t.provenance.step == step
    }
    own = replayed | {i for i, added in zip(result.ids, result.added, strict=True) if added}
    seen: set[int] = set()
    flags = []
    for task_id in result.ids:
        flags.append(task_id not in own or task_id in seen)
        seen.add(task_id)
    return flags


def _reference_programs(run, valid: list[Validated]) -> dict[int, str]:
    """The normalised programs of the references shown to the proposals in `valid`."""
    ids = sorted({i for v in valid for i in v.proposed.references})
    return {t.id: canonical_program(t.task.program) for t in run.store.get(ids)} if ids else {}


def _copies(validated: Validated, shown: dict[int, str]) -> bool:
    """Whether the task's program is one of its prompt's references up to comments, layout,
    the names it binds and repeated definitions (`canonical_program`). An induction task's
    program was given to the proposer, not written by it."""
    if validated.task.type == "induction":
        return False
    program = canonical_program(validated.task.program)
    return any(shown[i] == program for i in validated.proposed.references)
