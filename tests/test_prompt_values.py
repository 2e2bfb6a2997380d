"""No prompt carries an example value a model could echo as its answer.

A concrete example in a prompt (`the input [3, 1, 2], 'abc' means ...`) is what a small model
copies: the coder model answered 195 of 200 CRUXEval-I problems with exactly that example.
Prompts describe layouts with placeholders that never parse as an answer (`<xs>, <n>`,
`f(<arguments>)`). This test renders every prompt the project writes, for tasks whose own data
is unmistakable, removes that data, and looks for Python literals in what is left: in inline
code, in code blocks and in any call of `f`.

The benchmark's published CRUXEval formats (`--prompt-format direct|cot`) are exempt: they are
the benchmark's specification, few-shot examples included, reproduced as published.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

import pytest

from selfplay.config import RolesConfig
from selfplay.engine.base import Chat, chat
from selfplay.extract import fenced_blocks
from selfplay.proposer import proposer_prompt
from selfplay.solver import humaneval_prompt, math_prompt, mbpp_prompt, solver_prompt
from selfplay.types import Task

PROGRAM = "def f(alpha, beta):\n    return [alpha] * beta"
INPUT, OUTPUT = "'zq-input', 2", "['zq-input', 'zq-input']"
TASKS = {
    "deduction": Task("deduction", PROGRAM, (INPUT,), (OUTPUT,)),
    "abduction": Task("abduction", PROGRAM, (INPUT,), (OUTPUT,)),
    "induction": Task(
        "induction",
        PROGRAM,
        (INPUT, "'zq-b', 1", "'zq-c', 0", "'zq-d', 3"),
        (OUTPUT, "['zq-b']", "[]", "['zq-d', 'zq-d', 'zq-d']"),
        message="zq-message repeats",
        n_visible=2,
    ),
    "math": Task("math", "def f():\n    return 12", ("",), ("12",), "zq-problem: 3 * 4?"),
}
# Solved examples shown above a task (`roles.worked_examples`): their values are their own data.
EXAMPLES = {
    kind: Task(kind, "def f(gamma):\n    return gamma + 'zq-y'", ("'zq-ex'",), ("'zq-exzq-y'",))
    for kind in ("deduction", "abduction")
}
_INLINE = re.compile(r"`([^`\n]+)`")
_CALL = re.compile(r"\bf\(([^()\n]*)\)")


def _own_data() -> list[str]:
    """Text that belongs to the tasks rendered, longest first so that parts go after wholes."""
    parts = {"12"}
    for task in (*TASKS.values(), *EXAMPLES.values()):
        parts |= {task.program, task.message, *task.inputs, *task.outputs}
    return sorted((p for p in parts if p), key=len, reverse=True)


def _without_task_data(text: str) -> str:
    for part in _own_data():
        text = text.replace(part, "<task data>")
    return text


def _is_literal(text: str) -> bool:
    """Whether text is a Python literal or an argument list of literals (`...` counts)."""
    text = text.strip()
    if not text:
        return False
    for candidate in (text, f"({text},)"):
        try:
            ast.literal_eval(candidate)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            continue
        return True
    return False


def _snippets(text: str) -> Iterator[str]:
    yield from _INLINE.findall(text)
    for block in fenced_blocks(text):
        yield from block.body.split("\n")
    yield from _CALL.findall(text)


def example_values(prompt: Chat) -> list[str]:
    """The literal values a prompt shows beyond its task's own data."""
    text = _without_task_data("\n".join(m.content for m in prompt))
    return [s for s in _snippets(text) if _is_literal(s)]


def project_prompts() -> Iterator[tuple[str, Chat]]:
    """Every prompt the project renders: both roles, every task type, the benchmarks'."""
    for think in (True, False):
        roles = RolesConfig(think=think)
        for kind in ("deduction", "abduction", "math"):
            yield f"proposer/{kind}/{think}", proposer_prompt(kind, [], roles)
        yield f"proposer/induction/{think}", proposer_prompt("induction", [], roles, PROGRAM)
        for kind, task in TASKS.items():
            yield f"solver/{kind}/{think}", solver_prompt(task, roles)
        for kind, example in EXAMPLES.items():
            shown = solver_prompt(TASKS[kind], roles, [example])
            yield f"solver/{kind}/examples/{think}", shown
            yield f"solver/{kind}/assert/{think}", solver_prompt(TASKS[kind], roles, (), "assert")
            shown = solver_prompt(TASKS[kind], roles, [example], "assert")
            yield f"solver/{kind}/assert-examples/{think}", shown
        yield f"eval/math/{think}", math_prompt("zq-problem: 3 * 4?", roles)
        yield f"eval/humaneval/{think}", humaneval_prompt(PROGRAM, roles)
        yield f"eval/mbpp/{think}", mbpp_prompt("zq-message repeats", [INPUT], roles)


def test_the_scanner_finds_the_values_that_were_echoed():
    echoed = (
        "Write the input as the argument list of one call to `f`, with literals only: the "
        "input `[3, 1, 2], 'abc'` means the call `f([3, 1, 2], 'abc')`.\n```input\n...\n```"
    )
    assert example_values(chat(echoed)) == ["[3, 1, 2], 'abc'", "...", "[3, 1, 2], 'abc'"]


@pytest.mark.parametrize("name, prompt", list(project_prompts()))
def test_no_prompt_shows_an_example_value(name, prompt):
    assert example_values(prompt) == [], name


def test_the_abduction_layout_uses_the_tasks_own_parameters():
    text = solver_prompt(TASKS["abduction"])[1].content
    assert "```input\n<alpha>, <beta>\n```" in text and "f(<alpha>, <beta>)" in text
