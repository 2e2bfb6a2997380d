"""Semi-supervised pools: the labeled share of batches, and TraPO-style selection measured on
simulated learning trajectories written through a real store.

The simulation: a solver whose ability rises step by step (Rasch: p = sigmoid(theta_t - b)).
Labeled tasks and good unlabeled tasks follow it. Bad unlabeled tasks do not: never solved,
always solved, solved at a random rate each step (noise: the task does not teach anything),
or solved less as the model improves (a wrong label: the checked answer is not the right one).
Each task gets 8 answers in a step with probability 0.7 (the sampler does not draw every task
every step).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from selfplay.config import CurriculumConfig
from selfplay.curriculum import Provenance, TaskAttempts, TaskStore
from selfplay.curriculum.records import ORIGINS
from selfplay.curriculum.sampler import learnability
from selfplay.semi.selection import select
from selfplay.types import Task

STEPS = 12
KINDS = {"good": 40, "flat0": 10, "flat1": 10, "noisy": 20, "wrong_label": 20}


def _task(i: int) -> Task:
    return Task("deduction", f"def f(x):\n    return x + {i}", ("1",), (str(1 + i),))


def _auc(scores: np.ndarray, good: np.ndarray) -> float:
    """Probability that a random good task scores above a random bad one (ties count half)."""
    pos, neg = scores[good], scores[~good]
    wins = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(wins / (len(pos) * len(neg)))


def _simulate(store: TaskStore, seed: int = 0) -> dict[int, str]:
    """Fill the store with labeled and unlabeled tasks and STEPS steps of attempts; returns
    the kind of every unlabeled task by id."""
    rng = np.random.default_rng(seed)
    labeled = store.add_tasks([_task(i) for i in range(30)], Provenance("labeled", 0)).ids
    kinds = [k for k, count in KINDS.items() for _ in range(count)]
    tasks = [_task(1000 + i) for i in range(len(kinds))]
    unlabeled = store.add_tasks(tasks, Provenance("proposed", 0)).ids
    b = {i: rng.uniform(-1.0, 2.0) for i in (*labeled, *unlabeled)}
    kind = dict(zip(unlabeled, kinds, strict=True))
    for step in range(1, STEPS + 1):
        theta = -2.0 + 0.4 * step
        outcomes = []
        for task_id in (*labeled, *unlabeled):
            if rng.random() > 0.7:
                continue
            p = 1.0 / (1.0 + np.exp(b[task_id] - theta))
            p = {"flat0": 0.0, "flat1": 1.0, "noisy": rng.random(), "wrong_label": 1.0 - p}.get(
                kind.get(task_id, "good"), p
            )
            outcomes.append(TaskAttempts(task_id, 8, int(rng.binomial(8, p))))
        store.record_attempts(step, f"step{step - 1}", outcomes)
    return kind


@pytest.fixture
def trapo_config() -> CurriculumConfig:
    return CurriculumConfig(selection="trapo")


def test_trapo_separates_good_tasks_from_bad_ones(tmp_path, trapo_config, report):
    numbers = np.array([_separation(tmp_path / f"{seed}.sqlite", trapo_config, seed)
                        for seed in range(5)])  # fmt: skip
    auc, precision, recall, base_precision, weight_auc = numbers.mean(axis=0)
    report.append(
        f"trapo selection on simulated trajectories (5 runs): AUC {auc:.3f}, precision "
        f"{precision:.3f}, recall {recall:.3f}; no selection: precision {base_precision:.3f}; "
        f"the sampler's learnability weight as a score: AUC {weight_auc:.3f}"
    )
    assert auc > 0.9 and precision > 0.75 and recall > 0.8
    assert numbers[:, 0].min() > 0.85 and numbers[:, 2].min() > 0.75
    # The baselines do not separate: no selection admits everything (precision = the share
    # of good tasks), and the solve-rate frontier weight cannot tell noise from learning.
    assert base_precision < 0.5 and weight_auc < 0.65


def _separation(path, config: CurriculumConfig, seed: int) -> tuple[float, ...]:
    """(AUC of the similarity, precision and recall of admission, precision without
    selection, AUC of the learnability weight) on one simulated run."""
    store = TaskStore.open(str(path), "sim", config, selector=select)
    kind = _simulate(store, seed)
    chosen = store.selection(STEPS)
    good = np.array([kind[i] == "good" for i in chosen.ids.tolist()])
    assert len(chosen.ids) == sum(KINDS.values())  # every unlabeled task has a trajectory
    judged = np.isfinite(chosen.similarity)
    assert judged.mean() > 0.9  # 0.7 x 8 steps: almost all have 4 points or more
    for bad, most in (("flat0", 0.0), ("flat1", 0.0), ("wrong_label", 0.1), ("noisy", 0.4)):
        mine = np.array([kind[i] == bad for i in chosen.ids.tolist()]) & judged
        assert chosen.admitted[mine].mean() <= most, bad  # flat ones never; the others seldom
    reasons = {r for r, j in zip(chosen.reasons, judged, strict=True) if j}
    assert reasons <= {"similar", "dissimilar", "flat", "beyond_top"} and "flat" in reasons
    p, attempted = store.solve_rates(STEPS)
    weight = learnability(config, p, attempted, store.answers)[store.index.positions(chosen.ids)]
    store.close()
    return (
        _auc(chosen.similarity[judged], good[judged]),
        float(good[chosen.admitted].mean()),
        float(chosen.admitted[good].mean()),
        float(good.mean()),
        _auc(weight, good),
    )


def test_selection_decides_what_is_drawn_and_survives_reopening(store_url, trapo_config):
    path = store_url
    store = TaskStore.open(path, "sim", trapo_config, selector=select)
    _simulate(store, seed=1)
    chosen = store.selection(STEPS)
    rejected = set(chosen.rejected.tolist())
    assert rejected
    drawn = set()
    for salt in range(60):
        batch = store.sample(16, STEPS, salt=salt)
        drawn |= {t.id for t in batch.tasks}
        assert batch.selection is not None and batch.metrics["curriculum/trapo_rejected"] > 0
    assert not drawn & rejected
    store.close()
    # the trajectories come back from the attempts table alone
    again = TaskStore.open(path, "sim", trapo_config, selector=select)
    reread = again.selection(STEPS)
    assert np.array_equal(reread.ids, chosen.ids)
    assert np.allclose(reread.similarity, chosen.similarity, equal_nan=True)
    # without selection (the baseline) the same pool draws rejected tasks too
    again.close()
    again = TaskStore.open(path, "sim", replace(trapo_config, selection="none"))
    drawn = {t.id for s in range(60) for t in again.sample(16, STEPS, salt=s).tasks}
    assert drawn & rejected
    again.close()


def test_replayed_step_does_not_count_twice(tmp_path, trapo_config):
    store = TaskStore.open(str(tmp_path / "pool.sqlite"), "r", trapo_config)
    ids = store.add_tasks([_task(i) for i in range(3)], Provenance("proposed", 0)).ids
    store.record_attempts(1, "v0", [TaskAttempts(i, 4, 1) for i in ids])
    store.record_attempts(1, "v0", [TaskAttempts(i, 4, 4) for i in ids])  # ignored by the store
    traj = store.trajectories.matrix(1)
    assert traj.answers[:, -1].tolist() == [4, 4, 4] and traj.correct[:, -1].tolist() == [1, 1, 1]
    store.close()


def test_labeled_share_holds_over_many_draws(tmp_path):
    config = CurriculumConfig(labeled_ratio=0.25)
    store = TaskStore.open(str(tmp_path / "pool.sqlite"), "r", config)
    store.add_tasks([_task(i) for i in range(40)], Provenance("labeled", 0, source="set"))
    store.add_tasks([_task(100 + i) for i in range(400)], Provenance("proposed", 0))
    labeled_code = ORIGINS.index("labeled")
    shares = []
    for salt in range(300):
        batch = store.sample(8, 1, salt=salt)
        assert len(batch) == 8 and len({t.id for t in batch.tasks}) == 8
        origins = store.index["origin"][store.index.positions([t.id for t in batch.tasks])]
        share = float((origins == labeled_code).mean())
        assert share == batch.metrics["curriculum/labeled_share"] == 0.25  # 2 of 8, every time
        shares.append(share)
    # positions within a batch are shuffled: labeled tasks are not always first
    firsts = {store.get([store.sample(8, 1, salt=s).tasks[0].id])[0].provenance.origin
              for s in range(30)}  # fmt: skip
    assert firsts == {"labeled", "proposed"}
    store.close()


def test_labeled_share_gives_way_when_a_side_runs_short(tmp_path):
    store = TaskStore.open(str(tmp_path / "pool.sqlite"), "r", CurriculumConfig(labeled_ratio=0.5))
    store.add_tasks([_task(0)], Provenance("labeled", 0))
    store.add_tasks([_task(100 + i) for i in range(20)], Provenance("proposed", 0))
    batch = store.sample(8, 1)
    assert len(batch) == 8 and batch.metrics["curriculum/labeled_share"] == 1 / 8
    store.close()
    store = TaskStore.open(str(tmp_path / "only.sqlite"), "r", CurriculumConfig(labeled_ratio=0.5))
    store.add_tasks([_task(i) for i in range(20)], Provenance("labeled", 0))
    store.add_tasks([_task(100)], Provenance("proposed", 0))
    assert store.sample(8, 1).metrics["curriculum/labeled_share"] == 7 / 8
    store.close()


def test_recent_tasks_on_both_sides_of_the_split_are_drawn_from_their_own_side(tmp_path):
    # Recent proposed tasks lie between and after the labeled ones in the pool: the recent
    # share of each side must look only at that side's own recent tasks.
    config = CurriculumConfig(labeled_ratio=0.5, recent_share=0.5, recent_steps=4)
    store = TaskStore.open(str(tmp_path / "pool.sqlite"), "r", config)
    store.add_tasks([_task(i) for i in range(30)], Provenance("proposed", 1))
    store.add_tasks([_task(100 + i) for i in range(10)], Provenance("labeled", 1, source="set"))
    store.add_tasks([_task(200 + i) for i in range(30)], Provenance("proposed", 2))
    for salt in range(50):
        batch = store.sample(8, 3, salt=salt)
        assert len({t.id for t in batch.tasks}) == 8
        assert batch.metrics["curriculum/labeled_share"] == 0.5
        assert batch.metrics["curriculum/recent_fraction"] == 1.0  # every task is recent
    store.close()


def test_no_labeled_tasks_means_the_plain_draw(tmp_path):
    a = TaskStore.open(str(tmp_path / "a.sqlite"), "r", CurriculumConfig(labeled_ratio=0.0))
    b = TaskStore.open(str(tmp_path / "b.sqlite"), "r", CurriculumConfig(labeled_ratio=1.0))
    for store in (a, b):
        store.add_tasks([_task(i) for i in range(50)], Provenance("proposed", 0))
    for salt in range(5):
        ids_a = [t.id for t in a.sample(8, 1, salt=salt).tasks]
        assert ids_a == [t.id for t in b.sample(8, 1, salt=salt).tasks]
        assert a.sample(8, 1, salt=salt).metrics["curriculum/labeled_share"] == 0.0
    a.close()
    b.close()


def test_without_labeled_answers_nothing_is_judged(tmp_path, trapo_config):
    store = TaskStore.open(str(tmp_path / "pool.sqlite"), "r", trapo_config, selector=select)
    ids = store.add_tasks([_task(i) for i in range(6)], Provenance("proposed", 0)).ids
    rng = np.random.default_rng(0)
    for step in range(1, 9):
        store.record_attempts(step, "v", [TaskAttempts(i, 4, int(rng.integers(0, 5))) for i in ids])
    chosen = store.selection(8)
    assert chosen.admitted.all() and set(chosen.reasons) == {"no_reference"}
    assert len(store.sample(6, 8)) == 6
    store.close()


def test_a_labeled_task_the_pool_holds_as_proposed_or_seed_becomes_labeled(store_url, trapo_config):
    """Adding with origin `labeled` a task the run holds as `proposed` or `seed` labels it, in
    the database and in the open store, whose selection judges it as labeled from then on;
    adding a labeled task again with another origin leaves it labeled."""
    store = TaskStore.open(store_url, "r", trapo_config, selector=select)
    ids = store.add_tasks([_task(i) for i in range(4)], Provenance("proposed", 0)).ids
    ids += store.add_tasks([_task(i) for i in range(4, 6)], Provenance("seed", 0, source="s")).ids
    rng = np.random.default_rng(0)
    for step in range(1, 9):
        store.record_attempts(step, "v", [TaskAttempts(i, 4, int(rng.integers(0, 5))) for i in ids])
    assert set(store.selection(8).reasons) == {"no_reference"}  # no labeled task yet
    again = store.add_tasks([_task(i) for i in (1, 4, 5, 9)], Provenance("labeled", 0, source="l"))
    assert again.added == (False, False, False, True) and again.relabeled == (
        ids[1],
        ids[4],
        ids[5],
    )
    labeled = {ids[1], ids[4], ids[5], again.ids[3]}
    code = ORIGINS.index("labeled")
    assert set(store.index["id"][store.index["origin"] == code].tolist()) == labeled
    assert set(store.selection(8).ids.tolist()) == {ids[0], ids[2], ids[3]}  # unlabeled only
    kept = store.add_tasks([_task(1), _task(4)], Provenance("seed", 0)).relabeled
    assert kept == () and store.add_tasks([_task(5)], Provenance("labeled", 0)).relabeled == ()
    store.close()
    with TaskStore.open(store_url, "r", trapo_config) as reopened:
        tasks = reopened.get(reopened.index["id"].tolist())
    assert {t.id for t in tasks if t.provenance.origin == "labeled"} == labeled
    # the rest of a relabeled task's provenance is where it entered first
    assert [t.provenance.source for t in tasks if t.id in (ids[4], again.ids[3])] == ["s", "l"]
    # one batch holding a task twice, unlabeled then labeled: it enters (or stays) labeled
    with TaskStore.open(store_url, "r", trapo_config) as reopened:
        mixed = [Provenance("seed", 0), Provenance("labeled", 0, source="m")]
        added = reopened.add_tasks([_task(20), _task(20)], mixed)
        relabeled = reopened.add_tasks([_task(0), _task(0)], mixed).relabeled
        [new] = reopened.get([added.ids[0]])
    assert added.ids[0] == added.ids[1] and new.provenance.origin == "labeled"
    assert new.provenance.source == "m" and relabeled == (ids[0],)
