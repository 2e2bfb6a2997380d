"""The online Rasch fit recovers known abilities and difficulties from simulated answers."""

from __future__ import annotations

import numpy as np
from pool_helpers import task

from selfplay.config import CurriculumConfig
from selfplay.curriculum import Provenance, TaskAttempts, TaskStore


def test_rasch_fit_recovers_simulated_abilities_and_difficulties(store_url):
    rng = np.random.default_rng(7)
    n_tasks, n_steps = 300, 30
    true_b = rng.normal(0.0, 1.0, n_tasks)
    true_theta = np.linspace(-1.5, 1.5, n_steps)  # the solver improves steadily
    config = CurriculumConfig(ability_drift_sd=0.2, difficulty_prior_sd=1.0)
    with TaskStore.open(store_url, run="sim", config=config) as store:
        ids = np.array(store.add_tasks([task(i) for i in range(n_tasks)], Provenance()).ids)
        for step in range(n_steps):
            chosen = rng.choice(n_tasks, 80, replace=False)
            p = 1 / (1 + np.exp(true_b[chosen] - true_theta[step]))
            correct = rng.binomial(8, p)
            store.record_attempts(
                step,
                f"v{step}",
                [TaskAttempts(int(ids[c]), 8, int(k)) for c, k in zip(chosen, correct)],
            )
        estimates = store.estimates(ids.tolist(), step=n_steps - 1)
        est_b = np.array([e.difficulty for e in estimates])
        est_theta = np.array([store.ability(s)[0] for s in range(n_steps)])
    assert np.corrcoef(est_b, true_b)[0, 1] > 0.85
    assert np.corrcoef(est_theta, true_theta)[0, 1] > 0.95
    # the scale is pinned by the difficulty prior (mean 0), so the values match, not only ranks
    assert abs(est_theta[-1] - true_theta[-1]) < 0.6 and abs(est_theta[0] - true_theta[0]) < 0.6
    assert np.sqrt(np.mean((est_b - true_b) ** 2)) < 0.6
    # the combined estimate is calibrated: predicted vs true solve rates at the last step
    true_p = 1 / (1 + np.exp(true_b - true_theta[-1]))
    predicted = np.array([e.p for e in estimates])
    # (the combined one lags a little: discounted answers from weaker past solvers still count)
    assert np.mean(np.abs(predicted - true_p)) < 0.16
    assert np.mean(np.abs(np.array([e.irt_p for e in estimates]) - true_p)) < 0.12
