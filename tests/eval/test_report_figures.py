"""`selfplay report` draws figures: a run folder made of a real run's metrics, in-loop
evaluations and a real task pool gets its three PNGs; a folder with less gets what it can, and
says what it skipped; `--compare` draws the paired before and after."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from selfplay.cli import main
from selfplay.curriculum import Provenance, TaskStore
from selfplay.eval import figures
from selfplay.eval.report import read_metrics
from tests.curriculum.pool_helpers import task

REPO = Path(__file__).resolve().parents[2]
PNG = b"\x89PNG\r\n\x1a\n"
ALL_PANELS = [title for title, _, _ in figures.PANELS]


def assert_png(path: Path, at_least: int = 5_000) -> None:
    data = Path(path).read_bytes()
    assert data[:8] == PNG and len(data) > at_least, (path, len(data))


def evaluation(folder: Path, step: int, right: list[bool]) -> None:
    """An in-loop evaluation of CRUXEval-O at `step`: item 0 is trivial (copying solves it)."""
    rows = [
        {"subset": "cruxeval_o", "id": str(i), "correct": ok, "trivial": i == 0}
        for i, ok in enumerate(right)
    ]
    (folder / "eval").mkdir(exist_ok=True)
    path = folder / f"eval/cruxeval-step{step:06d}.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def a_pool(path: Path) -> None:
    """Six tasks of one run: four answered at step 2 (0 to 3 right of 4), two never answered."""
    with TaskStore.open(str(path), run="figures") as store:
        ids = store.add_tasks([task(i) for i in range(6)], Provenance("proposed", step=1)).ids
        store.record_attempts(2, "v2", [(ids[i], 4, i) for i in range(4)])


def test_a_run_folder_gets_training_evaluation_and_pool_figures(tmp_path, capsys):
    run = tmp_path / "learn-seed1"
    run.mkdir()
    shutil.copy(REPO / "results/learn-seed1/metrics.jsonl", run / "metrics.jsonl")
    for step, right in ((0, [1, 0, 0, 0, 1]), (10, [1, 1, 0, 0, 1]), (20, [1, 1, 1, 0, 1])):
        evaluation(run, step, [bool(x) for x in right])
    a_pool(run / "pool.sqlite")

    assert main(["report", str(run), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    out = run / "report"
    assert printed["figures"] == [
        str(out / f) for f in ("training.png", "evaluations.png", "pool.png")
    ]
    assert printed["figures_skipped"] == []
    for path in printed["figures"]:
        assert_png(path)
    assert_png(out / "training.png", 30_000)  # seven panels of 20 steps
    # the counts behind the intervals: 3 of 5 right at step 10, 2 of the 4 non-trivial
    point = printed["benchmarks"]["cruxeval_o"]["curve"][1]
    assert (point["n"], point["correct"]) == (5, 3)
    assert (point["non_trivial_n"], point["non_trivial_correct"]) == (4, 2)

    rows, _ = read_metrics(run / "metrics.jsonl")
    assert figures.training(rows, tmp_path / "t.png", "t") == ALL_PANELS
    assert main(["report", str(run)]) == 0
    assert f"figures: {out / 'training.png'}, " in capsys.readouterr().out


def test_the_pool_figure_counts_what_pool_stats_counts(tmp_path):
    a_pool(tmp_path / "pool.sqlite")
    stats, band, note = figures.pool_stats(tmp_path)
    assert note is None and band == (0.3, 0.8)
    assert (stats.tasks, stats.never_attempted, sum(stats.histogram)) == (6, 2, 4)
    figures.pool(stats, band, tmp_path / "pool.png")
    assert_png(tmp_path / "pool.png")


def test_an_older_run_without_pool_or_evaluations_gets_what_it_recorded(tmp_path, capsys):
    """Metrics without KL, entropy or pool size (an older run), NaN where nothing was
    answered, one line cut off: the panels it has; the figures it lacks are named."""
    rows = [
        {"step": s, "solve/accuracy": a, "solve/accuracy/abduction": float("nan")}
        for s, a in ((1, 0.25), (2, 0.5), (3, float("nan")))
    ]
    rows[1]["solve/accuracy/abduction"] = 0.5
    for row in rows:
        row |= {"propose/valid_rate/deduction": 0.5, "reward/solve": 0.1}
    lines = [json.dumps(r) for r in rows] + ['{"step": 4, "cut']
    (tmp_path / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    assert main(["report", str(tmp_path), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["figures"] == [str(tmp_path / "report/training.png")]
    skipped = printed["figures_skipped"]
    assert len(skipped) == 2 and "no evaluation figure" in skipped[0]
    assert f"no pool at {tmp_path / 'pool.sqlite'}" in skipped[1]
    assert_png(tmp_path / "report/training.png")
    drawn = figures.training(read_metrics(tmp_path / "metrics.jsonl")[0], tmp_path / "t.png", "")
    assert drawn == ["solver accuracy", "valid proposals per task type", "mean reward"]

    empty = tmp_path / "empty"  # a run that logged no step yet (a bare folder is no run's)
    empty.mkdir()
    (empty / "metrics.jsonl").write_text("")
    assert main(["report", str(empty), "--figures", str(tmp_path / "elsewhere")]) == 0
    table = capsys.readouterr().out
    assert "no figure: no step metrics" in table and "no figure: no pool at" in table
    # no evaluation in the folder: a line that says so, not an empty table's header
    assert "held-out evaluations: none in the run's folder" in table
    assert "before   after" not in table
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_compare_draws_the_paired_before_and_after(tmp_path, capsys):
    def write(folder: Path, right: list[int]) -> None:
        folder.mkdir()
        rows = [
            {"subset": subset, "id": str(i), "correct": bool(ok), "trivial": i % 4 == 0}
            for subset in ("cruxeval_o", "cruxeval_i")
            for i, ok in enumerate(right)
        ]
        (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    write(tmp_path / "base", [0, 0, 0, 1] * 10)
    write(tmp_path / "trained", [1, 1, 0, 1] * 10)
    argv = ["report", "--compare", str(tmp_path / "base"), str(tmp_path / "trained")]
    assert main([*argv, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    path = tmp_path / "trained/report/vs-base.png"
    assert printed["figures"] == [str(path)] and printed["figures_skipped"] == []
    assert_png(path)
    assert printed["cruxeval_o"]["correct"] == [10, 30]
    drawn = figures.paired(printed, tmp_path / "again.png")
    assert drawn == [
        "cruxeval_i all",
        "cruxeval_i non-trivial",
        "cruxeval_o all",
        "cruxeval_o non-trivial",
    ]

    path.unlink()
    assert main([*argv, "--json", "--no-figures"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert "figures" not in printed and not path.exists()


def test_the_command_line_loads_matplotlib_only_to_draw():
    code = "import sys, selfplay.cli; sys.exit('matplotlib' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], cwd=REPO).returncode == 0
