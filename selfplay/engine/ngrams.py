"""Sampling that steers a completion away from writing given texts out again.

A small proposer shown reference programs copies them: over a run's steps about half of its
valid proposals are a shown reference again (`propose/copy_share`), and a copy is no new work
for the pool whatever it earns. `NgramPenalty` lowers, by `penalty` logits, every token that
would complete an n-gram (of `n` tokens) of the given texts, at each step of the completion:
once a completion has followed a reference for `n - 1` tokens, the token that would go on
following it is made unlikely, so a copy breaks off within a line while code that only
shares short phrases with the references (`for i in range(`) is not touched. The penalty is
finite: where format-constrained generation allows one token only, that token is still drawn.

`generation.avoid_reference_ngrams` turns it on for deduction and abduction proposals, their
prompt's references being the texts (`avoiding`); both backends apply it (vLLM through a
logits processor, `selfplay.engine.vllm_ngrams`, which the vLLM engine loads only under that
knob). The log-probabilities a completion reports are those of the penalised distribution it
was drawn from; as with constrained generation, a trained proposer's update does not take them
for the policy's (`engine.base.policy_logprobs`) and computes the policy's own.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace

__all__ = ["EXTRA_ARGS_KEY", "NgramPenalty", "avoiding"]

#: where a vLLM request's `extra_args` carry its penalty (`selfplay.engine.vllm_ngrams`)
EXTRA_ARGS_KEY = "selfplay_avoid"


class NgramPenalty:
    """The tokens that would complete an n-gram of `sources` (token id sequences), and the
    logits with those lowered by `penalty`."""

    def __init__(self, sources: Sequence[Sequence[int]], n: int, penalty: float):
        if n < 2:
            raise ValueError("an n-gram penalty needs n >= 2 (n = 1 would ban every token)")
        self.n, self.penalty = n, penalty
        self.next: dict[tuple[int, ...], set[int]] = defaultdict(set)
        for ids in sources:
            for i in range(len(ids) - n + 1):
                self.next[tuple(ids[i : i + n - 1])].add(ids[i + n - 1])

    def banned(self, output: Sequence[int]) -> list[int]:
        """The tokens that, after `output`, would complete an n-gram of the sources."""
        if len(output) < self.n - 1:
            return []
        return sorted(self.next.get(tuple(output[len(output) - self.n + 1 :]), ()))

    def __call__(self, output: Sequence[int], logits):
        """`logits` (one row, a tensor) with the banned tokens lowered, in place; vLLM's
        per-request logits processor signature."""
        if banned := self.banned(output):
            logits[banned] -= self.penalty
        return logits


def avoiding(params, generation, texts: Sequence[Sequence[str]]):
    """`params` (`SamplingParams`) steering the completions of prompt k away from `texts[k]`
    under `generation.avoid_reference_ngrams` (unchanged when it is 0 or there is nothing to
    avoid)."""
    n = generation.avoid_reference_ngrams
    if not n or not any(texts):
        return params
    return replace(
        params,
        avoid=tuple(tuple(t) for t in texts),
        avoid_ngram=n,
        avoid_penalty=generation.avoid_reference_penalty,
    )
