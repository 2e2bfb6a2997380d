"""Decontamination: a proposal that writes back a program of CRUXEval, HumanEval or MBPP is
recognised after normalisation, an export never holds a proposed one, and an import (a seed or
labeled set) rejects one, except against the benchmark whose own file it is."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from selfplay.curriculum import Provenance, TaskStore
from selfplay.datasets.contamination import (
    BENCHMARK_FILES,
    BenchmarkPrograms,
    import_check,
    normalise,
)
from selfplay.datasets.export import ExportFilter, records
from selfplay.datasets.importer import import_file
from selfplay.executor import Executor
from selfplay.files import DATA_ENV
from selfplay.semi import import_labeled
from selfplay.types import Task
from tests.conftest import require_data


def test_normalisation_renames_the_entry_and_drops_docstrings_and_layout():
    benchmark = 'def add(x: int, y: int):\n    """Add x and y."""\n    return x + y  # sum'
    assert normalise(benchmark, "add") == normalise("def f(a, b): return a+b")
    assert normalise(benchmark, "add") != normalise("def f(a, b):\n    return a - b")
    recursive = "def fact(n):\n    return 1 if n < 2 else n * fact(n - 1)"
    assert normalise(recursive, "fact") == normalise(recursive.replace("fact", "f"))
    assert normalise("def f(:") == "def f(:"  # text that does not parse: by its words


def test_the_benchmarks_programs_are_recognised_in_a_proposal():
    for relative in BENCHMARK_FILES.values():
        require_data(relative)
    programs = BenchmarkPrograms.load(BENCHMARK_FILES)
    assert not programs.missing
    counts = {name: list(programs.programs.values()).count(name) for name in BENCHMARK_FILES}
    # distinct programs: CRUXEval has 800 problems (some share a program), HumanEval 164,
    # MBPP 974 (some already HumanEval's or each other's)
    assert counts["humaneval"] == 164 and counts["cruxeval"] > 750 and counts["mbpp"] > 900
    crux = json.loads(require_data("cruxeval/cruxeval.jsonl").read_text().splitlines()[0])
    renamed = crux["code"].replace("nums", "values").replace("output", "result")
    assert programs.match(renamed) == "cruxeval"
    assert programs.match(renamed.replace("reverse=True", "reverse=False")) == ""
    mbpp = json.loads(require_data("mbpp/mbpp.jsonl").read_text().splitlines()[0])
    entry = mbpp["test_list"][0].split("assert ")[1].split("(")[0].strip()
    assert programs.match(mbpp["code"].replace(entry, "f")) == "mbpp"
    assert programs.match("def f(a):\n    return a") == ""  # AZR's seed is no benchmark's


def test_absent_data_is_listed_not_an_error(tmp_path):
    programs = BenchmarkPrograms.load(["cruxeval", "mbpp"], root=tmp_path)
    assert set(programs.missing) == {"cruxeval", "mbpp"} and len(programs) == 0
    assert programs.match("def f(a):\n    return a") == ""


def test_an_export_leaves_a_proposed_benchmark_program_out(store_url):
    add = "def f(a, b):\n    return a + b"
    tasks = [
        Task("deduction", add, ("1, 2",), ("3",)),
        Task("deduction", add, ("4, 5",), ("9",)),
        Task("deduction", "def f(a, b):\n    return a * b", ("2, 3",), ("6",)),
    ]
    benchmarks = BenchmarkPrograms({normalise(add): "humaneval"})
    with TaskStore.open(store_url, run="r") as store:
        store.add_tasks(tasks[:1], Provenance("seed", 0, "", "import"))
        store.add_tasks(tasks[1:], Provenance("proposed", 1, "step0", "proposer"))
        kept = list(records(store, ExportFilter(benchmarks=benchmarks)))
        every = list(records(store, ExportFilter()))
    # the imported task stays (it was imported as it is); the proposed copy does not
    assert [(r["origin"], r["inputs"]) for r in kept] == [
        ("seed", ["1, 2"]),
        ("proposed", ["2, 3"]),
    ]
    assert len(every) == 3


# ---------------------------------------------------------------------------------------------
# imports: a seed or labeled set may not carry a benchmark's program into training

BENCH_PROGRAM = (
    "def f(nums):\n    out = []\n    for n in nums:\n        out.append(n * 2)\n    return out"
)
OWN_PROGRAM = "def f(s):\n    return s.upper() + s"


def _fake_data(root) -> None:
    """A data folder with a one-problem CRUXEval and a one-problem MBPP."""
    (root / "cruxeval").mkdir()
    (root / "cruxeval" / "cruxeval.jsonl").write_text(
        json.dumps({"id": "sample_0", "code": BENCH_PROGRAM, "input": "[1]", "output": "[2]"})
        + "\n"
    )
    (root / "mbpp").mkdir()
    mbpp = {"task_id": 1, "text": "Shout.", "code": OWN_PROGRAM.replace("f(", "shout("),
            "test_list": ["assert shout('a') == 'Aa'"]}  # fmt: skip
    (root / "mbpp" / "mbpp.jsonl").write_text(json.dumps(mbpp) + "\n")


@pytest.fixture(scope="module")
def executor():
    with Executor() as ex:
        yield ex


def test_an_import_rejects_a_benchmark_program_before_running_it(tmp_path, executor):
    renamed = BENCH_PROGRAM.replace("nums", "xs").replace("out", "acc")  # the same program
    rows = [
        {"program": renamed, "type": "deduction", "input": "[1, 2]"},
        {"program": renamed, "type": "abduction", "input": "[3]"},
        {"program": OWN_PROGRAM, "type": "deduction", "input": "'a'"},
    ]
    path = tmp_path / "seed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    benchmarks = BenchmarkPrograms({normalise(BENCH_PROGRAM): "cruxeval"})
    with TaskStore.open(str(tmp_path / "p.sqlite"), run="r") as store:
        report = import_file(store, path, executor, labeled=True, benchmarks=benchmarks)
        programs = [t.task.program for t in store.get(store.index["id"].tolist())]
        unchecked = import_file(store, path, executor, labeled=True)
    assert report.reasons() == {"contaminated:cruxeval": 2}
    assert [r.line for r in report.rejects] == [1, 2]
    assert "one of cruxeval's" in report.rejects[0].detail
    assert report.candidates == 3 and report.added == 1 and programs == [OWN_PROGRAM]
    assert unchecked.added == 2  # without benchmarks nothing is checked


def test_a_benchmarks_own_file_is_not_checked_against_it(tmp_path, monkeypatch):
    _fake_data(tmp_path)
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    names = ("cruxeval", "mbpp")
    loaded = BenchmarkPrograms.load(names)
    assert sorted(loaded.programs.values()) == ["cruxeval", "mbpp"]
    checked, own = import_check(tmp_path / "mbpp" / "mbpp.jsonl", names, loaded)
    assert own == "mbpp" and list(checked.programs.values()) == ["cruxeval"]
    other = tmp_path / "seed.jsonl"
    other.write_text("")
    assert import_check(other, names, loaded) == (loaded, "")
    assert import_check(other, (), None)[0].programs == {}
    # checked against `names` only, whatever `loaded` holds besides; MBPP not checked: no exemption
    checked, own = import_check(tmp_path / "mbpp" / "mbpp.jsonl", ("cruxeval",), loaded)
    assert own == "" and list(checked.programs.values()) == ["cruxeval"]
    # the same file by a relative path or a symbolic link; a copy is another file
    monkeypatch.chdir(tmp_path / "mbpp")
    assert import_check(Path("mbpp.jsonl"), names, loaded)[1] == "mbpp"
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "mbpp" / "mbpp.jsonl")
    assert import_check(tmp_path / "link.jsonl", names, loaded)[1] == "mbpp"
    copy = tmp_path / "copy.jsonl"
    copy.write_bytes((tmp_path / "mbpp" / "mbpp.jsonl").read_bytes())
    assert import_check(copy, names, loaded) == (loaded, "")


def test_a_runs_labeled_sets_are_decontaminated_and_logged(tmp_path, monkeypatch, executor, capsys):
    _fake_data(tmp_path)
    monkeypatch.setenv(DATA_ENV, str(tmp_path))
    seed = tmp_path / "seed.jsonl"
    seed.write_text(json.dumps({"program": BENCH_PROGRAM, "type": "deduction", "input": "[1]"}))
    names = ("cruxeval", "mbpp")
    paths = [tmp_path / "mbpp" / "mbpp.jsonl", seed]
    with TaskStore.open(str(tmp_path / "p.sqlite"), run="r") as store:
        reports = import_labeled(
            store, executor, paths, tmp_path, decontaminate=names,
            benchmarks=BenchmarkPrograms.load(names),
        )  # fmt: skip
    assert [r.reasons() for r in reports] == [{}, {"contaminated:cruxeval": 1}]
    assert reports[0].added == 2  # MBPP's own assert: a deduction and an abduction task
    log = [json.loads(line) for line in (tmp_path / "imports.jsonl").read_text().splitlines()]
    assert [entry["decontaminated"] for entry in log] == [["cruxeval"], ["cruxeval", "mbpp"]]
    assert [entry["benchmark_itself"] for entry in log] == ["mbpp", ""]
    assert "mbpp.jsonl is mbpp itself" in capsys.readouterr().err


def test_the_command_line_import_checks_and_says_which_file_is_a_benchmark(tmp_path):
    _fake_data(tmp_path)
    seed = tmp_path / "seed.jsonl"
    seed.write_text(json.dumps({"program": BENCH_PROGRAM, "type": "deduction", "input": "[1]"}))
    command = [sys.executable, "-m", "selfplay.cli", "pool", "import", "--store",
               str(tmp_path / "p.sqlite"), str(seed), str(tmp_path / "mbpp" / "mbpp.jsonl")]  # fmt: skip
    env = {**os.environ, DATA_ENV: str(tmp_path)}
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    summaries = [json.loads(line) for line in done.stdout.splitlines()]
    assert [s["reasons"] for s in summaries] == [{"contaminated:cruxeval": 1}, {}]
    assert "no humaneval data" in done.stderr and "is mbpp itself" in done.stderr
