"""`samples.jsonl` (`SampleLog`): a line per rollout, with the worked examples' answers of a
solver rollout whose prompt showed some."""

from __future__ import annotations

from selfplay.files import records
from selfplay.trainer.metrics import SampleLog
from selfplay.types import Rollout


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
