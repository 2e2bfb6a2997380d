"""scripts/example_drift.py: answers copying the published prompt's worked example against the
non-trivial items right, over a folder of evaluations."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "example_drift.py"


def write_eval(folder: Path, copies: int, right: int, trivial_right: int = 0) -> None:
    """Ten non-trivial CRUXEval-O items (`copies` answered `17`, `right` of the others right),
    two trivial ones, and one record in the solver's own format, which counts for nothing."""
    folder.mkdir()
    rows = []
    for k in range(10):
        answer = "17\n[/PYTHON]" if k < copies else "[1]"
        correct = copies <= k < copies + right
        rows.append({"subset": "cruxeval_o", "id": f"sample_{k}", "sample": 0,
                     "prompt_format": "direct", "trivial": False, "answer": answer,
                     "correct": correct})  # fmt: skip
    for k in range(10, 12):
        rows.append({"subset": "cruxeval_o", "id": f"sample_{k}", "sample": 0,
                     "prompt_format": "direct", "trivial": True, "answer": "17",
                     "correct": k - 10 < trivial_right})  # fmt: skip
    rows.append({"subset": "cruxeval_o_selfplay", "id": "sample_0", "sample": 0,
                 "prompt_format": "selfplay", "trivial": False, "answer": "17", "correct": True})  # fmt: skip
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def run(root: Path, *extra: str) -> list[dict]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(root), *extra], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_copies_and_rights_per_folder_and_their_rank_correlation(tmp_path):
    write_eval(tmp_path / "base", copies=0, right=5)
    # the more answers copy the example, the fewer right, with one tie in copies
    for name, copies, right in (("a", 0, 6), ("b", 2, 5), ("c", 2, 4), ("d", 6, 2)):
        write_eval(tmp_path / name, copies, right, trivial_right=2)
    lines = run(tmp_path, "--at-most", "4")  # copies count the trivial items too: 2, 4, 4, 8
    per = {line["folder"]: line for line in lines[:-1]}
    # `17` on eight items of d: six non-trivial, the two trivial; not the selfplay record.
    # The six whose answer runs on into the example's `[/PYTHON]` wrote the prompt over again
    assert per["d"]["cruxeval_o"] == {
        "items": 12,
        "non_trivial": 10,
        "non_trivial_right": 2,
        "copies": 8,
        "restarts": 6,
    }  # fmt: skip
    assert per["base"]["cruxeval_i"]["items"] == 0
    summary = lines[-1]["cruxeval_o"]
    assert lines[-1]["folders"] == 4  # the base is left out
    # ranks of copies 0, 1.5, 1.5, 3 against rights 3, 2, 1, 0: rho = -0.949
    assert summary["spearman_copies_vs_non_trivial_right"] == -0.949
    assert summary["folders_at_most"] == 3 and summary["non_trivial_right_range_at_most"] == [4, 6]
    assert summary["base_non_trivial_right"] == 5
    assert lines[-1]["cruxeval_i"]["spearman_copies_vs_non_trivial_right"] is None


def test_a_broken_line_names_its_file_and_line(tmp_path):
    write_eval(tmp_path / "a", 1, 1)
    with open(tmp_path / "a" / "samples.jsonl", "a") as f:
        f.write("\n[]\n")  # a blank line is skipped, a list is not a record
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True
    )
    assert (
        done.returncode != 0
        and "samples.jsonl line 15: a record must be a JSON object" in done.stderr
    )
    with open(tmp_path / "a" / "samples.jsonl", "w") as f:
        f.write("{not json\n")
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode != 0 and "samples.jsonl line 1: " in done.stderr


def test_a_folder_without_evaluations_is_an_error(tmp_path):
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True
    )
    assert done.returncode != 0 and "no evaluation folder" in done.stderr
