"""Verification of answers to tasks, batched: many answers for many tasks in one call.

deduction  the predicted output is parsed as a literal and compared, canonically, with the
           task's output; no code runs.
abduction  `f` runs on each predicted input; the canonical output must equal the task's.
           Whatever ends the input's own evaluation is the answer's (`answer:<why>`), what
           ends the task's program is the program's failing on it (a run-time guard it trips
           included: `crash:policy`, the rule in the detail).
induction  the predicted program runs on every hidden input; all outputs must match (the
           fraction that matched is the score). After a timeout the answer's remaining inputs
           are skipped: a wrong answer that loops costs one time limit, not one per input.

Identical answers to one task (after normalisation) are checked once. Each run's CPU limit is
`verify_time_factor` times the task's CPU time at validation, at least `verify_time_floor_s`
and at most `run_timeout_s`.
"""

from __future__ import annotations

from collections.abc import Sequence

from selfplay.executor import values
from selfplay.executor.policy import CompiledInput, PolicyRejection
from selfplay.types import Task, Verdict

__all__ = ["tripped_guard", "verify_items"]


def cpu_limit(executor, task: Task) -> float:
    cfg = executor.config
    if task.cpu_s <= 0:
        return cfg.run_timeout_s
    return min(cfg.run_timeout_s, max(cfg.verify_time_floor_s, cfg.verify_time_factor * task.cpu_s))


class _Plan:
    """Runs needed for one batch, and how to turn their results into verdicts."""

    def __init__(self, executor):
        self.executor = executor
        self.items: list[tuple[str, CompiledInput, int, float, int | None]] = []
        self.next_group = 0
        self.next_worker = 0

    def add_runs(self, source: str, calls: list[CompiledInput], cpu: float) -> list[int]:
        """Queue one answer's runs (sharing a group and a worker); returns their item indices."""
        worker = self.next_worker % self.executor.pool.size
        self.next_worker += 1
        group = self.next_group
        self.next_group += 1
        start = len(self.items)
        self.items.extend((source, call, worker, cpu, group) for call in calls)
        return list(range(start, len(self.items)))


def _deduction(executor, task: Task, answer: str) -> Verdict:
    try:
        predicted = values.canonical_from_text(answer, executor.limits)
    except values.ValueRejected as err:
        return Verdict(False, f"answer:{err.reason}", detail=str(err))
    if predicted == task.output:
        return Verdict(True, "ok", output=predicted, score=1.0)
    return Verdict(False, "wrong_output", output=predicted)


def _key(executor, task: Task, answer: str, mode: str) -> str:
    """The dedup key of an answer: the normalised input for abduction, the stripped text else."""
    if task.type == "abduction":
        compiled = executor.compile_input(answer, mode)
        if isinstance(compiled, CompiledInput):
            return compiled.text
    return answer.strip()


def _plan_answer(executor, plan: _Plan, task: Task, answer: str, mode: str) -> Verdict | list[int]:
    """A verdict decided without running anything, or the indices of the runs queued."""
    if task.type == "deduction":
        return _deduction(executor, task, answer)
    if task.type == "abduction":
        call = executor.compile_input(answer, mode)
        if isinstance(call, PolicyRejection):
            return Verdict(False, call.reason.replace("input:", "answer:"), detail=call.detail)
        return plan.add_runs(task.program, [call], cpu_limit(executor, task))
    compiled = executor.compile(answer)
    if isinstance(compiled, PolicyRejection):
        return Verdict(False, compiled.reason, detail=compiled.detail)
    calls = [executor.compile_input(i, mode) for i, _ in task.hidden_pairs]
    if any(isinstance(c, PolicyRejection) for c in calls):
        raise ValueError("the task's hidden inputs do not compile; validate tasks before verifying")
    return plan.add_runs(answer, calls, cpu_limit(executor, task))


def verify_items(
    executor, items: Sequence[tuple[Task, Sequence[str]]], mode: str
) -> list[list[Verdict]]:
    plan = _Plan(executor)
    planned = []  # per item: (key of each answer, {key: Verdict or run indices})
    for task, answers in items:
        if task.type == "math":
            raise ValueError("a math task's answers are judged by the math checker (mathcheck)")
        if task.type == "induction" and not task.hidden_pairs:
            raise ValueError("an induction task needs hidden input/output pairs to verify against")
        keys = [_key(executor, task, answer, mode) for answer in answers]
        decided: dict[str, Verdict | list[int]] = {}
        for key, answer in zip(keys, answers, strict=True):
            if key not in decided:
                decided[key] = _plan_answer(executor, plan, task, answer, mode)
        planned.append((keys, decided))
    results = executor.run_items(plan.items)
    out = []
    for (task, _), (keys, decided) in zip(items, planned, strict=True):
        final = {
            key: value if isinstance(value, Verdict) else _score(executor, task, value, results)
            for key, value in decided.items()
        }
        out.append([final[key] for key in keys])
    return out


def tripped_guard(reason: str, detail: str) -> tuple[str, str]:
    """(reason, detail) of a run-time guard (`policy:<rule>` from a run, not a compilation)
    that a program tripped while it ran: a failure of the program's, as when it raises
    (`crash:policy`, the rule in the detail)."""
    return "crash:policy", f"{reason.removeprefix('policy:')}: {detail}"


def _score(executor, task: Task, indices: list[int], results) -> Verdict:
    expected = [task.output] if task.type == "abduction" else [o for _, o in task.hidden_pairs]
    matched, failure, cpu = 0, None, 0.0
    for index, want in zip(indices, expected, strict=True):
        result = results[index]
        cpu = max(cpu, result.cpu_s)
        if not result.ok:
            failure = failure or result
            continue
        got = executor.recanonical(result.output)
        if got == want:
            matched += 1
        elif failure is None and got is None:
            failure = result
    score = matched / len(expected)
    if matched == len(expected):
        return Verdict(True, "ok", score=1.0, cpu_s=cpu)
    if failure is not None and not failure.ok:
        reason, detail = failure.reason, failure.detail
        if task.type == "abduction" and reason.startswith("input:"):
            # the answer is the input: that it failed to evaluate (an exception, a guard, a
            # limit) is the answer's fault, as when it does not compile
            reason = "answer:" + reason.removeprefix("input:")
        elif task.type == "abduction" and reason.startswith("policy:"):
            # a guard the task's program trips on the answer: the program fails on that
            # input, as when it raises, and the answer is a value
            reason, detail = tripped_guard(reason, detail)
        return Verdict(False, reason, score=score, cpu_s=cpu, detail=detail)
    return Verdict(False, "wrong_output", score=score, cpu_s=cpu)
