"""The proposal layouts the prompts ask for, as regular expressions, for format-constrained
generation (`generation.constrained_proposals`: vLLM's structured output keeps every sampled
token inside the expression, so a small model cannot wander off the layout).

Each expression describes exactly the requested answer: an optional `<think>` section when
`roles.think` asks for one, then `<answer>` holding

deduction / abduction  one python block: definitions (imports, functions, classes, constants),
                       among them `def f(`, then, as the last line, one call `f(...)`
induction              one python block: an optional comment line (the message), then between
                       `induction_visible + 1` and `induction_inputs` calls `f(...)`, one per
                       line
math                   a problem block, then a python block of definitions with `def f():`

Every text of this shape reads back through `parse_proposal` (the parser is more forgiving
than the expression, never less), and each line is free text within its kind of line: the
expression fixes the layout, not the program. Lines of a program cannot start with a backtick,
so a code block ends only at its closing fence.
"""

from __future__ import annotations

from collections.abc import Sequence

from selfplay.config import RolesConfig
from selfplay.types import TaskType

__all__ = ["proposal_regex", "proposal_regexes"]

_THINK = r"<think>\n[^<]*</think>\n"
# A top-level line of a program without test code: a definition's first line, an indented or
# blank line, a closing bracket of a multi-line constant, a constant's assignment, a comment.
_PROGRAM_LINE = (
    r"(?:(?:import|from|def|class|@)[^\n]*"
    r"|[ \t][^\n]*"
    r"|[\]})][^\n]*"
    r"|[A-Za-z_][A-Za-z0-9_]*[ \t]*(?::[^\n=]*)?=[^\n]*"
    r"|#[^\n]*"
    r")?\n"
)
_CALL = r"f\([^\n]*\)\n"
_OPEN = r"```python\n"
_FENCE_END = r"```\n"


def _program(definition: str) -> str:
    """Program lines, one of which starts with `definition` (the head of `def f`)."""
    return rf"(?:{_PROGRAM_LINE})*{definition}[^\n]*\n(?:{_PROGRAM_LINE})*"


def proposal_regex(task_type: TaskType, roles: RolesConfig | None = None) -> str:
    """The layout of a proposal of `task_type` as the proposer prompt asks for it."""
    roles = roles or RolesConfig()
    if task_type == "induction":
        low, high = roles.induction_visible + 1, roles.induction_inputs
        body = rf"{_OPEN}(?:#[^\n]*\n)?(?:{_CALL}){{{low},{high}}}{_FENCE_END}"
    elif task_type == "math":
        problem = rf"```problem\n(?:[^`\n][^\n]*\n)+{_FENCE_END}"
        body = problem + _OPEN + _program(r"def f\(\)") + _FENCE_END
    else:
        body = _OPEN + _program(r"def f\(") + _CALL + _FENCE_END
    head = _THINK if roles.think else ""
    return rf"{head}<answer>\n{body}</answer>"


def proposal_regexes(config, task_types: Sequence[TaskType]) -> tuple[str, ...] | None:
    """One layout per proposer prompt (of the given task types, in order) when the config
    asks for constrained proposals (`generation.constrained_proposals`); else None."""
    if not config.generation.constrained_proposals:
        return None
    return tuple(proposal_regex(t, config.roles) for t in task_types)
