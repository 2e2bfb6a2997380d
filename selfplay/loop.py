"""Stepping a run: `run_step` (the nine stages, one call each) and `run` (the steps around it:
progress, metrics, evaluations, checkpoints).

    propose -> validate -> store -> sample -> solve -> verify -> reward -> update -> sync

The run itself, its folder and how it opens, resumes and closes are in `selfplay.runs`; the
stages are in `selfplay.stages`. A resumed run drops the metrics of later (lost) steps and runs
the step after its checkpoint again.

Launched as several processes (torchrun, `accelerate launch`), the ranks share each step
(`selfplay.distributed`): rank 0 holds the pool and writes the metrics, progress, summary,
evaluations and the checkpoint's model files; every rank writes its part of a checkpoint and
resumes from the same one.
"""

from __future__ import annotations

import io
import time
from pathlib import Path

from selfplay import stages
from selfplay.config import Config, RunConfig, to_dict
from selfplay.console import Console
from selfplay.distributed import launch_rank
from selfplay.progress import Progress
from selfplay.runs import Run, check_start, close_run, open_run, run_folder
from selfplay.self_seed import seed_from_model
from selfplay.step import StageTimer, step_metrics
from selfplay.trainer.checkpoint import Checkpoints
from selfplay.trainer.metrics import MetricsLogger, ProposalLog, SampleLog

__all__ = ["run_step", "run"]


def run_step(run: Run, step: int) -> dict[str, float]:
    """One step of self-play and training; returns its metrics."""
    run.version = f"step{step - 1}"
    timer = StageTimer(run.on_stage)
    with timer("propose"):
        proposed = stages.propose(run, step)
    with timer("validate"):
        validated = stages.validate(run, proposed)
    with timer("store"):
        stored = stages.store_tasks(run, validated, step)
    if run.proposals is not None:
        run.proposals.write(step, stored)
    with timer("sample"):
        batch, pool = stages.sample(run, step)
    with timer("solve"):
        attempted = stages.solve(run, stored, batch, step)
    with timer("verify"):
        judged = stages.verify(run, attempted, step)
    with timer("reward"):
        rates = stages.solve_rates(stored, judged)
        rollouts = stages.reward(run, stored, rates, judged, step)
    if run.samples is not None:
        run.samples.write(step, rollouts)
    with timer("update"):
        update = stages.update(run, rollouts, step)
    with timer("sync"):
        stages.sync(run)
    metrics = step_metrics(run, stored, judged, rates, batch, rollouts, update, timer)
    return {**pool, **metrics}


# ---------------------------------------------------------------------------------------------
# the run


def run(config: Config, out=None) -> Path:
    """Run (or resume) the configured number of steps; returns the run folder.

    The run prints to `out` (default: the terminal) and keeps the libraries' output in
    `run.log` in its folder (`selfplay.console`; ranks other than 0 in `run.rank<k>.log`).
    A run that fails before it wrote anything there but that log (its model does not load)
    leaves no folder: the log's last lines are printed on the terminal and it is removed; a
    folder that was there before (a run resumed) is kept as it is."""
    check_start(config)  # a bad labeled path or a missing precision: before the folder exists
    rank = launch_rank()
    log = run_folder(config) / ("run.log" if rank == 0 else f"run.rank{rank}.log")
    with Console(log, config.run.log_level, bars=rank == 0) as terminal:
        return _run(config, out or terminal.out, log)


def _run(config: Config, out, log: Path) -> Path:
    progress = Progress(out, config.run.steps, log)
    state, start = open_run(config, announce=progress.banner)
    progress.current = start - 1  # a resumed run's bars name its steps
    cfg = state.config
    main = state.ranks.is_main
    checkpoints = Checkpoints(state.folder, cfg.run.keep_checkpoints, cfg.model.name)
    wandb = cfg.run.wandb_project or None
    logger = None
    if main:  # metrics, progress and the summary come from rank 0 only
        # the logs keep the steps the checkpoint holds; step 0 (the seeding, an evaluation) is
        # logged again by a run that starts from step 1, so its earlier line goes too
        kept = start - 1 if start > 1 else -1
        logger = MetricsLogger(state.folder, kept, cfg.run.tensorboard, wandb, to_dict(cfg))
        if cfg.run.log_samples:
            state.samples = SampleLog(state.folder, state.tokenizer, start - 1)
            state.proposals = ProposalLog(state.folder, state.tokenizer, start - 1)
    if not main:
        progress = Progress(io.StringIO(), cfg.run.steps)
    state.on_stage = progress.stage
    for report in state.imports or ():
        contaminated = sum(n for r, n in report.reasons().items() if r.startswith("contaminated"))
        relabeled = report.relabeled
        progress.note(
            f"labeled set {report.file}: {report.accepted} of {report.candidates} tasks accepted, "
            f"{report.added} new in the pool"
            + (f", {relabeled} held as seed or proposed labeled now" if relabeled else "")
            + (f", {contaminated} left out as benchmark programs" if contaminated else "")
        )
    try:
        if start > cfg.run.steps:
            progress.note(f"already finished: {cfg.run.steps} steps done")
        elif start > 1:
            progress.note(f"resumed from the checkpoint of step {start - 1}")
        if start == 1:
            before = seed_from_model(state, progress.seed_round)  # every rank: generation
            if before:
                progress.seeded(before)
            if cfg.run.eval_every:  # on every rank: each answers its share
                before.update(_evaluate(state, 0, progress))
            if before and main:
                logger.log(0, before)
        for step in range(start, cfg.run.steps + 1):
            metrics = run_step(state, step)
            metrics["run/world_size"] = float(state.ranks.world_size)
            progress.step(step, metrics)
            if _evaluates_after(cfg.run, step):
                metrics.update(_evaluate(state, step, progress))
            if main:
                logger.log(step, metrics)
            if step % cfg.run.checkpoint_every == 0 or step == cfg.run.steps:
                extra = state.kl.state() if state.kl is not None else {}
                extra.update(state.entropy.state() if state.entropy is not None else {})
                checkpoints.save(state.accelerator, state.model, state.tokenizer, step, extra)
        progress.summary(state)
    finally:
        if logger is not None:
            logger.close()
        close_run(state)
    return state.folder


def _evaluates_after(run: RunConfig, step: int) -> bool:
    """Whether the run evaluates after `step`: every `eval_every` steps and after the last, so
    that the last evaluation is of the weights the run ends with, whatever the step count."""
    return bool(run.eval_every) and (step % run.eval_every == 0 or step == run.steps)


def _evaluate(state: Run, step: int, progress: Progress) -> dict[str, float]:
    from selfplay.eval.in_loop import InLoopEval  # the benchmarks load only for runs that evaluate

    started = time.perf_counter()
    if state.evaluator is None:
        state.evaluator = InLoopEval(state.config, state.executor, state.math_checker, state.ranks)
    stages.use_role(state, "solve")  # the benchmarks ask the solver
    metrics = state.evaluator(state.engine, state.folder, step)
    progress.evaluation(step, metrics, time.perf_counter() - started)
    return metrics
