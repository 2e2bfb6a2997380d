"""Paired comparison of two evaluations of the same items (before and after training).

`mcnemar_exact` is the exact McNemar test: only the discordant items count (right after and
wrong before, or the reverse), and under the null hypothesis (training changed nothing) each
discordant item is equally likely to go either way, so their split is Binomial(n, 1/2). The
p-value is two-sided: twice the smaller tail, capped at 1.

`wilson` is the Wilson score interval of one accuracy (k right of n), the interval the report's
figures draw: unlike the normal approximation p +- z sqrt(p(1 - p) / n) it stays inside [0, 1]
and does not shrink to a point at 0 or n right.

`fisher_exact` and `cmh` compare two unpaired groups (two runs' proposals, say): Fisher's exact
test on one 2x2 table, and the Cochran-Mantel-Haenszel test over several (one per seed).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["cmh", "fisher_exact", "mcnemar_exact", "sign_test", "wilson"]


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

    With no items nothing is known: (0, 1)."""
    if n == 0:
        return 0.0, 1.0
    p, zz = k / n, z * z
    center = (p + zz / (2 * n)) / (1 + zz / n)
    half = z / (1 + zz / n) * math.sqrt(p * (1 - p) / n + zz / (4 * n * n))
    return max(0.0, center - half), min(1.0, center + half)


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
