"""The solver's answer layouts as regular expressions (`generation.constrained_answers`).

Every answer of CRUXEval (its 800 outputs, and its inputs written as literals) fits the expression in
every roles setting and reads back through `parse_answer` unchanged, so the constraint forbids
no right answer of that benchmark; the expression refuses what can never be right (a string
without quotes, prose after a value, a call). A slow test has SmolLM2 answer constrained with
vLLM: every answer that ends on its own parses.
"""

from __future__ import annotations

import ast
import json
import re

import pytest

from selfplay.config import RolesConfig, load
from selfplay.proposer.layout import think_limit
from selfplay.solver import parse_answer, reply, solver_prompt, solver_stop
from selfplay.solver.layout import answer_regex, answer_regexes
from selfplay.types import Answer, Task
from tests.conftest import generate_once, require_data

SETTINGS = [RolesConfig(think=t, prefill=p) for t in (False, True) for p in (False, True)]
PROGRAM = "def f(s, n):\n    return s * n"
FENCES = {"deduction": "output", "abduction": "input", "induction": "python"}


def written(value: str, kind: str, roles: RolesConfig) -> tuple[str, str]:
    """The whole reply with `value` as the answer, and the part of it the model writes."""
    think = "<think>\nworking it out\n</think>\n" if roles.think else ""
    whole = f"{think}<answer>\n```{FENCES[kind]}\n{value}\n```\n</answer>"
    if not roles.prefill:
        return whole, whole
    opening = "<think>\n" if roles.think else f"<answer>\n```{FENCES[kind]}\n"
    return whole, whole[len(opening) :]


def returned(completion: str, roles: RolesConfig) -> str:
    """The completion as the engine returns it: cut before the first stop string."""
    at = min((completion.find(s) for s in solver_stop(roles) if s in completion), default=None)
    return completion if at is None else completion[:at]


def assert_fits(value: str, kind: str) -> None:
    for roles in SETTINGS:
        whole, completion = written(value, kind, roles)
        assert re.fullmatch(answer_regex(kind, roles), completion), (roles, completion)
        read = whole[: len(whole) - len(completion)] + returned(completion, roles)
        assert parse_answer(read, kind) == Answer(kind, value.strip()), (roles, read)


@pytest.mark.parametrize(
    "value",
    ["'Hello World'", "r'a\\tb'", '"it\'s"', "'a\\'b'", "b'xy'", "-3", "0.5", "-.5", "1e-3", "True", "None",
     "float('inf')", "-float('inf')", "float('nan')",
     "[1, 'a']", "(1,)", "{'a': 1}", "set()", "frozenset({1})", "{1, 2}"],
)  # fmt: skip
def test_literals_fit_the_deduction_layout(value):
    assert_fits(value, "deduction")


def literals(arguments: str) -> bool:
    """Whether `arguments` are the arguments of a call written as literals only."""
    try:
        ast.literal_eval(f"[{arguments}]")
    except (SyntaxError, ValueError):
        return False
    return bool(arguments.strip())


def test_every_cruxeval_answer_fits_its_layout_and_reads_back():
    path = require_data("cruxeval/cruxeval.jsonl")
    problems = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    assert len(problems) == 800
    inputs = [p["input"] for p in problems if literals(p["input"])]
    # 12 inputs are not literals, as the solver prompt asks (`dict(e=1)`, `range(100, 120)`,
    # a name), and one `f` takes no arguments
    assert len(inputs) == 787
    for p in problems:
        assert_fits(p["output"], "deduction")
    for arguments in inputs:
        assert_fits(arguments, "abduction")


def test_a_program_fits_the_induction_layout():
    assert_fits("import math\n\ndef f(x):\n    # the root\n    return math.sqrt(x)", "induction")


@pytest.mark.parametrize(
    "kind, completion",
    [
        ("deduction", "Hello World\n```\n</answer>"),  # a string without quotes
        ("deduction", "'abc' is returned\n```\n</answer>"),  # prose after the value
        ("deduction", "f('abc')\n```\n</answer>"),  # a call, not a value
        ("deduction", "'abc'\n'def'\n```\n</answer>"),  # two lines
        ("abduction", "s='ab', n=2\n```\n</answer>"),  # a keyword first, not a literal
        ("induction", "return x\n```\n</answer>"),  # no def f(
    ],
)
def test_the_layout_refuses_answers_that_cannot_be_right(kind, completion):
    roles = RolesConfig(think=False, prefill=True)  # the completion follows the prefill
    assert not re.fullmatch(answer_regex(kind, roles), completion)
    right = {"deduction": "'abc'", "abduction": "'ab', 2", "induction": "def f(x):\n    return x"}
    assert re.fullmatch(answer_regex(kind, roles), f"{right[kind]}\n```\n</answer>")


def test_math_answers_hold_a_boxed_value():
    regex = answer_regex("math", RolesConfig(think=False))
    assert re.fullmatch(regex, "<answer>\nso \\boxed{42}\n</answer>")
    assert re.fullmatch(regex, "<answer>\n\\boxed{\\frac{1}{2}}\n</answer>")
    for unreadable in ("42", "\\boxed{}", "\\boxed{42"):
        assert not re.fullmatch(regex, f"<answer>\n{unreadable}\n</answer>")


def test_regexes_follow_the_config():
    assert answer_regexes(load(), ["deduction"]) is None
    config = load(None, ["generation.constrained_answers=true", "generation.max_new_tokens=64"])
    regexes = answer_regexes(config, ["deduction", "abduction", "deduction"])
    think = think_limit(64)
    assert regexes[0] == regexes[2] == answer_regex("deduction", config.roles, think)
    assert regexes[1] == answer_regex("abduction", config.roles, think)


@pytest.mark.slow
def test_smollm2_answers_constrained_in_notation_that_parses(require_vllm):
    """The embedded model on vLLM, constrained, as the demo runs it (prefilled, no thinking):
    every answer that ends on its own parses, and the identity task's string comes back in
    quotes (unconstrained, the model wrote it bare)."""
    from dataclasses import replace

    from selfplay.engine import sampling
    from selfplay.runs import IDENTITY_SEED

    config = load(None, ["engine.backend=vllm", "roles.think=false", "roles.prefill=true",
                         "generation.temperature=0.7", "generation.top_p=0.9",
                         "generation.constrained_answers=true",
                         "generation.max_new_tokens=64"])  # fmt: skip
    tasks = [
        Task("deduction", IDENTITY_SEED[0], (IDENTITY_SEED[1],), (IDENTITY_SEED[1],)),
        Task("abduction", PROGRAM, ("'ab', 2",), ("'abab'",)),
    ]
    prompts = [solver_prompt(t, config.roles) for t in tasks]
    params = sampling(config.generation, n=8, seed=0, stop=solver_stop(config.roles))
    params = replace(params, regex=answer_regexes(config, [t.type for t in tasks]))
    generations = generate_once(config, prompts, params)
    for task, prompt, generation in zip(tasks, prompts, generations, strict=True):
        for c in generation.completions:
            answer = parse_answer(reply(prompt, c.text), task.type, truncated=c.cut)
            assert c.cut or isinstance(answer, Answer), (c.text, answer)
    answers = [
        parse_answer(reply(prompts[0], c.text), "deduction") for c in generations[0].completions
    ]
    assert any(isinstance(a, Answer) and a.text[0] in "'\"" for a in answers), answers
