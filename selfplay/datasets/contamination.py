"""Decontamination: proposals that write back a program of a benchmark the project evaluates on.

A model may have seen CRUXEval, HumanEval and MBPP before training. A proposal that reproduces
one of their programs is no new work, and a pool (or an export) holding it would put test items
into training data. `BenchmarkPrograms` holds the normalised program of every problem of those
benchmarks (all of MBPP, not only its test split); `match(program)` names the benchmark a
program reproduces, or gives "".

Normalised (`normalise`): the benchmark's entry function renamed `f` (HumanEval's
`entry_point`, the function MBPP's first test calls that its code defines; CRUXEval's is `f`),
docstrings and imports dropped (HumanEval's `from typing import List` is no part of the
function), then `canonical_program` (comments, layout, quoting, annotations, and the names a
program binds renamed in order). So HumanEval's

    def add(x: int, y: int):
        \"\"\"Add two numbers x and y ...\"\"\"
        return x + y

and a proposal `def f(a, b):\\n    return a + b` are the same program. The match is exact after
normalisation: a proposal that changes a constant or a step of a benchmark program is not
caught (it is also no longer that benchmark's item).

The data sets are read from `$SELFPLAY_DATA` (`files.data_root`); a benchmark whose file is
absent is listed in `missing` and its programs go unchecked (the run says so when it starts).

Imports are checked too (`import_check`): a seed or labeled task whose program is a
benchmark's is rejected as `contaminated:<benchmark>` (AZR's 7B seed set holds a CRUXEval and
a HumanEval program; CRUXEval and MBPP share three). A file that is one of a benchmark's own
data files (`OWN_FILES`: `recipes/cpu_semi.yaml` trains on `mbpp/mbpp.jsonl`) is not checked
against that benchmark: training on it is the user's choice, said when it is imported, and
scores on that benchmark are then no held-out measurement. A copy of such a file elsewhere is
checked, and its tasks are rejected.
"""

from __future__ import annotations

import ast
import contextlib
import re
import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from selfplay.files import data_root, records
from selfplay.proposer.canonical import canonical_program

__all__ = ["BENCHMARK_FILES", "OWN_FILES", "BenchmarkPrograms", "import_check", "normalise"]

BENCHMARK_FILES = {
    "cruxeval": "cruxeval/cruxeval.jsonl",
    "humaneval": "humaneval/HumanEval.jsonl.gz",
    "mbpp": "mbpp/mbpp.jsonl",
}
#: every data file of each benchmark (an import of one is not checked against its benchmark)
OWN_FILES = {name: (relative,) for name, relative in BENCHMARK_FILES.items()}
OWN_FILES["mbpp"] += ("mbpp/sanitized-mbpp.json",)
_BODIES = (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def normalise(program: str, entry: str = "f") -> str:
    """The program as decontamination compares it (module doc); text that does not parse is
    compared by its words."""
    try:
        with warnings.catch_warnings():  # benchmark code with invalid escapes ('\d')
            warnings.simplefilter("ignore")
            tree = ast.parse(program)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return " ".join(program.split())
    tree.body = [s for s in tree.body if not isinstance(s, ast.Import | ast.ImportFrom)]
    for node in ast.walk(tree):
        if isinstance(node, _BODIES) and _docstring(node.body):
            node.body = node.body[1:] or [ast.Pass()]
        if entry != "f":
            if isinstance(node, ast.FunctionDef) and node.name == entry:
                node.name = "f"
            elif isinstance(node, ast.Name) and node.id == entry:
                node.id = "f"
    try:
        return canonical_program(ast.unparse(tree))
    except RecursionError:
        return " ".join(program.split())


def _docstring(body: list[ast.stmt]) -> bool:
    first = body[0] if body else None
    return (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
    )


@dataclass
class BenchmarkPrograms:
    """The normalised programs of the benchmarks, and which benchmark each came from."""

    programs: dict[str, str] = field(default_factory=dict)  # normalised program -> benchmark
    missing: dict[str, Path] = field(default_factory=dict)  # benchmark -> the absent file

    @classmethod
    def load(cls, benchmarks: Iterable[str], root: Path | None = None) -> BenchmarkPrograms:
        """The programs of `benchmarks` (keys of `BENCHMARK_FILES`) under `root`."""
        root = data_root() if root is None else Path(root)
        out = cls()
        for name in benchmarks:
            path = root / BENCHMARK_FILES[name]
            if not path.is_file():
                out.missing[name] = path
                continue
            for program, entry in _programs(name, records(path)):
                out.programs.setdefault(normalise(program, entry), name)
        return out

    def match(self, program: str) -> str:
        """The benchmark whose program `program` reproduces, or ""."""
        return self.programs.get(normalise(program), "") if self.programs else ""

    def __len__(self) -> int:
        return len(self.programs)


def import_check(
    path: Path, names: Iterable[str], loaded: BenchmarkPrograms | None = None
) -> tuple[BenchmarkPrograms, str]:
    """What an import of `path` is checked against: the programs of the benchmarks `names`
    (`loaded`, where given, holds them already), less those of the benchmark one of whose own
    data files `path` is (`OWN_FILES`, symbolic links followed; a copy elsewhere is checked);
    and that benchmark, where it is one of `names` ("" otherwise)."""
    root = data_root()
    names = tuple(names)
    own = ""
    for name, relatives in OWN_FILES.items():
        for relative in relatives:
            with contextlib.suppress(OSError):  # an absent benchmark file is not the import's
                if Path(path).samefile(root / relative):
                    own = name
    own = own if own in names else ""
    wanted = [name for name in names if name != own]
    if loaded is None or set(loaded.programs.values()) - set(wanted):
        # loaded afresh, not filtered: a program of two benchmarks is filed under one only
        return BenchmarkPrograms.load(wanted, root), own
    return loaded, own


def _programs(benchmark: str, rows: list[dict]) -> Iterable[tuple[str, str]]:
    """(program, entry function name) of each record of a benchmark's file."""
    for row in rows:
        if benchmark == "cruxeval" and "code" in row:
            yield row["code"], "f"
        elif (
            benchmark == "humaneval"
            and {"prompt", "canonical_solution", "entry_point"} <= row.keys()
        ):
            yield row["prompt"] + row["canonical_solution"], row["entry_point"]
        elif benchmark == "mbpp" and "code" in row:
            yield row["code"], _mbpp_entry(row["code"], (row.get("test_list") or [""])[0])


def _mbpp_entry(code: str, test: str) -> str:
    """The function of MBPP `code` that its first test calls (`assert int(g(5, 3)) == 35`
    calls `int` and `g`: the one the code defines), else "f"."""
    called = set(re.findall(r"([A-Za-z_]\w*)\s*\(", test))
    defined = re.findall(r"^def\s+([A-Za-z_]\w*)", code, re.M)
    return next((name for name in defined if name in called), "f")
