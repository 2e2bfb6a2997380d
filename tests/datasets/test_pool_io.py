"""Seeds in, exports out: round trips, malformed input, the command line, the real seed sets."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from selfplay.curriculum import Provenance, TaskStore
from selfplay.datasets.export import ExportFilter, export
from selfplay.datasets.importer import import_file
from selfplay.executor import Executor
from selfplay.types import Task

SEEDS = [
    {"code": "def f(a, b):\n    return a + b", "input": "1, 2", "output": "3", "id": "c1"},
    {
        "snippet": "def f(d):\n    return list(d)",
        "input": "dict(b=1, a=2)",
        "output": "['b', 'a']",
        "imports": [],
    },
    {
        "program": "def f(x):\n    return x * 2",
        "type": "induction",
        "inputs": ["1", "2", "3", "4"],
        "outputs": ["2", "4", "6", "8"],
        "message": "double",
    },
    {
        "program": "import math\ndef f(x):\n    return math.sqrt(x)",
        "type": "deduction",
        "input": "4",
    },
    {"program": "def f(x):\n    return x", "input": "1", "output": "2"},
    {"program": "def f(x):\n    return open('/etc/passwd').read()", "input": "1"},
    {"program": "def f(x):\n    return x", "input": "lambda: 1"},
]


@pytest.fixture(scope="module")
def executor():
    with Executor() as ex:
        yield ex


def _write(path, records, extra_lines=()):
    lines = [json.dumps(r) for r in records] + list(extra_lines)
    path.write_text("\n".join(lines) + "\n")
    return path


def test_import_validates_and_reports_every_reject(store_url, tmp_path, executor):
    seeds = _write(tmp_path / "seeds.jsonl", SEEDS, ["{not json", "[1, 2]"])
    with TaskStore.open(store_url, run="r") as store:
        report = import_file(store, seeds, executor, labeled=True)
        assert report.records == 9
        assert report.added == 6  # c1 twice, the dict seed twice, induction, sqrt
        reasons = report.reasons()
        assert reasons.pop("malformed_record") == 2 and reasons.pop("output_mismatch") == 2
        assert reasons.pop("input:not_literal") == 2  # the lambda, for both task types
        [(policy, count)] = reasons.items()
        assert policy.startswith("policy:") and count == 2
        assert {r.line for r in report.rejects if r.reason == "malformed_record"} == {8, 9}
        tasks = store.get(store.index["id"].tolist())
        assert {t.provenance.origin for t in tasks} == {"labeled"}
        dict_seed = next(t for t in tasks if "list(d)" in t.task.program)
        assert dict_seed.task.input == "{'b': 1, 'a': 2}"  # insertion order kept, a literal now
        induction = next(t for t in tasks if t.task.type == "induction")
        assert induction.task.n_visible == 2 and induction.task.message == "double"
        assert all(t.provenance.source == "seeds.jsonl" for t in tasks)
    assert len(report.rejects) == 2 + report.candidates - report.accepted


@pytest.mark.parametrize("suffix", ["jsonl", "json"])
def test_a_record_with_a_lone_surrogate_is_a_reject_and_the_rest_import(
    store_url, tmp_path, executor, suffix
):
    """A lone surrogate escape (`"\\ud83d"`, a cut emoji) is valid JSON but not text: in a
    field the executor never runs (an induction message, a math problem, an MBPP description)
    it reached the database insert, which failed and took the file's other records with it."""
    cut = "doubles \ud83d"
    records = [
        {"program": "def f(x):\n    return x + 1", "type": "induction", "inputs": ["1", "2", "3"]},
        {
            "program": "def f(x):\n    return x * 2",
            "type": "induction",
            "inputs": ["1", "2", "3"],
            "message": cut,
        },
        {"question": f"Tom has 3 apples and {cut} them. How many now?", "answer": "#### 6"},
        {"code": "def g(x):\n    return x", "test_list": ["assert g(1) == 1"], "text": cut},
        {"program": "def f(x):\n    return x - 1", "type": "deduction", "input": "1", cut: 1},
        {"program": "def f(x):\n    return x - 2", "type": "deduction", "input": "1"},
    ]
    path = tmp_path / f"seeds.{suffix}"
    if suffix == "json":
        path.write_text(json.dumps(records))  # the escapes as a file holds them (ensure_ascii)
    else:
        _write(path, records)
    with TaskStore.open(store_url, run="r") as store:
        report = import_file(store, path, executor)
        assert (report.records, report.added) == (6, 2) and len(store) == 2
    assert report.reasons() == {"malformed_record": 4}
    assert [r.line for r in report.rejects] == [2, 3, 4, 5]
    assert all("lone surrogate '\\ud83d'" in r.detail for r in report.rejects)
    assert "field 'message'" in report.rejects[0].detail
    assert "field name" in report.rejects[3].detail


@pytest.mark.parametrize("suffix", ["jsonl", "jsonl.gz", "json", "parquet"])
def test_a_record_that_is_not_utf8_is_a_reject_and_the_rest_import(tmp_path, executor, suffix):
    """A byte that is not UTF-8 (a Latin-1 `é`) was read as U+FFFD and the changed record
    imported as good (Parquet stopped the whole import instead): now its record is a reported
    reject, and the records around it import."""
    programs = [b"def f(x):\n    return x + 'a'", b"def f(x):\n    return x + 'caf\xe9'"]
    programs.append(b"def f(x):\n    return x + 'b'")
    records = [
        b'{"program": "%s", "type": "deduction", "input": "\'x\'"}' % p.replace(b"\n", b"\\n")
        for p in programs
    ]
    path = tmp_path / f"seeds.{suffix}"
    if suffix == "parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        program = pa.array(programs, pa.binary()).view(pa.string())  # bytes as they are
        columns = {"program": program, "type": ["deduction"] * 3, "input": ["'x'"] * 3}
        pq.write_table(pa.table(columns), path)
    elif suffix == "json":
        path.write_bytes(b"[" + b", ".join(records) + b"]")
    else:
        data = b"\n".join(records) + b"\n"
        path.write_bytes(gzip.compress(data) if suffix.endswith(".gz") else data)
    with TaskStore.open(str(tmp_path / "p.sqlite"), run="r") as store:
        report = import_file(store, path, executor)
        stored = [t.task.program for t in store.get(store.index["id"].tolist())]
    assert (report.records, report.added) == (3, 2)
    [reject] = report.rejects
    assert (reject.line, reject.reason) == (2, "malformed_record") and "UTF-8" in reject.detail
    assert stored == [programs[0].decode(), programs[2].decode()]


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "hf"])
def test_export_then_import_round_trips(store_url, tmp_path, executor, fmt):
    seeds = _write(tmp_path / "seeds.jsonl", SEEDS[:4])
    with TaskStore.open(store_url, run="a") as store:
        import_file(store, seeds, executor)
        ids = store.index["id"].tolist()
        [new] = store.add_tasks(
            store.get(ids[:1])[0:1]
            and [
                store.get(ids[:1])[0].task.__class__(
                    "deduction", "def f(x):\n    return -x", ("5",), ("-5",)
                )
            ],
            Provenance(step=3, model_version="m3", references=tuple(ids[:2])),
            guessable=[np.bool_(True)],  # a numpy flag is stored as a plain boolean
        ).ids
        store.record_attempts(3, "m3", [(new, 8, 3)])
        out = tmp_path / f"pool.{fmt}"
        count = export(store, fmt, out, ExportFilter())
        assert count == len(ids) + 1
        only = export(store, "jsonl", tmp_path / "hard.jsonl", ExportFilter(min_answers=1))
        assert only == 1
    if fmt == "hf":
        import datasets

        rows = list(datasets.load_from_disk(str(out)))
        source = tmp_path / "from_hf.jsonl"
        _write(source, rows)
    elif fmt == "parquet":
        source = out
    else:
        source = out
        rows = [json.loads(line) for line in out.read_text().splitlines()]
    if fmt == "parquet":
        import pyarrow.parquet as pq

        rows = pq.read_table(out).to_pylist()
    assert [r["task_id"] for r in rows] == sorted(r["task_id"] for r in rows)  # stable order
    last = rows[-1]
    assert (last["step"], last["model_version"], last["n_answers"]) == (3, "m3", 8)
    assert len(last["references"]) == 2 and last["origin"] == "proposed"
    assert last["guessable"] is True
    # the imported abduction tasks were judged for stock inputs as they entered; others not
    judged = {(r["type"], r["program"].split()[-1]): r["guessable"] for r in rows[:-1]}
    assert judged == {
        ("deduction", "b"): None,
        ("abduction", "b"): True,  # a + b on (1, 2): stock values
        ("deduction", "list(d)"): None,
        ("abduction", "list(d)"): False,  # no stock dict gives ['b', 'a']
        ("induction", "2"): None,
        ("deduction", "math.sqrt(x)"): None,
    }
    with TaskStore.open(store_url, run="b") as other:
        report = import_file(other, source, executor)
        assert report.rejects == [] and report.added == len(rows)
        hashes = {t.hash for t in other.get(other.index["id"].tolist())}
    assert hashes == {r["hash"] for r in rows}


def test_an_export_removes_what_a_killed_export_of_the_same_file_left(tmp_path):
    """A SIGKILLed export cannot remove its `.partial` sibling; the next export of that file
    does, unless its writer still runs or another machine wrote it."""
    import selfplay.datasets.export as export_module

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    host, out = export_module._host(), tmp_path / "pool.jsonl"
    names = {
        "killed": f".pool.jsonl.{host}.{dead.pid}.0123abcd.partial",
        "killed, its out moved aside": f".pool.jsonl.{host}.{dead.pid}.0123abcd.partial.old",
        "running": f".pool.jsonl.{host}.{os.getpid()}.0123abcd.partial",
        "another machine's": f".pool.jsonl.elsewhere.{dead.pid}.0123abcd.partial",
        "another file's": f".pool.jsonl.x.{host}.{dead.pid}.0123abcd.partial",
    }
    for name in names.values():
        (tmp_path / name).write_text("part")
    with TaskStore.open(str(tmp_path / "pool.sqlite"), run="r") as opened:
        opened.add_tasks(
            [Task("deduction", "def f(x):\n    return x + 1", ("1",), ("2",))],
            Provenance("seed", 0, "", "import"),
        )
        assert export(opened, "jsonl", out, ExportFilter()) == 1
        left = {p.name for p in tmp_path.glob(".*partial*")}
        # the moved-aside earlier out is the only copy while out is missing; now it is not
        assert left == {names[k] for k in names if not k.startswith("killed")} | {
            names["killed, its out moved aside"]
        }
        export(opened, "jsonl", out, ExportFilter(), force=True)
        assert {p.name for p in tmp_path.glob(".*partial*")} == {
            names[k] for k in names if not k.startswith("killed")
        }


@pytest.mark.parametrize("fmt", ["jsonl", "parquet", "hf"])
def test_an_interrupted_export_leaves_out_as_it_was(tmp_path, monkeypatch, fmt):
    import selfplay.datasets.export as export_module

    store = str(tmp_path / "pool.sqlite")
    tasks = [
        Task("deduction", f"def f(x):\n    return x + {i}", ("1",), (str(i + 1),)) for i in (1, 2)
    ]
    with TaskStore.open(store, run="r") as opened:
        opened.add_tasks(tasks, Provenance("seed", 0, "", "import"))
        [first, _] = export_module.records(opened, ExportFilter())

        def interrupted(*args):
            yield first
            raise KeyboardInterrupt

        out = tmp_path / f"pool.{fmt}"
        if fmt == "hf":
            out.mkdir()
            (out / "notes.txt").write_text("mine")
        else:
            out.write_text("precious")
        before = sorted((p.name, p.read_bytes()) for p in [out, *out.glob("*")] if p.is_file())
        monkeypatch.setattr(export_module, "records", interrupted)
        with pytest.raises(KeyboardInterrupt):
            export(opened, fmt, out, ExportFilter(), force=True)
        after = sorted((p.name, p.read_bytes()) for p in [out, *out.glob("*")] if p.is_file())
        assert after == before and sorted(p.name for p in tmp_path.iterdir()) == sorted(
            ["pool.sqlite", out.name, *(p.name for p in tmp_path.glob("pool.sqlite-*"))]
        )
        monkeypatch.undo()
        with pytest.raises(FileExistsError, match="--force"):  # not replaced unasked
            export(opened, fmt, out, ExportFilter())
        assert export(opened, fmt, out, ExportFilter(), force=True) == 2
    if fmt == "hf":
        import datasets

        assert not (out / "notes.txt").exists() and len(datasets.load_from_disk(str(out))) == 2
    elif fmt == "jsonl":
        assert len(out.read_text().splitlines()) == 2
    else:
        import pyarrow.parquet as pq

        assert pq.read_table(out).num_rows == 2


def test_the_export_command_refuses_an_existing_out_unless_forced(tmp_path, capsys):
    from selfplay.cli import main

    store, out = tmp_path / "pool.sqlite", tmp_path / "pool.jsonl"
    with TaskStore.open(str(store), run="r") as opened:
        task = Task("deduction", "def f(x):\n    return x", ("1",), ("1",))
        opened.add_tasks([task], Provenance("seed", 0, "", "import"))
    out.write_text("precious")
    command = ["pool", "export", "--store", str(store), "--format", "jsonl", "--out", str(out)]
    assert main(command) == 1 and "--force" in capsys.readouterr().err
    assert out.read_text() == "precious"
    assert main([*command, "--force"]) == 0 and json.loads(out.read_text())["program"]


def test_command_line_import_export_stats(tmp_path):
    seeds = _write(tmp_path / "seeds.jsonl", SEEDS)
    db = str(tmp_path / "cli.sqlite")
    run = [sys.executable, "-m", "selfplay.cli", "pool"]
    done = subprocess.run(
        [
            *run,
            "import",
            str(seeds),
            "--store",
            db,
            "--rejects",
            str(tmp_path / "rejects.jsonl"),
            "curriculum.decontaminate=[]",
        ],  # `a + b` is HumanEval's `add` (test_contamination.py)
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[0])
    assert summary["added"] == 6 and summary["rejected"] == 6
    assert len((tmp_path / "rejects.jsonl").read_text().splitlines()) == 6
    stats = subprocess.run([*run, "stats", "--store", db], capture_output=True, text=True)
    assert (
        stats.returncode == 0 and "deduction" in stats.stdout and "never attempted" in stats.stdout
    )
    assert "with a loop" not in stats.stdout
    shaped = [*run, "stats", "--store", db, "--programs", "--json"]
    shaped = subprocess.run(shaped, capture_output=True, text=True)
    # the store holds imported seeds only: no program that a model proposed
    assert shaped.returncode == 0 and json.loads(shaped.stdout)["programs"] == [], shaped.stderr
    # the growth table's spans by name: six seeds added at step 0, none answered yet
    [span] = json.loads(shaped.stdout)["growth"]
    assert span == {
        "first": 0,
        "last": 0,
        "added": 6,
        "total": 6,
        "answers": 0,
        "correct": 0,
        "again": 0,
        "again_correct": 0,
    }
    out = tmp_path / "out.parquet"
    done = subprocess.run(
        [
            *run,
            "export",
            "--store",
            db,
            "--format",
            "parquet",
            "--out",
            str(out),
            "--type",
            "induction",
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0 and "exported 1 tasks" in done.stderr
    bad = subprocess.run(
        [*run, "stats", "--store", str(tmp_path / "none.sqlite")], capture_output=True, text=True
    )
    assert bad.returncode == 1 and "holds no tasks" in bad.stderr
    bad = subprocess.run(
        [*run, "stats", "--store", "postgresql://nobody@127.0.0.1:1/none"],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1 and "cannot open the store" in bad.stderr, bad.stderr
    bad = subprocess.run(
        [
            *run,
            "export",
            "--store",
            db,
            "--format",
            "jsonl",
            "--out",
            str(tmp_path / "x.jsonl"),
            "--min-p",
            "0.9",
            "--max-p",
            "0.1",
        ],
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1 and "min_p" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize("command", [["stats"], ["export", "--format", "jsonl", "--out"]])
def test_a_missing_store_named_with_its_run_is_refused_not_created(tmp_path, capsys, command):
    from selfplay.cli import main

    store = tmp_path / "missing.sqlite"
    out = [str(tmp_path / "x.jsonl")] if command[0] == "export" else []
    code = main(["pool", *command, *out, "--store", str(store), "--run", "r"])
    assert code == 1 and "holds no tasks" in capsys.readouterr().err
    assert not store.exists() and not (tmp_path / "x.jsonl").exists()


@pytest.mark.parametrize("suffix", ["", "-wal", "-shm"])
def test_an_export_onto_the_store_itself_is_refused(tmp_path, capsys, monkeypatch, suffix):
    from selfplay.cli import main

    store, task = (
        tmp_path / "pool.sqlite",
        Task("deduction", "def f(x):\n    return x", ("1",), ("1",)),
    )
    with TaskStore.open(str(store), run="r") as opened:
        opened.add_tasks([task], Provenance("seed", 0, "", "import"))
    before = store.read_bytes()
    monkeypatch.chdir(tmp_path)  # the same file by a relative path
    out = ["--out", f"pool.sqlite{suffix}"]
    code = main(["pool", "export", "--store", str(store), "--format", "jsonl", *out])
    assert code == 1 and "store's own file" in capsys.readouterr().err
    assert store.read_bytes() == before
    assert suffix == "" or not Path(f"{store}{suffix}").exists()


@pytest.mark.data
def test_the_seed_sets_import_with_reported_acceptance(data, tmp_path, executor, capsys):
    files = sorted((data / "azr_seed").glob("*_seed_io.jsonl")) + [
        data / "cruxeval" / "cruxeval.jsonl"
    ]
    with TaskStore.open(str(tmp_path / "seeds.sqlite"), run="seeds") as store:
        for path in files:
            report = import_file(store, path, executor)
            with capsys.disabled():
                print(json.dumps(report.summary()))
            assert report.candidates and report.acceptance_rate > 0.8, report.summary()
            assert len(report.rejects) == report.candidates - report.accepted
        assert store.stats().by_type_origin[("induction", "seed")] > 400
