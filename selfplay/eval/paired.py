"""Paired comparison of two evaluations of the same items (before and after training).

`mcnemar_exact` is the exact McNemar test: only the discordant items count (right after and
wrong before, or the reverse), and under the null hypothesis (training changed nothing) each
discordant item is equally likely to go either way, so their split is Binomial(n, 1/2). The
p-value is two-sided: twice the smaller tail, capped at 1.

`wilson` is the Wilson score interval of one accuracy (k right of n), the interval the report's
figures draw: unlike the normal approximation p +- z sqrt(p(1 - p) / n) it stays inside [0, 1]
and does not shrink to a point at 0 or n right.

`exchange_test` pools several trained checkpoints (one per seed) against one base on the same
items: the statistic is the sum over items of (the checkpoints' mean score - the base's), and
under the null hypothesis (training changed nothing) the base and the checkpoints are
exchangeable on every item, so the null distribution comes from relabelling, on each item at
random, which of the S + 1 evaluations is the base. What it answers is narrow: whether these
checkpoints, taken together, differ from the base beyond what relabelling gives, the
checkpoints held fixed. It does not see the variance between seeds, so it is no test that a
training setting helps: two seeds that move a subset by +x and -x can reject it. A claim about
a setting needs more seeds and a test at the seed level; each seed's own McNemar test says
whether the seeds move the same way. A sign test on each item's change is not valid here
either: the checkpoints share the base, so the sign is set by the base's answer, and an item
the base misses more often than not changes up more often than down under the null.

`fisher_exact` and `cmh` compare two unpaired groups (two runs' proposals, say): Fisher's exact
test on one 2x2 table, and the Cochran-Mantel-Haenszel test over several (one per seed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

__all__ = ["cmh", "exchange_test", "fisher_exact", "mcnemar_exact", "sign_test", "wilson"]


def mcnemar_exact(before: Sequence[bool], after: Sequence[bool]) -> tuple[int, int, float]:
    """(items only `after` gets right, items only `before` gets right, two-sided p-value)."""
    if len(before) != len(after):
        raise ValueError(f"paired results differ in length: {len(before)} vs {len(after)}")
    gained = sum(a and not b for b, a in zip(before, after, strict=True))
    lost = sum(b and not a for b, a in zip(before, after, strict=True))
    return gained, lost, sign_test(gained, lost)


def sign_test(up: int, down: int) -> float:
    """Two-sided p-value of `up` changes one way against `down` the other, each way equally
    likely under the null hypothesis (Binomial(up + down, 1/2)). McNemar's exact test is this
    test on the discordant items; on problems answered several times it is the sign test of
    their per-problem accuracy."""
    n = up + down
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, k) for k in range(min(up, down) + 1)) / 2**n
    return min(1.0, 2 * tail)


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of the proportion k / n (95% at z = 1.96):

        center = (p + z^2 / 2n) / (1 + z^2 / n)
        half   = z / (1 + z^2 / n) * sqrt(p (1 - p) / n + z^2 / 4n^2)

    With no items nothing is known: (0, 1). The interval holds k / n; at k = 0 or k = n the
    rounding of `center - half` could put an end a hair past it, so the ends are held to it."""
    if n == 0:
        return 0.0, 1.0
    p, zz = k / n, z * z
    center = (p + zz / (2 * n)) / (1 + zz / n)
    half = z / (1 + zz / n) * math.sqrt(p * (1 - p) / n + zz / (4 * n * n))
    return min(p, max(0.0, center - half)), max(p, min(1.0, center + half))


def fisher_exact(a: int, b: int, c: int, d: int) -> float:
    """Two-sided p-value of Fisher's exact test on the table [[a, b], [c, d]]: the
    hypergeometric probability of every table with the same margins at most as likely as
    this one."""
    row, col, n = a + b, a + c, a + b + c + d

    def prob(x: int) -> float:
        return math.comb(row, x) * math.comb(n - row, col - x) / math.comb(n, col)

    seen = prob(a)
    tables = range(max(0, col - (n - row)), min(row, col) + 1)
    return min(1.0, sum(p for x in tables if (p := prob(x)) <= seen * (1 + 1e-7)))


def cmh(strata: list[tuple[int, int, int, int]]) -> float:
    """p-value of the Cochran-Mantel-Haenszel test over 2x2 tables [[a, b], [c, d]] (one per
    stratum): sum(a - E[a]) against its variance under no association, continuity-corrected,
    chi-square with one degree of freedom."""
    diff = var = 0.0
    for a, b, c, d in strata:
        row, col, n = a + b, a + c, a + b + c + d
        diff += a - row * col / n
        var += row * (c + d) * col * (b + d) / (n * n * (n - 1))
    if var == 0:
        return 1.0
    chi2 = max(0.0, abs(diff) - 0.5) ** 2 / var
    return math.erfc(math.sqrt(chi2 / 2))


def exchange_test(
    base: Sequence[float], after: Sequence[Sequence[float]], draws: int = 20000, seed: int = 0
) -> float:
    """Two-sided p-value that S checkpoints (`after`, S rows of per-item scores in [0, 1]) differ
    from the `base` scores of the same items, by `draws` random relabellings (see the module
    doc): (1 + relabellings at least as extreme) / (1 + draws), so never 0."""
    scores = np.asarray([base, *after], dtype=float).T  # (items, S + 1), the base first
    if scores.ndim != 2 or scores.shape[1] < 2:
        raise ValueError("the exchange test needs a base and at least one checkpoint")
    scores = scores[scores.min(1) != scores.max(1)]  # an item all agree on adds 0 either way
    if not len(scores):
        return 1.0
    seeds = scores.shape[1] - 1
    # an item's change with base b and total T over all S + 1: (T - b) / S - b
    total = float(scores.sum()) / seeds
    scale = (seeds + 1) / seeds
    observed = abs(total - scale * float(scores[:, 0].sum()))
    rng = np.random.default_rng(seed)
    rows = np.arange(len(scores))
    extreme = 0
    for start in range(0, draws, 1000):
        picks = rng.integers(0, seeds + 1, size=(min(1000, draws - start), len(scores)))
        null = total - scale * scores[rows, picks].sum(-1)
        extreme += int((np.abs(null) >= observed - 1e-9).sum())
    return (1 + extreme) / (1 + draws)
