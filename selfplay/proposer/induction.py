"""The programs of pool tasks that induction proposals write inputs for (`stages.propose`)."""

from __future__ import annotations

from selfplay.trivial import trivial_reasons
from selfplay.types import WRITTEN_TYPES

# The wider second draw's salt is the first's plus this, so that no two draws share a seed.
_WIDER_OFFSET = 100
# Candidates per induction proposal in the wider draw, when the first leaves too few programs.
_INDUCTION_OVERDRAW = 4


def induction_programs(store, executor, curriculum, n: int, step: int, salt: int) -> list[str]:
    """Up to `n` distinct programs of pool tasks (`store`, a `TaskStore`) for induction
    proposals to write inputs for, trivial ones left out (the `executor` runs them; kept with
    `curriculum.keep_trivial`): for AZR's identity seed every choice of inputs makes a trivial
    task, which the proposer, not having written it, cannot help. So are programs that already
    have `curriculum.induction_per_program` induction tasks: drawn by the frontier, a few
    programs would otherwise take the pool (as they did in a measured run, docs/results.md:
    induction tasks on 2 programs, told apart by their message).

    When the draw of `n` leaves fewer than `n` programs, a second, wider draw of
    `_INDUCTION_OVERDRAW` times `n` candidate tasks fills the rest, so that a pool where most
    programs are trivial or full still gives a step its induction proposals (the first draw
    alone left steps with none); a pool with enough programs gives the first draw's."""
    programs = _eligible(store, executor, curriculum, n, step, salt)
    if len(programs) < n:
        wider = _eligible(
            store, executor, curriculum, n * _INDUCTION_OVERDRAW, step, salt + _WIDER_OFFSET
        )
        programs = list(dict.fromkeys(programs + wider))
    return programs[:n]


def _eligible(store, executor, curriculum, n: int, step: int, salt: int) -> list[str]:
    """The distinct programs of `n` drawn tasks, in draw order, that induction may use."""
    drawn = store.sample(n, step, types=WRITTEN_TYPES, salt=salt, for_solver=False)
    tasks = [t.task for t in drawn.tasks]
    if tasks and not curriculum.keep_trivial:
        tasks = [t for t, why in zip(tasks, trivial_reasons(executor, tasks), strict=True)
                 if not why]  # fmt: skip
    programs = list(dict.fromkeys(t.program for t in tasks))
    cap = curriculum.induction_per_program
    if cap and programs:
        held = store.induction_inputs(programs, step)
        programs = [p for p in programs if len(held[p]) < cap]
    return programs
