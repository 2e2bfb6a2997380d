"""The pool on real databases: dedup, provenance, idempotent attempts, persistence."""

from __future__ import annotations

import numpy as np
import pytest
from pool_helpers import task

from selfplay.curriculum import Provenance, TaskAttempts, TaskStore
from selfplay.curriculum.stats import Growth
from selfplay.types import Task


def test_dedup_within_a_run_returns_existing_ids(store_url, config):
    with TaskStore.open(store_url, run="a", config=config) as store:
        first = store.add_tasks([task(i) for i in range(5)], Provenance("seed", source="s"))
        again = store.add_tasks([task(3), task(9), task(9)], Provenance("proposed", step=2))
        assert first.added == (True,) * 5
        assert again.added == (False, True, False)
        assert again.ids[0] == first.ids[3] and again.ids[1] == again.ids[2]
        assert len(store) == 6
        # a different type or trailing blanks: same program text, another task / the same one
        other = store.add_tasks([task(3, "abduction")], Provenance())
        assert other.n_added == 1
        spaced = Task("deduction", task(3).program + "  \n", ("3",), task(3).outputs)
        assert store.add_tasks([spaced], Provenance()).ids == (first.ids[3],)
    with TaskStore.open(store_url, run="b", config=config) as other_run:
        assert other_run.add_tasks([task(3)], Provenance()).n_added == 1  # dedup is per run
    assert sorted(TaskStore.runs(store_url)) == ["a", "b"]


def test_a_new_run_keeps_its_configuration(store_url):
    import sqlalchemy as sa

    from selfplay.curriculum.database import resolve_url
    from selfplay.curriculum.schema import RunRow

    TaskStore.open(store_url, run="cfg", run_config={"curriculum": {"shape": "azr"}}).close()
    engine = sa.create_engine(resolve_url(store_url, "cfg"))
    with engine.connect() as conn:
        stored = conn.execute(sa.select(RunRow.config).where(RunRow.name == "cfg")).scalar_one()
    engine.dispose()
    assert stored == {"curriculum": {"shape": "azr"}}


def test_provenance_and_references_round_trip(store_url, config):
    with TaskStore.open(store_url, run="r", config=config) as store:
        refs = store.add_tasks([task(1), task(2)], Provenance("seed")).ids
        prov = Provenance(
            "proposed",
            step=7,
            model_version="m7",
            source="proposer",
            source_id="p1",
            references=(refs[1], refs[0]),
        )
        [new] = store.add_tasks([task(3, "induction")], prov, {"ok": True, "cases": 3}).ids
    with TaskStore.open(store_url, run="r", config=config) as store:
        [got] = store.get([new])
        assert got.provenance == prov
        assert got.task == task(3, "induction")
        with pytest.raises(KeyError):
            store.add_tasks([task(4)], Provenance(references=(10_000,)))


def test_attempts_are_recorded_once_per_task_step_and_version(store_url, config):
    with TaskStore.open(store_url, run="r", config=config) as store:
        ids = store.add_tasks([task(i) for i in range(3)], Provenance()).ids
        first = store.record_attempts(1, "v1", [TaskAttempts(ids[0], 8, 2), (ids[1], 4, 4)])
        replay = store.record_attempts(1, "v1", [TaskAttempts(ids[0], 8, 8), (ids[2], 8, 1)])
        assert (first.recorded, replay.recorded, replay.already_recorded) == (2, 1, 1)
        store.record_attempts(1, "v2", [(ids[0], 8, 5)])  # another model version counts
        [e0, e1, e2] = store.estimates(ids)
        assert (e0.n_answers, e0.n_correct) == (16, 7)
        assert (e1.n_answers, e1.n_correct, e2.n_correct) == (4, 4, 1)
        assert e1.posterior_mean > 0.75 > e0.posterior_mean and e2.p < e1.p
        before = [store.estimates(ids)]
    with TaskStore.open(store_url, run="r", config=config) as store:  # the state persisted
        assert [store.estimates(ids)] == before
        store.rebuild_estimates()  # and replaying the attempts gives it back
        after = store.estimates(ids)
        for a, b in zip(before[0], after, strict=True):
            assert a.n_answers == b.n_answers
            assert a.posterior_mean == pytest.approx(b.posterior_mean, abs=1e-12)
            assert a.p == pytest.approx(b.p, abs=1e-9)  # the same updates in the same groups
            assert a.difficulty == pytest.approx(b.difficulty, abs=1e-9)
        with pytest.raises(ValueError):
            store.record_attempts(2, "v", [(ids[0], 4, 5)])
        with pytest.raises(KeyError):
            store.record_attempts(2, "v", [(999_999, 4, 1)])


def _play(store, step: int) -> list[str]:
    """One step of a run's pool traffic: two tasks proposed from references, answers to
    every task so far (the same for the same step, so that a step can be played again).
    Returns the new tasks' programs."""
    known = [int(i) for i in store.index["id"]]
    prov = Provenance("proposed", step, f"v{step}", "proposer", references=tuple(known[-2:]))
    made = [task(10 * step), task(10 * step + 1, "abduction")]
    new = store.add_tasks(made, prov).ids
    tried = [*known, *new]
    store.record_attempts(step, f"v{step}", [(t, 4, (i * step) % 5) for i, t in enumerate(tried)])
    return [t.program for t in made]


def _pool(store) -> tuple:
    """The pool by content, in the order tasks entered it (ids differ on PostgreSQL, where
    a deleted id is not given again)."""
    ids = sorted(int(i) for i in store.index["id"])
    tasks = store.get(ids)
    position = {i: n for n, i in enumerate(ids)}
    content = [
        (t.task.program, t.provenance.step, tuple(position[r] for r in t.provenance.references))
        for t in tasks
    ]
    estimates = [(e.n_answers, e.n_correct, e.p, e.difficulty) for e in store.estimates(ids)]
    return content, set(store.recorded), dict(store.abilities), estimates


def _same(a: tuple, b: tuple) -> None:
    assert a[:2] == b[:2]
    assert a[2].keys() == b[2].keys()
    for step, (theta, precision, answers) in a[2].items():
        assert b[2][step] == (pytest.approx(theta), pytest.approx(precision), answers)
    for x, y in zip(a[3], b[3], strict=True):
        assert x[:2] == y[:2] and x[2:] == pytest.approx(y[2:], abs=1e-9)


def test_a_rollback_gives_back_the_pool_of_its_step_and_the_same_steps_again(store_url, config):
    """What a resumed run relies on: after `roll_back(2)` the pool is the pool of step 2 (the
    seed kept), and playing steps 3 and 4 again gives the tasks and estimates they gave the
    first time; another run in the same store is not touched."""
    with TaskStore.open(store_url, run="other", config=config) as other:
        other.add_tasks([task(99)], Provenance("proposed", 5))
        other.record_attempts(5, "v", [(int(other.index["id"][0]), 4, 1)])
        theirs = _pool(other)
    with TaskStore.open(store_url, run="r", config=config) as store:
        store.add_tasks([task(0)], Provenance("seed"))
        for step in (1, 2):
            _play(store, step)
        at_two = _pool(store)
        later = [_play(store, step) for step in (3, 4)]
        at_four = _pool(store)
        assert store.roll_back(4) == (0, 0)  # nothing after step 4
        assert store.roll_back(2) == (4, 7 + 9)  # two tasks a step; answers to 7 and 9 tasks
        _same(_pool(store), at_two)
        assert store.last_step == 2
    with TaskStore.open(store_url, run="r", config=config) as store:  # as committed
        _same(_pool(store), at_two)
        assert [_play(store, step) for step in (3, 4)] == later
        _same(_pool(store), at_four)
        assert store.roll_back(0) == (8, 3 + 5 + 7 + 9)  # back to the seed alone
        assert [t[0] for t in _pool(store)[0]] == [task(0).program] and store.abilities == {}
    with TaskStore.open(store_url, run="other", config=config) as other:
        _same(_pool(other), theirs)


def test_a_run_without_a_checkpoint_leaves_the_pool_as_it_is_and_says_so(store_url, config, capsys):
    from selfplay.resume import roll_back

    with TaskStore.open(store_url, run="r", config=config) as store:
        store.add_tasks([task(0)], Provenance("seed"))
        roll_back(store, 0)
        assert capsys.readouterr().err == ""  # a new run: nothing to say
        for step in (1, 2):
            _play(store, step)
        before = _pool(store)
        roll_back(store, 0)  # its checkpoints gone, or another folder on a shared pool
        _same(_pool(store), before)
        assert "holds tasks or answers up to step 2" in capsys.readouterr().err
        roll_back(store, 1)  # resumed from step 1's checkpoint
        assert "2 tasks and 5 attempts recorded after step 1 removed" in capsys.readouterr().err


def test_discount_forgets_old_answers(store_url):
    from selfplay.config import CurriculumConfig

    config = CurriculumConfig(discount=0.5)
    with TaskStore.open(store_url, run="r", config=config) as store:
        [tid] = store.add_tasks([task(1)], Provenance()).ids
        store.record_attempts(0, "v0", [(tid, 8, 0)])
        store.record_attempts(10, "v10", [(tid, 8, 8)])
        [e] = store.estimates([tid], step=10)
        # the failures of step 0 weigh 0.5**10: the task now looks solved
        assert e.effective_answers == pytest.approx(8 + 8 * 0.5**10)
        assert e.posterior_mean == pytest.approx(9 / (10 + 8 * 0.5**10))  # Beta(1, 1) prior
        assert e.p > 0.85  # without discount it would be about one half


def test_stats_count_types_origins_and_growth(store_url, config):
    with TaskStore.open(store_url, run="r", config=config) as store:
        store.add_tasks([task(i) for i in range(4)], Provenance("seed"))
        ids = store.add_tasks([task(i, "abduction") for i in range(3)], Provenance(step=2)).ids
        store.record_attempts(2, "v", [(i, 8, 4) for i in ids])
        stats = store.stats()
    assert stats.by_type_origin == {("deduction", "seed"): 4, ("abduction", "proposed"): 3}
    assert stats.tasks == 7 and stats.never_attempted == 4 and sum(stats.histogram) == 3
    assert stats.answers == 24 and stats.growth[-1][3] == 7
    assert "abduction" in stats.table() and np.isfinite(stats.ability[0])


def test_growth_tells_answers_to_revisited_tasks_from_first_answers(store_url, config):
    """An answer counts as `again` when its task had answers at an earlier step of the same
    run; answers of another run and of the same step do not make it so."""
    with TaskStore.open(store_url, run="other", config=config) as other:
        [theirs] = other.add_tasks([task(0)], Provenance(step=0)).ids
        other.record_attempts(0, "v", [(theirs, 8, 8)])
    with TaskStore.open(store_url, run="r", config=config) as store:
        a, b = store.add_tasks([task(1), task(2)], Provenance(step=0)).ids
        store.record_attempts(0, "v0", [(a, 4, 1)])
        store.record_attempts(0, "v0b", [(b, 4, 0)])  # a second version at the same step
        store.record_attempts(1, "v1", [(a, 8, 6), (b, 8, 2)])
        [c] = store.add_tasks([task(3)], Provenance(step=1)).ids
        store.record_attempts(1, "v1", [(c, 4, 4)])
        stats = store.stats()
    assert stats.growth == (
        Growth(0, 0, 2, 2, answers=8, correct=1, again=0, again_correct=0),
        Growth(1, 1, 1, 3, answers=20, correct=12, again=16, again_correct=8),
    )
    table = stats.table()
    assert "right again" in table
    # step 1: 16 of 20 answers again, right on 4 of 4 new ones and on 8 of 16 again
    assert table.splitlines()[-1].split() == ["1", "1", "3", "20", "80%", "100%", "50%"]


def test_stats_read_how_long_the_written_programs_are_over_steps(store_url, config):
    loop = "def f(xs):\n    t = 0\n    for x in xs:\n        t += x\n    return t"
    with TaskStore.open(store_url, run="r", config=config) as store:
        store.add_tasks([task(i) for i in range(3)], Provenance("seed"))  # not proposed
        store.add_tasks([task(i) for i in range(3, 5)], Provenance(step=0))  # one line each
        store.add_tasks([Task("abduction", loop, ("[1]",), ("1",))], Provenance(step=1))
        store.add_tasks([Task("induction", loop, ("[2]",), ("2",))], Provenance(step=1))
        # the output is the input's text as another type: a copy up to type
        store.add_tasks(
            [Task("deduction", "def f(s):\n    return int(s)", ("'12'",), ("12",))],
            Provenance(step=1),
        )
        assert store.stats().programs == ()  # only when asked: it reads every program
        stats = store.stats(programs=True)
    # steps 0 and 1, one span each; the seeds were not proposed, the induction task's program
    # was given to its proposer
    assert stats.programs == ((0, 0, 2, 1.0, 0.0, 0.0), (1, 1, 2, 2.5, 0.5, 0.5))
    assert "with a loop" in stats.table() and "copy up to type" in stats.table()
    assert stats.table().splitlines()[-1].split() == ["1", "2", "2.5", "50%", "50%"]


def test_a_fork_starts_a_new_run_from_the_seeded_pool_and_leaves_the_original(tmp_path, config):
    """`selfplay pool fork`: the run's step-0 pool (the seeding's tasks and their answers)
    under a new name in a new, compacted file, with the seeding record beside it, forked while
    the run still has the pool open; the later steps and the store's other runs are not in
    the copy, and the original is left as it was, with no files of the fork's beside it."""
    import json
    import sqlite3
    import subprocess
    import sys

    def cli(*args):
        done = subprocess.run([*fork, *args], capture_output=True, text=True)
        assert "Traceback" not in done.stderr, done.stderr
        return done

    source = tmp_path / "a" / "pool.sqlite"
    fork = [sys.executable, "-m", "selfplay.cli", "pool", "fork", "--store", str(source)]
    with TaskStore.open(str(source), run="other", config=config) as other:
        other.add_tasks([task(99), task(98)], Provenance("proposed", 3))
        other.record_attempts(3, "v", [(int(i), 4, 1) for i in other.index["id"]])
    (source.parent / "seeding.json").write_text(json.dumps({"rounds": 8}))
    out = tmp_path / "b" / "pool.sqlite"
    with TaskStore.open(str(source), run="a", config=config) as store:
        store.add_tasks([task(0)], Provenance("seed"))
        _play(store, 0)  # the seeding: proposals of step 0, their solve rates asked
        seeded = _pool(store)
        for step in (1, 2):
            _play(store, step)
        original = _pool(store)
        done = cli("--run", "a", "--out", str(out), "b")  # the run still going
    assert done.returncode == 0, done.stderr
    assert "run 'a' at step 0 is run 'b'" in done.stderr and ": 2 tasks;" in done.stderr
    # the seed and step 0's abduction (its deduction is the seed again); steps 1 and 2 added
    # two tasks each and answered 4 and 6 tasks
    assert "4 tasks and 10 attempt records of later steps" in done.stderr
    assert "the store's 1 other run(s)" in done.stderr and "seeding.json copied" in done.stderr
    assert TaskStore.runs(str(out)) == ["b"]
    with TaskStore.open(str(out), run="b", config=config, create=False) as forked:
        _same(_pool(forked), seeded)
        assert forked.last_step == 0
    with sqlite3.connect(out) as db:  # nothing of the other run is left in the file
        rows = [
            db.execute(f"select count(*) from {t}").fetchone()[0] for t in ("tasks", "attempts")
        ]
    assert rows == [2, 2]  # step 0 answered the seed and the abduction
    assert json.loads((out.parent / "seeding.json").read_text()) == {"rounds": 8}
    with TaskStore.open(str(source), run="a", config=config, create=False) as store:
        _same(_pool(store), original)
    assert sorted(TaskStore.runs(str(source))) == ["a", "other"]
    assert sorted(p.name for p in source.parent.iterdir()) == ["pool.sqlite", "seeding.json"]

    # under its own name: a snapshot of the run's seeded pool, as results keep one
    same = tmp_path / "snapshot" / "pool.sqlite"
    assert cli("--run", "a", "--out", str(same), "a").returncode == 0
    assert TaskStore.runs(str(same)) == ["a"]

    # refused with a reason: nothing written, nothing left behind, nothing of --out touched
    forked = out.read_bytes()
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "seeding.json").write_text("{}")
    (tmp_path / "junk.sqlite").write_text("not a database")
    cases = (
        (["--run", "a", "--out", str(out), "c"], "exists; fork writes a new pool"),
        (["--run", "x", "--out", str(tmp_path / "x" / "pool.sqlite"), "c"], "no run named 'x'"),
        (["--out", str(tmp_path / "y" / "pool.sqlite"), "c"], "choose one with --run"),
        (["--run", "a", "--out", str(tmp_path / "z" / "z" / "pool.sqlite"), ""], "1 to 200"),
        (["--run", "a", "--out", str(tmp_path / "{run}" / "pool.sqlite"), "c"], "as paths"),
        (["--run", "a", "--out", str(tmp_path / "c" / "pool.sqlite"), "c"], "folder of its own"),
    )
    for args, why in cases:
        failed = cli(*args)
        assert failed.returncode == 1 and why in failed.stderr, failed.stderr
    junk = [*fork[:-1], str(tmp_path / "junk.sqlite"), "--out", str(tmp_path / "j.sqlite"), "j"]
    failed = subprocess.run(junk, capture_output=True, text=True)
    assert failed.returncode == 1 and "cannot fork" in failed.stderr, failed.stderr
    url = [*fork[:-1], "postgresql://h/db", "--out", str(tmp_path / "u.sqlite"), "u"]
    failed = subprocess.run(url, capture_output=True, text=True)
    assert failed.returncode == 1 and "as paths" in failed.stderr
    assert out.read_bytes() == forked
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "b", "c", "junk.sqlite", "snapshot"]
    assert [p.name for p in (tmp_path / "c").iterdir()] == ["seeding.json"]
