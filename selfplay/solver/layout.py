"""The answer layouts the solver prompts ask for, as regular expressions, for format-constrained
generation (`generation.constrained_answers`: vLLM's structured output keeps every sampled
token of an answer inside its expression).

The expression fixes the form of the answer, never its value:

deduction   one line, a Python literal: a string in quotes (the whole line), or a line that
            begins like a literal (a number, a bracket, True, False, None, set( or frozenset()
abduction   one line of arguments, literals only (as the prompt asks), so the line begins
            like one
induction   one python block of definitions, among them `def f(` (after it no top-level
            assignment: `selfplay.proposer.layout.program_regex`)
math        an answer section that holds a closed `\\boxed{...}`
assert      (the `assert` layout of deduction and abduction) one line, `assert f(...) == ...`

A small model that knows the value but not the notation (SmolLM2-135M answered `f('Hello
World')` with `Hello World`, unquoted, so never right) is kept to the notation; what it writes
inside is its own. Every text of this shape reads back through `parse_answer`. The expression
covers what the model writes: after the prompt's prefilled opening when `roles.prefill` begins
the reply (inside the code block without thinking, inside `<think>` with it), the whole reply
otherwise, with a think section (when `roles.think`) at most `think_chars` characters long
and without `<` (as in the proposal layouts: the section ends at the first tag).
"""

from __future__ import annotations

from collections.abc import Sequence

from selfplay.config import RolesConfig
from selfplay.proposer.layout import THINK_CHARS_MOST, program_regex, think_limit
from selfplay.solver.prompts import answer_opening
from selfplay.types import TaskType

__all__ = ["answer_regex", "answer_regexes"]

# The `assert` layout's answer: the completed assertion, one line.
_ASSERTION = r"assert f\([^\n]*\) == [^\n]+\n"

# A quoted string, bytes and raw ones included, with escapes; nothing may follow it on its line.
_STRING = r"""(?:[rR][bB]?|[bB][rR]?)?(?:'(?:[^'\\\n]|\\[^\n])*'|"(?:[^"\\\n]|\\[^\n])*")"""
# How a literal that is not a string begins (infinities and NaN as the executor writes them).
_LITERAL_HEAD = (
    r"(?:[\[({]|-?[0-9]|-?\.[0-9]|True|False|None|set\(|frozenset\(|-?float\(|-?inf|nan)"
)
_VALUE = rf"(?:{_STRING}|{_LITERAL_HEAD}[^\n]*)\n"
_ARGUMENTS = rf"[ \t]*(?:{_STRING}|{_LITERAL_HEAD})[^\n]*\n"


def answer_regex(
    task_type: TaskType,
    roles: RolesConfig | None = None,
    think_chars: int = THINK_CHARS_MOST,
    layout: str = "answer",
) -> str:
    """What the solver writes for a task of `task_type` in `layout` as its prompt asks (see
    the module)."""
    roles = roles or RolesConfig()
    think = rf"[^<]{{0,{think_chars}}}</think>\n"
    if layout == "assert" and task_type in ("deduction", "abduction"):
        if not roles.think:
            return _ASSERTION
        return (think if roles.prefill else rf"<think>\n{think}") + _ASSERTION
    if task_type == "math":  # the math prompt begins no reply
        head = rf"<think>\n{think}" if roles.think else ""
        box = r"\\boxed\{(?:[^{}<]|\{[^{}<]*\})+\}"  # closed, not empty, braces one deep
        return rf"{head}<answer>\n[^<]*{box}[^<]*</answer>"
    content = {
        "deduction": _VALUE,
        "abduction": _ARGUMENTS,
        "induction": program_regex(r"def f\("),
    }[task_type]
    block = answer_opening(task_type).replace("\n", r"\n")  # no other character is special
    rest = rf"{content}```\n</answer>"
    if roles.prefill:
        # the prompt begins the reply: inside <think>, or inside the answer's code block
        return think + block + rest if roles.think else rest
    return (rf"<think>\n{think}" if roles.think else "") + block + rest


def answer_regexes(
    config, task_types: Sequence[TaskType], layouts: Sequence[str] | None = None
) -> tuple[str, ...] | None:
    """One expression per solver prompt (of the given task types, in order, in `layouts`,
    else the answer layout) when the config asks for constrained answers
    (`generation.constrained_answers`); else None. Thinking may take about half of the
    completion's tokens."""
    if not config.generation.constrained_answers:
        return None
    think = think_limit(config.generation.max_new_tokens)
    layouts = layouts or ("answer",) * len(task_types)
    return tuple(
        answer_regex(t, config.roles, think, layout)
        for t, layout in zip(task_types, layouts, strict=True)
    )
