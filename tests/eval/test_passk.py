from math import comb

import pytest

from selfplay.eval.passk import mean_pass_at_k, pass_at_k


@pytest.mark.parametrize("n, c, k", [(10, 3, 1), (10, 3, 5), (20, 0, 5), (20, 20, 5), (200, 7, 10)])
def test_matches_the_binomial_formula(n, c, k):
    assert pass_at_k(n, c, k) == pytest.approx(1 - comb(n - c, k) / comb(n, k))


def test_pass_at_1_is_the_fraction_correct():
    assert pass_at_k(8, 3, 1) == pytest.approx(3 / 8)
    assert mean_pass_at_k([(4, 4), (4, 0)], 1) == pytest.approx(0.5)


def test_bad_arguments():
    with pytest.raises(ValueError):
        pass_at_k(4, 5, 1)
    with pytest.raises(ValueError):
        pass_at_k(4, 1, 5)
