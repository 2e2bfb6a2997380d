"""The unbiased pass@k estimator (Chen et al., 2021).

With n samples of which c are correct, the probability that at least one of k samples drawn
without replacement is correct is 1 - C(n - c, k) / C(n, k), computed as the product
1 - prod_{i = n - c + 1}^{n} (1 - k / i), which stays exact in floating point for large n.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["pass_at_k", "mean_pass_at_k", "pass_at_k_metrics"]


def pass_at_k(n: int, c: int, k: int) -> float:
    if not 0 <= c <= n or k < 1:
        raise ValueError(f"need 0 <= c <= n and k >= 1, got n={n}, c={c}, k={k}")
    if k > n:
        raise ValueError(f"pass@{k} needs at least {k} samples per problem, got {n}")
    if n - c < k:
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))


def mean_pass_at_k(counts: Sequence[tuple[int, int]], k: int) -> float:
    """Mean pass@k over problems given (n, c) per problem."""
    if not counts:
        raise ValueError("no problems")
    return float(np.mean([pass_at_k(n, c, k) for n, c in counts]))


def pass_at_k_metrics(
    name: str, counts: Sequence[tuple[int, int]], ks: Sequence[int]
) -> dict[str, float]:
    """`{name}/pass@{k}` for each k that every problem has enough samples for."""
    return {
        f"{name}/pass@{k}": mean_pass_at_k(counts, k) for k in ks if all(n >= k for n, _ in counts)
    }
