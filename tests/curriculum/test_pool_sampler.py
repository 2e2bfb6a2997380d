"""Sampler statistics over many draws: frontier share, quotas, recent share, reproducibility."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest
from pool_helpers import task

from selfplay.config import CurriculumConfig, SelfPlayConfig
from selfplay.curriculum import Provenance, TaskStore
from selfplay.curriculum.sampler import (
    SHAPES,
    apportion,
    learnability,
    revisit_factors,
    weighted_sample,
)
from selfplay.types import TASK_TYPES


def _pool(store, per_type: int = 60):
    """Tasks of all types whose solve rates are 0, 1/8 ... 1 (many answers, so the posterior
    is sharp), plus never-attempted ones; returns {task id: true rate}."""
    rates = {}
    for kind in TASK_TYPES:
        ids = store.add_tasks([task(i, kind) for i in range(per_type)], Provenance("seed")).ids
        outcomes = []
        for j, tid in enumerate(ids[: per_type - 6]):
            correct = (j % 9) * 8
            outcomes.append((tid, 64, correct))
            rates[tid] = correct / 64
        store.record_attempts(1, "v1", outcomes)
    return rates


@pytest.mark.parametrize("shape", ["azr", "rzero_band", "rzero_peak", "variance"])
def test_draws_follow_the_frontier_and_the_quotas(store_url, shape):
    config = CurriculumConfig(shape=shape, type_quotas=(2.0, 1.0, 1.0), recent_share=0.0)
    with TaskStore.open(store_url, run="r", config=config) as store:
        rates = _pool(store)
        drawn, per_type = Counter(), Counter()
        for salt in range(200):
            batch = store.sample(24, step=1, salt=salt)
            assert len(batch) == 24 and len({t.id for t in batch.tasks}) == 24
            kinds = Counter(t.task.type for t in batch.tasks)
            assert kinds == {"deduction": 12, "abduction": 6, "induction": 6}  # every draw
            per_type.update(kinds)
            drawn.update(t.id for t in batch.tasks)
        solved_or_failed = sum(drawn[t] for t, r in rates.items() if r in (0.0, 1.0))
        if shape != "variance":  # p(1-p) is small but not zero near the ends
            assert solved_or_failed < 0.02 * sum(drawn.values())
        if shape == "rzero_band":
            outside = sum(drawn[t] for t, r in rates.items() if not 0.25 <= r <= 0.85)
            assert outside == 0
        # frequencies follow the shape: the most learnable rate is drawn more than an edge one
        by_rate = Counter()
        for t, r in rates.items():
            by_rate[r] += drawn[t]

        def weight(r):
            return SHAPES[shape](np.array([r]), config, store.answers)[0]

        best = max(by_rate, key=weight)
        assert by_rate[best] > by_rate[0.125] or weight(0.125) > 0.2


def test_the_azr_shape_weighs_by_the_answers_a_drawn_task_gets(store_url):
    """A drawn task gets `selfplay.solver_samples` answers; the azr weight is AZR's expected
    reward over that many, (1 - p) - (1 - p)**n: with 2 answers it is p (1 - p)."""
    p, attempted = np.array([0.0, 0.25, 0.5, 1.0]), np.ones(4, dtype=bool)
    config = CurriculumConfig(shape="azr")
    two = learnability(config, p, attempted, answers=2)
    assert np.allclose(two, p * (1 - p))
    assert np.allclose(learnability(config, p, attempted, 8), (1 - p) - (1 - p) ** 8)
    with TaskStore.open(store_url, run="r", config=config) as store:
        assert store.answers == SelfPlayConfig().solver_samples
    # one answer never differs from itself: no task is worth drawing, the store's answers count
    with TaskStore.open(store_url, run="r", config=config, answers=1) as store:
        _pool(store, per_type=20)
        assert len(store.sample(8, step=1)) == 0
    with TaskStore.open(store_url, run="r", config=config, answers=2) as store:
        assert len(store.sample(8, step=1)) == 8


def test_new_tasks_are_explored_and_recent_share_holds(store_url):
    config = CurriculumConfig(recent_share=0.5, recent_steps=1, shape="rzero_band")
    with TaskStore.open(store_url, run="r", config=config) as store:
        _pool(store, per_type=40)
        new = set(store.add_tasks([task(1000 + i) for i in range(30)], Provenance(step=5)).ids)
        batch = store.sample(12, step=5, types=["deduction"])
        fresh = sum(t.id in new for t in batch.tasks)
        assert fresh >= 6  # the recent half, and new tasks may also win the other half
        assert batch.metrics["curriculum/recent_fraction"] == fresh / 12
        # with no exploration a never-attempted task still competes only by its estimate
        strict = CurriculumConfig(explore_weight=0.0, recent_share=0.0, shape="rzero_band")
    with TaskStore.open(store_url, run="r", config=strict) as store:
        assert all(
            t.estimate.n_answers > 0 or 0.3 <= t.estimate.p <= 0.8
            for t in store.sample(30, step=5).tasks
        )


def test_guessable_weight_draws_guessable_abductions_that_much_less(store_url):
    """Half of 40 equally learnable abduction tasks are marked guessable: with weight w each
    is drawn w times as often as an unmarked one, never with 0; the marks are stored (a
    reopened store draws the same), and the batch says its guessable share."""
    tasks = [task(i, "abduction") for i in range(40)]
    marks = [i % 2 == 0 for i in range(40)]
    with TaskStore.open(store_url, run="r") as store:
        ids = store.add_tasks(tasks, Provenance(step=1), guessable=marks).ids
    guessable = {i for i, mark in zip(ids, marks, strict=True) if mark}
    for weight, share in [(1.0, 0.5), (0.25, 0.2), (0.0, 0.0)]:
        config = CurriculumConfig(guessable_weight=weight, recent_share=0.0)
        with TaskStore.open(store_url, run="r", config=config) as store:
            drawn = []
            for salt in range(300):
                batch = store.sample(2, step=1, salt=salt)
                marked = sum(t.id in guessable for t in batch.tasks)
                assert batch.metrics["curriculum/guessable_share"] == marked / 2
                drawn.append(marked / 2)
        assert np.mean(drawn) == pytest.approx(share, abs=0.05)


def test_revisit_weight_draws_a_task_less_for_every_group_of_answers_it_has(store_url):
    """Three equally learnable tasks with 0, 8 and 16 answers (8 a drawn task's group): with
    weight w the solver draws them in the ratio 1 : w : w**2, the unanswered one alone with 0;
    a draw for another use than the solver's is not reweighted."""
    band = {"shape": "rzero_band", "band": (0.0, 1.0), "recent_share": 0.0}
    with TaskStore.open(store_url, run="r") as store:
        fresh, once, twice = store.add_tasks([task(i) for i in range(3)], Provenance(step=1)).ids
        store.record_attempts(1, "v1", [(once, 8, 4), (twice, 8, 4)])
        store.record_attempts(2, "v2", [(twice, 8, 4)])
    for weight in (1.0, 0.5, 0.0):
        config = CurriculumConfig(revisit_weight=weight, **band)
        with TaskStore.open(store_url, run="r", config=config, answers=8) as store:
            drawn = Counter(store.sample(1, step=2, salt=salt).tasks[0].id for salt in range(1400))
            other = Counter(
                store.sample(1, step=2, salt=salt, for_solver=False).tasks[0].id
                for salt in range(600)
            )
        total = 1 + weight + weight**2
        for tid, power in ((fresh, 0), (once, 1), (twice, 2)):
            assert drawn[tid] / 1400 == pytest.approx(weight**power / total, abs=0.04)
            assert other[tid] / 600 == pytest.approx(1 / 3, abs=0.06)


def test_a_much_answered_task_stays_drawable_under_a_revisit_weight_above_0():
    answered = np.array([0, 4, 8, 100_000])
    factors = revisit_factors(0.5, answered, answers=8)
    assert factors[:3] == pytest.approx([1.0, 0.5**0.5, 0.5])
    assert 0 < factors[3] < 1e-300  # 0.5 ** 12,500 would round to 0
    assert revisit_factors(0.0, answered, answers=8).tolist() == [1.0, 0.0, 0.0, 0.0]


def test_same_seed_step_and_salt_give_the_same_batch(store_url, config):
    with TaskStore.open(store_url, run="r", config=config) as store:
        _pool(store, per_type=30)
        a = [t.id for t in store.sample(16, step=3).tasks]
        b = [t.id for t in store.sample(16, step=3).tasks]
        c = [t.id for t in store.sample(16, step=3, salt=1).tasks]
        assert a == b and a != c


def test_references_are_diverse_and_prefer_the_frontier(store_url, config):
    with TaskStore.open(store_url, run="r", config=config) as store:
        rates = _pool(store, per_type=40)
        # near-duplicates: the same program with one constant changed
        dupes = store.add_tasks([task(7, "deduction")], Provenance()).ids
        refs = store.references(20, step=1, k=4, types=["deduction"])
        assert len(refs) == 20 and all(len(r) == 4 for r in refs)
        for prompt in refs:
            assert len({t.id for t in prompt}) == 4
            assert all(t.task.type == "deduction" for t in prompt)
        picked = [t.id for prompt in refs for t in prompt if t.id in rates]
        edge = sum(rates[t] in (0.0, 1.0) for t in picked)
        assert edge < 0.1 * len(picked)
        assert dupes


def test_a_pool_smaller_than_k_shows_each_task_once(store_url, config):
    with TaskStore.open(store_url, run="r", config=config) as store:
        [only] = store.add_tasks([task(1)], Provenance()).ids
        refs = store.references(3, step=1, k=2)
        assert [[t.id for t in prompt] for prompt in refs] == [[only]] * 3


def test_weighted_sample_matches_its_weights():
    rng = np.random.default_rng(0)
    weights = np.array([0.0, 1.0, 2.0, 3.0, 4.0])
    counts = np.zeros(5)
    for _ in range(4000):
        counts[weighted_sample(weights, 1, rng)] += 1
    assert counts[0] == 0
    assert np.allclose(counts[1:] / 4000, weights[1:] / 10, atol=0.03)
    both = weighted_sample(np.ones(1000), 999, rng)  # the Gumbel path: all distinct
    assert len(set(both.tolist())) == 999


def test_apportion_gives_missing_slots_to_other_types():
    assert apportion(10, (1, 1, 1), (100, 100, 100)) == [4, 3, 3]
    assert apportion(10, (1, 1, 1), (100, 2, 0)) == [8, 2, 0]
    assert apportion(5, (0, 1, 1), (100, 100, 100)) == [0, 3, 2]


def test_references_avoid_near_duplicates(store_url, config):
    from selfplay.types import Task

    bodies = [
        "return sorted(x)",
        "return len(x) * 2",
        "return {k: 1 for k in x}",
        "s = 0\n    for v in x:\n        s += v\n    return s",
        "return x[::-1]",
        "return max(x) - min(x)",
        "return [v for v in x if v % 2]",
        "return tuple(set(x))",
        "return str(x).upper()",
        "while len(x) > 1:\n        x = x[1:]\n    return x",
    ]
    with TaskStore.open(store_url, run="r", config=config) as store:
        family = store.add_tasks([task(i) for i in range(30)], Provenance()).ids  # x * i + c
        distinct = [
            Task("deduction", f"def f(x):\n    {b}", ("[3, 1, 2]",), ("1",)) for b in bodies
        ]
        store.add_tasks(distinct, Provenance())
        refs = store.references(30, step=0, k=4)
        from_family = np.mean([sum(t.id in family for t in prompt) for prompt in refs])
        assert from_family < 1.5  # uniform choice would give 3 of 4 from the family


def test_reference_dropout_blanks_a_share_of_the_prompts_and_nothing_else(store_url, config):
    from dataclasses import replace

    with TaskStore.open(store_url, run="r", config=config) as store:
        store.add_tasks([task(i) for i in range(30)], Provenance())
        shown = store.references(200, step=3, k=2)
    with TaskStore.open(store_url, "r", replace(config, reference_dropout=0.25)) as store:
        dropped = store.references(200, step=3, k=2)
    blank = [i for i, refs in enumerate(dropped) if not refs]
    assert 30 < len(blank) < 70  # about a quarter
    assert all(shown[i] == dropped[i] for i in range(200) if i not in blank)
    assert all(shown[i] for i in range(200))


def test_latest_gives_the_newest_tasks_from_before_a_step(store_url, config):
    with TaskStore.open(store_url, run="r", config=config) as store:
        for step in range(4):
            store.add_tasks([task(10 * step + i) for i in range(3)], Provenance("proposed", step))
        newest = store.latest(4, before_step=3)  # step 3's tasks are left out
        assert [t.provenance.step for t in newest] == [1, 2, 2, 2]
        assert [t.id for t in newest] == sorted(t.id for t in newest)  # oldest first
        assert store.latest(0, before_step=3) == [] and store.latest(5, before_step=0) == []
