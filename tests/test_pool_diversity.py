"""benchmarks/pool_diversity.py reads a pool; a run the store does not hold is an error that
names the runs it does hold, and the store is left as it was (no empty run added)."""

from __future__ import annotations

import importlib.util
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


def _script():
    spec = importlib.util.spec_from_file_location("pool_diversity", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_renamed_repeats_of_an_older_pool_are_counted():
    """A proposed task that an earlier one is with its variables renamed is counted (what a
    pool from before `repeat:renamed` let in); another input, or the first one, is not."""
    renamed_repeats = _script().renamed_repeats

    def task(program: str, given: str, output: str) -> Task:
        return Task("deduction", program, (given,), (output,))

    square, renamed = "def f(x):\n    return x * x", "def f(n):\n    # n squared\n    return n * n"
    tasks = [
        (task(square, "2", "4"), "seed"),
        (task(renamed, "2", "4"), "proposed"),  # the seed's task, renamed
        (task(renamed, "3", "9"), "proposed"),  # another input: new
        (task("def f(k):\n    return k * k", "3", "9"), "proposed"),  # the one before, renamed
    ]
    assert renamed_repeats(tasks) == [[renamed, square], ["def f(k):\n    return k * k", renamed]]


def test_behaviour_repeats_of_an_older_pool_are_counted(executor):
    """A proposed task whose program behaves as an earlier task's with the same input and
    output is counted, by the run's own judgement; a renamed repeat is counted as that alone,
    and a program that agrees on the input but not beside it is new."""
    behaviour_repeats = _script().behaviour_repeats

    def task(program: str, given: str = "3", output: str = "9") -> Task:
        return Task("deduction", program, (given,), (output,))

    square, power = "def f(x):\n    return x * x", "def f(x):\n    return x ** 2"
    plus = "def f(x):\n    return x + 6"
    tasks = [
        (task(square), "seed"),
        (task(power), "proposed"),  # the seed's computation again
        (task("def f(n):\n    return n * n"), "proposed"),  # renamed: counted there
        (task(plus), "proposed"),  # 9 on 3 as well, another function: new
        (task(power, "4", "16"), "proposed"),  # another input: new
    ]
    assert behaviour_repeats(executor, tasks) == [[power, square]]
    # a renamed repeat's program at another input and output is judged there; a task kept
    # out (trivial: by index) is neither judged nor compared with
    renamed, again = "def f(n):\n    return n * n", "def f(y):\n    return y ** 2"
    tasks = [
        (task(square), "seed"),
        (task(renamed), "proposed"),
        (task(again, "4", "16"), "proposed"),
        (task(renamed, "4", "16"), "proposed"),
        (task(plus), "proposed"),
        (task("def f(x):\n    return x + 2 * 3"), "proposed"),
    ]
    assert behaviour_repeats(executor, tasks) == [
        [renamed, again],
        [tasks[5][0].program, square, plus],
    ]
    assert behaviour_repeats(executor, tasks, {2, 4}) == []
