"""CRUXEval's published prompt formats and answer extraction (`selfplay eval cruxeval
--prompt-format direct|cot`), so that scores compare with the benchmark's published tables.

Source: the benchmark's repository, github.com/facebookresearch/cruxeval: `prompts.py`
(`make_direct_output_prompt`, `make_cot_output_prompt`, `make_direct_input_prompt`,
`make_cot_input_prompt`: the prompt texts), `openai/openai_prompt.py` (how chat models are
asked: that system message, the prompt as the user's message) and
`inference/tasks/{output,input}_prediction.py` (generation stops at `[/ANSWER]`; the answer
extraction). The prompt texts are the benchmark's specification and are reproduced here as
published, few-shot examples included: they are the only prompts of this project that show
example values (see tests/test_prompt_values.py).

Extraction, as published for the open models (`postprocess_generation` of those tasks): chain
of thought keeps what follows the first `[ANSWER]`; an output is what follows `==`; an input is
what precedes `==`, after `assert`: a call `f(...)`. The benchmark then runs
`assert f(...) == output`; the judge here runs the call's arguments in the sandbox, so an input
answer that is not a call of `f` is counted unreadable (as published it could not pass either).
"""

from __future__ import annotations

from typing import Literal

from selfplay.engine.base import Chat, Message, chat
from selfplay.extract import call_arguments
from selfplay.types import ParseFailure

__all__ = [
    "STYLES",
    "STOP",
    "SYSTEM",
    "EXAMPLE_ANSWERS",
    "copies_example",
    "restarts",
    "published_prompt",
    "published_answer",
]

Style = Literal["direct", "cot"]
STYLES: tuple[Style, ...] = ("direct", "cot")
STOP = ("[/ANSWER]",)
SYSTEM = (
    "You are an expert at Python programming, code execution, test case generation, and fuzzing."
)

_OUTPUT_TASK = (
    "You are given a Python function and an assertion containing an input to the function. "
    "Complete the assertion with a literal (no unsimplified expressions, no function calls) "
    "containing the output when executing the provided code on the given input, even if the "
    "function is incorrect or incomplete. Do NOT output any extra information. "
)
_DIRECT_OUTPUT = (
    _OUTPUT_TASK + "Provide the full assertion with the correct output in [ANSWER] and "
    "[/ANSWER] tags, following the examples.\n\n"
    "[PYTHON]\ndef f(n):\n    return n\nassert f(17) == ??\n[/PYTHON]\n"
    "[ANSWER]\nassert f(17) == 17\n[/ANSWER]\n\n"
    '[PYTHON]\ndef f(s):\n    return s + "a"\nassert f("x9j") == ??\n[/PYTHON]\n'
    '[ANSWER]\nassert f("x9j") == "x9ja"\n[/ANSWER]\n\n'
    "[PYTHON]\n{code}\nassert f({input}) == ??\n[/PYTHON]\n[ANSWER]\n"
)
_COT_OUTPUT = (
    _OUTPUT_TASK + "Execute the program step by step before arriving at an answer, and "
    "provide the full assertion with the correct output in [ANSWER] and [/ANSWER] tags, "
    "following the examples.\n\n"
    '[PYTHON]\ndef f(s):\n    s = s + s\n    return "b" + s + "a"\nassert f("hi") == ??\n'
    "[/PYTHON]\n[THOUGHT]\nLet's execute the code step by step:\n\n"
    "1. The function f is defined, which takes a single argument s.\n"
    '2. The function is called with the argument "hi", so within the function, s is '
    'initially "hi".\n'
    '3. Inside the function, s is concatenated with itself, so s becomes "hihi".\n'
    '4. The function then returns a new string that starts with "b", followed by the value '
    'of s (which is now "hihi"), and ends with "a".\n'
    '5. The return value of the function is therefore "bhihia".\n[/THOUGHT]\n'
    '[ANSWER]\nassert f("hi") == "bhihia"\n[/ANSWER]\n\n'
    "[PYTHON]\n{code}\nassert f({input}) == ??\n[/PYTHON]\n[THOUGHT]\n"
)
_DIRECT_INPUT = (
    "You will be given a function f and an output in the form f(??) == output. Find any input "
    "such that executing f on the input leads to the given output. There may be multiple "
    "answers, but you should only output one. In [ANSWER] and [/ANSWER] tags, complete the "
    "assertion with one such input that will produce the output when executing the "
    "function.\n\n"
    "[PYTHON]\ndef f(my_list):\n    count = 0\n    for i in my_list:\n"
    "        if len(i) % 2 == 0:\n            count += 1\n    return count\n"
    "assert f(??) == 3\n[/PYTHON]\n"
    '[ANSWER]\nassert f(["mq", "px", "zy"]) == 3\n[/ANSWER]\n\n'
    '[PYTHON]\ndef f(s1, s2):\n    return s1 + s2\nassert f(??) == "banana"\n[/PYTHON]\n'
    '[ANSWER]\nassert f("ba", "nana") == "banana"\n[/ANSWER]\n\n'
    "[PYTHON]\n{code}\nassert f(??) == {output}\n[/PYTHON]\n[ANSWER]\n"
)
_COT_INPUT = (
    "You will be given a function f and an output in the form f(??) == output. Your task is "
    "to find any input such that executing f on the input leads to the given output. There "
    "may be multiple answers, but only output one. First, think step by step. You MUST "
    "surround the answer with [ANSWER] and [/ANSWER] tags. Express your answer as a passing "
    "assertion containing the input and the given output.\n\n"
    "[PYTHON]\ndef f(x):\n    return x + 1\nassert f(??) == 17\n[/PYTHON]\n"
    "[THOUGHT]\nTo find an input such that executing f on the input leads to the given "
    "output, we can work backwards from the given assertion. We know that f(??) == 17. \n\n"
    "Since the function f(x) returns x + 1, for f(??) to be equal to 17, the value of ?? "
    "should be 16. \n[/THOUGHT]\n"
    "[ANSWER]\nassert f(16) == 17\n[/ANSWER]\n\n"
    "[PYTHON]\n{code}\nassert f(??) == {output}\n[/PYTHON]\n[THOUGHT]\n"
)
_TEMPLATES = {
    ("deduction", "direct"): _DIRECT_OUTPUT,
    ("deduction", "cot"): _COT_OUTPUT,
    ("abduction", "direct"): _DIRECT_INPUT,
    ("abduction", "cot"): _COT_INPUT,
}


#: The answers of each prompt's worked examples as `published_answer` extracts them. A model
#: that gives one of them to a problem of its own copies the prompt: a trained model's answers
#: can drift there (`17` on CRUXEval-O, `["mq", "px", "zy"]` on CRUXEval-I), which
#: `selfplay report --compare` counts.
EXAMPLE_ANSWERS: dict[tuple[str, Style], tuple[str, ...]] = {
    ("deduction", "direct"): ("17", '"x9ja"'),
    ("deduction", "cot"): ('"bhihia"',),
    ("abduction", "direct"): ('["mq", "px", "zy"]', '"ba", "nana"'),
    ("abduction", "cot"): ("16",),
}


def copies_example(answer: str, kind: str, style: Style) -> bool:
    """Whether a recorded answer is one of the prompt's worked examples' answers: its first
    line, stripped (a model that runs on past the answer writes the prompt's tags after it)."""
    first = answer.strip().split("\n")[0].strip()
    return first in EXAMPLE_ANSWERS[(kind, style)]


def restarts(reply: str) -> bool:
    """Whether a reply begins a new `[PYTHON]` block: it writes the prompt's few-shot document
    over again, from an example on, instead of answering the last one. The trained coder's
    replies did this on 110 of the first 200 CRUXEval-O problems after 10 steps of self-play
    (base model: 9), and what the extraction reads from them is the first example's answer."""
    return reply.lstrip().startswith("[PYTHON]")


def published_prompt(
    kind: str, style: Style, code: str, input: str, output: str, completing: bool = False
) -> Chat:
    """The benchmark's prompt for output prediction (`deduction`: shows `input`) or input
    prediction (`abduction`: shows `output`), as a chat model is asked it; `completing`, as
    the benchmark's harness asks open models (`inference/utils.py`): the text alone, no system
    message and no chat template, for the model to continue (a reply begun with nothing
    before it, `engine.template.render`)."""
    # str.replace, not str.format: the code holds braces of its own.
    text = _TEMPLATES[(kind, style)].replace("{code}", code)
    text = text.replace("{input}", input) if kind == "deduction" else text
    text = text.replace("{output}", output) if kind == "abduction" else text
    return (Message("assistant", text),) if completing else chat(text, SYSTEM)


def published_answer(text: str, kind: str, style: Style) -> str | ParseFailure:
    """The answer as the benchmark extracts it: an output's text, or an input's arguments."""
    if style == "cot" and "[ANSWER]" in text:
        text = text.split("[ANSWER]")[1]
    text = text.strip()
    if kind == "deduction":
        value = text.split("==")[1].strip() if "==" in text else text
        return value or ParseFailure("no_answer", "no output found")
    if "==" in text:
        text = text.split("==")[0].strip()
    if "assert" in text:
        text = text.split("assert")[1].strip()
    arguments = call_arguments(text)
    if arguments is None:
        return ParseFailure("no_answer", f"the input is not a call of f: {text[:80]!r}")
    return arguments
