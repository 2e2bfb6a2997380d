"""Solver prompts: predict the output (deduction), find an input (abduction), write `f` from
visible input/output pairs and the proposer's message (induction)."""

from __future__ import annotations

from selfplay.config import RolesConfig
from selfplay.engine.base import Chat, chat
from selfplay.proposer.prompts import SYSTEM, VALUE_TYPES, answer_format, rules
from selfplay.types import Task

__all__ = ["solver_prompt"]


def solver_prompt(task: Task, roles: RolesConfig | None = None) -> Chat:
    roles = roles or RolesConfig()
    build = {"deduction": _deduction, "abduction": _abduction, "induction": _induction}
    return chat(build[task.type](task, roles.think), SYSTEM)


def _program(task: Task) -> str:
    return f"```python\n{task.program.strip()}\n```"


def _deduction(task: Task, think: bool) -> str:
    return "\n\n".join(
        [
            f"Here is a Python function:\n{_program(task)}",
            f"What does the call `f({task.input})` return? Work it out without running code.",
            f"Write the returned value as a Python literal ({VALUE_TYPES}).",
            answer_format("```output\n...\n```", think),
        ]
    )


def _abduction(task: Task, think: bool) -> str:
    return "\n\n".join(
        [
            f"Here is a Python function:\n{_program(task)}",
            f"Find an input for which `f` returns exactly `{task.output}`.",
            "Write the input as the argument list of one call to `f`, with literals only: the "
            "input `[3, 1, 2], 'abc'` means the call `f([3, 1, 2], 'abc')`.",
            answer_format("```input\n...\n```", think),
        ]
    )


def _induction(task: Task, think: bool) -> str:
    pairs = "\n".join(f"f({i}) == {o}" for i, o in task.visible_pairs)
    hint = f"\n\nIts author describes it: {task.message}" if task.message else ""
    return "\n\n".join(
        [
            f"A Python function `f` gave these results:\n{pairs}{hint}",
            "Write the function `f`. It is checked on other inputs as well, so it must do what "
            "the original does in general, not only on these examples.",
            rules(),
            answer_format("```python\ndef f(...):\n    ...\n```", think),
        ]
    )
