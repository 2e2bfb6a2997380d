"""Proposer prompts: invent a task of a given type, conditioned on K reference tasks.

deduction / abduction  the model writes a program `f` and one input; the executor runs it to
                       get the output. For deduction the solver will predict the output, for
                       abduction an input, so the two prompts ask for different difficulty.
induction              the model is given a program (from the store) and writes several inputs
                       and a short message describing the function; the solver sees some pairs
                       and the message and must write `f`.
math                   the model writes a short word problem and a program whose `f()` computes
                       its answer; the executor runs `f()` for the gold answer, the solver sees
                       only the problem.

The rules stated here are the executor's (`selfplay.executor.guards`), listed from its tables so
that prompt and sandbox cannot drift apart.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence

from selfplay.config import RolesConfig
from selfplay.engine.base import Chat, chat
from selfplay.executor.guards import FORBIDDEN_BUILTINS
from selfplay.executor.modules import ALLOWED_MODULES
from selfplay.types import Task, TaskType

__all__ = [
    "SYSTEM",
    "rules",
    "format_task",
    "answer_format",
    "proposer_prompt",
    "shown_programs",
    "shown_references",
]

SYSTEM = (
    "You are a careful Python programmer who invents and solves small programming puzzles. "
    "A sandboxed checker runs every program; anything that breaks its rules is discarded."
)

VALUE_TYPES = "None, bool, int, float, str, bytes, list, tuple, dict, set or frozenset"
LITERALS = "numbers, strings, lists, tuples, dicts, sets, True, False, None"
_VALUE_CHARS = 300  # longest input or output text shown in a reference


# Builtins of the interactive prompt that programs never reach for; naming them lengthens the
# prompt for nothing.
_INTERACTIVE = frozenset({"copyright", "credits", "license", "help", "exit", "quit"})


def _importable(module: str) -> bool:
    if module.startswith("_"):
        return False
    try:
        return importlib.util.find_spec(module) is not None
    except ImportError:  # e.g. string.templatelib before Python 3.14
        return False


def rules(final_call: bool = False, min_statements: int = 0, trivial: bool = False) -> str:
    """The executor's rules for a task program, as the prompts state them; with `final_call`
    the program ends with the call of `f` that fixes the task's input. `min_statements` is
    the validate stage's floor (`selfplay.proposer.complexity`); `trivial` states the store
    stage's refusal of trivial tasks (`selfplay.trivial`)."""
    modules = ", ".join(sorted(m for m in ALLOWED_MODULES if _importable(m)))
    banned = ", ".join(sorted(n for n in FORBIDDEN_BUILTINS - _INTERACTIVE if n[0] != "_"))
    return "\n".join(
        [
            "Rules for the program (the checker enforces them):",
            "- Define a function named `f`; helper functions and classes are fine. "
            + (
                "Besides definitions, write only the final call of `f`."
                if final_call
                else "Do not call `f` or print anything yourself: only definitions are kept."
            ),
            "- `f` must be deterministic: the same input always gives the same output. No "
            "randomness, clock, files, network or environment.",
            f"- Import only from these modules: {modules}.",
            f"- Not available: {banned}, and names or attributes starting with an underscore.",
            "- `f` must finish well within a second and return a plain value made of "
            f"{VALUE_TYPES}.",
            f"- The arguments of a call of `f` are literals only ({LITERALS}).",
            *(
                [
                    "- The output must depend on the input: a function that returns its input "
                    "unchanged, ignores it, or gives the same output for other inputs is "
                    "discarded, and so is a copy of an earlier puzzle."
                ]
                if trivial
                else []
            ),
            *(
                [
                    f"- Together, the functions have at least {min_statements} statements "
                    "(lines of code that do something): a one-line function is too simple."
                ]
                if min_statements
                else []
            ),
        ]
    )


def _short(value: str) -> str:
    return value if len(value) <= _VALUE_CHARS else value[:_VALUE_CHARS] + " ..."


def format_task(task: Task, number: int | None = None, pairs: str = "all") -> str:
    """A task as prompts show it; `pairs` is all or visible (induction shows only those)."""
    head = f"### Puzzle {number} ({task.type})\n" if number is not None else ""
    program = f"```python\n{task.program.strip()}\n```\n"
    shown = task.visible_pairs if pairs == "visible" else tuple(zip(task.inputs, task.outputs))
    lines = [f"f({_short(i)}) == {_short(o)}" for i, o in shown]
    message = f"Message: {task.message}\n" if task.message else ""
    return head + program + message + "\n".join(lines)


def answer_format(body: str, think: bool) -> str:
    """How to lay out the reply: reasoning (optional), then the answer between tags."""
    lead = (
        "First think it through inside <think> </think>, then give your final answer inside "
        "<answer> </answer>, exactly in this format:\n<think>\n...\n</think>\n"
        if think
        else "Give your answer inside <answer> </answer>, exactly in this format:\n"
    )
    return f"{lead}<answer>\n{body}\n</answer>"


_GOALS = {
    "deduction": "Another model will see the function and the input and must predict the output "
    "without running the code. Make working out the output take careful, step-by-step "
    "reasoning, not a guess.",
    "abduction": "Another model will see the function and its output and must find an input "
    "that produces that output. Make working backwards from the output take careful "
    "reasoning, not a guess.",
}


_NOT_GUESSABLE = (
    " The input must not be guessable: if a common input (such as 0, 1, 3, 'abc' or "
    "[1, 2, 3]) also gives your output, the puzzle is discarded."
)


def _as_answer(task: Task, layout: str = "answer") -> str:
    """A reference written the way the proposer is asked to answer, with what the checker
    made of it, so that the examples also teach the format; with `layout` "assert" a
    deduction or abduction reference is the function alone and `assert f(input) == output`,
    which a copy would have to rewrite; with "calls", the call and its output alone, with no
    function to copy (`roles.reference_layout`)."""
    if task.type == "induction":
        calls = [f"f({_short(i)})" for i in task.inputs]
        lines = [f"# {task.message}", *calls] if task.message else calls
        return f"```python\n{task.program.strip()}\n```\n{_calls(lines)}"
    if layout == "assert":
        check = f"assert f({_short(task.input)}) == {_short(task.output)}"
        return f"```python\n{task.program.strip()}\n```\n{check}"
    if layout == "calls":
        return f"`f({_short(task.input)})` returned `{_short(task.output)}`."
    program = f"```python\n{task.program.strip()}\n\nf({_short(task.input)})\n```"
    return f"{program}\nIt returns {_short(task.output)}."


def _calls(lines: Sequence[str]) -> str:
    return "```python\n" + "\n".join(lines) + "\n```"


def shown_references(
    references: Sequence[Task], roles: RolesConfig, induction: bool = False
) -> list[Task]:
    """The references a proposer prompt shows: induction proposals are shown induction tasks,
    program-and-input proposals deduction and abduction tasks (they have the same shape);
    programs longer than `roles.reference_chars` are left out."""
    return [
        t
        for t in references
        if len(t.program) <= roles.reference_chars
        and t.type != "math"
        and (t.type == "induction") == induction
    ]


def shown_programs(task_type: str, references: Sequence[Task], roles: RolesConfig) -> list[str]:
    """The programs a deduction or abduction proposer prompt shows (none for other types):
    what a proposal is steered away from copying (`generation.avoid_reference_ngrams`)."""
    if task_type not in ("deduction", "abduction"):
        return []
    return [t.program for t in shown_references(references, roles)]


def _references(references: Sequence[Task], roles: RolesConfig, induction: bool) -> str:
    usable = shown_references(references, roles, induction)
    if not usable:
        return "There are no earlier puzzles yet: invent the first one."
    shown = "\n\n".join(
        f"Puzzle {k + 1}:\n{_as_answer(t, roles.reference_layout)}" for k, t in enumerate(usable)
    )
    return f"Earlier puzzles, for reference (make yours different from all of them):\n\n{shown}"


def proposer_prompt(
    task_type: TaskType,
    references: Sequence[Task],
    roles: RolesConfig | None = None,
    program: str | None = None,
    refuse_trivial: bool = False,
    topic: str | None = None,
    refuse_stock: bool = False,
) -> Chat:
    """The chat asking for a new task; induction needs the `program` to write inputs for.
    `refuse_trivial` states that trivial tasks are discarded (`curriculum.keep_trivial`
    false); a deduction or abduction prompt may name a `topic` to build `f` around
    (`selfplay.proposer.topics`). `refuse_stock` states, to an abduction prompt, that a task a
    stock input solves is discarded (`curriculum.refuse_stock_inputs`)."""
    roles = roles or RolesConfig()
    if task_type == "math":
        return chat(_math(references, roles), SYSTEM)
    if task_type == "induction":
        if not program:
            raise ValueError("an induction proposal is written for a given program")
        return chat(_induction(program, references, roles, refuse_trivial), SYSTEM)
    body = "```python\ndef f(<parameters>):\n    <body>\n\nf(<arguments>)\n```"
    idea = f" Build `f` around this idea: {topic}." if topic else ""
    guess = _NOT_GUESSABLE if refuse_stock and task_type == "abduction" else ""
    # asked last, after the references, the ask says what they are to it
    unlike = (
        ", unlike the earlier ones"
        if roles.ask_last and shown_references(references, roles)
        else ""
    )
    ask = [
        f"Invent a new puzzle{unlike}: a Python function `f` and one input for it. "
        f"{_GOALS[task_type]}{guess}{idea}",
        "Write one Python code block: the function `f`, then, as its last line, one call of "
        "`f` on the input you chose. The checker runs that call to get the output.",
    ]
    shown = _references(references, roles, induction=False)
    checked = rules(final_call=True, min_statements=roles.min_statements, trivial=refuse_trivial)
    if roles.ask_last:  # what to write is the last thing read before the answer
        parts = [shown, checked, *ask]
    else:
        parts = [*ask, checked, shown]
    text = "\n\n".join([*parts, answer_format(body, roles.proposer_thinks)])
    return chat(text, SYSTEM)


def _induction(
    program: str, references: Sequence[Task], roles: RolesConfig, refuse_trivial: bool
) -> str:
    n = roles.induction_inputs
    calls = [f"f(<arguments {k + 1}>)" for k in range(n)]
    body = _calls(["# <what f does, in one sentence>", *calls])
    return "\n\n".join(
        [
            f"Here is a Python function:\n```python\n{program.strip()}\n```",
            f"Write {n} calls of `f` on different inputs that together reveal what `f` does. "
            "Another model will see some of the inputs with their outputs and must write `f`; "
            "it is checked on the other inputs.",
            "Write one Python code block: a comment line that hints at what `f` does without "
            f"giving the code away, then the {n} calls, one per line. Do not repeat the function. "
            f"The arguments of each call are literals only ({LITERALS}).",
            *(
                [
                    "Calls whose outputs are all equal, or each equal to its input, reveal "
                    "nothing: such a puzzle is discarded."
                ]
                if refuse_trivial
                else []
            ),  # fmt: skip
            _references(references, roles, induction=True),
            answer_format(body, roles.proposer_thinks),
        ]
    )


def _math(references: Sequence[Task], roles: RolesConfig) -> str:
    # Labeled problems (no program, answers that need not be numbers) are no model for what
    # the proposer must write.
    usable = [
        t
        for t in references
        if t.type == "math" and not t.is_labeled_math and len(t.program) <= roles.reference_chars
    ]
    shown = "\n\n".join(
        f"Problem {k + 1}:\n```problem\n{t.message}\n```\n"
        f"```python\n{t.program.strip()}\n```\nIts answer is {_short(t.output)}."
        for k, t in enumerate(usable)
    )
    references_text = (
        f"Earlier problems, for reference (make yours different from all of them):\n\n{shown}"
        if usable
        else "There are no earlier problems yet: invent the first one."
    )
    body = "```problem\n<the word problem>\n```\n```python\ndef f():\n    <body>\n```"
    return "\n\n".join(
        [
            "Invent a new math word problem whose answer is one number, and a Python function "
            "`f()`, without arguments, that computes that answer. Another model will see only "
            "the problem and must solve it by reasoning. Make solving it take several careful "
            "steps, not a guess.",
            "Write the problem in a ```problem block and the function in a ```python block. "
            "The checker runs `f()` to get the answer: it must return an int or a float.",
            rules(),
            references_text,
            answer_format(body, roles.proposer_thinks),
        ]
    )
