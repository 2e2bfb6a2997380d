"""Generation seeds: a step's stages and consecutive steps never share a sampling seed, and the
derivation never changes (a resumed run regenerates the samples of the step it lost)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import SimpleNamespace

from selfplay import stages
from selfplay.config import Config
from selfplay.engine import derive_seed
from selfplay.engine.vllm_backend import VLLMEngine


@dataclass
class _Params:
    """The two fields of vLLM's sampling parameters that seeding reads, and its `clone`."""

    seed: int | None
    n: int

    def clone(self):
        return replace(self)


def _sample_seeds(seed: int, requests: int, n: int) -> list[int]:
    """The seed of every sample of one vLLM call: request k's j-th sample gets its seed + j."""
    return [p.seed + j for p in VLLMEngine._seeded(_Params(seed, n), requests) for j in range(n)]


def test_no_two_samples_of_neighbouring_steps_and_stages_share_a_seed():
    run = SimpleNamespace(config=Config())
    requests, n = 512, 8
    seeds = [
        s
        for step in (41, 42)
        for stage in (0, 1, 2)
        for s in _sample_seeds(stages._seed(run, step, stage), requests, n)
    ]
    assert len(set(seeds)) == len(seeds) == 2 * 3 * requests * n


def test_the_derivation_is_stable():
    assert derive_seed(0, 1, 0) == 7525110624671850846
    assert derive_seed(7, 3) == 880155747399164344
    assert all(0 <= derive_seed(seed, k) < 2**63 for seed in (0, -1, 2**70) for k in range(9))
    assert VLLMEngine._seeded(_Params(None, 4), 3).seed is None  # unseeded stays unseeded
