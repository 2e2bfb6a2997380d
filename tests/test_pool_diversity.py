"""benchmarks/pool_diversity.py reads a pool; a run the store does not hold is an error that
names the runs it does hold, and the store is left as it was (no empty run added)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from selfplay.config import CurriculumConfig
from selfplay.curriculum import Provenance, TaskStore
from selfplay.types import Task

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "pool_diversity.py"


def test_an_unknown_run_is_named_and_not_created(tmp_path):
    path = str(tmp_path / "pool.sqlite")
    with TaskStore.open(path, "learn", CurriculumConfig(run="learn")) as store:
        task = Task("deduction", "def f(n):\n    return n * 3", ("2",), ("6",))
        store.add_tasks([task], Provenance("proposed", 1, "", "learn"))
    done = subprocess.run(
        [sys.executable, str(SCRIPT), path, "--run", "other"], capture_output=True, text=True
    )
    assert done.returncode != 0
    assert "holds no run 'other'; its runs: learn" in done.stderr
    assert TaskStore.runs(path) == ["learn"]
