"""scripts/role_share.py: the proposer's share of a run's policy updates, recomputed from the
rollouts the run wrote (plain or gzipped), by token, by sequence and as the run trained."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "role_share.py"


def rows(step: int) -> list[dict]:
    """A step's rollouts: one proposal of 8 tokens, four answers of 2 (two deduction, one
    abduction, one induction), one proposal with no advantage (no weight)."""
    out = [
        {"step": step, "role": "propose", "tokens": 8, "advantage": -1.0},
        {"step": step, "role": "propose", "tokens": 30, "advantage": 0.0},
    ]
    out += [{"step": step, "role": "solve", "type": t, "tokens": 2, "advantage": a}
            for t, a in zip(("deduction", "deduction", "abduction", "induction"),
                            (1.0, -1.0, 1.0, -1.0))]  # fmt: skip
    return out


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=False
    )


def test_shares_by_token_by_sequence_and_as_trained_over_the_steps_asked(tmp_path):
    plain, packed = tmp_path / "plain", tmp_path / "packed"
    plain.mkdir(), packed.mkdir()
    lines = [json.dumps(r) + "\n" for r in rows(1) + rows(2)]
    # a half-written last line, as a run still going leaves it, is skipped
    (plain / "samples.jsonl").write_text("".join(lines) + '{"step": 2, "ro')
    late = {"step": 3, "role": "propose", "tokens": 100, "advantage": 5.0}  # outside 1-2
    with gzip.open(packed / "samples.jsonl.gz", "wt") as f:
        f.writelines([*lines, json.dumps(late) + "\n"])
    # trained by sequence with the proposals' advantages halved: 0.5 of 2.5 per step
    (packed / "config.yaml").write_text(
        "trainer:\n  aggregation: sequence\n  propose_weight: 0.5\n"
    )
    done = run(str(plain), str(packed), "--steps", "1", "2")
    assert done.returncode == 0, done.stderr
    assert "skipped: not JSON" in done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    for folder in (plain, packed):
        got = summary[str(folder)]
        assert got["propose_share"]["token"] == 0.5
        assert got["propose_share"]["sequence"] == 0.2
        assert got["rollouts_tokens"] == {"propose": [4, 76], "solve": [8, 16]}
        shares = {"abduction": 0.25, "deduction": 0.5, "induction": 0.25}
        assert got["solve_shares"] == {"token": shares, "sequence": shares}
    assert summary[str(plain)]["propose_share"]["as_trained"] == 0.5  # no config: by token
    assert summary[str(packed)]["propose_share"]["as_trained"] == pytest.approx(0.5 / 4.5)
    assert "0.500 by token, 0.200 by sequence" in done.stdout
    assert "by token: abduction 0.250, deduction 0.500, induction 0.250" in done.stdout


def test_a_run_with_no_advantage_has_no_share(tmp_path):
    (tmp_path / "samples.jsonl").write_text(
        json.dumps({"step": 1, "role": "solve", "tokens": 3, "advantage": 0.0}) + "\n"
    )
    done = run(str(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "none by token, none by sequence" in done.stdout
    assert json.loads(done.stdout.splitlines()[-1])[str(tmp_path)]["propose_share"]["token"] is None


@pytest.mark.parametrize(
    ("content", "message"), [(None, "no samples.jsonl"), ("{broken\n", "no rollouts")]
)
def test_a_run_without_readable_rollouts_is_a_clear_error(tmp_path, content, message):
    if content is not None:
        (tmp_path / "samples.jsonl").write_text(content)
    done = run(str(tmp_path))
    assert done.returncode != 0
    assert message in done.stderr
