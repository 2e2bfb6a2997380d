"""scripts/compare_runs.py: runs' curves side by side; their proposals counted and tested."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

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


def _script_module():
    import importlib.util

    spec = importlib.util.spec_from_file_location("compare_runs", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_proposal_counts_over_steps_and_tests_in_pairs(tmp_path):
    def step(k, valid, dup, copy):
        return {
            "step": k,
            "propose/proposals": 12,
            "propose/valid": valid,
            "propose/new_tasks": valid - round(valid * dup),
            "propose/duplicate_share": dup,
            "propose/copy_share": copy,
            "propose/repeat_share": dup - copy,
            "propose/trivial_share": 0.0,
            "propose/contaminated_share": 0.0,
        }

    runs = [
        write_run(tmp_path / f"{name}{seed}", [step(k, 8, dup, copy) for k in range(1, 7)])
        for seed in (0, 1)
        for name, dup, copy in (("base", 0.75, 0.5), ("changed", 0.25, 0.125))
    ]
    result = subprocess.run(
        [sys.executable, str(SCRIPT), "--proposals", "2", "5", *map(str, runs), "--json"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    base = out["runs"][str(runs[0])]
    assert base == {
        "proposals": 48,
        "valid": 32,
        "new_tasks": 8,
        "no_new_work": 24,
        "repeat": 8,
        "copy": 16,
        "trivial": 0,
        "contaminated": 0,
    }  # steps 2-5 only: 4 steps of 8 valid, 6 of them no new work
    changed = out["runs"][str(runs[1])]
    assert changed["no_new_work"] == 8 and changed["copy"] == 4
    script = _script_module()
    assert out["tests"]["fisher"][0]["no_new_work"] == pytest.approx(
        script.fisher_exact(8, 24, 24, 8)
    )
    assert out["tests"]["cmh"]["no_new_work"] < out["tests"]["fisher"][0]["no_new_work"]
    text = subprocess.run(
        [sys.executable, str(SCRIPT), "--proposals", "2", "5", *map(str, runs)],
        capture_output=True,
        text=True,
    ).stdout
    assert "no new work 24 (75%; repeat 8, copy 16" in text and "CMH over the pairs" in text
