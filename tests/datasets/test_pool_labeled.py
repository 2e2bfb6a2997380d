"""Labeled sets: MBPP asserts become tasks of `f`, CRUXEval and MBPP import as labeled sets
with reported acceptance; GSM8K and MATH-500 problems import as program-less `math` tasks whose
gold answers the math checker must read, deduplicated by problem and answer."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from selfplay.curriculum import TaskStore
from selfplay.curriculum.records import Provenance
from selfplay.datasets.candidates import Candidate, Reject
from selfplay.datasets.importer import import_file
from selfplay.datasets.mbpp import candidates, rename, triplet
from selfplay.executor import Executor
from selfplay.types import Task
from tests.conftest import require_data


@pytest.fixture(scope="module")
def executor():
    with Executor() as ex:
        yield ex


def test_an_assert_becomes_a_program_of_f():
    code = (
        "def fact(n):\r\n    # fact(n) = n!\r\n    return 1 if n < 2 else n * fact(n - 1)\r\n"
        "class A:\r\n    def fact(self):\r\n        return self.fact\r\n"
    )
    program, arguments, expected = triplet(code, "assert fact(5) == 120")
    assert program.startswith("def f(n):\n    # fact(n) = n!\n    return 1 if n < 2 else n * f(")
    assert "def fact(self):" in program and "self.fact" in program  # methods keep their name
    assert (arguments, expected) == ("5", "120")
    assert triplet("def g(a, b=1):\n    return a", "assert g([1, -2], b={'x': (1,)})==[1]")[1:] == (
        "[1, -2], b={'x': (1,)}",
        "[1]",
    )


@pytest.mark.parametrize(
    "code, test, reason",
    [
        ("def g(x): return x", "assert set(g((1, 2))) == set((1, 2))", "mbpp:not_a_direct_call"),
        ("def g(x): return x", "assert math.isclose(g(1.0), 1.0)", "mbpp:not_an_equality"),
        ("def g(x): return x", "assert g(1) != 2", "mbpp:not_an_equality"),
        ("def g(x): return x", "assert h(1) == 1", "mbpp:not_defined"),
        ("def g(x): return x", "assert g(y) == 1", "mbpp:argument_not_literal"),
        ("def g(x): return x", "assert g(*[1]) == 1", "mbpp:argument_not_literal"),
        ("def g(f): return f", "assert g(1) == 1", "mbpp:name_f_taken"),
        ("def g(x): return x", "assert g(1 == 1", "mbpp:syntax"),
    ],
)
def test_asserts_that_cannot_be_tasks_are_skipped_with_a_reason(code, test, reason):
    assert triplet(code, test)[0] == reason


def test_a_record_gives_two_candidates_per_assert_and_counts_skips():
    record = {
        "task_id": 7,
        "text": "Double a number.",
        "code": "def double(x):\n    return 2 * x",
        "test_list": ["assert double(2) == 4", "assert abs(double(1)) == 2"],
        "test_imports": ["import math"],
    }
    found = candidates(record, 3)
    kept = [c for c in found if isinstance(c, Candidate)]
    skipped = [c for c in found if isinstance(c, Reject)]
    assert [c.type for c in kept] == ["deduction", "abduction"]
    assert kept[0].program == "import math\ndef f(x):\n    return 2 * x"
    assert kept[0].inputs == ("2",) and kept[0].outputs == ("4",) and kept[0].source_id == "7/0"
    assert [(r.type, r.reason, r.line) for r in skipped] == [
        ("deduction", "mbpp:not_a_direct_call", 3),
        ("abduction", "mbpp:not_a_direct_call", 3),
    ]
    setup = dict(record, test_setup_code="x = Node(1)")
    assert {r.reason for r in candidates(setup, 1)} == {"mbpp:test_setup_code"}
    with pytest.raises(ValueError, match="test_list"):
        candidates(dict(record, test_list="assert double(2) == 4"), 1)


def test_rename_touches_names_not_strings_or_attributes():
    code = "def add(a):\n    s = 'add'\n    return obj.add + add(a) # add\n"
    assert rename(code, "add") == "def f(a):\n    s = 'add'\n    return obj.add + f(a) # add\n"


def test_mbpp_records_import_and_run(tmp_path, executor):
    records = [
        {
            "task_id": 1,
            "text": "Reverse a list.",
            "code": "def rev(xs):\r\n\treturn xs[::-1]",
            "test_setup_code": "",
            "test_list": ["assert rev([1, 2]) == [2, 1]", "assert rev([]) == [1]"],
        },
        {
            "task_id": 2,
            "text": "Halve a number.",
            "code": "def half(x):\n    return x / 2",
            "test_list": ["assert half(4) == 2"],  # == as the assert has it: 2.0 passes
        },
    ]
    path = tmp_path / "mbpp.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records) + "\n{broken\n")
    with TaskStore.open(str(tmp_path / "p.sqlite"), run="r") as store:
        report = import_file(store, path, executor, labeled=True)
        assert report.format == "mbpp" and report.added == 4 and report.candidates == 6
        assert report.reasons() == {"output_mismatch": 2, "malformed_record": 1}
        assert [r.line for r in report.rejects if r.reason == "malformed_record"] == [3]
        tasks = store.get(store.index["id"].tolist())
        assert {t.task.type for t in tasks} == {"deduction", "abduction"}
        assert all(t.provenance.origin == "labeled" for t in tasks)
        assert tasks[0].task.program.startswith("def f(xs)") and tasks[0].task.output == "[2, 1]"
        assert tasks[2].task.output == "2.0"  # the program's own, type-exact output


def test_a_broken_json_array_is_one_reported_reject(tmp_path, executor):
    path = tmp_path / "set.json"
    path.write_text('[{"code": "def g(x): return x", "test_list": []},')
    with TaskStore.open(str(tmp_path / "p.sqlite"), run="r") as store:
        report = import_file(store, path, executor, labeled=True)
    assert report.reasons() == {"malformed_record": 1} and "JSON array" in report.rejects[0].detail


def test_a_labeled_import_labels_the_tasks_the_pool_holds_as_seeds(store_url, tmp_path, executor):
    """`selfplay pool import X`, then a run with `seed.labeled=X`: the labeled import found
    every task a duplicate and left it `seed`, and the run drew no labeled task."""
    records = [
        {"program": f"def f(x):\n    return x * {i} + 1", "type": "deduction", "input": "3"}
        for i in range(5)
    ]
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    with TaskStore.open(store_url, run="r") as store:
        assert import_file(store, path, executor).added == 5
        report = import_file(store, path, executor, labeled=True)
        assert (report.added, report.duplicates, report.relabeled) == (0, 5, 5)
        assert report.summary()["relabeled"] == 5
        assert store.stats().by_type_origin == {("deduction", "labeled"): 5}
        assert store.sample(4, 1).metrics["curriculum/labeled_share"] == 1.0
        again = import_file(store, path, executor, labeled=True)
        assert (again.duplicates, again.relabeled) == (5, 0)


GSM = [
    {"question": "Tom has 3 apples and buys 4 more. How many now?", "answer": "3+4=7\n#### 7"},
    {"question": "Ann has 2 pears and gets 5 more. How many now?", "answer": "2+5=7\n#### 7"},
    {"question": "How many sides has a square?", "answer": "A square has four sides."},
    {"question": "What is 1,000 times 3?", "answer": "#### 3,000"},
]
MATH = [
    {"problem": "Compute $\\sin 60^\\circ$.", "answer": "\\frac{\\sqrt3}{2}", "unique_id": "a/1"},
    {"problem": "Solve $x^2 < 1$.", "solution": "So $\\boxed{x}$ ... $\\boxed{(-1, 1)}$."},
    {"problem": "Write a broken answer.", "answer": "}{"},
    {"problem": "Name the prime below 3.", "solution": "It is two, with no box."},
]


def write_lines(path, records, broken_at=None):
    lines = [json.dumps(r) for r in records]
    if broken_at is not None:
        lines.insert(broken_at - 1, '{"question": "cut off')
    path.write_text("\n".join(lines) + "\n")
    return path


def test_math_problems_import_as_labeled_math_tasks(tmp_path):
    gsm = write_lines(tmp_path / "gsm.jsonl", GSM, broken_at=3)
    math500 = write_lines(tmp_path / "math.jsonl", MATH)
    with TaskStore.open(str(tmp_path / "p.sqlite"), run="r") as store:
        # no executor at all: a labeled math problem has no program to run
        first = import_file(store, gsm, None, labeled=True)
        assert first.format == "gsm8k" and first.records == 5 and first.candidates == 4
        assert (first.added, first.by_type) == (3, {"math": 3})
        assert first.reasons() == {"malformed_record": 1, "math:no_gold": 1}
        assert {r.reason: r.line for r in first.rejects} == {
            "malformed_record": 3,
            "math:no_gold": 4,
        }
        second = import_file(store, math500, None, labeled=True)
        assert second.format == "math500" and (second.candidates, second.added) == (4, 2)
        assert second.reasons() == {"math:gold_unparsable": 1, "math:no_gold": 1}
        lines = {r.reason: r.line for r in second.rejects}
        assert lines == {"math:gold_unparsable": 3, "math:no_gold": 4}
        assert "}{" in next(r.detail for r in second.rejects if r.line == 3)
        tasks = store.get(store.index["id"].tolist())
    assert [(t.task.message, t.task.output) for t in tasks] == [
        (GSM[0]["question"], "7"),
        (GSM[1]["question"], "7"),  # the same answer to another problem: another task
        (GSM[3]["question"], "3000"),
        (MATH[0]["problem"], "\\frac{\\sqrt3}{2}"),
        (MATH[1]["problem"], "(-1, 1)"),  # the last box of the solution
    ]
    assert all(t.task.is_labeled_math and t.task.inputs == ("",) for t in tasks)
    assert {t.provenance.origin for t in tasks} == {"labeled"}
    assert [t.provenance.source_id for t in tasks][2:4] == ["line 5", "a/1"]
    assert len({t.hash for t in tasks}) == 5


def test_math_problems_import_once(tmp_path):
    gsm = write_lines(tmp_path / "gsm.jsonl", GSM + GSM[:1])  # a problem twice in one file
    with TaskStore.open(str(tmp_path / "p.sqlite"), run="r") as store:
        first = import_file(store, gsm, None, labeled=True)
        again = import_file(store, gsm, None, labeled=True)
        assert (first.added, first.duplicates) == (3, 1)
        assert (again.added, again.duplicates, again.accepted) == (0, 4, 4)
        assert len(store) == 3


def test_a_limit_imports_the_same_seeded_sample_every_time(tmp_path):
    problems = [{"question": f"What is {n} + 1?", "answer": f"#### {n + 1}"} for n in range(40)]
    path = write_lines(tmp_path / "gsm.jsonl", problems)
    with TaskStore.open(str(tmp_path / "p.sqlite"), run="r") as store:
        first = import_file(store, path, None, labeled=True, limit=10, sample_seed=3)
        assert (first.records, first.sampled_from, first.added) == (10, 40, 10)
        assert first.summary()["sampled_from"] == 40
        again = import_file(store, path, None, labeled=True, limit=10, sample_seed=3)
        assert (again.added, again.duplicates) == (0, 10)  # a resumed run adds nothing
        kept = [int(t.task.output) - 1 for t in store.get(store.index["id"].tolist())]
        assert kept == sorted(kept) and len(set(kept)) == 10  # in file order, no repeats
        other = import_file(store, path, None, labeled=True, limit=10, sample_seed=4)
        assert 0 < other.added < 10  # another seed, another sample (overlapping by chance)
        whole = import_file(store, path, None, labeled=True, limit=100)
        assert (whole.records, whole.sampled_from) == (40, 0)
        assert "sampled_from" not in whole.summary()
    with (
        TaskStore.open(str(tmp_path / "q.sqlite"), run="r") as store,
        pytest.raises(ValueError, match="limit must be"),
    ):
        import_file(store, path, None, labeled=True, limit=-1)


def test_records_that_are_neither_code_nor_math_are_rejected_saying_so(tmp_path, executor):
    path = write_lines(
        tmp_path / "odd.jsonl",
        [{"text": "hello", "answer": "7"}, {"type": "math", "output": "2"}],
    )
    with TaskStore.open(str(tmp_path / "p.sqlite"), run="r") as store:
        report = import_file(store, path, executor, labeled=True)
    assert report.reasons() == {"malformed_record": 2} and len(store) == 0
    neither, no_problem = (r.detail for r in report.rejects)
    assert "neither a program" in neither and "math problem" in neither
    assert "non-empty 'message'" in no_problem


def test_proposed_math_tasks_run_their_program_again_on_import(tmp_path, executor):
    eggs = "Janet's ducks lay 16 eggs a day. She eats 3 and bakes with 4. How many are left?"
    program = "def f():\n    return 16 - 3 - 4"
    path = write_lines(
        tmp_path / "proposed.jsonl",
        [
            {"type": "math", "program": program, "message": eggs, "output": "9"},
            {"type": "math", "program": program, "message": eggs + " (twice)"},  # no answer
            {"type": "math", "program": program, "message": "Wrong?", "output": "10"},
            {"type": "math", "program": "def f():\n    return 'nine'", "message": "Words?"},
            {"type": "math", "program": "def f():\n    return 1 / 0", "message": "Zero?"},
        ],
    )
    with TaskStore.open(str(tmp_path / "p.sqlite"), run="r") as store:
        report = import_file(store, path, executor)
        tasks = store.get(store.index["id"].tolist())
    assert (report.format, report.added, report.by_type) == ("generic_math", 2, {"math": 2})
    assert [(r.line, r.reason) for r in report.rejects] == [
        (3, "output_mismatch"),
        (4, "math:not_a_number"),
        (5, "crash:ZeroDivisionError"),
    ]
    assert [(t.task.output, t.task.is_labeled_math) for t in tasks] == [("9", False)] * 2
    assert tasks[0].task == Task("math", program, ("",), ("9",), eggs, cpu_s=tasks[0].task.cpu_s)


def test_proposed_math_tasks_export_and_import_back(tmp_path, executor):
    from selfplay.datasets.export import ExportFilter, export

    problems = [(f"Tom has {n} apples and buys {n + 2} more. How many now?", n) for n in (3, 5)]
    tasks = [
        Task("math", f"def f():\n    return {n} + {n + 2}", ("",), (str(2 * n + 2),), text)
        for text, n in problems
    ]
    out = tmp_path / "export.jsonl"
    with TaskStore.open(str(tmp_path / "a.sqlite"), run="a") as store:
        store.add_tasks(tasks, Provenance("proposed", 1, "v1", "proposer"))
        assert export(store, "jsonl", out, ExportFilter(types=("math",))) == 2
        hashes = sorted(t.hash for t in store.get(store.index["id"].tolist()))
    with TaskStore.open(str(tmp_path / "b.sqlite"), run="b") as store:
        report = import_file(store, out, executor)
        assert (report.added, report.rejects) == (2, [])
        back = store.get(store.index["id"].tolist())
    assert sorted(t.hash for t in back) == hashes
    assert [t.task.program for t in back] == [t.program for t in tasks]


def test_labeled_math_tasks_export_and_import_back(tmp_path):
    from selfplay.datasets.export import ExportFilter, export

    math500 = write_lines(tmp_path / "math.jsonl", MATH)
    out = tmp_path / "export.jsonl"
    with TaskStore.open(str(tmp_path / "a.sqlite"), run="a") as store:
        import_file(store, math500, None, labeled=True)
        assert export(store, "jsonl", out, ExportFilter(types=("math",))) == 2
        hashes = sorted(store.get(store.index["id"].tolist())[i].hash for i in range(2))
    with TaskStore.open(str(tmp_path / "b.sqlite"), run="b") as store:
        report = import_file(store, out, None, labeled=True)
        assert report.format == "generic_math"
        assert (report.added, report.by_type, report.rejects) == (2, {"math": 2}, [])
        back = store.get(store.index["id"].tolist())
    assert sorted(t.hash for t in back) == hashes
    assert [t.provenance.source_id for t in back] == ["a/1", "a/2"]


def test_the_cli_imports_code_and_math_in_one_call(tmp_path):
    crux = tmp_path / "crux.jsonl"
    crux.write_text(json.dumps({"code": "def f(x):\n    return x", "input": "1", "output": "1"}))
    gsm = write_lines(tmp_path / "gsm.jsonl", GSM)
    store_path = tmp_path / "cli.sqlite"
    command = [sys.executable, "-m", "selfplay.cli", "pool", "import", "--labeled", str(crux)]
    result = subprocess.run(
        [*command, str(gsm), "--store", str(store_path), "--run", "r"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    summaries = [json.loads(line) for line in result.stdout.splitlines()]
    assert [s["format"] for s in summaries] == ["cruxeval", "gsm8k"]
    assert summaries[1]["by_type"] == {"math": 3} and summaries[1]["reasons"] == {"math:no_gold": 1}
    assert "math:no_gold" in result.stderr  # the table names the reason with a line
    with TaskStore.open(str(store_path), run="r") as store:
        assert store.stats().by_type_origin[("math", "labeled")] == 3


@pytest.mark.data
@pytest.mark.parametrize(
    "relative, least", [("gsm8k/test.jsonl", 1.0), ("math500/test.jsonl", 1.0)]
)
def test_gsm8k_and_math500_import_as_labeled_math(tmp_path, report, relative, least):
    path = require_data(relative)
    with TaskStore.open(str(tmp_path / "p.sqlite"), run="r") as store:
        result = import_file(store, path, None, labeled=True)
        again = import_file(store, path, None, labeled=True)
        size = len(store)
        tasks = store.get(store.index["id"].tolist()[:50])
    summary = result.summary()
    report.append(
        f"labeled import {relative}: {summary['accepted']}/{summary['candidates']} math tasks "
        f"accepted ({summary['acceptance_rate']:.1%}) from {summary['records']} records; "
        f"rejects {summary['reasons']}; again: {again.added} added, {again.duplicates} known"
    )
    assert result.acceptance_rate >= least, summary  # every gold answer parses
    assert result.records == result.candidates and result.by_type == {"math": result.accepted}
    assert len(result.rejects) == result.candidates - result.accepted
    assert size == result.added and (again.added, again.duplicates) == (0, result.accepted)
    assert all(t.task.is_labeled_math and t.task.message and t.task.output for t in tasks)


@pytest.mark.data
@pytest.mark.parametrize(
    "relative, least",
    [
        ("mbpp/mbpp.jsonl", 0.95),
        ("mbpp/sanitized-mbpp.json", 0.9),
        ("cruxeval/cruxeval.jsonl", 0.95),
        ("azr_seed/3b_coder_seed_io.jsonl", 0.8),
    ],
)
def test_labeled_sets_import_with_reported_acceptance(tmp_path, executor, report, relative, least):
    path = require_data(relative)
    with TaskStore.open(str(tmp_path / "p.sqlite"), run="r") as store:
        result = import_file(store, path, executor, labeled=True)
        origins = {o for (_, o) in store.stats().by_type_origin}
    summary = result.summary()
    report.append(
        f"labeled import {relative}: {summary['accepted']}/{summary['candidates']} tasks "
        f"accepted ({summary['acceptance_rate']:.1%}) from {summary['records']} records; "
        f"rejects {summary['reasons']}"
    )
    assert result.acceptance_rate > least, summary
    assert len(result.rejects) == result.candidates - result.accepted
    assert origins == {"labeled"}
    assert result.by_type["deduction"] == result.by_type["abduction"] > 0
