"""Solver prompts: predict the output (deduction), find an input (abduction), write `f` from
visible input/output pairs and the proposer's message (induction); and the prompts of the
benchmarks (`selfplay eval`): a math word problem or competition problem (GSM8K, MATH-500), a
function to complete (HumanEval) or to write from a description and its tests (MBPP)."""

from __future__ import annotations

import ast
import random
from collections.abc import Sequence
from typing import get_args

from selfplay.config import RolesConfig
from selfplay.engine.base import Chat, chat
from selfplay.engine.template import begun
from selfplay.extract import ANSWER_STOP
from selfplay.proposer.prompts import LITERALS, SYSTEM, answer_format, rules
from selfplay.solver.examples import shown_answer
from selfplay.types import SolverLayout, Task

__all__ = [
    "LAYOUTS",
    "solver_prompt",
    "solver_stop",
    "draw_layouts",
    "reply",
    "math_prompt",
    "humaneval_prompt",
    "mbpp_prompt",
]

MATH_SYSTEM = "You are a careful mathematician who solves problems step by step."

#: How a deduction or abduction task can be asked (`roles.solver_layouts`): `answer`, the
#: value alone in the answer section's code block; `assert`, the task as an assertion with
#: `??` in place of the answer, written back whole. Other task types have one layout.
LAYOUTS: tuple[SolverLayout, ...] = get_args(SolverLayout)


def solver_prompt(
    task: Task,
    roles: RolesConfig | None = None,
    examples: Sequence[Task] = (),
    layout: str = "answer",
) -> Chat:
    """The solver's prompt for `task` in `layout` (deduction and abduction; see `LAYOUTS`);
    `examples` (tasks of its type, `solver.examples.worked_examples`) are shown first, each
    solved in the layout."""
    roles = roles or RolesConfig()
    _check(layout)
    if task.type == "math":
        return math_prompt(task.message, roles)
    if layout == "assert" and task.type in _QUESTIONS:
        return _assert_prompt(task, roles, examples)
    build = {"deduction": _deduction, "abduction": _abduction, "induction": _induction}
    begun = ""
    if roles.prefill:
        begun = "<think>\n" if roles.think else answer_opening(task.type)
    text = build[task.type](task, roles.think)
    if examples and task.type in _QUESTIONS:
        text = _with_examples(text, task.type, examples)
    return chat(text, SYSTEM, begun)


# The code fence each answer opens with (see the layouts in `_deduction` and the others).
_FENCES = {"deduction": "output", "abduction": "input", "induction": "python"}


def answer_opening(task_type: str) -> str:
    """The answer section's beginning, up to the first line of its code block."""
    return f"<answer>\n```{_FENCES[task_type]}\n"


# The line that closes the answer's code block.
CLOSING_FENCE = "\n```"
# A code block's closing fence on a line of its own, the line ended: unlike `CLOSING_FENCE`,
# never the opening fence of a block that follows a line of text (`...:\n```python`).
CLOSED_BLOCK = "\n```\n"


def solver_stop(
    roles: RolesConfig | None = None, task_type: str = "deduction", layout: str = "answer"
) -> tuple[str, ...]:
    """Where the solver's generation of a `task_type` answer in `layout` ends: at `</answer>`,
    and, when the reply begins inside the answer's code block (`roles.prefill` without
    thinking; not for math, whose prompt begins no reply and whose answer may hold code
    blocks), at the block's closing fence, since nothing after it is read; an assertion (the
    `assert` layout) without thinking, at the end of a code block's last line (`CLOSED_BLOCK`);
    with thinking, whose code blocks would end it too, at the end of the sequence or the token
    limit (constrained answers end it at the assertion's line). A model that does not
    close its answer section must not spend tokens, or be trained, on what it writes there:
    the coder model, after 16 steps of self-play, wrote its answer and then the fence again
    until the token limit, every answer 256 tokens long, each one reinforced with its
    answer's reward."""
    roles = roles or RolesConfig()
    _check(layout)
    if layout == "assert" and task_type in _QUESTIONS:
        return ANSWER_STOP if roles.think else (*ANSWER_STOP, CLOSED_BLOCK)
    inside_block = roles.prefill and not roles.think and task_type != "math"
    return (*ANSWER_STOP, CLOSING_FENCE) if inside_block else ANSWER_STOP


def draw_layouts(roles: RolesConfig, purpose: str, count: int, seed: int) -> tuple[str, ...]:
    """A layout for each of `count` prompts of `purpose` from `roles.solver_layouts`: for
    training, drawn with `seed` (with one layout, that one, without a draw); for a new task's
    solve rate (`estimate`), the first, so that every new task is measured alike."""
    layouts = roles.solver_layouts
    if len(layouts) == 1 or purpose == "estimate":
        return layouts[:1] * count
    rng = random.Random(seed)
    return tuple(rng.choice(layouts) for _ in range(count))


def _check(layout: str) -> None:
    if layout not in LAYOUTS:
        raise ValueError(f"solver layout {layout!r}: choose from {', '.join(LAYOUTS)}")


def reply(prompt: Chat, text: str) -> str:
    """The whole reply to `prompt`: the text the prompt began it with, then the completion.
    Parse this, not the completion alone, when the solver's reply was prefilled."""
    return begun(prompt) + text


# How a solved example states its task; its answer is the one a copy would give.
_QUESTIONS = {
    "deduction": lambda t: f"The call `f({t.input})` returns:",
    "abduction": lambda t: f"An input for which `f` returns `{t.output}`:",
}


def _with_examples(text: str, task_type: str, examples: Sequence[Task]) -> str:
    """`text` after the solved examples, each its function, its question and its answer as
    the solver writes one (without reasoning)."""
    shown = [
        f"Example {n}. Here is a Python function:\n{_program(example)}\n"
        + _QUESTIONS[task_type](example)
        + f"\n{answer_opening(task_type)}{shown_answer(example)}{CLOSING_FENCE}\n</answer>"
        for n, example in enumerate(examples, 1)
    ]
    intro = "Solved examples of this kind of task, each with its own function and values:"
    return "\n\n".join([intro, *shown, "Now your task.", text])


def _assertion(task: Task, answer: str) -> str:
    """The task's assertion with `answer` in the answer's place (`??`: the question)."""
    if task.type == "deduction":
        return f"assert f({task.input}) == {answer}"
    return f"assert f({answer}) == {task.output}"


# The `assert` layout: what `??` stands for, and what replaces it.
_BLANKS = {
    "deduction": (
        "what the call returns",
        "the value the call returns, written as a Python literal; work it out without running code",
    ),
    "abduction": (
        "the call's arguments",
        "arguments for which it holds, in the order of `f`'s parameters, literals only "
        f"({LITERALS})",
    ),
}


def _assert_prompt(task: Task, roles: RolesConfig, examples: Sequence[Task]) -> Chat:
    """The task as an assertion to complete, written back whole; the worked examples as
    completed assertions. The reply is never begun for the model (but for `<think>`), so that
    it learns how to begin one; its answer is read from the assertion (`parse_answer`)."""
    blank, fill = _BLANKS[task.type]
    code = f"```python\n{task.program.strip()}\n{_assertion(task, '??')}\n```"
    lead = "First think it through inside <think> </think>, then write" if roles.think else "Write"
    text = "\n\n".join(
        [
            f"Here is a Python function and an assertion about one call of it, with `??` in "
            f"place of {blank}:\n{code}",
            f"Complete the assertion: replace `??` with {fill}.",
            f"{lead} the completed assertion alone, on one line.",
        ]
    )
    if examples:
        shown = [
            f"Example {n}.\n```python\n{e.program.strip()}\n{_assertion(e, shown_answer(e))}\n```"
            for n, e in enumerate(examples, 1)
        ]
        intro = "Completed assertions of this kind, each about its own function:"
        text = "\n\n".join([intro, *shown, "Now yours.", text])
    return chat(text, SYSTEM, "<think>\n" if roles.prefill and roles.think else "")


def _program(task: Task) -> str:
    return f"```python\n{task.program.strip()}\n```"


def _deduction(task: Task, think: bool) -> str:
    return "\n\n".join(
        [
            f"Here is a Python function:\n{_program(task)}",
            f"What does the call `f({task.input})` return? Work it out without running code.",
            # no list of types or values here: SmolLM2 answered with it ("None, bool, int, ...")
            "Write the returned value as a Python literal, as `repr()` prints it: a str in "
            "quotes, a list in brackets, a dict in braces.",
            answer_format("```output\n<value>\n```", think),
        ]
    )


def _abduction(task: Task, think: bool) -> str:
    arguments = parameter_placeholders(task.program)
    return "\n\n".join(
        [
            f"Here is a Python function:\n{_program(task)}",
            f"Find an input for which `f` returns exactly `{task.output}`.",
            "Write the input as the arguments of one call of `f`, in the order of its "
            f"parameters, as literals only ({LITERALS}): for the call `f({arguments})` write "
            f"`{arguments}` with each placeholder replaced by a value.",
            answer_format(f"```input\n{arguments}\n```", think),
        ]
    )


def parameter_placeholders(program: str) -> str:
    """`<xs>, <n>` for `def f(xs, n)`: the layout of an input in the task's own parameter
    names, placeholders that are never a valid answer (they do not parse as Python), so a
    model that copies the layout cannot score with it; `<arguments>` if `f` is not found."""
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        tree = ast.Module(body=[], type_ignores=[])
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "f":
            args = node.args
            names = [a.arg for a in (*args.posonlyargs, *args.args)]
            names += [f"{args.vararg.arg}..."] if args.vararg else []
            if names:
                return ", ".join(f"<{name}>" for name in names)
    return "<arguments>"


def _induction(task: Task, think: bool) -> str:
    pairs = "\n".join(f"f({i}) == {o}" for i, o in task.visible_pairs)
    hint = f"\n\nIts author describes it: {task.message}" if task.message else ""
    return "\n\n".join(
        [
            f"A Python function `f` gave these results:\n{pairs}{hint}",
            "Write the function `f`. It is checked on other inputs as well, so it must do what "
            "the original does in general, not only on these examples.",
            rules(),
            answer_format("```python\ndef f(<parameters>):\n    <body>\n```", think),
        ]
    )


def math_prompt(problem: str, roles: RolesConfig | None = None) -> Chat:
    """A math problem; the final answer goes in `\\boxed{}` inside the answer section."""
    roles = roles or RolesConfig()
    text = "\n\n".join(
        [
            f"Solve this problem:\n{problem.strip()}",
            "Write the final answer as a number or a LaTeX expression in \\boxed{}.",
            answer_format("\\boxed{<answer>}", roles.think),
        ]
    )
    return chat(text, MATH_SYSTEM)


def humaneval_prompt(prompt: str, roles: RolesConfig | None = None) -> Chat:
    """A function signature with its docstring, to be completed."""
    roles = roles or RolesConfig()
    text = "\n\n".join(
        [
            f"Complete this Python function:\n```python\n{prompt.strip()}\n```",
            "Write the whole function, its signature included, in one Python code block. It is "
            "checked by hidden tests.",
            answer_format("```python\n<code>\n```", roles.think),
        ]
    )
    return chat(text, SYSTEM)


def mbpp_prompt(description: str, tests: list[str], roles: RolesConfig | None = None) -> Chat:
    """A task description and the asserts the function must pass (MBPP's own prompt format)."""
    roles = roles or RolesConfig()
    shown = "\n".join(tests)
    text = "\n\n".join(
        [
            f"{description.strip()} Your code should pass these tests:\n```python\n{shown}\n```",
            "Write the function in one Python code block, without the tests.",
            answer_format("```python\n<code>\n```", roles.think),
        ]
    )
    return chat(text, SYSTEM)
