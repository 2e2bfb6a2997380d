"""The proposer's references: K pool tasks per prompt, at the frontier and not near-duplicates.

For each prompt, `reference_candidates * K` candidates are drawn by learnability (the solver
sampler's weights, so frontier tasks come first), then kept greedily in draw order while their
token Jaccard similarity to every kept one stays at most `reference_max_similarity`. Programs
are compared by their sets of identifier and operator tokens, with every number and string
literal counted as one and the same token: cheap, and a copy that only changes constants is
then a near-duplicate, while a different idea shares few tokens. If the threshold leaves
fewer than K, the least similar of the rest fill the prompt; no task is shown twice, so a
pool of fewer than K tasks gives fewer references. When fewer than K tasks have a positive
weight (a young or fully solved pool), every task of the allowed types is a candidate,
uniformly.

A share `reference_dropout` of the prompts (drawn with the step's seed) is shown no reference
at all: its proposer invents from its own prior. A small model shown references mostly copies
them or writes a variant, and a zero-data pool's first non-trivial task then becomes the one
idea every later proposal repeats (observed in a zero-data run: docs/results.md).
"""

from __future__ import annotations

import re

import numpy as np

from selfplay.curriculum import sampler

_LITERAL = re.compile(r"\d[\w.]*|'[^'\n]*'|\"[^\"\n]*\"")
_TOKEN = re.compile(r"[A-Za-z_]\w*|[^\s\w]{1,2}")


def tokens(program: str) -> frozenset[str]:
    return frozenset(_TOKEN.findall(_LITERAL.sub(" 0 ", program))) | {"0"}


def jaccard(a: frozenset, b: frozenset) -> float:
    union = len(a | b)
    return len(a & b) / union if union else 1.0


def choose_references(store, n_prompts: int, step: int, k: int, types, salt: int) -> list[list]:
    groups = store.index.groups(types)
    allowed = np.concatenate(groups) if groups else np.empty(0, dtype=np.int64)
    if n_prompts <= 0 or len(allowed) == 0:
        return [[] for _ in range(max(n_prompts, 0))]
    p, attempted = store.solve_rates(step)
    weights = sampler.learnability(store.config, p[allowed], attempted[allowed], store.answers)
    if np.count_nonzero(weights > 0) < k:
        weights = np.ones(len(allowed))
    rng = sampler.generator(store.config, step, salt, stream=1)
    size = k * store.config.reference_candidates
    candidates = [allowed[sampler.weighted_sample(weights, size, rng)] for _ in range(n_prompts)]
    ids = store.index["id"]
    unique = np.unique(np.concatenate(candidates))
    loaded = {t.id: t for t in store.get(ids[unique].tolist(), step)}
    shape = {i: tokens(t.task.program) for i, t in loaded.items()}
    limit = store.config.reference_max_similarity
    chosen = [[loaded[i] for i in _diverse(ids[c].tolist(), shape, k, limit)] for c in candidates]
    if store.config.reference_dropout > 0:  # its own stream: other draws stay as they were
        blank = sampler.generator(store.config, step, salt, stream=2).random(n_prompts)
        chosen = [[] if b < store.config.reference_dropout else c for b, c in zip(blank, chosen)]
    return chosen


def _diverse(candidates: list[int], shape: dict, k: int, limit: float) -> list[int]:
    """Up to k distinct tasks of `candidates` (a draw with replacement): a pool of one task
    shows it once, not k times."""
    kept: list[int] = []
    rest: list[tuple[float, int, int]] = []
    for order, task_id in enumerate(dict.fromkeys(candidates)):
        closest = max((jaccard(shape[task_id], shape[j]) for j in kept), default=0.0)
        if closest <= limit and len(kept) < k:
            kept.append(task_id)
        else:
            rest.append((closest, order, task_id))
    for _, _, task_id in sorted(rest)[: k - len(kept)]:
        kept.append(task_id)
    return kept
