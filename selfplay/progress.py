"""What a run prints: the stage in progress, one line per step, and a summary at the end."""

from __future__ import annotations

import math


def _fmt(value: float | None, spec: str = ".2f") -> str:
    missing = value is None or (isinstance(value, float) and math.isnan(value))
    return "-" if missing else format(value, spec)


class Progress:
    def __init__(self, out, steps: int):
        self.out = out
        self.steps = steps
        self.tty = hasattr(out, "isatty") and out.isatty()
        self.current = 0
        self.history: list[dict] = []

    def stage(self, name: str) -> None:
        if self.tty:
            self.out.write(f"\r  step {self.current + 1}/{self.steps}: {name:<10}")
            self.out.flush()

    def note(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def step(self, step: int, m: dict) -> None:
        self.current = step
        self.history.append(m)
        rates = [(k.rsplit("/", 1)[-1][0], v) for k, v in m.items() if "/valid_rate/" in k]
        parts = [
            f"step {step:>3}/{self.steps}  {m.get('timing_s/step', 0):6.1f}s",
            "valid " + " ".join(f"{kind} {_fmt(v, '.0%')}" for kind, v in rates),
            f"new tasks {int(m.get('propose/new_tasks', 0))}",
            # valid proposals that were copies, repeats, trivial or a benchmark's programs
            f"no new work {_fmt(m.get('propose/duplicate_share'), '.0%')}",
            f"solve acc {_fmt(m.get('solve/accuracy'))}",
            f"pool {int(m.get('curriculum/pool_size', 0))}",
            f"loss {_fmt(m.get('update/loss'), '.3f')}",
            f"{_fmt(m.get('generate/tokens_per_s'), '.0f')} tok/s",
        ]
        self.out.write(("\r" if self.tty else "") + " | ".join(parts) + "\n")
        self.out.flush()

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
            f"Done: {len(h)} steps this session in {folder}",
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
        self.out.write("\n".join(lines) + "\n")
        self.out.flush()


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
