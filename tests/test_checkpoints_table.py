"""scripts/checkpoints_table.py: every evaluation folder paired with the base evaluated on its own
setup, its non-trivial gains and losses per subset, and a summary over the folders."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "checkpoints_table.py"

XEON = {
    "cpu": "Intel(R) Xeon(R) Processor",
    "dtype": "bfloat16",
    "packages": {"torch": "2"},
    "gpus": [],
}
EPYC = {"cpu": "AMD EPYC", "dtype": "bfloat16", "packages": {"torch": "2"}, "gpus": []}


def write_eval(folder: Path, right_o: list[bool], right_i: list[bool], setup: dict | None):
    """Output and input items in that order; the last output item is trivial (copying solves
    it), so it counts in no non-trivial figure."""
    folder.mkdir()
    lines = []
    for subset, rights in (("cruxeval_o", right_o), ("cruxeval_i", right_i)):
        for n, right in enumerate(rights):
            trivial = subset == "cruxeval_o" and n == len(rights) - 1
            lines.append(
                {"subset": subset, "id": f"sample_{n}", "sample": 0, "program": "def f(x): ...",
                 "input": "1", "output": "2", "trivial": trivial, "answer": "2",
                 "correct": right, "failure": None if right else "wrong_value"}
            )  # fmt: skip
    (folder / "samples.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    summary = {"benchmark": "cruxeval"} | ({"environment": setup} if setup else {})
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def run(*args) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, check=True
    )
    return done.stdout.splitlines()


def test_each_folder_pairs_with_the_base_of_its_own_setup(tmp_path):
    xeon = write_eval(tmp_path / "base-xeon", [0, 0, 0, 0, 1], [0, 0, 1], XEON)
    epyc = write_eval(tmp_path / "base-epyc", [1, 1, 1, 1, 1], [1, 1, 1], EPYC)
    old = write_eval(tmp_path / "base-old", [1, 0, 0, 0, 0], [0, 0, 0], None)
    # gains on all four non-trivial output items against the Xeon base, losses against EPYC's
    write_eval(tmp_path / "run-xeon", [1, 1, 1, 1, 0], [0, 1, 0], XEON)
    write_eval(tmp_path / "run-old", [0, 1, 0, 0, 1], [0, 0, 0], None)
    write_eval(tmp_path / "run-gpu", [1, 1, 1, 1, 1], [1, 1, 1], XEON | {"gpus": ["H100"]})
    lines = run("--json", "--bases", epyc, xeon, old, "--", *sorted(tmp_path.iterdir()))
    rows = {r["folder"]: r for r in map(json.loads, lines[:-1])}
    assert set(rows) == {"run-xeon", "run-old"}  # the bases are not rows of their own
    assert rows["run-xeon"]["base"] == "base-xeon"
    assert rows["run-xeon"]["cruxeval_o"] == {
        "n": 4, "before": 0.0, "after": 1.0, "gained": 4, "lost": 0, "net": 4, "p": 0.125,
    }  # fmt: skip
    assert rows["run-xeon"]["cruxeval_i"] | {"p": None} == {
        "n": 3, "before": 0.3333, "after": 0.3333, "gained": 1, "lost": 1, "net": 0, "p": None,
    }  # fmt: skip
    assert rows["run-old"]["base"] == "base-old"  # neither records its setup
    old_o = rows["run-old"]["cruxeval_o"]
    assert (old_o["gained"], old_o["lost"]) == (1, 1)
    summary = json.loads(lines[-1])
    assert summary["paired"] == 2
    assert summary["unpaired"] == ["run-gpu"]  # no base made with a GPU: not paired with another
    assert summary["cruxeval_o"] == {
        "folders": 2, "net_min": 0, "net_max": 4, "net_max_folder": "run-xeon",
        "up_significant": 0, "down_significant": 0,
    }  # fmt: skip


def test_the_table_names_each_folder_its_base_and_its_changes(tmp_path):
    base = write_eval(tmp_path / "base", [0, 0, 0, 0, 1], [0, 0, 1], XEON)
    after = write_eval(tmp_path / "after", [1, 1, 0, 0, 1], [0, 0, 0], XEON)
    lines = run("--bases", base, "--", after)
    assert lines[0].split()[:2] == ["folder", "base"]
    assert lines[1].split()[:9] == ["after", "base", "2", "/", "0", "+2", "0.5", "0", "/"]
    assert json.loads(lines[-1])["cruxeval_i"]["net_max"] == -1
