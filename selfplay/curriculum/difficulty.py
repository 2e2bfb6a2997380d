"""How hard is a task for the current solver? Two estimates, and their combination.

1. A discounted Beta posterior over the task's solve rate (per task, from its own answers).
   The solver changes as it trains, so an answer `a` steps old counts `gamma**a` times
   (`curriculum.discount`). The state is (s, f, t): discounted successes and failures as of
   step t. At a later step T both decay by w = gamma**(T - t); recording n answers with k
   correct at step T makes (w s + k, w f + n - k, T). With prior Beta(a0, b0):

       posterior mean = (a0 + w s) / (a0 + b0 + w (s + f)),   effective answers = w (s + f)

2. A one-parameter item-response (Rasch) model fitted online: P(correct) = sigmoid(theta_t - b_i)
   with a solver ability theta_t per step and a difficulty b_i per task, both in logits. Each
   carries a Gaussian belief (mean, precision), updated by one Laplace step per recorded batch,
   in the manner of a Kalman filter (or Glicko for Elo):

   * ability: the belief of step t starts from the latest earlier step's, its variance grown by
     the drift `ability_drift_sd**2` per step in between (the first step: N(0, ability_prior_sd)).
     A batch of (b_i, n_i, k_i) then moves theta by Newton iterations on its log posterior,
         g = sum_i (k_i - n_i p_i) - lam0 (theta - mu0),   H = sum_i n_i p_i (1 - p_i) + lam0,
         theta <- theta + g / H,                           p_i = sigmoid(theta - b_i),
     and its precision becomes H (the Laplace approximation).
   * difficulty: prior N(0, difficulty_prior_sd) for a new task; each batch takes one Newton step
     from the current belief (b, lam) with the updated theta:
         b <- b - lr (k - n p) / (lam + n p (1 - p)),      lam <- lam + n p (1 - p).
     More successes than predicted make a task easier (b falls). The difficulty prior's zero
     mean pins the scale, which a Rasch model leaves free up to a shift.

   A task never attempted by the current model still gets a prediction from the current
   ability and its difficulty (learned from earlier models' answers, or the prior when new).
   Uncertainty widens the prediction toward 1/2 (MacKay's probit approximation):
         p_irt = sigmoid((theta - b) / sqrt(1 + pi (var_theta + var_b) / 8)).

3. The combined estimate, used by the sampler, treats the Rasch prediction as a Beta prior worth
   m = `irt_prior_strength` answers, updated by the task's own discounted answers:

       p = (m p_irt + w s) / (m + w (s + f))

   Fresh answers dominate once there are more than m of them; with none, the model speaks.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from selfplay.config import CurriculumConfig


@dataclass(frozen=True)
class Estimate:
    """Difficulty estimates of one task at one step; `p` is the one the sampler uses."""

    p: float  # combined solve-rate estimate
    posterior_mean: float  # discounted Beta posterior alone
    effective_answers: float  # w (s + f): discounted number of answers behind the posterior
    irt_p: float  # Rasch prediction for the current ability
    difficulty: float  # Rasch b (logits)
    difficulty_sd: float
    ability: float  # Rasch theta of the solver at this step (logits)
    n_answers: int  # raw totals over all steps
    n_correct: int


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def decay(config: CurriculumConfig, last_step, step):
    """gamma ** (step - last_step), never above 1 (a record from the future is not decayed)."""
    age = np.maximum(np.asarray(step) - np.asarray(last_step), 0)
    return np.power(config.discount, age)


def posterior_mean(config: CurriculumConfig, succ, fail, w):
    a0, b0 = config.prior_successes, config.prior_failures
    return (a0 + w * succ) / (a0 + b0 + w * (succ + fail))


def difficulty_variance(config: CurriculumConfig, precision):
    """Variance of b; a precision of 0 means no answers yet: the prior's variance."""
    prior = 1.0 / config.difficulty_prior_sd**2
    return 1.0 / np.where(precision > 0, precision, prior)


def irt_p(theta: float, theta_var: float, difficulty, difficulty_var):
    scale = np.sqrt(1.0 + math.pi * (theta_var + difficulty_var) / 8.0)
    return sigmoid((theta - difficulty) / scale)


def combined(config: CurriculumConfig, p_irt, succ, fail, w):
    m = config.irt_prior_strength
    return (m * p_irt + w * succ) / (m + w * (succ + fail))


def update_counts(config: CurriculumConfig, succ, fail, last_step, step: int, n, k):
    """Discounted counts after n answers, k correct, at `step` (vectorised over tasks)."""
    w_old = decay(config, last_step, step)  # decay the old evidence to `step`
    w_new = decay(config, step, last_step)  # or, for a step older than the state, the new one
    new_last = np.maximum(last_step, step)
    return w_old * succ + w_new * k, w_old * fail + w_new * (n - k), new_last


# ---------------------------------------------------------------------------------------------
# Rasch


def ability_prior(
    config: CurriculumConfig, previous: tuple[int, float, float] | None, step: int
) -> tuple[float, float]:
    """(mean, precision) of theta at `step` given the latest earlier (step, theta, precision)."""
    if previous is None:
        return 0.0, 1.0 / config.ability_prior_sd**2
    prev_step, theta, precision = previous
    var = 1.0 / precision + max(step - prev_step, 0) * config.ability_drift_sd**2
    return theta, 1.0 / var


def update_ability(
    config: CurriculumConfig, mu0: float, lam0: float, difficulty, n, k
) -> tuple[float, float]:
    """MAP ability (Newton iterations) and its Laplace precision after a batch of answers."""
    theta = mu0
    hessian = lam0
    for _ in range(config.ability_iterations):
        p = sigmoid(theta - difficulty)
        hessian = float(np.sum(n * p * (1 - p))) + lam0
        gradient = float(np.sum(k - n * p)) - lam0 * (theta - mu0)
        theta += gradient / hessian
    p = sigmoid(theta - difficulty)
    return theta, float(np.sum(n * p * (1 - p))) + lam0


def update_difficulty(config: CurriculumConfig, theta: float, difficulty, precision, n, k):
    """One Laplace (Newton) step per task from its current belief; returns (b, precision)."""
    lam = np.where(precision > 0, precision, 1.0 / config.difficulty_prior_sd**2)
    p = sigmoid(theta - difficulty)
    info = n * p * (1 - p)
    new_lam = lam + info
    return difficulty - config.irt_lr * (k - n * p) / new_lam, new_lam


@dataclass(frozen=True)
class BatchUpdate:
    """The new state of the tasks in one recorded batch, and the step's new ability belief."""

    succ: np.ndarray
    fail: np.ndarray
    last_step: np.ndarray
    difficulty: np.ndarray
    precision: np.ndarray
    theta: float
    theta_precision: float


def apply_batch(
    config: CurriculumConfig,
    state: dict[str, np.ndarray],
    step: int,
    n: np.ndarray,
    k: np.ndarray,
    ability: tuple[float, float],
) -> BatchUpdate:
    """Both models after one batch of answers at `step`; `state` holds the tasks' columns
    (succ, fail, last_step, difficulty, difficulty_precision), `ability` the prior (mean,
    precision) of the step's theta: its belief so far, or `ability_prior` for a new step."""
    succ, fail, last = update_counts(
        config, state["succ"], state["fail"], state["last_step"], step, n, k
    )
    theta, theta_precision = update_ability(config, *ability, state["difficulty"], n, k)
    difficulty, precision = update_difficulty(
        config, theta, state["difficulty"], state["difficulty_precision"], n, k
    )
    return BatchUpdate(succ, fail, last, difficulty, precision, theta, theta_precision)


def decay_table(config: CurriculumConfig, step: int, last_step: np.ndarray) -> np.ndarray:
    """gamma ** (step - last_step) by table lookup: ages are small integers, and a gather is
    several times faster than a power over a million tasks."""
    age = np.clip(step - last_step, 0, None)
    top = int(age.max()) if len(age) else 0
    table = np.power(config.discount, np.arange(min(top, 10_000) + 1, dtype=np.float64))
    return table[np.minimum(age, len(table) - 1)]
