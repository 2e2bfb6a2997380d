"""The records one step passes from stage to stage, and the stage timer.

A `Proposed` is one proposer completion followed through validation and the store; an
`Attempted` is one solver completion followed through verification. Both keep the token ids
and log-probabilities the policy update needs.
"""

from __future__ import annotations

import time
from collections import defaultdict
from contextlib import contextmanager
from dataclasses import dataclass, field

from selfplay.types import Answer, ParseFailure, Proposal, Task, Verdict


@dataclass
class Proposed:
    task_type: str
    group: int  # the prompt it was sampled from
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    references: tuple[int, ...]  # pool ids shown in the prompt
    parsed: Proposal | ParseFailure
    verdicts: list[Verdict] = field(default_factory=list)
    task: Task | None = None
    task_id: int | None = None
    added: bool = False  # False for a valid task the pool already held
    solve_rate: float | None = None

    @property
    def outcome(self) -> str:
        if isinstance(self.parsed, ParseFailure):
            return "malformed"
        return "valid" if self.task is not None else "invalid"


@dataclass
class Attempted:
    task_id: int
    task: Task
    purpose: str  # "estimate" (a new proposal's solve rate) or "train" (frontier batch)
    group: int
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    parsed: Answer | ParseFailure
    verdict: Verdict | None = None

    @property
    def outcome(self) -> str:
        if isinstance(self.parsed, ParseFailure):
            return "malformed"
        return "correct" if self.verdict is not None and self.verdict.ok else "wrong"


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


def _rate(items: list, predicate) -> float:
    return sum(map(predicate, items)) / len(items) if items else float("nan")


def step_metrics(run, proposed, attempted, batch, rollouts, advantages, update, timer) -> dict:
    """The step's metrics, namespaced by stage."""
    m: dict[str, float] = {}
    for kind in run.config.selfplay.task_types:
        mine = [p for p in proposed if p.task_type == kind]
        m[f"propose/parse_rate/{kind}"] = _rate(mine, lambda p: p.outcome != "malformed")
        m[f"propose/valid_rate/{kind}"] = _rate(mine, lambda p: p.outcome == "valid")
        trained = [a for a in attempted if a.purpose == "train" and a.task.type == kind]
        m[f"solve/accuracy/{kind}"] = _rate(trained, lambda a: a.outcome == "correct")
    valid = [p for p in proposed if p.outcome == "valid"]
    m["propose/proposals"] = float(len(proposed))
    m["propose/valid"] = float(len(valid))
    m["propose/new_tasks"] = float(sum(p.added for p in valid))
    m["propose/solve_rate"] = _rate(valid, lambda p: p.solve_rate or 0.0)
    rewards = {"propose": [], "solve": []}
    for r in rollouts:
        rewards[r.role].append(r.reward)
    for role, values in rewards.items():
        m[f"reward/{role}"] = sum(values) / len(values) if values else float("nan")
    if valid:
        m["propose/learnability"] = _mean_learnability(run, valid)
    for reason, count in _reasons(proposed).items():
        m[f"propose/rejected/{reason}"] = float(count)
    trained = [a for a in attempted if a.purpose == "train"]
    m["solve/accuracy"] = _rate(trained, lambda a: a.outcome == "correct")
    m["solve/parse_rate"] = _rate(trained, lambda a: a.outcome != "malformed")
    estimates = [a for a in attempted if a.purpose == "estimate"]
    m["solve/new_task_accuracy"] = _rate(estimates, lambda a: a.outcome == "correct")
    m.update(batch.metrics)
    if advantages:
        mean = sum(advantages) / len(advantages)
        m["advantage/mean"] = mean
        m["advantage/abs_max"] = max(abs(a) for a in advantages)
        m["advantage/nonzero_share"] = _rate(advantages, lambda a: abs(a) > 1e-9)
    m.update({f"update/{k}": v for k, v in update.items()})
    m.update(timer.metrics())
    generated = sum(len(p.completion_ids) for p in proposed) + sum(
        len(a.completion_ids) for a in attempted
    )
    seconds = timer.seconds.get("propose", 0.0) + timer.seconds.get("solve", 0.0)
    m["generate/tokens"] = float(generated)
    m["generate/tokens_per_s"] = generated / seconds if seconds else float("nan")
    return m


def _mean_learnability(run, valid) -> float:
    from selfplay.trainer.rewards import learnability

    shape = run.config.reward.learnability
    return sum(learnability(shape, p.solve_rate or 0.0, run.config) for p in valid) / len(valid)


def _reasons(proposed) -> dict[str, int]:
    """Why proposals failed: malformed (and why it could not be read), or the first part of
    the executor's reason (syntax, policy, timeout, ...)."""
    counts: dict[str, int] = defaultdict(int)
    for p in proposed:
        if p.outcome == "malformed":
            counts["malformed"] += 1
            counts[f"malformed:{p.parsed.reason}"] += 1  # truncated, no_program, ...
        elif p.outcome == "invalid":
            bad = next((v for v in p.verdicts if not v.ok), None)
            counts[(bad.reason.split(":")[0] if bad else "induction_pairs")] += 1
    return counts
