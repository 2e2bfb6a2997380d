"""The exact McNemar test, the Wilson interval, Fisher's and the CMH test against values worked
out by hand."""

import math

import pytest

from selfplay.eval.paired import cmh, fisher_exact, mcnemar_exact, wilson


def test_only_discordant_pairs_count():
    before = [True, True, False, False, False]
    after = [True, False, True, True, False]
    gained, lost, p = mcnemar_exact(before, after)
    assert (gained, lost) == (2, 1)
    assert p == pytest.approx(1.0)  # 2 * P(X <= 1 | n=3) = 2 * 4/8, capped at 1


def test_a_one_sided_split_is_significant():
    # 10 discordant items, all gained: p = 2 / 2**10
    gained, lost, p = mcnemar_exact([False] * 10 + [True] * 5, [True] * 15)
    assert (gained, lost) == (10, 0)
    assert p == pytest.approx(2 / 1024)


def test_no_change_and_mismatched_lengths():
    assert mcnemar_exact([True, False], [True, False]) == (0, 0, 1.0)
    with pytest.raises(ValueError, match="differ in length"):
        mcnemar_exact([True], [True, False])


def test_the_wilson_interval():
    # none right of 10: [0, z^2 / (n + z^2)], not the normal approximation's point at 0
    assert wilson(0, 10) == pytest.approx((0.0, 3.8416 / 13.8416))
    # half right: symmetric, center 0.5, half-width z / (1 + z^2/n) sqrt(1/4n + z^2/4n^2)
    assert wilson(5, 10) == pytest.approx((0.2366, 0.7634), abs=1e-4)
    low, high = wilson(10, 10)
    assert high == 1.0 and low == pytest.approx(10 / 13.8416)
    assert wilson(0, 0) == (0.0, 1.0)
    # none or all right: the interval holds the share however the ends round (at n = 183 the
    # lower end of 0 / 183 rounded to 1e-17, and the report's figure refused the error bar)
    for n in range(1, 1001):
        for k in (0, n):
            low, high = wilson(k, n)
            assert low <= k / n <= high, (k, n)


def test_fisher_and_cmh_agree_with_their_textbook_values():
    # the lady tasting tea: tables with 3 right of 4 and all 4 right, either way, 34 of 70
    assert fisher_exact(3, 1, 1, 3) == pytest.approx(34 / 70)
    assert fisher_exact(4, 0, 0, 4) == pytest.approx(2 / 70)
    assert fisher_exact(2, 2, 2, 2) == pytest.approx(1.0)
    # one stratum: the CMH statistic is Yates' chi-square times (n - 1) / n
    a, b, c, d = 10, 20, 25, 15
    n = a + b + c + d
    yates = n * (abs(a * d - b * c) - n / 2) ** 2 / ((a + b) * (c + d) * (a + c) * (b + d))
    chi2 = yates * (n - 1) / n
    assert cmh([(a, b, c, d)]) == pytest.approx(math.erfc(math.sqrt(chi2 / 2)))
    # two strata that point the same way are stronger together than either alone
    both = cmh([(a, b, c, d), (a, b, c, d)])
    assert both < cmh([(a, b, c, d)])
