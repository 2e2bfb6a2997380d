"""The proposal layouts as regular expressions (format-constrained generation).

Two directions: every proposal the parser reads from real completions (the recorded SmolLM2
fixtures, the AZR seed programs) still fits the expression when written in the requested
layout, so the constraint forbids no program or input the parser takes; and every text the
expression allows reads back through the parser, including as the engine returns it (cut
before the stop string `</answer>`). A slow test has SmolLM2 write constrained proposals with
vLLM and parses them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from selfplay.config import RolesConfig, load
from selfplay.proposer import parse_proposal, proposal_regex, proposal_regexes
from selfplay.proposer.layout import think_limit
from selfplay.types import ParseFailure, Proposal
from tests.conftest import generate_once, require_data
from tests.fixture_report import parsed

FIXTURES = Path(__file__).parent / "fixtures" / "completions.jsonl"
ROLES = RolesConfig()
PROGRAM = "def f(xs):\n    return sorted(xs)"


def layout(proposal: Proposal, think: bool) -> str:
    """A proposal written the way the proposer prompt asks for it."""
    head = "<think>\nworking it out\n</think>\n" if think else ""
    if proposal.type == "induction":
        comment = [f"# {proposal.message}"] if proposal.message else []
        lines = "\n".join([*comment, *(f"f({i})" for i in proposal.inputs)])
        body = f"```python\n{lines}\n```\n"
    elif proposal.type == "math":
        body = f"```problem\n{proposal.message}\n```\n```python\n{proposal.program}\n```\n"
    else:
        body = f"```python\n{proposal.program}\n\nf({proposal.inputs[0]})\n```\n"
    return f"{head}<answer>\n{body}</answer>"


def read_back(text: str, proposal: Proposal):
    return parse_proposal(
        text,
        proposal.type,
        program=proposal.program,
        min_inputs=ROLES.induction_visible + 1,
        max_inputs=ROLES.induction_inputs,
    )


def assert_fits(proposal: Proposal) -> None:
    for think in (True, False):
        text = layout(proposal, think)
        regex = proposal_regex(proposal.type, RolesConfig(think=think))
        assert re.fullmatch(regex, text), text
        assert read_back(text, proposal) == proposal
        assert read_back(text.removesuffix("</answer>"), proposal) == proposal


def fixture_proposals() -> list[Proposal]:
    records = [json.loads(line) for line in FIXTURES.read_text().splitlines()]
    found = [parsed(r) for r in records if r["role"] == "proposer"]
    return [p for p in found if isinstance(p, Proposal)]


def assigns_after_f(program: str) -> bool:
    """Whether a top-level assignment follows `def f(` (test code: the layout refuses it)."""
    lines = program.splitlines()
    heads = [k for k, line in enumerate(lines) if line.startswith("def f(")]
    return bool(heads) and any(
        re.match(r"[A-Za-z_]\w*\s*(:[^=]*)?=", line) for line in lines[heads[0] + 1 :]
    )


def test_every_recorded_proposal_fits_its_layout():
    """... but those with test code after `def f`, which the layout refuses on purpose."""
    proposals = fixture_proposals()
    assert len(proposals) >= 40
    refused = 0
    for proposal in proposals:
        if proposal.type == "induction":  # the stage reads between these many inputs
            inputs = proposal.inputs[: ROLES.induction_inputs]
            if len(inputs) <= ROLES.induction_visible:
                continue
            proposal = Proposal("induction", proposal.program, inputs, "hints at f")
        if proposal.type != "induction" and assigns_after_f(proposal.program):
            regex = proposal_regex(proposal.type, RolesConfig(think=False))
            assert not re.fullmatch(regex, layout(proposal, think=False))
            refused += 1
            continue
        assert_fits(proposal)
    assert refused == 4  # of the 50 recorded proposals (they print or reassign f after it)


def test_the_seed_programs_fit_their_layout():
    """The AZR seed programs: real code of every shape (helpers, classes, imports, constants)."""
    path = require_data("azr_seed/7b_coder_seed_io.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines()][:300]
    for row in rows:
        written = layout(Proposal("deduction", row["snippet"], (row["input"],)), think=False)
        proposal = parse_proposal(written, "deduction")
        if isinstance(proposal, Proposal) and "\n" not in proposal.inputs[0]:
            assert_fits(proposal)


@pytest.mark.parametrize(
    "kind, text",
    [
        ("deduction", f"<answer>\n```python\nimport math\n\n{PROGRAM}\n\nf([2, 1])\n```\n"),
        (
            "abduction",
            "<answer>\n```python\n# constants\nLIMIT: int = 3\nTABLE = {\n    'a': 1,\n}\n"
            "@staticmethod\ndef g(x):\n    return x\ndef f(xs):\n    return xs[:LIMIT]\n"
            "f([1, 2, 3, 4])\n```\n",
        ),
        ("induction", "<answer>\n```python\nf([1])\nf([2, 1])\nf([])\nf([3, 3])\n```\n"),
        (
            "math",
            "<answer>\n```problem\nTom has 3 apples\nand eats one.\n```\n```python\n"
            "def f():\n    return 3 - 1\n```\n",
        ),
    ],
)
def test_texts_the_layout_allows_parse(kind, text):
    regex = proposal_regex(kind, RolesConfig(think=False))
    assert re.fullmatch(regex, text + "</answer>")
    result = parse_proposal(text, kind, program=PROGRAM if kind == "induction" else None)
    assert isinstance(result, Proposal), result


@pytest.mark.parametrize(
    "kind, text",
    [
        ("deduction", f"Here is my puzzle.\n```python\n{PROGRAM}\n```"),  # prose, no call
        ("deduction", f"<answer>\n```python\n{PROGRAM}\n```\n</answer>"),  # no call
        ("deduction", f"<answer>\n```python\n{PROGRAM}\nprint(f([1]))\n```\n</answer>"),
        # test code after `def f` (a proposal that loops on such lines never ends)
        ("deduction", f"<answer>\n```python\n{PROGRAM}\nresult = f([1])\nf([1])\n```\n</answer>"),
        ("induction", "<answer>\n```python\nf([1])\nf([2])\n```\n</answer>"),  # too few
        ("deduction", f"<answer>\n```python\n{PROGRAM}\nf()\n```\n</answer>"),  # no input
        ("induction", "<answer>\n```python\nf([1])\nf( )\nf([2])\nf([3])\n```\n</answer>"),
        ("induction", f"<answer>\n```python\n{PROGRAM}\nf(1)\nf(2)\nf(3)\nf(4)\n```\n</answer>"),
    ],
)
def test_the_layout_refuses_what_the_stage_cannot_use(kind, text):
    assert not re.fullmatch(proposal_regex(kind, RolesConfig(think=False)), text)


def test_while_written_no_assignment_follows_def_f():
    """Structured output keeps every prefix of the text one the expression could still
    complete: once `def f(` is written, a top-level assignment (test code, on which proposals
    looped past the token limit) is no longer such a prefix; before it, a constant is."""
    regex_module = pytest.importorskip("regex")  # partial matches; a dependency of transformers
    head = "<answer>\n```python\n"

    def open_prefix(text: str) -> bool:
        pattern = proposal_regex("deduction", RolesConfig(think=False))
        return regex_module.fullmatch(pattern, head + text, partial=True) is not None

    assert open_prefix("LIMIT = 3\ndef fold(x):\n    return x\nTABLE = {\n")
    assert open_prefix("def f(x):\n    return g(x)\n\ndef g(x):\n    return x\n# the call\nf(")
    assert not open_prefix("def f(x):\n    return x\n\nresult =")
    # names that start as a keyword does are assignments too, and `f` defined with a space
    # is not a definition before which anything goes
    for test_code in ("default = f(1)", "imported = f(1)", "classes = [", "from_list = f("):
        assert not open_prefix(f"def f(x):\n    return x\n{test_code}")
    assert not open_prefix("import os; result = f(1)")
    for spelled in ("def f (x):", "def  f(x):", "def\tf(x):"):
        assert not open_prefix(f"{spelled}\n    return x\nresult =")
    assert open_prefix("def fold(x):\n    return x\ndef _f(x):\n    return x\nLIMIT = 3\n")
    assert not open_prefix("def g(x):\n    return x\ndef f(x):\n    return g(x)\nxs = [")


def test_regexes_follow_the_config():
    assert proposal_regexes(load(), ["deduction"]) is None
    config = load(None, ["generation.constrained_proposals=true", "roles.think=false"])
    regexes = proposal_regexes(config, ["deduction", "induction", "deduction"])
    assert regexes[0] == regexes[2] == proposal_regex("deduction", config.roles)
    assert regexes[1] == proposal_regex("induction", config.roles)
    assert not regexes[0].startswith("<think>")
    solver_only = ["roles.think=true", "roles.proposer_think=false"]
    config = load(None, ["generation.constrained_proposals=true", *solver_only])
    assert not any(r.startswith("<think>") for r in proposal_regexes(config, ["deduction", "math"]))


def test_the_think_section_is_limited_to_about_half_the_token_budget():
    config = load(None, ["generation.constrained_proposals=true", "generation.max_new_tokens=64"])
    (regex,) = proposal_regexes(config, ["induction"])
    limit = think_limit(64)
    assert limit == 32 * 4 and regex == proposal_regex("induction", config.roles, limit)
    assert think_limit(4096) == 2048  # capped: the expression stays small
    answer = "<answer>\n```python\nf(1)\nf(2)\nf(3)\nf(4)\n```\n</answer>"
    assert re.fullmatch(regex, f"<think>\n{'x' * limit}</think>\n{answer}")
    assert not re.fullmatch(regex, f"<think>\n{'x' * (limit + 1)}</think>\n{answer}")


@pytest.mark.slow
def test_smollm2_writes_constrained_proposals_that_parse(require_vllm):
    """The embedded model on vLLM, constrained: every completion that ends on its own (is not
    cut by the token limit, nor stopped by vLLM when its grammar rejects a token) parses, except
    induction calls that repeat an input, and calls that are no Python (`f(x: 10)`,
    `f(<arguments>)`; for induction every call, else the final one): the layout fixes the shape
    of the calls, not that they differ or that their arguments parse. Deduction and abduction
    each get at least one proposal. Eight samples a kind: about half of the 135M model's samples
    loop inside their think section until the token limit, so three can all be cut."""
    from dataclasses import replace

    from selfplay.engine import sampling
    from selfplay.extract import ANSWER_STOP
    from selfplay.proposer import proposer_prompt

    overrides = ["engine.backend=vllm", "generation.temperature=0.7", "generation.top_p=0.9"]
    config = load(None, [*overrides, "generation.max_new_tokens=384", "engine.max_model_len=2048"])
    kinds = ["deduction", "abduction", "induction"]
    prompts = [proposer_prompt(k, [], config.roles, PROGRAM) for k in kinds]
    params = sampling(config.generation, n=8, seed=0, stop=ANSWER_STOP)
    think = think_limit(config.generation.max_new_tokens)
    params = replace(params, regex=tuple(proposal_regex(k, config.roles, think) for k in kinds))
    generations = generate_once(config, prompts, params)
    for kind, generation in zip(kinds, generations, strict=True):
        results = []
        for c in generation.completions:
            result = parse_proposal(c.text, kind, program=PROGRAM, min_inputs=4, max_inputs=6)
            repeats = kind == "induction" and getattr(result, "reason", "") == "too_few_inputs"
            ended = not c.cut
            unreadable = _calls_that_do_not_parse(c.text, kind)
            assert not ended or isinstance(result, Proposal) or repeats or unreadable, (
                f"{kind} completion ended ({c.finish_reason}) and did not parse: {result}\n"
                f"--- its whole text ---\n{c.text}"
            )
            results.append(result)
        if kind != "induction":
            assert any(isinstance(r, Proposal) for r in results), (kind, generation.completions)


@pytest.mark.parametrize(
    "think",
    ["", "<think>\n```python\n# </think>\n", "<think>\n```\n# </think>\n"],
)
def test_calls_that_do_not_parse_are_read_from_the_answer(think):
    """Completions the embedded model wrote: a think section that opens a fence and never
    closes it, then calls that are no Python. The parser finds no input in them; the slow
    test's excuse for them must read the same section the parser reads."""
    for calls in ("f(x) def f(x): return sorted(x)\n" * 4, "f(<arguments 1>)\n" * 4):
        text = f"{think}<answer>\n```python\n# what f does\n{calls}```\n</answer>"
        result = parse_proposal(text, "induction", program=PROGRAM, min_inputs=4)
        assert isinstance(result, ParseFailure) and _calls_that_do_not_parse(text)
    good = f"{think}<answer>\n```python\nf([1])\nf(x: 2)\n```\n</answer>"
    assert not _calls_that_do_not_parse(good)
    program = f"{think}<answer>\n```python\ndef f(<parameters>):\n    <body>\n\n"
    assert _calls_that_do_not_parse(program + "f(<arguments>)\n```\n", "deduction")
    assert not _calls_that_do_not_parse(program + "f([1])\n```\n", "deduction")


def _calls_that_do_not_parse(text: str, kind: str = "induction") -> bool:
    """A completion in the layout whose calls (induction: all of them; else the final one)
    fail to parse as Python: the expression held, the arguments it cannot check did not. Read
    from the answer section, as the parser reads it: a fence the think section leaves open must
    not pair with the answer's."""
    from selfplay.extract import answer_region, call_arguments, fenced_blocks
    from selfplay.proposer.parse import _is_comment

    blocks = [b.body for b in fenced_blocks(answer_region(text)) if b.lang == "python"]
    lines = [x for b in blocks for x in b.split("\n") if x.strip() and not _is_comment(x)]
    lines = lines if kind == "induction" else lines[-1:]
    return bool(lines) and all(
        re.fullmatch(r"f\(.*\)", x) and call_arguments(x) is None for x in lines
    )
