"""Parsers on the shapes models write, and on text that is not an answer at all."""

from __future__ import annotations

import random

import pytest

from selfplay.extract import clean_program, fenced_blocks
from selfplay.proposer import parse_proposal
from selfplay.solver import parse_answer
from selfplay.types import Answer, ParseFailure, Proposal

PROGRAM = "def f(xs):\n    return sorted(xs)"


@pytest.mark.parametrize(
    "text",
    [
        # the requested format
        "<think>\nsort it\n</think>\n<answer>\n"
        f"```python\n{PROGRAM}\n```\n```input\n[3, 1]\n```\n</answer>",
        # no tags, a language tag of another spelling, reasoning first
        f"Let me write one.\n```py\n{PROGRAM}\n```\nInput:\n```input\n[3, 1]\n```",
        # untagged fences, an `Input:` line instead of a block
        f"```\n{PROGRAM}\n```\n**Input:** `[3, 1]`",
        # the input given as a whole call, inside the answer section
        f"<answer>```python\n{PROGRAM}\n```\n```input\nf([3, 1])\n```</answer>",
        # test code after the function carries the input
        f"```python\n{PROGRAM}\n\nprint(f([3, 1]))\n```",
        # unfenced code
        f"Here it is:\n\n{PROGRAM}\n\nInput: [3, 1]",
        # closing fence glued to the last line; think section holding a draft
        "<think>```python\ndef f(x):\n    return x\n```</think>\n"
        f"```python\n{PROGRAM}```\n```input\n[3, 1]\n```",
    ],
)
def test_proposals_in_the_shapes_models_write(text):
    proposal = parse_proposal(text, "deduction")
    assert proposal == Proposal("deduction", PROGRAM, ("[3, 1]",)), proposal


def test_proposal_failures_are_typed():
    assert parse_proposal("", "abduction") == ParseFailure("empty", "the completion is empty")
    assert parse_proposal("I like turtles.", "abduction").reason == "no_program"
    assert parse_proposal(f"```python\n{PROGRAM}\n```", "abduction").reason == "no_input"
    cut = parse_proposal("<think>I will write a funct", "deduction", truncated=True)
    assert cut.reason == "truncated" and "no_program" in cut.detail


def test_induction_proposals():
    blocks = "\n".join(f"```input\n{v}\n```" for v in ("[1]", "[2, 3]", "[2, 3]", "f([])"))
    text = f"<answer>\n{blocks}\n```message\nIt sorts\nthe list.\n```\n</answer>"
    proposal = parse_proposal(text, "induction", program=PROGRAM)
    assert proposal == Proposal("induction", PROGRAM, ("[1]", "[2, 3]", "[]"), "It sorts the list.")
    one_block = "```input\n[1]\n[2]\n'a', 3\n```\nMessage: sorts things"
    assert parse_proposal(one_block, "induction", PROGRAM).inputs == ("[1]", "[2]", "'a', 3")
    assert parse_proposal("```input\n[1]\n```", "induction", PROGRAM).reason == "too_few_inputs"
    no_message = parse_proposal("```input\n[1]\n```\n```input\n[2]\n```", "induction", PROGRAM)
    assert no_message == Proposal("induction", PROGRAM, ("[1]", "[2]"), "")
    assert parse_proposal("nothing", "induction", PROGRAM).reason == "no_inputs"
    with pytest.raises(ValueError):  # our own mistake, not the model's
        parse_proposal("```input\n1\n```", "induction")


def test_induction_proposals_in_the_requested_layout():
    """One code block: a comment with the message, then one call per line."""
    text = (
        "<answer>\n```python\n# sorts a list\n# ascending\nf([1])\nf([2, 3])\nf([])\n```\n</answer>"
    )
    proposal = parse_proposal(text, "induction", program=PROGRAM)
    assert proposal == Proposal(
        "induction", PROGRAM, ("[1]", "[2, 3]", "[]"), "sorts a list ascending"
    )
    # a Message: line wins over the comment; a repeated function's body comments are no message
    repeated = f"```python\n{PROGRAM}\n    # inner\n\nprint(f([1]))\nf([2])\n```\nMessage: sorts"
    assert parse_proposal(repeated, "induction", PROGRAM).message == "sorts"
    silent = f"```python\n{PROGRAM}\n    # inner\n\nprint(f([1]))\nf([2])\n```"
    assert parse_proposal(silent, "induction", PROGRAM) == Proposal(
        "induction", PROGRAM, ("[1]", "[2]"), ""
    )
    # placeholders copied from the prompt are never inputs
    echoed = "```python\n# <what f does>\nf(<arguments 1>)\nf(<arguments 2>)\n```"
    assert parse_proposal(echoed, "induction", PROGRAM).reason == "no_inputs"
    # one call written wrongly does not lose the others (the block does not parse whole)
    slip = "```python\n# sorts\nf([3, 1])\nf(x: 10)\nf([2])\n```"
    assert parse_proposal(slip, "induction", PROGRAM).inputs == ("[3, 1]", "[2]")
    wrong = "```python\nf(x: 1)\nf(x: 2)\n```"  # every call wrong: nothing to read
    assert parse_proposal(wrong, "induction", PROGRAM).reason == "no_inputs"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<think>add</think><answer>\n```output\n[1, 2]\n```\n</answer>", "[1, 2]"),
        ("<answer>[1, 2]</answer>", "[1, 2]"),
        ("The output is below.\n```\n'abc'\n```", "'abc'"),
        ("So the answer is:\nOutput: `{'a': 1}`.", "{'a': 1}"),
        ("```python\nassert f([2, 1]) == [1, 2]\n```", "[1, 2]"),
        ("f([2, 1]) == (1, 2)", "(1, 2)"),
    ],
)
def test_deduction_answers(text, expected):
    assert parse_answer(text, "deduction") == Answer("deduction", expected)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("<answer>\n```input\n[2, 1], 'x'\n```\n</answer>", "[2, 1], 'x'"),
        ("```python\nf([2, 1])\n```", "[2, 1]"),
        ("Input: f('abc')", "'abc'"),
        ("assert f(3, 4) == 7", "3, 4"),
        ("```python\nf('ab')  # a comment (with parentheses)\n```", "'ab'"),
    ],
)
def test_abduction_answers(text, expected):
    assert parse_answer(text, "abduction") == Answer("abduction", expected)


def test_induction_answers_are_cleaned_programs():
    text = f"<think>hmm</think>\n```python\nimport math\n\n{PROGRAM}\n\nprint(f([2, 1]))\n```"
    assert parse_answer(text, "induction") == Answer("induction", f"import math\n\n{PROGRAM}")
    assert parse_answer("no idea", "induction").reason == "no_program"
    assert parse_answer("no idea", "deduction").reason == "no_answer"
    assert parse_answer("```output\n", "deduction", truncated=True).reason == "truncated"


def test_clean_program_keeps_definitions_and_collects_calls():
    source = (
        "import math\nLIMIT = 3\nVOWELS = set('aeiou')\n\n@staticmethod\ndef g(x):\n"
        "    return x\n\ndef f(a, b):\n    return a + b\n\nresult = f(1, 2)\n"
        "shown = str(print(g(1)))\nn = int(input())\nxs = list(map(f, range(9)))\n"
        "status = g(2)\nassert f(3, 4) == 7\n"
        "if __name__ == '__main__':\n    print(f('a', 'b'))\n"
    )
    program, calls = clean_program(source)
    assert program == (
        "import math\n\nLIMIT = 3\n\nVOWELS = set('aeiou')\n\n@staticmethod\ndef g(x):\n"
        "    return x\n\ndef f(a, b):\n    return a + b"
    )
    assert calls == ["1, 2", "3, 4", "'a', 'b'"]
    assert clean_program("def f(:\n") == ("def f(:\n", [])


def test_a_program_that_does_not_parse_still_gives_its_call():
    """A broken program in the requested layout (here a body that is only a comment, which
    the layout cannot tell from code) is a task the executor refuses as a syntax error, not a
    completion without a task: its last-line call is still read."""
    from selfplay.executor.policy import PolicyRejection, compile_program

    source = "def f(x):\n    # Your code here\n\n# Test the function\nf(1)\n    f(2)\n"
    program, calls = clean_program(source)
    assert calls == ["1"]
    assert program == "def f(x):\n    # Your code here\n\n# Test the function\n    f(2)\n"
    text = f"<answer>\n```python\n{source.replace('    f(2)', '')}```\n</answer>"
    proposal = parse_proposal(text, "deduction")
    assert isinstance(proposal, Proposal) and proposal.inputs == ("1",)
    rejection = compile_program(proposal.program)
    assert isinstance(rejection, PolicyRejection) and rejection.reason == "syntax"


def test_fenced_blocks_left_open_are_marked():
    [block] = fenced_blocks("text\n```python\ndef f(x):\n    return")
    assert block.lang == "python" and not block.closed and block.body.endswith("return")


def test_parsers_never_raise_on_garbage():
    """Random mixtures of fences, tags, labels and code fragments give results, never errors."""
    pieces = [
        "```", "```python", "```input", "```output", "```message", "~~~", "<think>", "</think>",
        "<answer>", "</answer>", "def f(", "def f(x):", "    return x", "Input:", "Output:",
        "f(", ")", "(", "[", "]", "'", '"', "\\", "assert f(1) ==", "\n", "\n\n", "==", "#",
        "\x00", "é", "lambda", "if __name__ == '__main__':", "print(f(1))", "import os",
    ]  # fmt: skip
    rng = random.Random(0)
    for _ in range(2000):
        text = "".join(rng.choice(pieces) + rng.choice(["", " ", "\n"]) for _ in range(12))
        for kind in ("deduction", "abduction"):
            assert isinstance(parse_proposal(text, kind), Proposal | ParseFailure)
            assert isinstance(parse_answer(text, kind), Answer | ParseFailure)
        assert isinstance(parse_proposal(text, "induction", PROGRAM), Proposal | ParseFailure)
        assert isinstance(parse_answer(text, "induction"), Answer | ParseFailure)
