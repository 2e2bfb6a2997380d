"""The proposal layouts the prompts ask for, as regular expressions, for format-constrained
generation (`generation.constrained_proposals`: vLLM's structured output keeps every sampled
token inside the expression, so a small model cannot wander off the layout).

Each expression describes exactly the requested answer: an optional `<think>` section when
the proposer is asked to think (`roles.think` and `roles.proposer_think`; at most
`think_chars` characters, so that thinking cannot use up the token budget the answer needs:
`proposal_regexes` allows about half of `generation.max_new_tokens`), then `<answer>` holding

deduction / abduction  one python block: definitions (imports, functions, classes, and
                       before `def f(` constants), among them `def f(`, then, as the last line,
                       one call `f(...)` with arguments
induction              one python block: an optional comment line (the message), then between
                       `induction_visible + 1` and `induction_inputs` calls `f(...)` with
                       arguments, one per line
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

__all__ = ["proposal_regex", "proposal_regexes", "program_regex", "think_limit"]

CHARS_PER_TOKEN = 4  # about, in English and code, for the tokenizers of the models we use
# A top-level line of a program without test code: a definition's first line, an indented or
# blank line, a closing bracket of a multi-line constant, a comment, and before `def f` a
# constant's assignment. After `def f` an assignment is test code (`result = f(...)`, then
# `print_result = ...`): half of the proposals the coder wrote past the token limit looped on
# such lines (docs/results.md), so there the next top-level line is a definition or the call.
# Before it no line is `def f(` (else, while the text is written, `def f` could still be to
# come and an assignment after it would be allowed).
# (a keyword and a space: `imported = f(1)` is an assignment; no `;` after an import)
_OTHER_LINE = (
    r"(?:import|from)[ \t][^\n;]*|class[ \t][^\n]*|@[^\n]*|[ \t][^\n]*|[\]})][^\n]*|#[^\n]*"
)
_DEF_LINE = r"def[ \t][^\n]*"
_DEF_NOT_F = r"def[ \t]+(?:[^f \t\n][^\n]*|f[A-Za-z0-9_][^\n]*)"  # not `def f(` (nor `def f (`)
_ASSIGNMENT_LINE = r"[A-Za-z_][A-Za-z0-9_]*[ \t]*(?::[^\n=]*)?=[^\n]*"
_EARLIER_LINE = rf"(?:{_OTHER_LINE}|{_DEF_NOT_F}|{_ASSIGNMENT_LINE})?\n"
_LATER_LINE = rf"(?:{_OTHER_LINE}|{_DEF_LINE})?\n"
_CALL = r"f\([^) \t\n][^\n]*\)\n"  # with arguments: `f()` gives no input
_OPEN = r"```python\n"
_FENCE_END = r"```\n"


def program_regex(definition: str) -> str:
    """Program lines, the first of which to start with `def f(` starting with `definition`
    (`def f(` or `def f()`); after it, no top-level assignment."""
    return rf"(?:{_EARLIER_LINE})*{definition}[^\n]*\n(?:{_LATER_LINE})*"


def proposal_regex(
    task_type: TaskType, roles: RolesConfig | None = None, think_chars: int = 2048
) -> str:
    """The layout of a proposal of `task_type` as the proposer prompt asks for it, its think
    section (when `roles.proposer_thinks`) at most `think_chars` characters long."""
    roles = roles or RolesConfig()
    if task_type == "induction":
        low, high = roles.induction_visible + 1, roles.induction_inputs
        body = rf"{_OPEN}(?:#[^\n]*\n)?(?:{_CALL}){{{low},{high}}}{_FENCE_END}"
    elif task_type == "math":
        problem = rf"```problem\n(?:[^`\n][^\n]*\n)+{_FENCE_END}"
        body = problem + _OPEN + program_regex(r"def f\(\)") + _FENCE_END
    else:
        body = _OPEN + program_regex(r"def f\(") + _CALL + _FENCE_END
    head = rf"<think>\n[^<]{{0,{think_chars}}}</think>\n" if roles.proposer_thinks else ""
    return rf"{head}<answer>\n{body}</answer>"


def proposal_regexes(config, task_types: Sequence[TaskType]) -> tuple[str, ...] | None:
    """One layout per proposer prompt (of the given task types, in order) when the config
    asks for constrained proposals (`generation.constrained_proposals`); else None. Thinking
    may take about half of the completion's tokens."""
    if not config.generation.constrained_proposals:
        return None
    think = think_limit(config.generation.max_new_tokens)
    return tuple(proposal_regex(t, config.roles, think) for t in task_types)


THINK_CHARS_MOST = 2048  # structured-output backends build a state per repetition of `{0,N}`


def think_limit(max_new_tokens: int) -> int:
    """The think section's length limit for a completion of `max_new_tokens`: about half, at
    most `THINK_CHARS_MOST` characters."""
    return min(max_new_tokens // 2 * CHARS_PER_TOKEN, THINK_CHARS_MOST)
