"""The nine stages of a step, one function each, in data-flow order (see `loop.run_step`).

propose   the model writes tasks: per task type, prompts with K references from the pool
          (induction prompts also get a program from the pool to write inputs for)
validate  the executor checks each proposal (a math task's `f()` must return a number); a valid
          one becomes a `Task`
store     valid tasks enter the pool (duplicates keep their existing id)
sample    a frontier batch for the solver is drawn from the pool
solve     the model answers each new valid task `attempts` times (to estimate its solve rate)
          and each frontier task `solver_samples` times (to train on)
verify    the executor judges every answer (the math checker a math task's answers); the
          attempts are recorded in the pool
reward    rewards and advantages of both roles become `Rollout`s
update    one policy update on the rollouts
sync      the generation engine gets the new weights
"""

from __future__ import annotations

from collections import defaultdict

from selfplay.curriculum import Provenance, TaskAttempts
from selfplay.curriculum.records import verification_record
from selfplay.engine import sampling
from selfplay.extract import ANSWER_STOP
from selfplay.proposer import math_verdict, parse_proposal, proposer_prompt, task_from
from selfplay.solver import parse_answer, solver_prompt
from selfplay.step import Attempted, Proposed
from selfplay.trainer.advantages import AdvantageInputs, compute_advantages
from selfplay.trainer.rewards import RoleResult
from selfplay.trainer.rewards import reward as role_reward
from selfplay.trainer.update import policy_update
from selfplay.types import Answer, Proposal, Rollout

_PROGRAM_TYPES = ("deduction", "abduction")


def _seed(run, step: int, stage: int) -> int:
    """A generation seed that depends only on the run seed, the step and the stage, so that
    a resumed run regenerates what the lost step generated."""
    return (run.config.run.seed * 1_000_003 + step) * 16 + stage


def propose(run, step: int) -> list[Proposed]:
    cfg = run.config
    prompts, meta = [], []
    for salt, task_type in enumerate(cfg.selfplay.task_types):
        n = cfg.selfplay.proposals
        induction = task_type == "induction"
        programs: list[str | None] = [None] * n
        if induction:
            drawn = run.store.sample(n, step, types=_PROGRAM_TYPES, salt=101 + salt).tasks
            if not drawn:
                continue  # nothing to write inputs for yet
            programs = [drawn[k % len(drawn)].task.program for k in range(n)]
        ref_types = [task_type] if task_type in ("induction", "math") else list(_PROGRAM_TYPES)
        references = run.store.references(n, step, types=ref_types, salt=salt)
        for k in range(n):
            refs = references[k] if k < len(references) else []
            prompts.append(
                proposer_prompt(task_type, [r.task for r in refs], cfg.roles, programs[k])
            )
            meta.append((task_type, tuple(r.id for r in refs), programs[k]))
    params = sampling(
        cfg.generation, n=cfg.selfplay.proposal_samples, seed=_seed(run, step, 0), stop=ANSWER_STOP
    )
    proposed = []
    for group, ((task_type, refs, program), generation) in enumerate(
        zip(meta, run.engine.generate(prompts, params), strict=True)
    ):
        for c in generation.completions:
            parsed = parse_proposal(
                c.text,
                task_type,
                program=program,
                min_inputs=cfg.roles.induction_visible + 1,
                max_inputs=cfg.roles.induction_inputs,
                truncated=c.finish_reason == "length",
            )
            proposed.append(
                Proposed(
                    task_type,
                    group,
                    generation.prompt_token_ids,
                    c.token_ids,
                    c.logprobs,
                    refs,
                    parsed,
                )
            )
    return proposed


def validate(run, proposed: list[Proposed]) -> None:
    parsed = [p for p in proposed if isinstance(p.parsed, Proposal)]
    cases = [case for p in parsed for case in p.parsed.cases]
    verdicts = iter(run.executor.validate(cases))
    for p in parsed:
        p.verdicts = [next(verdicts) for _ in p.parsed.cases]
        if p.parsed.type == "math":
            p.verdicts = [math_verdict(v) for v in p.verdicts]
        p.task = task_from(p.parsed, p.verdicts, n_visible=run.config.roles.induction_visible)


def store_tasks(run, proposed: list[Proposed], step: int) -> None:
    valid = [p for p in proposed if p.task is not None]
    if not valid:
        return
    provenance = [
        Provenance("proposed", step, run.version, "proposer", references=p.references)
        for p in valid
    ]
    records = [verification_record(p.verdicts, run.executor.isolation) for p in valid]
    result = run.store.add_tasks([p.task for p in valid], provenance, records)
    for p, task_id, added in zip(valid, result.ids, result.added, strict=True):
        p.task_id, p.added = task_id, added


def sample(run, step: int):
    """The solver's frontier batch, and the pool's statistics (size, frontier share, solve
    rate histogram, solver ability) at this step for the metrics."""
    batch = run.store.sample(run.config.selfplay.solver_tasks, step)
    if run.selection_log is not None and batch.selection is not None:
        run.selection_log.write(batch.selection)
    return batch, run.store.stats(step, growth=False).metrics()


def solve(run, proposed: list[Proposed], batch, step: int) -> list[Attempted]:
    cfg = run.config
    new = {p.task_id: p.task for p in proposed if p.task_id is not None}
    jobs = [
        ("estimate", list(new.items()), cfg.selfplay.attempts, 1),
        ("train", [(t.id, t.task) for t in batch.tasks], cfg.selfplay.solver_samples, 2),
    ]
    attempted, group = [], 0
    for purpose, tasks, n, stage in jobs:
        if not tasks:
            continue
        prompts = [solver_prompt(task, cfg.roles) for _, task in tasks]
        params = sampling(cfg.generation, n=n, seed=_seed(run, step, stage), stop=ANSWER_STOP)
        for (task_id, task), generation in zip(
            tasks, run.engine.generate(prompts, params), strict=True
        ):
            for c in generation.completions:
                parsed = parse_answer(c.text, task.type, truncated=c.finish_reason == "length")
                attempted.append(
                    Attempted(
                        task_id,
                        task,
                        purpose,
                        group,
                        generation.prompt_token_ids,
                        c.token_ids,
                        c.logprobs,
                        parsed,
                    )
                )
            group += 1
    return attempted


def verify(run, attempted: list[Attempted], step: int) -> None:
    by_task: dict[int, list[Attempted]] = defaultdict(list)
    for a in attempted:
        by_task[a.task_id].append(a)
    items, owners, math = [], [], []
    for answers in by_task.values():
        well_formed = [a for a in answers if isinstance(a.parsed, Answer)]
        if well_formed and well_formed[0].task.type == "math":
            math += well_formed
        elif well_formed:
            items.append((well_formed[0].task, [a.parsed.text for a in well_formed]))
            owners.append(well_formed)
    for answers, verdicts in zip(owners, run.executor.verify_many(items), strict=True):
        for a, verdict in zip(answers, verdicts, strict=True):
            a.verdict = verdict
    if math:
        pairs = [(a.task.output, a.parsed.text) for a in math]
        for a, verdict in zip(math, run.math_checker.check_many(pairs), strict=True):
            a.verdict = verdict
    outcomes = [
        TaskAttempts(task_id, len(answers), sum(a.outcome == "correct" for a in answers))
        for task_id, answers in by_task.items()
    ]
    if outcomes:
        run.store.record_attempts(step, run.version, outcomes)


def reward(run, proposed: list[Proposed], attempted: list[Attempted]):
    """(rollouts, advantages): both roles' rewards, normalised by the configured estimator."""
    cfg = run.config
    tally: dict[int, list[int]] = defaultdict(lambda: [0, 0])
    for a in attempted:
        if a.purpose == "estimate":
            tally[a.task_id][0] += a.outcome == "correct"
            tally[a.task_id][1] += 1
    rollouts = []
    for p in proposed:
        if p.task_id is not None and tally[p.task_id][1]:
            p.solve_rate = tally[p.task_id][0] / tally[p.task_id][1]
        elif p.task is not None:  # valid but not attempted: the engine returned nothing
            p.solve_rate = 0.0
        r = role_reward(RoleResult("propose", p.outcome, p.solve_rate), cfg)
        rollouts.append(
            Rollout("propose", p.task_type, p.group, p.prompt_ids, p.completion_ids, p.logprobs, r)
        )
    offset = max((p.group for p in proposed), default=-1) + 1
    for a in attempted:
        if a.purpose == "train":
            r = role_reward(RoleResult("solve", a.outcome), cfg)
            rollouts.append(
                Rollout(
                    "solve",
                    a.task.type,
                    offset + a.group,
                    a.prompt_ids,
                    a.completion_ids,
                    a.logprobs,
                    r,
                )
            )
    rollouts = [r for r in rollouts if r.role in cfg.selfplay.train_roles and r.completion_ids]
    if not rollouts:
        return [], []
    import torch

    inputs = AdvantageInputs(
        torch.tensor([r.reward for r in rollouts]),
        [r.role for r in rollouts],
        [r.task_type for r in rollouts],
        [r.group for r in rollouts],
    )
    return rollouts, compute_advantages(cfg.trainer.advantage, inputs).tolist()


def update(run, rollouts: list[Rollout], advantages: list[float]) -> dict[str, float]:
    if not rollouts:
        return {}
    run.engine.sleep()
    try:
        return policy_update(
            run.accelerator,
            run.model,
            run.optimizer,
            run.scheduler,
            rollouts,
            advantages,
            run.update_settings,
            run.pad_id,
            run.reference,
        )
    finally:
        run.engine.wake_up()


def sync(run) -> None:
    run.engine.load_weights(run.accelerator.unwrap_model(run.model))
