"""Reading the solver's answer out of its completion; never raises on model text.

deduction  the last block tagged `output` (or `answer`, `result`), else the last untagged,
           `text` or `python` block that is one expression, else the `<answer>` section itself
           when it is one line, else an `Output:` line, else `f(...) == value` /
           `assert f(...) == value`. Inline backticks and a final full stop are removed.
abduction  likewise with `input` (untagged blocks must be an argument list or a call of `f`);
           a whole call `f(...)` is reduced to its arguments.
induction  the last program defining `f`, cleaned of top-level test code (see `extract`);
           with `bare_programs`, a program whose top-level code demonstrates it (a call, an
           assertion) is no answer (`test_code`; `extract.has_test_code`).
math       the final answer as `selfplay.mathcheck.extract_answer` reads it (`\\boxed{}`,
           "the answer is", a last number, ...), for the math checker.

The answer text goes to `Executor.verify` as it is; whether it is a valid literal or program is
the executor's judgement, not the parser's.
"""

from __future__ import annotations

import ast
import re

from selfplay import extract
from selfplay.mathcheck.extract import extract_answer
from selfplay.types import Answer, ParseFailure, TaskType

__all__ = ["parse_answer"]

_VALUE_TAGS = {
    "deduction": ("output", "answer", "result", "return"),
    "abduction": ("input", "inputs", "args", "arguments", "answer"),
}
# Blocks with these tags hold an answer only when their text has the answer's shape.
_GENERIC_TAGS = ("text", "plaintext", "python", "py", "")
_LABELS = {"deduction": ("output", "returns", "result"), "abduction": ("input",)}
_EQUALS = re.compile(r"^\s*(?:assert\s+)?f\((.*)\)\s*==\s*(.+?)\s*$", re.M)


def parse_answer(
    text: str, task_type: TaskType, truncated: bool = False, bare_programs: bool = False
) -> Answer | ParseFailure:
    if not isinstance(text, str) or not text.strip():
        return ParseFailure("empty", "the completion is empty")
    region = extract.answer_region(text)
    if task_type == "math":
        value = extract_answer(text) or ""
    elif task_type == "induction":
        found = extract.program_blocks(region) or extract.program_blocks(text)
        if found and bare_programs and extract.has_test_code(found[-1]):
            why = "the program demonstrates itself at top level (calls, prints, asserts)"
            return ParseFailure("test_code", why)
        value = extract.clean_program(found[-1])[0] if found else ""
    else:
        value = _value(region, task_type, has_answer_tag="<answer>" in text.lower())
    if value:
        return Answer(task_type, value)
    missing = "no_program" if task_type == "induction" else "no_answer"
    reason = "truncated" if truncated else missing
    return ParseFailure(reason, f"no {task_type} answer found")


def _value(region: str, task_type: TaskType, has_answer_tag: bool) -> str:
    blocks = [b for b in extract.fenced_blocks(region) if b.body.strip()]
    tagged = [b.body for b in blocks if b.lang in _VALUE_TAGS[task_type]]
    generic = [
        _normalise(b.body, task_type)
        for b in blocks
        if b.lang in _GENERIC_TAGS and "def f" not in b.body
    ]
    generic = [v for v in generic if _shaped(v, task_type)]
    if tagged or generic:
        return _normalise(tagged[-1], task_type) if tagged else generic[-1]
    if has_answer_tag and region.strip() and "\n" not in region.strip():
        return _normalise(region, task_type)
    labelled = extract.labelled(region, *_LABELS[task_type])
    if labelled:
        return _normalise(labelled[-1], task_type)
    equations = _EQUALS.findall(region)
    if equations:
        arguments, result = equations[-1]
        return _normalise(result if task_type == "deduction" else arguments, task_type)
    return ""


def _shaped(value: str, task_type: TaskType) -> bool:
    """Whether text from an untagged block looks like the answer: one expression for an output,
    an argument list for an input (code that merely mentions values does not)."""
    if task_type == "abduction":
        return extract.is_argument_list(value)
    try:
        ast.parse(value, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return False
    return True


def _normalise(value: str, task_type: TaskType) -> str:
    value = extract.strip_value(value)
    if task_type == "deduction":
        # `f(3) == 9` or `assert f(3) == 9` written inside the answer block.
        match = _EQUALS.match(value)
        return extract.strip_value(match.group(2)) if match else value
    match = _EQUALS.match(value)
    if match:
        return match.group(1).strip()
    inner = extract.call_arguments(value)
    return inner if inner is not None else value
