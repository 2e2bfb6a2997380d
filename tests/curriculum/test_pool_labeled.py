"""Labeled sets: MBPP asserts become tasks of `f`, CRUXEval and MBPP import as labeled sets
with reported acceptance, math problems are refused naming the missing task type."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from selfplay.curriculum import TaskStore
from selfplay.curriculum.importer import import_file
from selfplay.curriculum.mbpp import candidates, rename, triplet
from selfplay.curriculum.seeds import Candidate, MathRecords, Reject
from selfplay.executor import Executor
from selfplay.types import TASK_TYPES
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


@pytest.mark.skipif("math" in TASK_TYPES, reason="a math task type exists")
def test_math_problems_are_refused_naming_the_missing_type(tmp_path, executor):
    crux = tmp_path / "crux.jsonl"
    crux.write_text(json.dumps({"code": "def f(x):\n    return x", "input": "1", "output": "1"}))
    gsm = tmp_path / "gsm.jsonl"
    gsm.write_text(json.dumps({"question": "1 + 1?", "answer": "2\n#### 2"}) + "\n")
    with TaskStore.open(str(tmp_path / "p.sqlite"), run="r") as store:
        with pytest.raises(MathRecords, match="task type 'math'"):
            import_file(store, gsm, executor, labeled=True)
        assert len(store) == 0
    store_path = tmp_path / "cli.sqlite"
    command = [sys.executable, "-m", "selfplay.cli", "pool", "import", "--labeled", str(crux)]
    result = subprocess.run(
        [*command, str(gsm), "--store", str(store_path)], capture_output=True, text=True
    )
    assert result.returncode == 1 and "task type 'math'" in result.stderr
    assert "Traceback" not in result.stderr and not store_path.exists()  # nothing imported


@pytest.mark.data
@pytest.mark.skipif("math" in TASK_TYPES, reason="a math task type exists")
def test_gsm8k_and_math500_are_refused(tmp_path, executor):
    with TaskStore.open(str(tmp_path / "p.sqlite"), run="r") as store:
        for relative, fmt in (("gsm8k/test.jsonl", "gsm8k"), ("math500/test.jsonl", "math500")):
            with pytest.raises(MathRecords, match=f"math problems \\({fmt}\\)"):
                import_file(store, require_data(relative), executor, labeled=True)


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
