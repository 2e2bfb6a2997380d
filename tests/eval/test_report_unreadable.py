"""Lines of a samples file that cannot be read (a file cut short while it was written) are left
out of `selfplay report --compare` and `--pooled`; the table says so, as `--json` does."""

from __future__ import annotations

import json

from selfplay.cli import main


def _row(i: int, correct: bool) -> dict:
    return {"subset": "cruxeval_o", "id": f"sample_{i}", "sample": 0, "correct": correct,
            "failure": None if correct else "wrong_value", "trivial": False, "answer": "x",
            "prompt_format": "direct", "program": "def f(x):\n    return x", "input": str(i),
            "output": "1"}  # fmt: skip


def _write(folder, rows, cut: int = 0) -> str:
    """A samples file of `rows`, the last `cut` of them cut off in the middle of the line."""
    folder.mkdir()
    lines = [json.dumps(r) for r in rows]
    lines[len(lines) - cut :] = [line[: len(line) // 2] for line in lines[len(lines) - cut :]]
    (folder / "samples.jsonl").write_text("".join(line + "\n" for line in lines))
    return str(folder)


def test_the_tables_say_how_many_lines_could_not_be_read(tmp_path, capsys):
    base = _write(tmp_path / "base", [_row(i, i < 3) for i in range(10)])
    cut = _write(tmp_path / "cut", [_row(i, i < 5) for i in range(10)], cut=2)
    whole = _write(tmp_path / "whole", [_row(i, i < 4) for i in range(10)])
    assert main(["report", "--compare", base, cut]) == 0
    table = capsys.readouterr().out
    assert "warning: lines that could not be read are left out (2 of after)" in table
    assert main(["report", "--compare", base, cut, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["unreadable_lines"] == [0, 2]
    assert main(["report", "--compare", base, whole]) == 0
    assert "could not be read" not in capsys.readouterr().out
    assert main(["report", "--pooled", base, whole, cut]) == 0
    assert "are left out (2 of after 2)" in capsys.readouterr().out
    assert main(["report", "--pooled", base, whole]) == 0
    assert "could not be read" not in capsys.readouterr().out


def test_a_runs_report_says_how_many_lines_of_its_evaluations_could_not_be_read(tmp_path, capsys):
    """`selfplay report RUN` pairs the run's first and last evaluation of each benchmark: a
    line of either that cannot be read is said as in a comparison."""
    run = tmp_path / "run"
    (run / "eval").mkdir(parents=True)
    (run / "metrics.jsonl").write_text(json.dumps({"step": 2, "time": 0.0}) + "\n")
    for step, cut in ((0, 0), (2, 3)):
        rows = [json.dumps(_row(i, i < 2 + step)) for i in range(10)]
        rows[len(rows) - cut :] = [line[: len(line) // 2] for line in rows[len(rows) - cut :]]
        (run / "eval" / f"cruxeval-step{step}.jsonl").write_text("\n".join(rows) + "\n")
    assert main(["report", str(run), "--no-figures"]) == 0
    table = capsys.readouterr().out
    assert "warning: lines that could not be read are left out (3 of step 2)" in table
    assert main(["report", str(run), "--no-figures", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["benchmarks"]["cruxeval_o"]["unreadable_lines"] == [
        0,
        3,
    ]


def test_a_file_with_no_readable_record_is_an_error_naming_it(tmp_path, capsys):
    base = _write(tmp_path / "base", [_row(i, i < 3) for i in range(4)])
    empty = _write(tmp_path / "empty", [])
    cut = _write(tmp_path / "cut", [_row(0, True)], cut=1)
    for command in (["--pooled", empty, cut], ["--pooled", base, cut], ["--compare", base, empty]):
        assert main(["report", *command]) == 1
        err = capsys.readouterr().err
        named = empty if command[1] == empty or command[2] == empty else cut
        assert f"{named}/samples.jsonl holds no readable evaluation record" in err, err
        assert "share no evaluated item" not in err


def test_a_folder_that_is_no_run_folder_is_an_error(tmp_path, capsys):
    (tmp_path / "notes.txt").write_text("not a run")
    assert main(["report", str(tmp_path), "--no-figures"]) == 1
    err = capsys.readouterr().err
    assert f"{tmp_path} is no run folder" in err and "0 steps" not in err
