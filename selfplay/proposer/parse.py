"""Reading a proposal out of the proposer's completion; never raises on model text.

deduction / abduction: the program is the last block in the answer that defines `f` (fenced,
with any or no language tag, or unfenced code starting at `def f(`), cleaned of top-level code
other than definitions. The input is the last block tagged `input` (or `args`, `arguments`),
else an `Input:` line, else the arguments of the last call of `f` in the program's top-level
code (the form the prompt asks for: the program ends with that call). An input given as a
whole call `f(...)` is reduced to its arguments.

induction: the calls of `f` in the answer's code blocks, one per line (the requested form), or
every block tagged `input`, in order, without duplicates; the message from a block tagged
`message`, a `<message>` section, a `Message:` line, or else the top-level comment lines of the
block that holds the calls (the requested form: `# what f does` above the calls). The message
is optional: a small model that writes good calls but no message still makes a task (the
solver sees the pairs either way).

math: the program as for deduction (its `f` takes no arguments; the input is empty) and the
word problem from a block tagged `problem` (or `question`), a `<problem>` section or a
`Problem:` line.

Failures say why: `no_program`, `no_input`, `no_inputs`, `too_few_inputs`, `no_problem`, and
`truncated` when a completion cut off by the token limit gave nothing usable.
"""

from __future__ import annotations

import re

from selfplay import extract
from selfplay.types import ParseFailure, Proposal, TaskType

__all__ = ["parse_proposal"]

_INPUT_TAGS = ("input", "inputs", "args", "arguments")
_CODE_TAGS = ("python", "py", "python3", "")
_MESSAGE = re.compile(r"<message>(.*?)(?:</message>|\Z)", re.S | re.I)
_PROBLEM = re.compile(r"<problem>(.*?)(?:</problem>|\Z)", re.S | re.I)


def parse_proposal(
    text: str,
    task_type: TaskType,
    program: str | None = None,
    min_inputs: int = 2,
    max_inputs: int | None = None,
    truncated: bool = False,
) -> Proposal | ParseFailure:
    """A `Proposal`, or a `ParseFailure` saying why none could be read.

    `program` is the given program of an induction proposal; `truncated` says the completion
    hit the token limit (the failure reason is then `truncated`).
    """
    if not isinstance(text, str) or not text.strip():
        return ParseFailure("empty", "the completion is empty")
    region = extract.answer_region(text)
    if task_type == "induction":
        result = _induction(region, text, program or "", min_inputs, max_inputs)
    elif task_type == "math":
        result = _math(region, text)
    else:
        result = _program_and_input(region, text, task_type)
    if isinstance(result, ParseFailure) and truncated:
        return ParseFailure("truncated", f"cut off by the token limit ({result.reason})")
    return result


def _program_and_input(region: str, text: str, task_type: TaskType) -> Proposal | ParseFailure:
    # Reasoning sometimes holds the only code; the answer region is preferred when it has some.
    candidates = extract.program_blocks(region) or extract.program_blocks(text)
    if not candidates:
        return ParseFailure("no_program", "no code defining `f` found")
    program, calls = extract.clean_program(candidates[-1])
    inputs = _tagged_inputs(region) or _tagged_inputs(text)
    found = (
        inputs[-1:]
        or extract.labelled(region, "input", "inputs")[-1:]
        or [c for c in calls if extract.is_argument_list(c)][-1:]
    )
    if not found or not found[0]:
        return ParseFailure("no_input", "no input found (expected a ```input block)")
    return Proposal(task_type, program, (_argument_text(found[0]),))


def _tagged_inputs(text: str) -> list[str]:
    return [b.body.strip() for b in extract.fenced_blocks(text) if b.lang in _INPUT_TAGS]


def _argument_text(value: str) -> str:
    """`[1, 2]` from `f([1, 2])`, `Input: [1, 2]` or `` `[1, 2]` ``; else the text stripped."""
    value = extract.strip_value(value)
    labelled = extract.labelled(value, "input")
    if labelled and "\n" not in value.strip():
        value = labelled[0]
    inner = extract.call_arguments(value)
    return inner if inner is not None else value


def _split_lines(body: str) -> list[str]:
    """One untagged or tagged block holding one argument list per line, split into inputs."""
    lines = [line.strip() for line in body.split("\n") if line.strip()]
    values = [_argument_text(line) for line in lines]
    if len(lines) > 1 and all(extract.is_argument_list(v) for v in values):
        return values
    return [_argument_text(body)]


def _induction(
    region: str, text: str, program: str, min_inputs: int, max_inputs: int | None
) -> Proposal | ParseFailure:
    if not program:
        raise ValueError("an induction proposal needs the program it was written for")
    blocks = [b for b in extract.fenced_blocks(region) if b.lang in _INPUT_TAGS]
    inputs = [v for b in blocks for v in _split_lines(b.body)]
    comments: list[str] = []
    if not inputs:  # the requested form: calls of `f`, one per line, in a code block
        code = [b.body for b in extract.fenced_blocks(region) if b.lang in _CODE_TAGS]
        with_calls = [(body, _calls(body)) for body in code]
        inputs = [c for _, calls in with_calls for c in calls]
        comments = [_comment(body) for body, calls in with_calls if calls]
    if not inputs:
        inputs = [_argument_text(v) for v in extract.labelled(region, "input")]
    if not inputs:
        return ParseFailure("no_inputs", "no inputs found (expected calls of `f`, one per line)")
    unique = list(dict.fromkeys(v for v in inputs if v))
    if len(unique) < min_inputs:
        return ParseFailure("too_few_inputs", f"{len(unique)} distinct inputs, need {min_inputs}")
    message = _message(region) or _message(text) or next((c for c in comments if c), "")
    return Proposal("induction", program, tuple(unique[:max_inputs]), message)


def _calls(body: str) -> list[str]:
    """Arguments of the calls of `f` in a block, line by line, comment lines skipped (a line
    that does not parse alone, such as a call spread over lines, is read with the block's
    parser). A block that does not parse whole either, such as good calls beside one written
    wrongly (`f(x: 10)`), keeps the calls whose lines parse alone."""
    lines = [line for line in body.split("\n") if line.strip() and not _is_comment(line)]
    found = [extract.call_arguments(line) for line in lines]
    alone = [f for f in found if f is not None]
    if found and len(alone) == len(found):
        return alone
    whole = [c for c in extract.clean_program(body)[1] if extract.is_argument_list(c)]
    return whole or alone


def _is_comment(line: str) -> bool:
    return line.lstrip().startswith("#")


def _comment(body: str) -> str:
    """The message written as comment lines at the top level of the block of calls
    (`# sorts the list`), joined; empty without one."""
    lines = [line.lstrip("#").strip() for line in body.split("\n") if line.startswith("#")]
    return " ".join(" ".join(lines).split())


def _message(text: str) -> str:
    tagged = [b.body for b in extract.fenced_blocks(text) if b.lang in ("message", "hint")]
    found = tagged or _MESSAGE.findall(text) or extract.labelled(text, "message", "hint")
    return " ".join(found[-1].split()) if found else ""


def _math(region: str, text: str) -> Proposal | ParseFailure:
    candidates = extract.program_blocks(region) or extract.program_blocks(text)
    if not candidates:
        return ParseFailure("no_program", "no code defining `f` found")
    program = extract.clean_program(candidates[-1])[0]
    problem = _problem(region) or _problem(text)
    if not problem:
        return ParseFailure("no_problem", "no word problem found (expected a ```problem block)")
    return Proposal("math", program, ("",), problem)


def _problem(text: str) -> str:
    tagged = [b.body for b in extract.fenced_blocks(text) if b.lang in ("problem", "question")]
    found = tagged or _PROBLEM.findall(text) or extract.labelled(text, "problem")
    return found[-1].strip() if found else ""
