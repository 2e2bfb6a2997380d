"""What a step asks the proposer (`stages.propose`): per task type of `selfplay.task_types`,
`selfplay.proposals` prompts, each with its references drawn from the pool, the idea it names
(`roles.topics`), the pool program an induction prompt writes inputs for, and the reference
programs its proposal is steered away from (`generation.avoid_reference_ngrams`)."""

from __future__ import annotations

from dataclasses import dataclass

from selfplay.engine.base import Chat
from selfplay.proposer.induction import induction_programs
from selfplay.proposer.prompts import proposer_prompt, shown_programs
from selfplay.proposer.topics import prompt_topic
from selfplay.types import WRITTEN_TYPES, TaskType

__all__ = ["Request", "proposer_requests"]

# The pool draws of a step are seeded by (step, salt). The references of the k-th task type
# use salt k; the programs that induction proposals write inputs for use 101 + k, and their
# wider second draw 201 + k (`induction_programs`), so that no two draws share a seed.
_PROGRAM_SALT = 101
_DRAW = 1000  # the seeding's round r (`proposer_requests`' draw) adds 1000 r to every salt


@dataclass(frozen=True)
class Request:
    """One proposer prompt and what the propose stage keeps with it."""

    task_type: TaskType
    prompt: Chat
    references: tuple[int, ...]  # pool ids of the references shown
    program: str | None  # what an induction proposal writes inputs for
    avoid: list[str]  # the shown references' programs, steered away from


def proposer_requests(run, step: int, draw: int = 0) -> list[Request]:
    """The step's proposer prompts, in task-type order, for the run (`runs.Run`, not imported:
    the packages below the runs' do not import them). `draw` r > 0, a seeding round
    (`selfplay.self_seed`), gets its own topics and references. An induction type gets none
    while the pool has no program to write inputs for."""
    cfg = run.config
    refuse_stock = cfg.curriculum.refuse_stock_inputs and not cfg.curriculum.keep_trivial
    requests = []
    for index, task_type in enumerate(cfg.selfplay.task_types):
        salt, n = index + _DRAW * draw, cfg.selfplay.proposals
        programs: list[str | None] = [None] * n
        if task_type == "induction":
            given = induction_programs(
                run.store, run.executor, cfg.curriculum, n, step, _PROGRAM_SALT + salt
            )
            if not given:
                continue  # nothing to write inputs for yet
            programs = [given[k % len(given)] for k in range(n)]
        ref_types = [task_type] if task_type in ("induction", "math") else list(WRITTEN_TYPES)
        references = run.store.references(n, step, types=ref_types, salt=salt)
        for k in range(n):
            refs = references[k] if k < len(references) else []
            shown = [r.task for r in refs]
            prompt = proposer_prompt(
                task_type,
                shown,
                cfg.roles,
                programs[k],
                refuse_trivial=not cfg.curriculum.keep_trivial,
                topic=prompt_topic(cfg, task_type, step, k + n * draw),  # on through the shuffle
                refuse_stock=refuse_stock,
            )
            avoid = shown_programs(task_type, shown, cfg.roles)
            requests.append(
                Request(task_type, prompt, tuple(r.id for r in refs), programs[k], avoid)
            )
    return requests
