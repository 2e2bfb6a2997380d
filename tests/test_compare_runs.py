"""scripts/compare_runs.py: curves of several runs side by side from their metrics.jsonl."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "compare_runs.py"


def write_run(folder: Path, lines: list[dict]) -> Path:
    folder.mkdir()
    (folder / "metrics.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return folder


def test_curves_line_up_by_step_and_totals_add_up(tmp_path):
    a = write_run(
        tmp_path / "semi",
        [
            {"step": 0, "eval/cruxeval_o/pass@1": 0.25},
            {"step": 1, "solve/accuracy": 0.5, "propose/valid": 2, "propose/proposals": 9},
            {"step": 2, "solve/accuracy": math.nan, "propose/valid": 1, "propose/proposals": 9},
        ],
    )
    b = write_run(tmp_path / "zero", [{"step": 1, "solve/accuracy": 0.0, "propose/proposals": 9}])
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(a), str(b), "--json"], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["curves"]["solve/accuracy"] == {"semi": {"1": 0.5}, "zero": {"1": 0.0}}
    assert out["curves"]["eval/cruxeval_o/pass@1"] == {"semi": {"0": 0.25}, "zero": {}}
    assert "update/entropy" not in out["curves"]  # logged by no run
    assert out["totals"]["semi"] == {
        "propose/proposals": 18,
        "propose/valid": 3,
        "propose/new_tasks": 0,
    }
    tables = subprocess.run([sys.executable, str(SCRIPT), str(a), str(b)], capture_output=True)
    text = tables.stdout.decode()
    assert "solve/accuracy" in text and "0.500" in text and "semi: proposals 18, valid 3" in text


def test_a_folder_without_metrics_is_refused(tmp_path):
    result = subprocess.run(
        [sys.executable, str(SCRIPT), str(tmp_path)], capture_output=True, text=True
    )
    assert result.returncode == 2 and "no metrics.jsonl" in result.stderr
