"""Whether a valid proposal is new work for the pool (the `store` stage, `stages.store_tasks`).

    kept_out           why a proposal stays out of the pool: a copy of a reference shown in
                       its prompt (its program in other words, `copy`, or one that behaves
                       as the reference's does, `copy:behaviour`), a benchmark's program, a
                       trivial task, a pooled task with its variables renamed
                       (`renamed_repeats`) or with a program that behaves as its program
                       does (`behaviour_repeats`), an induction task that adds nothing on its
                       program (`induction_repeats`)
    task_keys          the keys the pool finds those by: a task up to the names its program
                       binds (`canonical_key`), and without its program (`io_key`)
    duplicates         which proposals that entered the pool are repeats of its tasks
    replacements       the task judged and pooled in a valid one's place: an abduction that its
                       output answers made a deduction (`curriculum.retype_fixed_abductions`),
                       a task trivial at its input given another input like it where it is
                       not (`curriculum.reinput_trivial`); `repaired` applies them to proposals
    guessable          which abduction tasks a stock input solves: they enter the pool marked,
                       and `curriculum.guessable_weight` sets how often the solver draws them

Each function takes the run (`runs.Run`): its configuration, pool, executor and benchmarks.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from selfplay.curriculum.records import content_hash
from selfplay.proposer.canonical import canonical_program
from selfplay.trivial import (
    MIN_PROBES,
    deduction_twins,
    input_twins,
    probe_inputs,
    stock_solves,
    trivial_reasons,
)
from selfplay.types import WRITTEN_TYPES, Task, Validated, Verdict

__all__ = [
    "ALIKE_CAP",
    "KEYS",
    "alike_candidates",
    "behaviour_copies",
    "behaviour_repeats",
    "canonical_key",
    "duplicates",
    "guessable",
    "induction_repeats",
    "io_key",
    "kept_out",
    "renamed_repeats",
    "repaired",
    "replacements",
    "task_keys",
]

#: pooled programs a proposal is run against for `behaviour_repeats`, per input and output
ALIKE_CAP = 8
#: failures that a limit caused (and a less busy machine might not have): no behaviour to compare
_LIMITS = frozenset({"timeout", "memory", "crash:worker", "input:timeout", "input:memory"})


def replacements(run, tasks: list[Task]) -> list[Task]:
    """Per valid task, the task the store stage judges and pools in its place: the task
    itself, or, under `curriculum.retype_fixed_abductions`, for an abduction that its output
    given back as the input answers, the deduction of its program and input where that is not
    trivial (`trivial.deduction_twins`); then, under `curriculum.reinput_trivial`, for a
    deduction or abduction that is a copy or constant at its input, the same program on the
    first input like it at which it is not (`trivial.input_twins`; under both knobs, an
    abduction that no input makes work as one, as a deduction at those inputs). Neither under
    `curriculum.keep_trivial`. The proposal benchmark judges its proposals with this too."""
    curriculum = run.config.curriculum
    out = list(tasks)
    if curriculum.keep_trivial:
        return out
    if curriculum.retype_fixed_abductions:
        asked = [i for i, t in enumerate(out) if t.type == "abduction"]
        part = [out[i] for i in asked]
        twins = run.ranks.map(lambda chunk, _: deduction_twins(run.executor, chunk), part)
        for i, twin in zip(asked, twins, strict=True):
            out[i] = twin or out[i]
    if curriculum.reinput_trivial:
        stock = curriculum.refuse_stock_inputs

        def moved(chunk: list[Task], _) -> list[Task | None]:
            reasons = trivial_reasons(run.executor, chunk)  # a copy or constant output or not
            retype = curriculum.retype_fixed_abductions
            return input_twins(run.executor, chunk, reasons, stock=stock, as_deductions=retype)

        asked = [i for i, t in enumerate(out) if t.type in WRITTEN_TYPES]
        twins = run.ranks.map(moved, [out[i] for i in asked])
        for i, twin in zip(asked, twins, strict=True):
            out[i] = twin or out[i]
    return out


def repaired(run, validated: tuple[Validated, ...]) -> tuple[Validated, ...]:
    """The proposals with each valid task replaced by the one the store stage judges and pools
    in its place (`replacements`). The proposal stays what it was (`Proposed.task_type`); a
    task given another input carries that input's run as its verdicts and is marked `reinput`.
    A task that stays trivial is `kept_out`'s, as without the knobs."""
    asked = [k for k, v in enumerate(validated) if v.task is not None]
    tasks = replacements(run, [validated[k].task for k in asked])
    out = list(validated)
    for k, task in zip(asked, tasks, strict=True):
        given = validated[k].task
        if task.inputs != given.inputs:
            ran = Verdict(True, output=task.output, input=task.input, cpu_s=task.cpu_s)
            out[k] = replace(validated[k], verdicts=(ran,), task=task, reinput=True)
        elif task != given:
            out[k] = replace(validated[k], task=task)
    return tuple(out)


def kept_out(run, validated: tuple[Validated, ...], step: int) -> dict[int, str]:
    """Why each valid proposal that stays out of the pool does: `copy`, `copy:behaviour`,
    `contaminated:<benchmark>`, `trivial:<why>` or `repeat:<why>` (first that applies), by
    proposal index. `curriculum.behaviour_copies=false` judges programs by their text only
    (no `copy:behaviour`, no `repeat:behaviour`). An induction task's program was given to the
    proposer, not written by it: never a copy or a benchmark's program."""
    valid = {k: v for k, v in enumerate(validated) if v.task is not None}
    shown = _reference_programs(run, list(valid.values()))
    written = {k: v for k, v in valid.items() if v.task.type != "induction"}
    why: dict[int, str] = {}
    for k, v in written.items():
        if _copies(v, shown):
            why[k] = "copy"
    if run.config.curriculum.behaviour_copies:
        rest = {k: v for k, v in written.items() if k not in why}
        why.update(dict.fromkeys(behaviour_copies(run, rest, shown), "copy:behaviour"))
    for k, v in written.items():
        if k not in why and (benchmark := run.benchmarks.match(v.task.program)):
            why[k] = f"contaminated:{benchmark}"
    if not run.config.curriculum.keep_trivial:
        rest = [k for k in valid if k not in why]
        tasks = [valid[k].task for k in rest]
        stock = run.config.curriculum.refuse_stock_inputs
        found = run.ranks.map(
            lambda part, _: trivial_reasons(run.executor, part, stock=stock), tasks
        )
        why.update(
            {k: f"trivial:{reason}" for k, reason in zip(rest, found, strict=True) if reason}
        )
    rest = {k: v.task for k, v in valid.items() if k not in why}
    if rest:
        why.update(renamed_repeats(run, rest, step))
    rest = {k: v.task for k, v in written.items() if k not in why}
    if rest and run.config.curriculum.behaviour_copies:
        why.update(behaviour_repeats(run, rest, step))
    induction = {k: v.task for k, v in valid.items() if k not in why and v.task.type == "induction"}
    if induction:
        why.update(induction_repeats(run, induction, step))
    return why


def canonical_key(task: Task) -> str:
    """The content hash (`records.content_hash`) of the task with its program in canonical
    text (`canonical_program`): tasks that differ only in their program's comments, layout
    and the names it binds share it, and the solver has the same work on each."""
    return content_hash(replace(task, program=canonical_program(task.program)))


def io_key(task: Task) -> str:
    """The content hash of the task without its program: its type, inputs, outputs and
    message. The pooled tasks a proposal could repeat in other words share it."""
    return content_hash(replace(task, program=""))


#: how each of the pool's key columns (`schema.KEY_COLUMNS`) keys a task
KEYS = {"canonical": canonical_key, "io": io_key}


def task_keys(tasks: list[Task]) -> dict[str, list[str]]:
    """The tasks' keys by the pool's column (`schema.KEY_COLUMNS`), for `TaskStore.add_tasks`."""
    return {column: [key(t) for t in tasks] for column, key in KEYS.items()}


def renamed_repeats(run, tasks: dict[int, Task], step: int) -> dict[int, str]:
    """The tasks (by proposal index) that repeat a pooled task, or an earlier one of `tasks`,
    up to the names their program binds, comments and layout (`canonical_key`), without being
    it (`repeat:renamed`; an exact repeat enters the pool as its task and is found there,
    `duplicates`). `x * x` on 2 is `n * n` on 2 again: no new work. Tasks of the step itself
    count from the pool only where they are not the task: a resumed run that replays a step
    meets its own tasks there, each exactly, and judges the rest as the lost run did."""
    keys = {k: canonical_key(task) for k, task in tasks.items()}
    found = sorted(set(keys.values()))
    pooled = run.store.keyed_tasks("canonical", found, step, canonical_key, programs=False)
    held = {key: {digest for _, digest, _ in found} for key, found in pooled.items()}
    why: dict[int, str] = {}
    for k, task in tasks.items():
        digest, seen = content_hash(task), held.setdefault(keys[k], set())
        if digest not in seen and seen:
            why[k] = "repeat:renamed"
        else:
            seen.add(digest)
    return why


def behaviour_repeats(run, tasks: dict[int, Task], step: int) -> dict[int, str]:
    """The deduction and abduction tasks (by proposal index) whose program behaves as the
    program of a pooled task with the same input and output (`io_key`), or of an earlier one of
    `tasks`, does: the same output or failure on every probe input like theirs, as
    `behaviour_copies` judges against a prompt's references (`repeat:behaviour`). A variant of a
    pooled program that the prompt did not show (`x ** 2` for a pooled `x * x`, a branch
    reordered) asks the solver to trace the same computation on the same input again. Tasks of
    the step itself count from the pool as in `renamed_repeats`: an exact repeat is left to the
    store. The oldest `ALIKE_CAP` pooled tasks of an input and output are compared, one per
    canonical program, so a step's sandbox work does not grow with the pool."""
    written = {k: t for k, t in tasks.items() if t.type in WRITTEN_TYPES}
    if not written:
        return {}
    keys = {k: io_key(task) for k, task in written.items()}
    pooled = run.store.keyed_tasks("io", sorted(set(keys.values())), step, io_key)
    # the oldest pooled tasks of a key (a replayed step's own come last), as (hash, program)
    held = {key: [row[1:] for row in found[:ALIKE_CAP]] for key, found in pooled.items()}
    others = {}
    for k, task in written.items():
        digest, rows = content_hash(task), held[keys[k]]
        if all(h != digest for h, _ in rows):  # an exact repeat is the store's (`duplicates`)
            others[k] = (task, alike_candidates(task, [p for _, p in rows]))
            rows.append((digest, task.program))
    return dict.fromkeys(behaves_as(run, others), "repeat:behaviour")


def alike_candidates(task: Task, programs: list[str]) -> list[str]:
    """The programs `behaviour_repeats` runs `task`'s against, of those held with its input and
    output (oldest first): one per program in other words (`canonical_program`), not its own."""
    shapes = {canonical_program(p): p for p in programs}
    return [p for p in shapes.values() if p != task.program]


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


def guessable(run, tasks: list[Task]) -> list[bool | None]:
    """Per task, whether one of its stock inputs solves it (`trivial.stock_inputs`: an answer
    that does not read the output) for an abduction task; None for the other types (not
    judged). One executor call for the abduction tasks, split across ranks; none when
    `kept_out` refused the guessable ones already (`curriculum.refuse_stock_inputs`)."""
    marks: list[bool | None] = [None] * len(tasks)
    asked = [i for i, t in enumerate(tasks) if t.type == "abduction"]
    curriculum = run.config.curriculum
    if curriculum.refuse_stock_inputs and not curriculum.keep_trivial:
        solves = [False] * len(asked)
    else:
        part = [tasks[i] for i in asked]
        solves = run.ranks.map(lambda chunk, _: stock_solves(run.executor, chunk), part)
    for i, solved in zip(asked, solves, strict=True):
        marks[i] = solved
    return marks


def behaviour_copies(run, proposals: dict[int, Validated], shown: dict[int, Task]) -> list[int]:
    """The deduction and abduction proposals (by index) whose program behaves as one of their
    prompt's references does (`behaves_as`). `2 * n` for a shown `n * 2`, or a reordered sum,
    is a copy in other words: no new work for a solver."""
    others = {
        k: (v.task, [shown[i].program for i in dict.fromkeys(v.proposed.references)])
        for k, v in proposals.items()
    }
    return behaves_as(run, others)


def behaves_as(run, others: dict[int, tuple[Task, list[str]]]) -> list[int]:
    """The deduction and abduction tasks (by index, each with the programs to compare it with)
    whose program behaves as one of those does: the other program gives the task's output on
    its input, and on every probe input like it (`trivial.probe_inputs`) the same output as the
    task's program, or the same refusal or exception (by reason); at least `MIN_PROBES` probes
    must run, and a run cut by a limit (time, memory, a lost worker) rules a match out, since a
    busier machine might not cut it. Every program runs in the sandbox, in one executor call
    for the batch (split across ranks)."""
    cases, owners = [], []  # owners: (task, other program or None for its own, input)
    for k, (task, programs) in others.items():
        if task.type not in WRITTEN_TYPES:
            continue
        probes = probe_inputs(task.input)
        if len(probes) < MIN_PROBES or not programs:
            continue
        for j, text in enumerate(probes):
            cases.append((task.program, text))
            owners.append((k, None, j))
        for i, program in enumerate(programs):
            for j, text in enumerate([task.input, *probes]):
                cases.append((program, text))
                owners.append((k, i, j - 1))  # -1: the task's own input
    verdicts = run.ranks.map(lambda part, _: run.executor.validate(part), cases)
    # per task, per program (None: its own), per input (-1: its own): the output, or the
    # reason it failed (None where a limit cut the run: not a behaviour to compare)
    results: dict = defaultdict(lambda: defaultdict(dict))
    for (k, i, j), verdict in zip(owners, verdicts, strict=True):
        if verdict.ok:
            seen = ("output", verdict.output)
        else:
            seen = None if verdict.reason in _LIMITS else ("failed", verdict.reason)
        results[k][i][j] = seen
    alike = []
    for k, by_program in results.items():
        own = by_program.pop(None)
        ran = sum(seen is not None and seen[0] == "output" for seen in own.values())
        if ran < MIN_PROBES or None in own.values():
            continue
        given = ("output", others[k][0].output)
        if any(
            other[-1] == given and all(other[j] == seen for j, seen in own.items())
            for other in by_program.values()
        ):
            alike.append(k)
    return alike


def _reference_programs(run, valid: list[Validated]) -> dict[int, Task]:
    """The references shown to the proposals in `valid`, by task id."""
    ids = sorted({i for v in valid for i in v.proposed.references})
    return {t.id: t.task for t in run.store.get(ids)} if ids else {}


def _copies(validated: Validated, shown: dict[int, Task]) -> bool:
    """Whether the task's program is one of its prompt's references up to comments, layout,
    the names it binds and repeated definitions (`canonical_program`)."""
    program = canonical_program(validated.task.program)
    return any(
        canonical_program(shown[i].program) == program for i in validated.proposed.references
    )
