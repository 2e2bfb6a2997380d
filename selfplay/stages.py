"""The nine stages of a step, one function each, in data-flow order (see `loop.run_step`).

Each stage takes the run (`selfplay.runs.Run`) and the frozen records of the stages before it
and returns new records (`selfplay.types`); none changes a record it was given.

stage     returns     what it does
propose   Proposed    the model writes tasks: per task type, prompts with K references from the
                      pool (induction prompts also get a program from the pool)
validate  Validated   the executor checks each proposal (a math task's `f()` must return a
                      number; a program below `roles.min_statements` is refused unrun); a
                      valid one carries its `Task`
store     Stored      valid tasks enter the pool (duplicates keep their existing id); a task
                      the pool held is a repeat; a copy of a reference shown, a trivial task,
                      a benchmark's program, a pooled task with its variables renamed or its
                      program's behaviour, and an induction task that adds nothing on its
                      program stay out of the pool; each is no new work
sample    SolverBatch a frontier batch for the solver is drawn from the pool
solve     Attempted   the model answers each new valid task `attempts` times (to estimate its
                      solve rate) and each frontier task `solver_samples` times (to train on)
verify    Judged      the run's `Judge` judges every answer (the executor, or the math checker
                      for math tasks); the attempts are recorded in the pool
reward    Rollout     rewards and advantages of both roles (a proposal's from its new task's
                      solve rate); every judged answer, estimate or train, is a rollout
update    metrics     one policy update on the rollouts
sync      (nothing)   the generation engine gets the new weights

With several processes the stages read the same: generation, validation and judging go through
`selfplay.distributed` (each rank its share, everyone gets every result), the pool through its
`SharedStore` (rank 0 writes, every rank reads the same), and the update trains each rank on
its share of the rollouts. Rewards and advantages are computed on every rank from identical
records, over the whole step.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from typing import TYPE_CHECKING

import torch

from selfplay import distributed, new_work
from selfplay.curriculum import Provenance, TaskAttempts
from selfplay.curriculum.records import verification_record
from selfplay.engine import derive_seed, sampling
from selfplay.engine.base import policy_logprobs
from selfplay.engine.ngrams import avoiding
from selfplay.extract import ANSWER_STOP
from selfplay.proposer import build_task, parse_proposal, proposal_verdicts
from selfplay.proposer.complexity import brevity, too_simple
from selfplay.proposer.layout import proposal_regexes
from selfplay.proposer.requests import proposer_requests
from selfplay.solver import parse_answer, reply, solver_prompt, solver_stop
from selfplay.solver.examples import shown_answer, worked_examples
from selfplay.solver.layout import answer_regexes
from selfplay.solver.prompts import draw_layouts
from selfplay.trainer import lora
from selfplay.trainer.advantages import AdvantageInputs, compute_advantages
from selfplay.trainer.repetition import penalties
from selfplay.trainer.rewards import RoleResult
from selfplay.trainer.rewards import reward as role_reward
from selfplay.trainer.update import policy_update
from selfplay.types import (
    WRITTEN_TYPES,
    Answer,
    Attempted,
    Judged,
    Proposal,
    Proposed,
    Rollout,
    Stored,
    Task,
    Validated,
    Verdict,
)

if TYPE_CHECKING:
    from selfplay.runs import Run

# The stages of a step that draw random numbers, each with its own seed (`_seed`): three
# generate, the update draws its mini-batches.
_PROPOSE_STAGE, _ESTIMATE_STAGE, _TRAIN_STAGE, _UPDATE_STAGE = 0, 1, 2, 3

# Salt of the solver prompts' layouts (`roles.solver_layouts`) among a stage's seeds.
_LAYOUT_SALT = 401


def _seed(run: Run, step: int, stage: int, *more: int) -> int:
    """A generation seed hashed (`derive_seed`) from the run seed, the step, the stage and
    `more` (the seeding's round), so that a resumed run asks what the lost step asked and no two
    stages or steps share seeds; the pool rolled back to the checkpoint (`runs._roll_back`) makes
    the prompts the lost step's too (results/learn20-perrole-seed1/first-segment-steps.txt)."""
    return derive_seed(run.config.run.seed, step, stage, *more)


def propose(run: Run, step: int, draw: int = 0) -> tuple[Proposed, ...]:
    """The step's proposer prompts (`proposer_requests`) and their completions, parsed. `draw`
    r > 0, a seeding round (`selfplay.self_seed`), gets its own generation seeds, topics and
    references."""
    cfg = run.config
    requests = proposer_requests(run, step, draw)
    params = sampling(
        cfg.generation,
        n=cfg.selfplay.proposal_samples,
        seed=_seed(run, step, _PROPOSE_STAGE, *((draw,) if draw else ())),
        stop=ANSWER_STOP,
    )
    regexes = proposal_regexes(cfg, [r.task_type for r in requests])
    params = avoiding(replace(params, regex=regexes), cfg.generation, [r.avoid for r in requests])
    prompts = [r.prompt for r in requests]
    proposed = []
    use_role(run, "propose")
    for group, (request, generation) in enumerate(
        zip(requests, distributed.generate(run.ranks, run.engine, prompts, params), strict=True)
    ):
        for c in generation.completions:
            parsed = parse_proposal(
                c.text,
                request.task_type,
                program=request.program,
                min_inputs=cfg.roles.induction_visible + 1,
                max_inputs=cfg.roles.induction_inputs,
                truncated=c.cut,
            )
            proposed.append(
                Proposed(
                    request.task_type,
                    group,
                    generation.prompt_token_ids,
                    c.token_ids,
                    policy_logprobs(c, params),
                    request.references,
                    parsed,
                    c.finish_reason,
                )
            )
    return tuple(proposed)


def validate(run: Run, proposed: tuple[Proposed, ...]) -> tuple[Validated, ...]:
    """Every parsed proposal's runs in one executor call; the proposer's verdicts on them (a
    math task's `f()` must return a number) and the task they make. A deduction or abduction
    program with fewer statements than `roles.min_statements` is refused without a run."""
    floor = run.config.roles.min_statements
    simple = {
        k: reason
        for k, p in enumerate(proposed)
        if isinstance(p.parsed, Proposal)
        and p.task_type in WRITTEN_TYPES
        and (reason := too_simple(p.parsed.program, floor))
    }
    cases = [
        case
        for k, p in enumerate(proposed)
        if isinstance(p.parsed, Proposal) and k not in simple
        for case in p.parsed.cases
    ]
    verdicts = iter(run.ranks.map(lambda part, _: run.executor.validate(part), cases))
    validated = []
    for k, p in enumerate(proposed):
        if not isinstance(p.parsed, Proposal):
            validated.append(Validated(p))
            continue
        if k in simple:
            validated.append(Validated(p, (Verdict(False, "too_simple", detail=simple[k]),)))
            continue
        judged = proposal_verdicts(p.parsed, [next(verdicts) for _ in p.parsed.cases])
        task = build_task(p.parsed, judged, n_visible=run.config.roles.induction_visible)
        validated.append(Validated(p, judged, task))
    return tuple(validated)


def store_tasks(run: Run, validated: tuple[Validated, ...], step: int) -> tuple[Stored, ...]:
    """The valid tasks into the pool; each proposal with its task's pool id and why it is no
    new work, if it is not (see `Stored`).

    What stays out of the pool is `new_work.kept_out`'s: copies of a reference shown (else
    the pool never leaves the seed: docs/results.md), benchmarks' programs, trivial tasks
    (which teach the solver to copy rather than trace), pooled tasks again in other words and
    induction tasks that add nothing. Before that (`new_work.repaired`), an abduction that its
    output answers is made a deduction where that is work (`curriculum.retype_fixed_abductions`),
    and a task that is a copy or constant at its input takes another input where it is work
    (`curriculum.reinput_trivial`). An abduction task that enters is marked with whether a
    stock input solves it (`new_work.guessable`, for `curriculum.guessable_weight`)."""
    validated = new_work.repaired(run, validated)
    kept_out = new_work.kept_out(run, validated, step)
    fresh = [v for k, v in enumerate(validated) if v.task is not None and k not in kept_out]
    placed = iter(())
    if fresh:
        provenance = [
            Provenance("proposed", step, run.version, "proposer", references=v.proposed.references)
            for v in fresh
        ]
        records = [verification_record(v.verdicts, run.executor.isolation) for v in fresh]
        tasks = [v.task for v in fresh]
        guessable = new_work.guessable(run, tasks)
        keys = new_work.task_keys(tasks)
        result = run.store.add_tasks(tasks, provenance, records, guessable, keys)
        placed = zip(result.ids, result.added, new_work.duplicates(run, result, step), strict=True)
    stored = []
    for k, v in enumerate(validated):
        if v.task is None:
            stored.append(Stored(v))
        elif k in kept_out:
            stored.append(Stored(v, no_new_work=kept_out[k]))
        else:
            task_id, added, repeat = next(placed)
            stored.append(Stored(v, task_id, added, "repeat" if repeat else ""))
    return tuple(stored)


def sample(run: Run, step: int):
    """The solver's frontier batch, and the pool's statistics (size, frontier share, solve
    rate histogram, solver ability) at this step for the metrics."""
    batch = run.store.sample(run.config.selfplay.solver_tasks, step)
    if run.selection_log is not None and batch.selection is not None:
        run.selection_log.write(batch.selection)
    return batch, run.store.stats(step, growth=False).metrics()


def solve(run: Run, stored: tuple[Stored, ...], batch, step: int) -> tuple[Attempted, ...]:
    """Answers to each new task (to estimate its solve rate) and to the frontier batch."""
    cfg = run.config
    new = {s.task_id: s.validated.task for s in stored if s.task_id is not None}
    jobs = [
        ("estimate", list(new.items()), cfg.selfplay.attempts, _ESTIMATE_STAGE),
        ("train", [(t.id, t.task) for t in batch.tasks], cfg.selfplay.solver_samples, _TRAIN_STAGE),
    ]
    attempted, group = [], 0
    for purpose, all_tasks, n, stage in jobs:
        # each prompt's layout (`roles.solver_layouts`), then one generation call per set of
        # stop strings (math answers end elsewhere): within a job the tasks of the first
        # task's set come first, each task one group
        seed = derive_seed(cfg.run.seed, step, stage, _LAYOUT_SALT)
        layouts = draw_layouts(cfg.roles, purpose, len(all_tasks), seed)
        by_stop: dict[tuple[str, ...], list] = defaultdict(list)
        for (task_id, task), layout in zip(all_tasks, layouts, strict=True):
            by_stop[solver_stop(cfg.roles, task.type, layout)].append((task_id, task, layout))
        for part, (stop, tasks) in enumerate(by_stop.items()):
            # the first call keeps the stage's seed (a step without math generates as before)
            seed = derive_seed(cfg.run.seed, step, stage, part) if part else _seed(run, step, stage)
            params = sampling(cfg.generation, n=n, seed=seed, stop=stop, role="solve")
            kinds, asked_in = [t.type for _, t, _ in tasks], [layout for *_, layout in tasks]
            params = replace(params, regex=answer_regexes(cfg, kinds, asked_in))
            group = _attempt(run, tasks, purpose, params, attempted, group, step)
    return tuple(attempted)


def _attempt(run: Run, tasks, purpose: str, params, attempted: list, group: int, step: int) -> int:
    """The answers to `tasks` under `params` appended to `attempted`, one group per task from
    `group` on, each prompt in its layout with its worked examples (`roles.worked_examples`);
    the next group's number."""
    roles = run.config.roles
    shown_tasks = [task for _, task, _ in tasks]
    k, limit = roles.worked_examples, roles.reference_chars
    examples = worked_examples(run.store, shown_tasks, k, step, group, limit, run.judge)
    prompts = [
        solver_prompt(task, roles, shown, layout)
        for (_, task, layout), shown in zip(tasks, examples, strict=True)
    ]
    use_role(run, "solve")
    for (task_id, task, layout), prompt, shown, generation in zip(
        tasks,
        prompts,
        examples,
        distributed.generate(run.ranks, run.engine, prompts, params),
        strict=True,
    ):
        for c in generation.completions:
            text = reply(prompt, c.text)
            parsed = parse_answer(text, task.type, c.cut, roles.bare_programs)
            attempted.append(
                Attempted(
                    task_id,
                    task,
                    purpose,
                    group,
                    generation.prompt_token_ids,
                    c.token_ids,
                    policy_logprobs(c, params),
                    parsed,
                    c.finish_reason,
                    tuple(shown_answer(example) for example in shown),
                    layout,
                )
            )
        group += 1
    return group


def verify(run: Run, attempted: tuple[Attempted, ...], step: int) -> tuple[Judged, ...]:
    """Every answer judged; each task's attempts recorded in the pool."""
    by_task: dict[int, list[int]] = defaultdict(list)
    for index, a in enumerate(attempted):
        by_task[a.task_id].append(index)
    verdicts = _verdicts(run, attempted, by_task.values())
    judged = tuple(Judged(a, v) for a, v in zip(attempted, verdicts, strict=True))
    outcomes = [
        TaskAttempts(task_id, len(indices), sum(judged[i].outcome == "correct" for i in indices))
        for task_id, indices in by_task.items()
    ]
    if outcomes:
        run.store.record_attempts(step, run.version, outcomes)
    return judged


def _verdicts(run: Run, attempted: tuple[Attempted, ...], by_task) -> list[Verdict | None]:
    """One verdict per answer, None for a malformed one; the run's judge routes each task's
    well-formed answers (the executor or the math checker, one batched call each)."""
    verdicts: list[Verdict | None] = [None] * len(attempted)
    items: list[tuple[Task, list[str]]] = []
    owners: list[list[int]] = []
    for indices in by_task:
        well_formed = [i for i in indices if isinstance(attempted[i].parsed, Answer)]
        if well_formed:
            items.append(
                (attempted[well_formed[0]].task, [attempted[i].parsed.text for i in well_formed])
            )
            owners.append(well_formed)
    judged = run.ranks.map(lambda part, _: run.judge.judge(part), items)
    for indices, answers in zip(owners, judged, strict=True):
        for i, verdict in zip(indices, answers, strict=True):
            verdicts[i] = verdict
    return verdicts


def solve_rates(stored: tuple[Stored, ...], judged: tuple[Judged, ...]) -> tuple[float | None, ...]:
    """Each proposal's empirical solve rate: the share of its task's estimate answers judged
    correct; 0 for a valid task without any (the engine returned nothing), None unless valid."""
    tally: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for j in judged:
        if j.attempted.purpose == "estimate":
            tally[j.attempted.task_id][0] += j.outcome == "correct"
            tally[j.attempted.task_id][1] += 1
    rates: list[float | None] = []
    for s in stored:
        correct, answers = tally.get(s.task_id, (0, 0))
        if answers:
            rates.append(correct / answers)
        else:
            rates.append(0.0 if s.outcome == "valid" else None)
    return tuple(rates)


def reward(
    run: Run,
    stored: tuple[Stored, ...],
    rates: tuple[float | None, ...],
    judged: tuple[Judged, ...],
    step: int,
) -> tuple[Rollout, ...]:
    """Both roles' rollouts with their rewards (a proposal's from its solve rate in `rates`)
    and their advantages, normalised by the configured estimator.

    Every judged answer is a rollout: the answers that estimated a new task's solve rate are
    trained on as AZR does, each task's answers a group of their own (as a frontier task's
    are), so no generated answer is wasted."""
    cfg = run.config
    penalties = _penalties(run, stored, step)
    rollouts = [
        _proposer_rollout(run, s, rate, penalty)
        for s, rate, penalty in zip(stored, rates, penalties, strict=True)
    ]
    # Solver groups are numbered after the proposer's, so that no group mixes the two roles.
    offset = max((s.validated.proposed.group for s in stored), default=-1) + 1
    rollouts += [_solver_rollout(run, j, offset) for j in judged]
    rollouts = [r for r in rollouts if r.role in cfg.selfplay.train_roles and r.completion_ids]
    if not rollouts:
        return ()
    inputs = AdvantageInputs(
        torch.tensor([r.reward for r in rollouts]),
        [r.role for r in rollouts],
        [r.task_type for r in rollouts],
        [r.group for r in rollouts],
    )
    advantages = compute_advantages(cfg.trainer.advantage, inputs).tolist()
    return tuple(replace(r, advantage=a) for r, a in zip(rollouts, advantages, strict=True))


def _penalties(run: Run, stored: tuple[Stored, ...], step: int) -> list[float]:
    """Each proposal's repetition and novelty penalties (`trainer/repetition.py`), against
    the step's other valid proposals and the pool's newest tasks from before the step, and
    the brevity penalty of a deduction or abduction program (`proposer/complexity.py`)."""
    cfg = run.config.reward
    # an induction task's program was given to its proposer: only written programs count
    programs = [
        s.validated.task.program
        if s.outcome == "valid" and s.validated.task.type != "induction"
        else None
        for s in stored
    ]
    earlier = []
    if cfg.novelty > 0 and any(programs):
        earlier = [t.task.program for t in run.store.latest(cfg.novelty_window, step)]
    out = penalties(cfg, programs, earlier)
    if cfg.brevity > 0:
        for k, (s, program) in enumerate(zip(stored, programs, strict=True)):
            if program is not None and s.validated.task.type in WRITTEN_TYPES:
                out[k] += cfg.brevity * brevity(program, cfg.brevity_statements)
    return out


def _proposer_rollout(run: Run, stored: Stored, rate: float | None, penalty: float) -> Rollout:
    p = stored.validated.proposed
    result = RoleResult("propose", stored.outcome, rate, stored.duplicate, penalty)
    r = role_reward(result, run.config)
    return Rollout("propose", p.task_type, p.group, p.prompt_ids, p.completion_ids, p.logprobs, r)


def _solver_rollout(run: Run, judged: Judged, group_offset: int) -> Rollout:
    a = judged.attempted
    r = role_reward(RoleResult("solve", judged.outcome), run.config)
    group = group_offset + a.group
    return Rollout(
        *("solve", a.task.type, group, a.prompt_ids, a.completion_ids, a.logprobs, r),
        shown=a.shown,
        layout=a.layout,
    )


def update(run: Run, rollouts: tuple[Rollout, ...], step: int) -> dict[str, float]:
    """One policy update on the tempered distribution the rollouts were sampled from, its
    mini-batches drawn with a seed of the step."""
    if not rollouts:
        return {}
    trainer = run.config.trainer
    controls = [c for c in (run.kl, run.entropy) if c is not None]
    for control in controls:  # this step's coefficients (trainer.kl_target, .entropy_target)
        trainer = control.apply(trainer)
    run.engine.sleep()
    try:
        stats = policy_update(
            run.accelerator,
            run.model,
            run.optimizer,
            run.scheduler,
            rollouts,
            config=trainer,
            pad_id=run.pad_id,
            reference=run.reference,
            temperature=run.config.generation.temperature,
            solve_temperature=run.config.generation.temperature_of("solve"),
            seed=_seed(run, step, _UPDATE_STAGE),
            share=run.ranks,
        )
    finally:
        run.engine.wake_up()
    run.engine_role = None  # the engine holds neither role's new policy
    for control in controls:
        control.adapt(trainer, stats)
    return stats


def sync(run: Run) -> None:
    """The engine's weights made the updated policy's. With one adapter per role, each role's
    are loaded when it next generates (`use_role`)."""
    if not run.config.trainer.lora.per_role:
        run.engine.load_weights(run.accelerator.unwrap_model(run.model))


def use_role(run: Run, role: str) -> None:
    """With one adapter per role (`trainer.lora.per_role`): make `role`'s adapter the model's
    active one (the transformers engine generates with the model itself) and its merged
    weights the engine's, unless they are already. A model with one policy serves both."""
    if not run.config.trainer.lora.per_role:
        return
    model = run.accelerator.unwrap_model(run.model)
    lora.activate(model, role)
    if run.engine_role != role:
        run.engine.load_weights(model)
        run.engine_role = role
