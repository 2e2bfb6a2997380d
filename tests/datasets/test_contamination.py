"""Decontamination: a proposal that writes back a program of CRUXEval, HumanEval or MBPP is
recognised after normalisation, and an export never holds a proposed one."""

from __future__ import annotations

import json

from selfplay.curriculum import Provenance, TaskStore
from selfplay.datasets.contamination import BENCHMARK_FILES, BenchmarkPrograms, normalise
from selfplay.datasets.export import ExportFilter, records
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
