"""Penalties for proposals that resemble others: R-Zero's batch repetition penalty, and
novelty against the pool.

R-Zero (Huang et al. 2025) clusters a batch's questions by BLEU distance and subtracts
lambda * |C| / B from each question's uncertainty reward, clipped at 0 (C its cluster, B the
batch). Here the items are the step's valid proposals and the similarity is the token Jaccard
of their programs after `canonical_program` (bound names renamed in order, so renaming a
parameter changes nothing) with every literal one token (`references.tokens`: a copy that only
changes constants resembles its original), function headers left out (every program has a
`def f(...)`, which would make any two short programs alike); two proposals whose similarity
is at least
`reward.repetition_similarity` are linked and a cluster is a connected group (single
linkage). A proposal's penalty is `reward.repetition` * |C| / B.

Novelty (`novelty`): a proposal that resembles a task the pool held before the step (among its
`reward.novelty_window` newest, where a collapsing proposer's variants of one program pile
up) loses `reward.novelty` * (s - t) / (1 - t), with s its largest similarity to them and t
`reward.repetition_similarity`: a variant of a pool program that changes one operator is
near 1, an unrelated program 0.

Both are taken off a new task's learnability, down to the penalty floor at most (what a copy
or a refusal earns, whichever is more; `rewards.penalty_floor`): a near-copy never earns less
than a copy, and a proposal that is different earns more than one
alike even where both are too easy or too hard to earn learnability (R-Zero clips at 0, which
leaves no gradient between them there).
"""

from __future__ import annotations

from collections.abc import Sequence

from selfplay.curriculum.references import jaccard, tokens
from selfplay.proposer.canonical import canonical_program

__all__ = ["cluster_shares", "novelty", "penalties"]


def penalties(config, programs: Sequence[str | None], earlier: Sequence[str]) -> list[float]:
    """Per proposal of a step (its program, None unless valid), the repetition and novelty
    penalties of `config` (the `reward` section) against the step's valid proposals and the
    pool's `earlier` programs."""
    out = [0.0] * len(programs)
    valid = [k for k, p in enumerate(programs) if p is not None]
    if not valid:
        return out
    own = [programs[k] for k in valid]
    if config.repetition > 0:
        for k, share in zip(valid, cluster_shares(own, config.repetition_similarity), strict=True):
            out[k] += config.repetition * share
    if config.novelty > 0:
        near = novelty(own, earlier, config.repetition_similarity)
        for k, distance in zip(valid, near, strict=True):
            out[k] += config.novelty * distance
    return out


def cluster_shares(programs: Sequence[str], threshold: float) -> list[float]:
    """Per program, the share of `programs` in its cluster (|C| / B, see the module doc)."""
    shapes = [_shape(p) for p in programs]
    parent = list(range(len(programs)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i in range(len(shapes)):
        for j in range(i):
            if jaccard(shapes[i], shapes[j]) >= threshold:
                parent[root(i)] = root(j)
    roots = [root(i) for i in range(len(programs))]
    return [roots.count(r) / len(programs) for r in roots]


def _shape(program: str) -> frozenset[str]:
    """The tokens of the program's canonical text without its `def` lines."""
    lines = canonical_program(program).splitlines()
    return tokens("\n".join(line for line in lines if not line.lstrip().startswith("def ")))


def novelty(programs: Sequence[str], earlier: Sequence[str], threshold: float) -> list[float]:
    """Per program, how far above `threshold` its largest similarity to `earlier` lies, as a
    share of the way to 1 (0 when it is below, or there is nothing earlier)."""
    known = [_shape(p) for p in earlier]
    out = []
    for program in programs:
        shape = _shape(program)
        closest = max((jaccard(shape, k) for k in known), default=0.0)
        out.append(max(0.0, (closest - threshold) / (1.0 - threshold)) if threshold < 1 else 0.0)
    return out
