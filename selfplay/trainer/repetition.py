"""R-Zero's batch repetition penalty, on programs: proposals of one step that resemble each
other share a cluster, and each earns less the larger its cluster.

R-Zero (Huang et al. 2025) clusters a batch's questions by BLEU distance and subtracts
lambda * |C| / B from each question's uncertainty reward, clipped at 0 (C its cluster, B the
batch). Here the items are the step's valid proposals and the similarity is the token Jaccard
of their programs after `canonical_program` (bound names renamed in order, so renaming a
parameter changes nothing) with every literal one token (`references.tokens`: a copy that only
changes constants resembles its original), function headers left out (every program has a
`def f(...)`, which would make any two short programs alike); two proposals whose similarity
is at least
`reward.repetition_similarity` are linked and a cluster is a connected group (single
linkage). A proposal's penalty is `reward.repetition` * |C| / B, taken off its learnability
(never below 0: a valid new task still earns more than a duplicate).
"""

from __future__ import annotations

from collections.abc import Sequence

from selfplay.curriculum.references import jaccard, tokens
from selfplay.proposer.canonical import canonical_program

__all__ = ["cluster_shares"]


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
