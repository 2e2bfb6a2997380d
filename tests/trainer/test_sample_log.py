"""`samples.jsonl` (`SampleLog`): a line per rollout, with the worked examples' answers of a
solver rollout whose prompt showed some; `proposals.jsonl` (`ProposalLog`): a line per
proposal, with what became of it."""

from __future__ import annotations

from selfplay.files import records
from selfplay.trainer.metrics import ProposalLog, SampleLog
from selfplay.types import (
    ParseFailure,
    Proposal,
    Proposed,
    Rollout,
    Stored,
    Task,
    Validated,
    Verdict,
)


class Letters:
    """A tokenizer whose token ids are character codes."""

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids)


def test_a_line_per_rollout_with_the_shown_answers(tmp_path):
    log = SampleLog(tmp_path, Letters())
    text = [ord(c) for c in "12"]
    rollouts = [
        Rollout("solve", "deduction", 0, (1,), tuple(text), (0.0, 0.0), 1.0, 0.5, shown=("7",)),
        Rollout("propose", "abduction", 1, (1,), tuple(text), (0.0, 0.0), 0.0),
    ]
    log.write(3, rollouts)
    first, second = records(tmp_path / "samples.jsonl")
    assert first == {
        "step": 3,
        "role": "solve",
        "type": "deduction",
        "group": 0,
        "tokens": 2,
        "reward": 1.0,
        "advantage": 0.5,
        "text": "12",
        "shown": ["7"],
    }
    assert "shown" not in second and second["role"] == "propose"


def test_a_line_per_proposal_with_what_became_of_it(tmp_path):
    """Malformed, invalid, a copy kept out of the pool and a new task: each says why, in a run
    that trains the proposer or not; a resumed run drops the lines of its lost steps."""

    def proposed(text, parsed, finish="stop"):
        ids = tuple(ord(c) for c in text)
        return Proposed("deduction", 2, (1,), ids, (0.0,) * len(ids), (4, 9), parsed, finish)

    program = "def f(x):\n    return x + 1"
    proposal = Proposal("deduction", program, ("1",))
    task = Task("deduction", program, ("1",), ("2",))
    bad_run = (Verdict(False, "crash:TypeError"),)
    stored = [
        Stored(Validated(proposed("def f(", ParseFailure("unfinished"), "length"))),
        Stored(Validated(proposed("bad", proposal), bad_run)),
        Stored(
            Validated(proposed("copy", proposal), (Verdict(True),), task),
            None,
            False,
            "copy:behaviour",
        ),  # fmt: skip
        Stored(Validated(proposed("new", proposal), (Verdict(True),), task, True), 7, True),
    ]
    log = ProposalLog(tmp_path, Letters())
    log.write(1, stored[:2])
    log.write(2, stored[2:])
    malformed, invalid, copy, new = records(tmp_path / "proposals.jsonl")
    assert malformed == {
        "step": 1,
        "type": "deduction",
        "group": 2,
        "tokens": 6,
        "cut": True,
        "text": "def f(",
        "outcome": "malformed",
        "reason": "malformed:unfinished",
        "no_new_work": "",
        "added": False,
        "task_id": None,
        "reinput": False,
        "references": [4, 9],
    }
    assert (invalid["outcome"], invalid["reason"], invalid["cut"]) == (
        "invalid",
        "crash:TypeError",
        False,
    )
    assert (copy["outcome"], copy["no_new_work"], copy["added"]) == (
        "valid",
        "copy:behaviour",
        False,
    )
    assert copy["task"] == {
        "type": "deduction",
        "program": program,
        "inputs": ["1"],
        "outputs": ["2"],
        "message": "",
        "n_visible": 0,
    }
    assert (new["reason"], new["no_new_work"], new["task_id"], new["reinput"]) == ("", "", 7, True)
    ProposalLog(tmp_path, Letters(), resume_step=1)  # step 2 was lost
    assert [r["step"] for r in records(tmp_path / "proposals.jsonl")] == [1, 1]
    # an induction proposal whose runs all passed but gave too few distinct pairs: no task
    pairs = Proposal("induction", program, ("1", "1"), "adds one")
    log.write(3, [Stored(Validated(proposed("ind", pairs), (Verdict(True), Verdict(True))))])
    assert records(tmp_path / "proposals.jsonl")[-1]["reason"] == "induction_pairs"
