"""The parsers and the executor on real completions of SmolLM2-135M-Instruct.

`tests/fixtures/completions.jsonl` holds proposals and answers the embedded model wrote for the
prompts of this project, sampled at temperature 0.7 and top-p 0.9 with at most 512 new tokens
(`scripts/make_parse_fixtures.py engine.backend=vllm generation.max_new_tokens=512
generation.temperature=0.7 generation.top_p=0.9` regenerates them and prints these counts).
The floors below are the counts measured when they were generated: a parser
change that reads fewer of them, or makes fewer proposals valid, fails here.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from selfplay.executor import Executor
from selfplay.types import Answer, ParseFailure, Proposal
from tests.fixture_report import parsed, report

FIXTURES = Path(__file__).parent / "fixtures" / "completions.jsonl"

# (parsed, valid proposals or correct answers) per role/type, as measured at generation.
FLOORS = {
    "proposer/deduction": (19, 7),
    "proposer/abduction": (25, 15),
    "proposer/induction": (3, 0),
    "solver/deduction": (32, 1),
    "solver/abduction": (11, 0),
    "solver/induction": (58, 1),
}


@pytest.fixture(scope="module")
def records():
    return [json.loads(line) for line in FIXTURES.read_text().splitlines()]


def test_the_fixtures_are_a_few_hundred_completions_of_every_kind(records):
    kinds = {(r["role"], r["type"]) for r in records}
    assert len(records) >= 300 and len(kinds) == 6
    assert all(r["text"] is not None for r in records)


def test_every_completion_gives_a_typed_result(records):
    for record in records:
        assert isinstance(parsed(record), Proposal | Answer | ParseFailure)


def test_parse_and_validation_counts_do_not_regress(records):
    with Executor() as executor:
        counts = report(records, executor)["counts"]
    for key, (parse_floor, judged_floor) in FLOORS.items():
        judged = counts[key].get("valid", counts[key].get("correct", 0))
        assert counts[key]["parsed"] >= parse_floor, (key, counts[key])
        assert judged >= judged_floor, (key, counts[key])


ABDUCTION = Path(__file__).parent / "fixtures" / "abduction_answers.jsonl"


def test_no_single_abduction_answer_dominates():
    """Answers to the abduction prompt, recorded after its example input was replaced by
    placeholders (`scripts/make_parse_fixtures.py --kinds solver/abduction --per-type 24 --out
    tests/fixtures/abduction_answers.jsonl engine.backend=vllm engine.max_model_len=8192
    generation.max_new_tokens=192 generation.temperature=0.7 generation.top_p=0.9
    roles.think=false`): with the example, one string (the example) made up 195 of 200 answers
    of the coder model. No answer string may make up more than a fifth of the answers given
    (every completion counts, as in that tally; SmolLM2-135M often rewrites the function
    instead of answering), and no answer is a placeholder copied from the layout."""
    records = [json.loads(line) for line in ABDUCTION.read_text().splitlines()]
    answers = [a.text for a in map(parsed, records) if isinstance(a, Answer)]
    assert len(records) >= 24 and len(answers) >= 3, len(answers)
    [(top, count)] = Counter(" ".join(a.split()) for a in answers).most_common(1)
    assert count <= 0.2 * len(records), (top, count, len(records))
    assert not any(a.startswith("<") for a in answers)  # no Python value starts with "<"
