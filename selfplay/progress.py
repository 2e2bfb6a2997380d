"""What a run prints: its size at the start, a bar for each long phase (through
`selfplay.console`), one line per step and per evaluation, and a summary at the end.

The step line carries the warning signs of a failing run beside its progress: the token
entropy of the update (falling towards 0: the policy collapses onto a few answers), the share
of valid proposals that are no new work and of those that are trivial (rising: the proposer
copies), and the share of proposals and answers cut at the token limit (rising: they ramble or
loop).
"""

from __future__ import annotations

import math
from pathlib import Path

from tqdm import tqdm

from selfplay import console

# what a stage's bars count
_UNITS = {"propose": "proposal", "seed": "proposal", "solve": "answer"}


def _fmt(value: float | None, spec: str = ".2f") -> str:
    missing = value is None or (isinstance(value, float) and math.isnan(value))
    return "-" if missing else format(value, spec)


class Progress:
    def __init__(self, out, steps: int, log: Path | None = None):
        self.out = out
        self.steps = steps
        self.log = log  # where the libraries' output goes
        self.current = 0
        self.history: list[dict] = []

    def banner(
        self, config, folder: Path, device: str = "cpu", processes: int = 1, precision: str = ""
    ) -> None:
        """The run's size, before the model loads (as nanochat and cleanrl print theirs), and
        the precision of its update (`precision`: float32, bf16 or fp16 autocast)."""
        sp, gen = config.selfplay, config.generation
        kinds = ", ".join(sp.task_types)
        where = f"on {device}" + (f", {processes} processes" if processes > 1 else "")
        if precision:
            where += f", update in {precision}" + ("" if precision == "float32" else " autocast")
        lines = [
            f"selfplay run {config.curriculum.run}: {_count(config.run.steps, 'step')}, "
            f"folder {folder}",
            f"  model {config.model.name} {where}, generation with {config.engine.backend}",
            f"  proposals per step: {sp.proposals} prompts x {sp.proposal_samples} for each of "
            f"{kinds}",
            f"  answers per step: {sp.attempts} to each new task, {sp.solver_samples} to each of "
            f"{sp.solver_tasks} pool tasks; at most {gen.max_new_tokens} tokens each",
            f"  evaluation: {_evaluations(config.run)}",
        ]
        if sp.seed_proposals:
            lines.insert(
                2,
                f"  before the first step: the pool seeded from {sp.proposals} prompts x "
                f"{sp.seed_proposals} for each of "
                f"{', '.join(t for t in sp.task_types if t != 'induction')}"
                + (f", in rounds of {sp.seed_round}" if sp.seed_proposals > sp.seed_round else "")
                + " (no training)",
            )
        if self.log is not None:
            lines.append(f"  the libraries' output (vLLM, transformers, torch): {self.log}")
        self.note("\n".join(lines))

    def stage(self, name: str) -> None:
        """A stage of the next step starts: it labels the bars of its long phases."""
        label = f"step {self.current + 1}/{self.steps} {name}"
        if name == "seed":  # before the first step (`selfplay.self_seed`)
            label = "seeding the pool"
        console.activity.set((label, _UNITS.get(name, "sample")))

    def note(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def seed_round(self, done: int, rounds: int, m: dict) -> None:
        """One line per finished round of a seeding in more than one round."""
        if rounds > 1:
            self.note(
                f"seeding round {done}/{rounds}: {int(m['seed/added'])} new tasks so far, from "
                f"{int(m['seed/valid'])} valid of {int(m['seed/proposals'])} proposals"
            )

    def seeded(self, m: dict) -> None:
        """One line for the pool's seeding from the model's proposals (`selfplay.self_seed`)."""
        counts = ("seed/proposals", "seed/valid", "seed/added", "seed/rounds")
        out = [f"{k.split('/')[1]} {int(v)}" for k, v in m.items() if k not in counts]
        self.note(
            f"seeded the pool: {int(m['seed/added'])} new tasks from {int(m['seed/valid'])} valid"
            f" of {int(m['seed/proposals'])} proposals"
            + (f" (no new work: {', '.join(out)})" if out else "")
        )

    def evaluation(self, step: int, metrics: dict, seconds: float) -> None:
        """One line per evaluation: pass@1 of each benchmark's subsets, and how long it took."""
        when = "before the first step" if step == 0 else f"after step {step}"
        scores = [
            f"{name.split('/')[1]} {value:.3f}"
            for name, value in metrics.items()
            if name.startswith("eval/") and name.endswith("/pass@1")
        ]
        self.note(f"eval {when}: pass@1 {', '.join(scores)}  ({tqdm.format_interval(seconds)})")

    def step(self, step: int, m: dict) -> None:
        self.current = step
        self.history.append(m)
        rates = [(k.rsplit("/", 1)[-1][0], v) for k, v in m.items() if "/valid_rate/" in k]
        parts = [
            f"step {step:>3}/{self.steps}  {m.get('timing_s/step', 0):6.1f}s",
            "valid " + " ".join(f"{kind} {_fmt(v, '.0%')}" for kind, v in rates),
            f"new tasks {int(m.get('propose/new_tasks', 0))}",
            # valid proposals that were copies, repeats, trivial or a benchmark's programs
            f"no new work {_fmt(m.get('propose/duplicate_share'), '.0%')} "
            f"(trivial {_fmt(m.get('propose/trivial_share'), '.0%')})",
            f"solve acc {_fmt(m.get('solve/accuracy'))}",
            f"pool {int(m.get('curriculum/pool_size', 0))}",
            f"entropy {_fmt(m.get('update/entropy'))}",
            # proposals and answers cut at generation.max_new_tokens
            f"cut prop {_fmt(m.get('propose/clipped_ratio'), '.0%')} "
            f"ans {_fmt(m.get('solve/clipped_ratio'), '.0%')}",
            f"loss {_fmt(m.get('update/loss'), '.3f')}",
            f"{_fmt(m.get('generate/tokens_per_s'), '.0f')} tok/s",
        ]
        self.note(" | ".join(parts))

    def summary(self, run) -> None:
        h = self.history
        proposed = sum(m.get("propose/proposals", 0) for m in h)
        valid = sum(m.get("propose/valid", 0) for m in h)
        added = sum(m.get("propose/new_tasks", 0) for m in h)
        first = h[0].get("solve/accuracy") if h else None
        last = h[-1].get("solve/accuracy") if h else None
        store, folder = run.config.curriculum.store, run.folder
        lines = [
            "",
            f"Done: {_count(len(h), 'step')} this session in {folder}",
            f"  tasks proposed {int(proposed)}, valid {int(valid)}, added to the pool "
            f"{int(added)} (pool now {len(run.store)} tasks)",
            f"  solver answers judged correct: {_solved(h)}",
            f"  solver accuracy on its frontier batch: first step {_fmt(first)}, "
            f"last step {_fmt(last)}",
            f"  metrics: {folder / 'metrics.jsonl'}, TensorBoard: {folder / 'tensorboard'}",
            f"  checkpoints: {folder / 'checkpoints'}   pool: {store}",
            f"  export the pool: selfplay pool export --store {store} --format jsonl "
            "--out pool.jsonl",
        ]
        if self.log is not None:
            lines.append(f"  the libraries' output: {self.log}")
        self.note("\n".join(lines))


def _evaluations(run) -> str:
    if not run.eval_every:
        return "none (run.eval_every=0)"
    size = f"first {run.eval_problems} problems" if run.eval_problems else "all problems"
    every = "every step" if run.eval_every == 1 else f"every {run.eval_every} steps"
    return (
        f"{', '.join(run.eval_benchmarks)} ({size}) before the first step, {every}, after the last"
    )


def _count(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _solved(history: list[dict]) -> str:
    """`7 of 180 (deduction 0/60, induction 7/120)`: every judged answer of the session, new
    tasks' estimates included, in all and per task type."""
    kinds = sorted(
        {k.rsplit("/", 1)[1] for m in history for k in m if k.startswith("solve/answers/")}
    )
    right = {k: int(sum(m.get(f"solve/correct/{k}", 0) for m in history)) for k in kinds}
    total = {k: int(sum(m.get(f"solve/answers/{k}", 0) for m in history)) for k in kinds}
    per = ", ".join(f"{k} {right[k]}/{total[k]}" for k in kinds if total[k])
    return f"{sum(right.values())} of {sum(total.values())}" + (f" ({per})" if per else "")
