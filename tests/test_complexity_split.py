"""scripts/complexity_split.py: CRUXEval's non-trivial items split by their program's statements
and loops, each folder paired with the baseline per subset and group."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "complexity_split.py"

ONE_LINE = "def f(x):\n    return x * 2"
LOOP = "def f(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total"
FIVE = "def f(s):\n    a = s\n    b = a + s\n    c = b[::-1]\n    d = c.upper()\n    return d"


def write_eval(folder: Path, correct: list[bool]) -> Path:
    """Four CRUXEval-O items and one CRUXEval-I item; the third output item is trivial."""
    items = [
        ("cruxeval_o", "sample_0", ONE_LINE, False),
        ("cruxeval_o", "sample_1", LOOP, False),
        ("cruxeval_o", "sample_2", ONE_LINE, True),
        ("cruxeval_o", "sample_3", FIVE, False),
        ("cruxeval_i", "sample_1", LOOP, False),
    ]
    folder.mkdir()
    lines = [
        {"subset": subset, "id": i, "sample": 0, "program": program, "input": "1",
         "output": "2", "trivial": trivial, "answer": "2", "correct": right}
        for (subset, i, program, trivial), right in zip(items, correct, strict=True)
    ]  # fmt: skip
    (folder / "samples.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return folder


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, check=True
    )


def test_items_are_paired_with_the_base_per_subset_and_group(tmp_path):
    base = write_eval(tmp_path / "base", [False, True, True, False, False])
    after = write_eval(tmp_path / "after", [True, False, False, True, True])
    result = json.loads(run(str(base), str(after), "--json").stdout)
    # the trivial item counts nowhere: two one-line, one loop, one five-statement output item
    assert result["benchmark"]["cruxeval_o"] == {
        "statements 1-2": 1, "statements 3-4": 1, "statements 5+": 1, "loop": 1, "no loop": 2,
    }  # fmt: skip
    output = result["runs"][str(after)]["cruxeval_o"]
    assert output["statements 1-2"] == {
        "items": 1, "before": 0, "after": 1, "gained": 1, "lost": 0, "p": 1.0,
    }  # fmt: skip
    assert output["statements 3-4"]["lost"] == 1  # the loop: =, for, += and return
    assert output["loop"] == output["statements 3-4"]
    assert (output["no loop"]["gained"], output["no loop"]["items"]) == (2, 2)
    assert output["statements 5+"]["gained"] == 1
    assert result["runs"][str(after)]["cruxeval_i"]["loop"]["gained"] == 1
    table = run(str(base), str(after)).stdout
    assert "cruxeval_o  statements 1-2     1 items, right 0 -> 1 (1 / 0, p = 1)" in table


def test_the_tasks_a_run_pooled_are_counted_by_group(tmp_path):
    from selfplay.curriculum import Provenance, TaskStore
    from selfplay.types import Task

    base = write_eval(tmp_path / "base", [False, True, True, False, False])
    store = str(tmp_path / "pool.sqlite")
    with TaskStore.open(store, "r") as pool:
        pool.add_tasks(
            [
                Task("deduction", ONE_LINE, ("3",), ("6",)),
                Task("abduction", LOOP, ("[2]",), ("2",)),
            ],
            Provenance("proposed", 1),
        )
        pool.add_tasks([Task("deduction", FIVE, ("'a'",), ("'AA'",))], Provenance("seed"))
    done = run(str(base), "--pool", store, "r")
    assert done.stdout == (
        "pool of r: 2 proposed deduction and abduction tasks "
        "(statements 1-2 1, statements 3-4 1, statements 5+ 0, loop 1, no loop 1)\n"
    )
