"""The frontier sampler: which pool tasks the solver sees, and which the proposer is shown.

A task's weight is its learnability under a named shape of its estimated solve rate p
(`difficulty.py`); `curriculum.shape` picks one:

  azr         AZR's proposer reward is 1 - r for the solve rate r of a group of answers, and 0
              when r is 0 or 1. Its expectation over a group of n answers with solve
              probability p is (1 - p) - (1 - p)**n: 0 at p = 0 and p = 1, largest for hard
              tasks that are sometimes solved. n is the number of answers a drawn task gets,
              `selfplay.solver_samples` (the store's `answers`): a task is worth drawing when
              its group of answers is likely to differ, which is what gives the solver's
              group-relative advantages a signal.
  rzero_band  R-Zero's filter: 1 when band[0] <= p <= band[1], else 0.
  rzero_peak  R-Zero's uncertainty reward, peaked at p = 1/2: min(p, 1 - p).
  variance    p (1 - p): the variance of one answer's reward, the signal that group-relative
              advantages feed on.

Never-attempted tasks get `explore_weight` times the shape's maximum: optimism in the face of
uncertainty, so a new task is tried once before its estimate decides how often it comes back.
The store multiplies the weight of an abduction task a stock input solves (`tasks.guessable`)
by `guessable_weight` before the draw (1: no change), and a task's weight by `revisit_weight`
for every n answers it already has (n: `selfplay.solver_samples`; `revisit_factors`), so that a
small pool is not answered again and again until the solver fits it (1: no change).

A batch of n is split over task types by `type_quotas` (largest remainders; a type without
enough drawable tasks gives its slots to the others), and within a type, up to
`recent_share` of its slots go to tasks created in the last `recent_steps` steps. Draws are
weighted, without replacement, from a generator seeded by (seed, step, salt): the same pool,
step and salt give the same batch, which makes a resumed run draw what it drew before.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from selfplay.config import CurriculumConfig


def _azr(p, config: CurriculumConfig, answers: int):
    q = 1.0 - p
    return q - _power(q, answers)


def _power(x: np.ndarray, n: int) -> np.ndarray:
    """x ** n for an integer n >= 1 by repeated squaring: a few multiplications per element,
    several times faster than a general power over a million tasks."""
    result, base = None, x
    while n:
        if n & 1:
            result = base if result is None else result * base
        n >>= 1
        if n:
            base = base * base
    return result


def _band(p, config: CurriculumConfig, answers: int):
    low, high = config.band
    return ((p >= low) & (p <= high)).astype(np.float64)


def _peak(p, config: CurriculumConfig, answers: int):
    return np.minimum(p, 1.0 - p)


def _variance(p, config: CurriculumConfig, answers: int):
    return p * (1.0 - p)


#: learnability shapes by name (`curriculum.shape`): weight(p, config, answers per drawn task)
SHAPES: dict[str, Callable] = {
    "azr": _azr,
    "rzero_band": _band,
    "rzero_peak": _peak,
    "variance": _variance,
}
_GRID = np.linspace(0.0, 1.0, 2001)


def learnability(
    config: CurriculumConfig, p, attempted, answers: int, positions: np.ndarray | None = None
) -> np.ndarray:
    """Sampling weight of each task: its shape value, or the exploration weight if unattempted;
    `answers` is how many answers a drawn task gets (`selfplay.solver_samples`); `positions`,
    if known, are those of the attempted tasks."""
    shape = SHAPES[config.shape]
    explore = config.explore_weight * float(np.max(shape(_GRID, config, answers)))
    weights = np.full(len(p), explore)
    pos = np.flatnonzero(attempted) if positions is None else positions
    weights[pos] = np.clip(shape(p[pos], config, answers), 0.0, None)
    return weights


def revisit_factors(weight: float, answered: np.ndarray, answers: int) -> np.ndarray:
    """What `curriculum.revisit_weight` multiplies each task's weight by: `weight` once for
    every `answers` answers it has (`answered`). Every answer counts, the few a new proposal
    gets to estimate its solve rate too: the solver is trained on those as well. A factor is
    never rounded to 0 unless `weight` is 0, so a much-answered task stays drawable, rarely."""
    factors = np.power(weight, answered / answers)
    if weight > 0:
        np.maximum(factors, np.finfo(np.float64).tiny, out=factors)
    return factors


def generator(config: CurriculumConfig, step: int, salt: int, stream: int) -> np.random.Generator:
    return np.random.default_rng([config.seed, max(step, 0), salt, stream])


def weighted_sample(
    weights: np.ndarray,
    k: int,
    rng: np.random.Generator,
    exclude: np.ndarray | None = None,
    positive: int | None = None,
) -> np.ndarray:
    """Up to k distinct positions, drawn one after another proportionally to `weights`,
    never one of `exclude`.

    Drawing with replacement and keeping first occurrences gives exactly that distribution (a
    repeat is rejected, and what is left is drawn in proportion to its weight); it needs one
    cumulative sum and about k lookups, where exponential keys would need a random number and a
    logarithm per task. When k is a large part of the drawable tasks, repeats would be many, so
    Gumbel top-k keys are used instead (the same distribution). `positive`, if known, is the
    number of positive weights.
    """
    skip = set() if exclude is None else set(exclude.tolist())
    if positive is None:
        positive = int(np.count_nonzero(weights > 0))
    positive -= sum(1 for i in skip if weights[i] > 0)
    k = min(k, positive)
    if k <= 0:
        return np.empty(0, dtype=np.int64)
    if 4 * k > positive:
        keys = np.full(len(weights), -np.inf)
        nz = weights > 0
        keys[nz] = np.log(weights[nz]) - np.log(-np.log(rng.random(int(nz.sum()))))
        if skip:
            keys[list(skip)] = -np.inf
        top = np.argpartition(-keys, k - 1)[:k]
        return top[np.argsort(-keys[top], kind="stable")]
    cumulative = np.cumsum(weights)
    total = cumulative[-1]
    chosen: dict[int, None] = {}
    while len(chosen) < k:
        need = k - len(chosen)
        draws = np.searchsorted(cumulative, rng.random(2 * need + 8) * total, side="right")
        for position in np.minimum(draws, len(weights) - 1).tolist():
            if position not in chosen and position not in skip and weights[position] > 0:
                chosen[position] = None
                if len(chosen) == k:
                    break
    return np.fromiter(chosen, dtype=np.int64, count=k)


def apportion(n: int, quotas, available) -> list[int]:
    """Split n slots by `quotas` (largest remainders), never beyond `available` per part."""
    counts = [0] * len(quotas)
    live = [i for i, q in enumerate(quotas) if q > 0 and available[i] > 0]
    left = n
    while left > 0 and live:
        total = sum(quotas[i] for i in live)
        shares = {i: left * quotas[i] / total for i in live}
        grant = {i: min(int(shares[i]), available[i] - counts[i]) for i in live}
        given = sum(grant.values())
        if given == 0:  # all shares below one: the largest remainders get one each
            for i in sorted(live, key=lambda i: (-shares[i], i))[:left]:
                grant[i] = 1
            given = sum(grant.values())
        for i in live:
            counts[i] += grant[i]
        left -= given
        live = [i for i in live if counts[i] < available[i]]
    return counts


def draw(
    config: CurriculumConfig,
    n: int,
    weights: np.ndarray,
    groups: list[np.ndarray],
    recent: list[np.ndarray],
    rng: np.random.Generator,
) -> np.ndarray:
    """Positions of a batch: `groups` holds the positions of each task type, `recent` for each
    group the positions within it of its recent tasks."""
    per_group = [np.take(weights, g) for g in groups]  # take: a faster gather than weights[g]
    available = [int(np.count_nonzero(w > 0)) for w in per_group]
    picked = []
    counts = apportion(n, config.type_quotas, available)
    for group, w, fresh, count, positive in zip(
        groups, per_group, recent, counts, available, strict=True
    ):
        if count == 0:
            continue
        fresh = fresh[w[fresh] > 0]
        n_recent = min(int(config.recent_share * count), len(fresh))
        first = fresh[weighted_sample(w[fresh], n_recent, rng)]
        rest = weighted_sample(w, count - len(first), rng, exclude=first, positive=positive)
        picked.append(group[np.concatenate([first, rest])])
    out = np.concatenate(picked) if picked else np.empty(0, dtype=np.int64)
    return out[rng.permutation(len(out))]


def draw_split(
    config: CurriculumConfig,
    n: int,
    weights: np.ndarray,
    groups: list[np.ndarray],
    labeled: np.ndarray,
    recent: np.ndarray,
    rng: np.random.Generator,
) -> np.ndarray:
    """Positions of a batch (`draw`): `labeled_ratio` of it from labeled tasks (the `labeled`
    mask) when any are drawable, the rest from the others; a side short of drawable tasks
    leaves its slots to the other, so the batch is as full as the pool allows. `recent`: the
    positions of the recent tasks, ascending."""

    def part(k: int, w: np.ndarray, parts: list[np.ndarray]) -> np.ndarray:
        if k <= 0:
            return np.empty(0, dtype=np.int64)
        return draw(config, k, w, parts, [members(g, recent) for g in parts], rng)

    if not labeled.any():
        return part(n, weights, groups)
    first = part(round(config.labeled_ratio * n), weights, [g[labeled[g]] for g in groups])
    rest = part(n - len(first), weights, [g[~labeled[g]] for g in groups])
    picked = np.concatenate([first, rest])
    if len(picked) < n:
        left = weights.copy()
        left[picked] = 0.0
        picked = np.concatenate([picked, part(n - len(picked), left, groups)])
    return picked[rng.permutation(len(picked))]


def members(group: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Indices within the sorted `group` of those `positions` that belong to it (a group may
    be one side of the labeled split, which other tasks of its type are not part of)."""
    if not len(group):
        return group
    at = np.searchsorted(group, positions)
    found = group[np.minimum(at, len(group) - 1)] == positions
    return at[found]


def batch_metrics(config, p, attempted, recent) -> dict[str, float]:
    """The metrics of a drawn batch: its size and its share at the frontier, unattempted and
    recent, its mean solve rate."""
    low, high = config.band
    count = max(len(p), 1)
    return {
        "curriculum/batch_size": float(len(p)),
        "curriculum/frontier_fraction": float(np.count_nonzero((p >= low) & (p <= high)) / count),
        "curriculum/explore_fraction": float(np.count_nonzero(~attempted) / count),
        "curriculum/recent_fraction": float(np.count_nonzero(recent) / count),
        "curriculum/mean_p": float(p.mean()) if len(p) else 0.0,
        # difficulty as the estimated failure rate of the batch's tasks, 1 - mean p
        "curriculum/mean_difficulty": float(1.0 - p.mean()) if len(p) else 0.0,
    }
