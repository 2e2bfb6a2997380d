"""Evaluation split across a run's ranks: each rank answers its share of a benchmark's problems.

Inside `across(ranks)`, every `harness.evaluate` cuts its problems into `ranks.shares` strided
shares (problem i in share i % shares, as `Ranks.map` cuts a step's prompts), and each rank
generates, reads and judges the answers of the shares it owns, with its own engine and judge.
The answers, verdicts and replies are then gathered, in problem order, on every rank, and the
scores and records are made from them as in one process: the same records in the same order,
the same pass@k. Greedy answers do not depend on the split; sampled ones (n > 1, a seed) are
drawn with one seed per share (`share_seed`), as a step's are, so they are reproducible for a
given number of shares.

A rank waits in a gather only for the other ranks to finish their share of the same subset,
never for a whole evaluation (before, rank 0 evaluated alone while the others waited in the
next step's first collective). Every rank must evaluate the same benchmarks in the same order,
which `InLoopEval` does: it is called on every rank, and rank 0 writes the records.

Outside `across`, and with one process, `harness.evaluate` works on all problems in one share,
exactly as it always has.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from selfplay.distributed import Ranks

__all__ = ["across", "current", "answer"]

_RANKS: ContextVar[Ranks | None] = ContextVar("evaluation ranks", default=None)


@contextmanager
def across(ranks: Ranks) -> Iterator[Ranks]:
    """Evaluations inside split their problems across `ranks`."""
    token = _RANKS.set(ranks)
    try:
        yield ranks
    finally:
        _RANKS.reset(token)


def current() -> Ranks:
    """The ranks evaluations are split across now: one process outside `across`."""
    return _RANKS.get() or Ranks()


def answer(work: Callable[[list, int], list], problems: Sequence) -> list:
    """`work(part, k)` over the shares of `problems` this rank owns, every share's results
    gathered in problem order (`Ranks.map`); `work` returns one result per problem of its part,
    which must pickle."""
    return current().map(work, problems)
