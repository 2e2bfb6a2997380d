"""scripts/wrong_types.py: across evaluations, a subset's non-trivial score against its
answers of a wrong type, with Spearman's rank correlation and a permutation p-value."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "wrong_types.py"


def load_script():
    spec = importlib.util.spec_from_file_location("wrong_types", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def write_eval(folder: Path, answers: list[str]) -> Path:
    """Four non-trivial CRUXEval-I items of a function that takes a string, whose gold input is
    'ab', and one trivial item answered with a list (not counted); the answer 'ab' is right."""
    folder.mkdir()
    rows = [
        {"subset": "cruxeval_i", "id": f"sample_{i}", "program": "def f(s):\n    return s",
         "input": "'ab'", "output": "'ab'", "trivial": i == 4, "answer": answer,
         "correct": answer == "'ab'"}
        for i, answer in enumerate([*answers, "[1]"])
    ]  # fmt: skip
    rows.append({**rows[0], "subset": "cruxeval_o"})  # another subset: not counted
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


def test_each_folder_is_counted_and_the_ranks_correlated(tmp_path):
    folders = [
        write_eval(tmp_path / "base", ["'ab'", "'ab'", "'zz'", "'x'"]),  # 2 right, 0 wrong-typed
        write_eval(tmp_path / "mid", ["'ab'", "[1]", "'zz'", "x + 1"]),  # 1 right, 1; 1 untyped
        write_eval(tmp_path / "late", ["[1]", "[1]", "1", "'x'"]),  # 0 right, 3
    ]
    out = subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, folders)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    rows = [json.loads(line) for line in out]
    assert [
        (r["folder"], r["right"], r["wrong_type"], r["wrong_of_right_type"]) for r in rows[:3]
    ] == [
        ("base", 2, 0, 2),
        ("mid", 1, 1, 1),
        ("late", 0, 3, 1),
    ]
    assert all(r["non_trivial"] == 4 for r in rows[:3])
    # a perfect inverse order; of the 6 orders of three, 2 are as extreme
    assert rows[-1] == {
        "subset": "cruxeval_i",
        "folders": 3,
        "spearman_right_vs_wrong_type": -1.0,
        "p_value": pytest.approx(1 / 3, abs=1e-3),
    }


def test_ranks_share_ties_and_the_shuffled_p_value_counts_the_observed_order():
    script = load_script()
    assert script.ranks([3, 1, 3, 2]) == [3.5, 1.0, 3.5, 2.0]
    x = list(range(12))
    rho, p = script.spearman(x, [-v for v in x])
    assert rho == pytest.approx(-1.0)
    assert 0 < p < 1e-3  # 20,000 shuffles: never 0
    rho, p = script.spearman(x, [v % 2 for v in x])
    assert abs(rho) < 0.5 and p > 0.05


def test_no_spread_gives_no_correlation_and_no_records_a_clear_error(tmp_path):
    same = [write_eval(tmp_path / name, ["'ab'", "[1]", "'zz'", "'x'"]) for name in "abc"]
    run = [sys.executable, str(SCRIPT)]
    out = subprocess.run([*run, *map(str, same)], capture_output=True, text=True, check=True)
    summary = json.loads(out.stdout.splitlines()[-1])  # valid JSON: no NaN
    assert summary["spearman_right_vs_wrong_type"] is None and summary["p_value"] is None
    failed = subprocess.run(
        [*run, "--subset", "cruxeval_i_selfplay", *map(str, same)], capture_output=True, text=True
    )
    assert failed.returncode != 0 and "no non-trivial record of subset" in failed.stderr
