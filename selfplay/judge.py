"""The judge: one place that decides whether answers to tasks are right, whatever the task type.

    judge = Judge(executor, math_checker)
    verdicts = judge.judge([(task, ["[1, 2]", "[2, 1]"]), (math_task, ["\\frac{1}{2}"])])

deduction, abduction and induction answers go to the sandboxed executor
(`Executor.verify_many`: a predicted output compared canonically, a predicted input run through
the task's program, a written program run on the hidden inputs); math answers go to the math
checker (`MathChecker.check_many`: the answer compared with the task's output by math-verify).
Each back-end gets one batched call per `judge` call, so the executor and the math checker
keep their workers busy however the task types are mixed.

The judge owns neither back-end: whoever started them (the run, `selfplay eval`) closes them.
A judge without a math checker judges code tasks only; the math checker starts its workers
when the first math answer arrives, so a judge that never sees one costs nothing for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from selfplay.executor import Executor
from selfplay.executor.policy import INPUT_MODES
from selfplay.mathcheck import MathChecker
from selfplay.types import Task, Verdict

__all__ = ["Judge"]


@dataclass(frozen=True)
class Judge:
    """Routes answers by task type to the executor or the math checker; see the module doc.

    `inputs` is how abduction answers (predicted inputs) are read (`policy.INPUT_MODES`):
    `literal` for the model's own tasks, `expression` where a benchmark's inputs are written
    as expressions (CRUXEval).
    """

    executor: Executor | None
    math_checker: MathChecker | None = None
    inputs: str = "literal"

    def __post_init__(self) -> None:
        if self.inputs not in INPUT_MODES:
            raise ValueError(f"inputs must be one of {INPUT_MODES}, got {self.inputs!r}")

    def judge(self, items: Sequence[tuple[Task, Sequence[str]]]) -> list[list[Verdict]]:
        """One list of verdicts per (task, answers) item, in the order of the items and of
        their answers."""
        math = [i for i, (task, _) in enumerate(items) if task.type == "math"]
        code = [i for i, (task, _) in enumerate(items) if task.type != "math"]
        verdicts: list[list[Verdict]] = [[] for _ in items]
        for i, judged in zip(math, self._check_math([items[i] for i in math]), strict=True):
            verdicts[i] = judged
        for i, judged in zip(code, self._run_code([items[i] for i in code]), strict=True):
            verdicts[i] = judged
        return verdicts

    def _check_math(self, items: Sequence[tuple[Task, Sequence[str]]]) -> list[list[Verdict]]:
        """The math checker's verdicts, from one `check_many` call over all answers."""
        pairs = [(task.output, answer) for task, answers in items for answer in answers]
        if not pairs:
            return [[] for _ in items]
        if self.math_checker is None:
            raise ValueError("this judge has no math checker to judge math answers")
        flat = iter(self.math_checker.check_many(pairs))
        return [[next(flat) for _ in answers] for _, answers in items]

    def _run_code(self, items: Sequence[tuple[Task, Sequence[str]]]) -> list[list[Verdict]]:
        """The executor's verdicts, from one `verify_many` call."""
        if not items:
            return []
        if self.executor is None:
            raise ValueError("this judge has no executor to judge code-task answers")
        return self.executor.verify_many(items, inputs=self.inputs)
