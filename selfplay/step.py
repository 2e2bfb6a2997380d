"""The step's stage timer and metrics, read from the records its stages made
(`selfplay.types`)."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING

from selfplay.proposer.complexity import loops, statements
from selfplay.solver.examples import EXAMPLE_TYPES, copies_shown
from selfplay.trainer.rewards import learnability
from selfplay.types import NO_NEW_WORK, WRITTEN_TYPES, Judged, Rollout, Stored

if TYPE_CHECKING:
    from selfplay.runs import Run


class StageTimer:
    """Wall-clock seconds per stage, reported as `timing_s/<stage>`."""

    def __init__(self, on_stage=None) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.current = ""
        self.on_stage = on_stage

    @contextmanager
    def __call__(self, stage: str):
        self.current = stage
        if self.on_stage is not None:
            self.on_stage(stage)
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] += time.perf_counter() - start
            self.current = ""

    def metrics(self) -> dict[str, float]:
        out = {f"timing_s/{stage}": s for stage, s in self.seconds.items()}
        out["timing_s/step"] = sum(self.seconds.values())
        return out


def _rate(items: Sequence, predicate) -> float:
    return sum(map(predicate, items)) / len(items) if items else float("nan")


def step_metrics(
    run: Run,
    stored: Sequence[Stored],
    judged: Sequence[Judged],
    solve_rates: Sequence[float | None],
    pool_batch,
    rollouts: Sequence[Rollout],
    update: dict[str, float],
    timer: StageTimer,
) -> dict[str, float]:
    """The step's metrics, namespaced by stage. `solve_rates` are the stored proposals'
    (`stages.solve_rates`), `pool_batch` is the solver's frontier batch."""
    m: dict[str, float] = {}
    trained = [j for j in judged if j.attempted.purpose == "train"]
    for kind in run.config.selfplay.task_types:
        mine = [s for s in stored if s.validated.proposed.task_type == kind]
        m[f"propose/parse_rate/{kind}"] = _rate(mine, lambda s: s.outcome != "malformed")
        m[f"propose/valid_rate/{kind}"] = _rate(mine, lambda s: s.outcome == "valid")
        of_kind = [j for j in trained if j.attempted.task.type == kind]
        m[f"solve/accuracy/{kind}"] = _rate(of_kind, lambda j: j.outcome == "correct")
        # every judged answer of the type, estimates of new tasks included
        answered = [j for j in judged if j.attempted.task.type == kind]
        m[f"solve/answers/{kind}"] = float(len(answered))
        m[f"solve/correct/{kind}"] = float(sum(j.outcome == "correct" for j in answered))
    pairs = zip(stored, solve_rates, strict=True)
    valid = [(s, rate or 0.0) for s, rate in pairs if s.outcome == "valid"]
    m["propose/proposals"] = float(len(stored))
    m["propose/valid"] = float(len(valid))
    m["propose/new_tasks"] = float(sum(s.added for s, _ in valid))
    # abductions judged as deductions (`curriculum.retype_fixed_abductions`), then new work
    # or not as such
    retyped = sum(s.validated.task.type != s.validated.proposed.task_type for s, _ in valid)
    m["propose/retyped"] = float(retyped)
    # tasks given another input, at which they are not trivial (`curriculum.reinput_trivial`)
    m["propose/reinput"] = float(sum(s.validated.reinput for s, _ in valid))
    # every valid proposal that is no new work, and each kind apart (`types.NO_NEW_WORK`)
    m["propose/duplicate_share"] = _rate(valid, lambda pair: pair[0].duplicate)
    kinds = [s.no_new_work_kind for s, _ in valid]
    for kind in NO_NEW_WORK:
        m[f"propose/{kind}_share"] = kinds.count(kind) / len(kinds) if kinds else float("nan")
    # of the repeats, a pooled task's with its variables renamed, or with a program that
    # behaves alike (`new_work`)
    m["propose/renamed_share"] = _rate(valid, lambda pair: pair[0].no_new_work == "repeat:renamed")
    m["propose/alike_share"] = _rate(valid, lambda pair: pair[0].no_new_work == "repeat:behaviour")
    # and why, by type: `propose/no_new_work/abduction/trivial:copy` counts the abductions its
    # output given as the input solves (counts, so that a report can sum steps)
    for s, _ in valid:
        if s.no_new_work:
            key = f"propose/no_new_work/{s.validated.proposed.task_type}/{s.no_new_work}"
            m[key] = m.get(key, 0.0) + 1.0
    m["propose/solve_rate"] = _rate(valid, lambda pair: pair[1])
    m.update(_program_shape([s for s, _ in valid]))
    m["reward/rollouts"] = float(len(rollouts))
    m["reward/estimate_rollouts"] = float(_estimate_rollouts(run, judged))
    rewards: dict[str, list[float]] = {"propose": [], "solve": []}
    for r in rollouts:
        rewards[r.role].append(r.reward)
    for role, values in rewards.items():
        m[f"reward/{role}"] = sum(values) / len(values) if values else float("nan")
    if valid:
        m["propose/learnability"] = _mean_learnability(run, [rate for _, rate in valid])
    for reason, count in _reasons(stored).items():
        m[f"propose/rejected/{reason}"] = float(count)
    m["solve/accuracy"] = _rate(trained, lambda j: j.outcome == "correct")
    m["solve/parse_rate"] = _rate(trained, lambda j: j.outcome != "malformed")
    layouts = run.config.roles.solver_layouts
    for layout in layouts if len(layouts) > 1 else ():  # each of several apart
        mine = [j for j in trained if j.attempted.layout == layout]
        m[f"solve/layout/{layout}/accuracy"] = _rate(mine, lambda j: j.outcome == "correct")
        m[f"solve/layout/{layout}/parse_rate"] = _rate(mine, lambda j: j.outcome != "malformed")
    # answers that copy a worked example's answer (`roles.worked_examples`): what the
    # examples are there to unlearn
    shown = [j for j in trained if j.attempted.shown and j.outcome != "malformed"]
    copies = [(j.attempted.task.type, _copies_example(j.attempted)) for j in shown]  # once each
    m["solve/example_copies"] = _rate(copies, lambda c: c[1])
    for kind in EXAMPLE_TYPES:
        mine = [c for c in copies if c[0] == kind]
        m[f"solve/example_copies/{kind}"] = _rate(mine, lambda c: c[1])
    estimates = [j for j in judged if j.attempted.purpose == "estimate"]
    m["solve/new_task_accuracy"] = _rate(estimates, lambda j: j.outcome == "correct")
    m.update(pool_batch.metrics)
    advantages = [r.advantage for r in rollouts]
    if advantages:
        m["advantage/mean"] = sum(advantages) / len(advantages)
        m["advantage/abs_max"] = max(abs(a) for a in advantages)
        m["advantage/nonzero_share"] = _rate(advantages, lambda a: abs(a) > 1e-9)
    m.update({f"update/{k}": v for k, v in update.items()})
    m.update(timer.metrics())
    generated = sum(len(s.validated.proposed.completion_ids) for s in stored) + sum(
        len(j.attempted.completion_ids) for j in judged
    )
    seconds = timer.seconds.get("propose", 0.0) + timer.seconds.get("solve", 0.0)
    m["generate/tokens"] = float(generated)
    m["generate/tokens_per_s"] = generated / seconds if seconds else float("nan")
    m.update(_lengths("propose", [s.validated.proposed for s in stored]))
    m.update(_lengths("solve", [j.attempted for j in judged]))
    return m


def _lengths(role: str, completions: Sequence) -> dict[str, float]:
    """The role's mean completion length in tokens and the share of its completions cut at the
    token limit (`generation.max_new_tokens`), as TRL logs them: a clipped ratio that climbs
    while the length nears the limit is a run whose answers ramble or loop."""
    return {
        f"{role}/mean_length": _rate(completions, lambda c: len(c.completion_ids)),
        f"{role}/clipped_ratio": _rate(completions, lambda c: c.finish_reason == "length"),
    }


def _program_shape(valid: Sequence[Stored]) -> dict[str, float]:
    """The new deduction and abduction programs' mean statement count and the share of them
    with a loop or a comprehension (`proposer/complexity.py`): CRUXEval's have a median of 4
    statements, and 58% a loop; a run whose proposer writes one-liners has 1 and 0. Copies
    and other proposals that are no new work are left out, as the brevity penalty leaves
    them: a copied long reference is not a longer program written."""
    tasks = [s.validated.task for s in valid if not s.duplicate]
    written = [t.program for t in tasks if t.type in WRITTEN_TYPES]
    counts = [n for n in map(statements, written) if n is not None]
    return {
        "propose/statements": sum(counts) / len(counts) if counts else float("nan"),
        "propose/loop_share": _rate(written, lambda p: bool(loops(p))),
    }


def _estimate_rollouts(run: Run, judged: Sequence[Judged]) -> int:
    """How many of the step's rollouts are answers that estimated a new task's solve rate
    (`stages.reward` trains on every judged answer with tokens, when the solver trains)."""
    if "solve" not in run.config.selfplay.train_roles:
        return 0
    estimates = (j.attempted for j in judged if j.attempted.purpose == "estimate")
    return sum(bool(a.completion_ids) for a in estimates)


def _mean_learnability(run: Run, rates: list[float]) -> float:
    shape = run.config.reward.learnability
    return sum(learnability(shape, p, run.config) for p in rates) / len(rates)


def _reasons(stored: Sequence[Stored]) -> dict[str, int]:
    """Why proposals failed: malformed (and why it could not be read), or the first part of
    the verdict's reason (syntax, policy, timeout, ..., too_simple)."""
    counts: dict[str, int] = defaultdict(int)
    for s in stored:
        if s.outcome == "malformed":
            counts["malformed"] += 1
            counts[s.failure] += 1  # malformed:truncated, ...
        elif s.outcome == "invalid":
            counts[s.failure.split(":")[0]] += 1
    return counts


def _copies_example(attempted) -> bool:
    """Whether an answer is, as a value, one of its prompt's worked examples' answers."""
    return copies_shown(attempted.parsed.text, attempted.task.type, attempted.shown)
