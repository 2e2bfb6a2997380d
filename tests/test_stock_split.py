"""scripts/stock_split.py: CRUXEval-I's non-trivial items split by whether a stock input
solves them, each folder paired with the baseline on both halves."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "stock_split.py"

# (id, program, gold input, output, trivial): a stock input (3) solves the first, the copy
# answer the third; only working back from 148 solves the second
ITEMS = [
    ("sample_0", "def f(x):\n    return x * 2", "3", "6", False),
    ("sample_1", "def f(x):\n    return x * 4", "37", "148", False),
    ("sample_2", "def f(s):\n    return s.upper()", "'Q'", "'Q'", True),
    # the data's own spelling of a dict output, not the executor's: {'a': 1} solves it
    ("sample_3", "def f(d):\n    return dict(d, b=2)", "{'z': 5}", '{"b": 2, "a": 1}', False),
]


def write_eval(folder: Path, answers: list[str], correct: list[bool]) -> Path:
    folder.mkdir()
    lines = [
        {"subset": "cruxeval_o", "id": "sample_0", "sample": 0, "correct": True, "trivial": False,
         "program": "def f(x):\n    return x", "input": "1", "output": "1", "answer": "1"},
    ]  # fmt: skip
    for (i, program, given, output, trivial), answer, right in zip(
        ITEMS, answers, correct, strict=True
    ):
        lines.append(
            {"subset": "cruxeval_i", "id": i, "sample": 0, "program": program, "input": given,
             "output": output, "trivial": trivial, "answer": answer, "correct": right}
        )  # fmt: skip
    (folder / "samples.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    return folder


def test_items_split_by_stock_input_and_paired_with_the_base(tmp_path):
    base = write_eval(tmp_path / "base", ["3", "37", "'Q'", "{}"], [True, True, True, False])
    after = write_eval(tmp_path / "after", ["3", "5", "'Q'", None], [True, False, True, False])
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(base), str(after), "--json"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    result = json.loads(done.stdout)
    assert result["problems"] == 4 and result["stock_solved"] == 2
    row = result["runs"][str(after)]
    assert row["stock"] == {"items": 2, "before": 1, "after": 1, "gained": 0, "lost": 0, "p": 1.0}
    assert row["not_stock"]["items"] == 1  # the trivial item is in neither half
    assert (row["not_stock"]["before"], row["not_stock"]["after"]) == (1, 0)
    assert row["not_stock"]["lost"] == 1
    assert row["stock_answers"] == 2  # 3 and 5 are stock inputs of an int argument; no answer
    assert result["runs"][str(base)]["stock_answers"] == 2  # 3 and {}


def test_the_abductions_a_run_pooled_are_counted_by_whether_a_guess_solves_them(tmp_path):
    from selfplay.curriculum import Provenance, TaskStore
    from selfplay.types import Task

    base = write_eval(tmp_path / "base", ["3", "37", "'Q'", "{}"], [True, True, True, False])
    store = str(tmp_path / "pool.sqlite")
    with TaskStore.open(store, "r") as pool:
        tasks = [Task("abduction", p, (x,), (y,)) for _, p, x, y, _ in ITEMS[:2]]
        tasks.append(Task("deduction", ITEMS[0][1], ("3",), ("6",)))
        pool.add_tasks(tasks, Provenance("proposed", 1))
        pool.add_tasks([Task("abduction", "def f(x):\n    return x + 1", ("1",), ("2",))],
                       Provenance("seed"))  # fmt: skip
    done = subprocess.run(
        [sys.executable, str(SCRIPT), str(base), "--pool", store, "r"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert done.stdout == "r: 1 of 2 pooled abduction tasks stock-solvable\n"


def test_answer_margins_split_the_base_right_problems_by_what_training_kept(
    tmp_path, tiny_model_dir
):
    """scripts/answer_margins.py: a finite margin per problem the baseline got right (trivial
    ones aside), grouped by whether the second folder kept it."""
    script = SCRIPT.parent / "answer_margins.py"
    base = write_eval(tmp_path / "base", ["3", "37", "'Q'", "{}"], [True, True, True, False])
    after = write_eval(tmp_path / "after", ["3", "5", "'Q'", None], [True, False, True, False])
    done = subprocess.run(
        [sys.executable, str(script), str(base), str(after), "--model", str(tiny_model_dir)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    *rows, summary = [json.loads(line) for line in done.stdout.splitlines()]
    assert [(r["id"], r["group"]) for r in rows] == [("sample_0", "kept"), ("sample_1", "lost")]
    assert all(isinstance(r["margin"], float) and r["margin"] == r["margin"] for r in rows)
    assert summary["kept_items"] == summary["lost_items"] == 1
