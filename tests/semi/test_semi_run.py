"""A semi-supervised run on CPU with the tiny model: `seed.labeled` imports labeled sets when
the run starts (and adds nothing when it starts again), labeled tasks fill their share of
the solver's batches, and TraPO selection logs its decisions in the run folder."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from selfplay.config import ConfigError, load
from selfplay.curriculum import TaskStore
from selfplay.loop import run
from selfplay.trainer.metrics import read_metrics
from tests.conftest import require_data
from tests.test_loop import overrides, seed_pool


@pytest.mark.data
def test_labeled_sets_join_a_run_once(tmp_path, tiny_model_dir):
    for relative in ("cruxeval/cruxeval.jsonl", "humaneval/HumanEval.jsonl.gz", "mbpp/mbpp.jsonl"):
        require_data(relative)  # the labeled set, and the benchmarks it is checked against
    small = tmp_path / "small.jsonl"
    small.write_text(
        json.dumps({"program": "def f(x):\n    return x + 1", "input": "1", "output": "2"}) + "\n"
    )
    folder = tmp_path / "run"
    args = [
        *overrides(folder, tiny_model_dir, steps=2),
        f"seed.labeled=['{{data}}/cruxeval/cruxeval.jsonl', '{small}']",
        "seed.labeled_limit=200",  # 200 of CRUXEval's 800 problems, drawn with run.seed
        "curriculum.labeled_ratio=0.5",
        "curriculum.selection=trapo",
        "curriculum.trapo_window=3",
        "curriculum.trapo_min_points=3",
    ]
    config = load(None, args)
    folder.mkdir()
    pool = str(folder / "pool.sqlite")
    seed_pool(replace(config, curriculum=replace(config.curriculum, store=pool)))
    out = tmp_path / "out.txt"
    with open(out, "w") as stream:
        run(config, out=stream)
    imports = [json.loads(line) for line in (folder / "imports.jsonl").read_text().splitlines()]
    crux = imports[0]
    assert (crux["records"], crux["sampled_from"], crux["candidates"]) == (200, 800, 400)
    # CRUXEval's own file: checked against the other benchmarks only (the run's wiring)
    assert (crux["benchmark_itself"], crux["decontaminated"]) == ("cruxeval", ["humaneval", "mbpp"])
    assert imports[1]["decontaminated"] == ["cruxeval", "humaneval", "mbpp"]
    assert 390 <= crux["added"] <= 400  # CRUXEval loses 6 of its 1600 tasks in all
    assert f"labeled set cruxeval.jsonl: {crux['added']} of 400 tasks accepted" in out.read_text()
    with TaskStore.open(pool, "test", config.curriculum) as store:
        counts = store.stats().by_type_origin
        size = len(store)
    assert counts[("deduction", "labeled")] == crux["by_type"]["deduction"] + 1
    assert counts[("deduction", "seed")] == 3
    metrics = read_metrics(folder)
    # three tasks a step: two labeled (round(0.5 * 3)), one from the rest of the pool
    assert [m["curriculum/labeled_share"] for m in metrics] == [2 / 3, 2 / 3]
    assert all("curriculum/trapo_tasks" in m for m in metrics)
    lines = (folder / "selection.jsonl").read_text().splitlines()
    decisions = [json.loads(line) for line in lines]
    assert decisions and {d["reason"] for d in decisions} <= {"few_points", "no_reference"}
    # a second start (the run is finished) imports again and adds nothing
    with open(out, "w") as stream:
        run(config, out=stream)
    imports = [json.loads(line) for line in (folder / "imports.jsonl").read_text().splitlines()]
    assert [i["added"] for i in imports] == [crux["added"], 2, 0, 0]
    assert [i["duplicates"] for i in imports[2:]] == [crux["added"], 2]
    with TaskStore.open(pool, "test", config.curriculum) as store:
        assert len(store) == size
    assert (folder / "selection.jsonl").read_text().splitlines() == lines  # nothing was lost


def test_a_resumed_run_drops_the_selection_lines_of_the_steps_it_runs_again(tmp_path):
    from selfplay.semi import SelectionLog

    path = tmp_path / "selection.jsonl"
    records = [{"step": s, "task_id": s, "admitted": True, "reason": "ok"} for s in (1, 2, 3)]
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + '{"step": 4, "ta')
    log = SelectionLog(path, resume_step=2)
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1, 2]
    # it goes on from the kept decisions: an unchanged one is not written again
    assert log.last == {1: (True, "ok"), 2: (True, "ok")}
    assert SelectionLog(path).last == log.last and len(path.read_text().splitlines()) == 2


def test_a_bad_labeled_path_stops_the_run_before_it_starts(tmp_path, tiny_model_dir):
    folder = tmp_path / "run"
    config = load(None, [*overrides(folder, tiny_model_dir), f"seed.labeled={tmp_path}/no.jsonl"])
    with pytest.raises(ConfigError, match="seed.labeled: no file"):
        run(config)
    assert not folder.exists()
    gsm = tmp_path / "gsm.jsonl"
    gsm.write_text(json.dumps({"question": "1 + 1?", "answer": "#### 2"}) + "\n")
    config = load(None, [*overrides(folder, tiny_model_dir), f"seed.labeled={gsm}"])
    with pytest.raises(ConfigError, match="add math to selfplay.task_types"):
        run(config)
