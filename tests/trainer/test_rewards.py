"""Rewards, with the values at the boundaries of the solve rate pinned."""

from __future__ import annotations

import pytest

from selfplay.config import Config, ConfigError, load
from selfplay.trainer.rewards import RoleResult, learnability, reward

CONFIG = Config()


def proposer(p: float | None, outcome: str = "valid") -> float:
    return reward(RoleResult("propose", outcome, p), CONFIG)


@pytest.mark.parametrize(
    "shape, p, expected",
    [
        ("azr", 0.0, 0.0),
        ("azr", 1.0, 0.0),
        ("azr", 0.25, 0.75),
        ("azr", 0.5, 0.5),
        ("rzero_band", 0.0, 0.0),
        ("rzero_band", 0.3, 1.0),
        ("rzero_band", 0.8, 1.0),
        ("rzero_band", 0.81, 0.0),
        ("rzero_band", 1.0, 0.0),
        ("rzero_peak", 0.0, 0.0),
        ("rzero_peak", 0.5, 0.5),
        ("rzero_peak", 1.0, 0.0),
        ("variance", 0.0, 0.0),
        ("variance", 0.5, 0.25),
        ("variance", 1.0, 0.0),
    ],
)
def test_learnability_shapes(shape, p, expected):
    assert learnability(shape, p, CONFIG) == pytest.approx(expected)


def test_proposer_rewards():
    assert proposer(None, "malformed") == -1.0
    assert proposer(None, "invalid") == -0.5
    assert proposer(0.0) == 0.0  # valid but never solved: better than invalid, no learning signal
    assert proposer(1.0) == 0.0  # valid but always solved
    assert proposer(0.125) == pytest.approx(0.875)
    with pytest.raises(ValueError):
        proposer(None)
    with pytest.raises(ValueError):
        proposer(1.5)


def test_solver_rewards():
    assert reward(RoleResult("solve", "correct"), CONFIG) == 1.0
    assert reward(RoleResult("solve", "wrong"), CONFIG) == -0.5
    assert reward(RoleResult("solve", "malformed"), CONFIG) == -1.0


def test_configured_shape_and_penalties():
    cfg = load(None, ["reward.learnability=rzero_peak", "reward.proposer_invalid=-0.25"])
    assert reward(RoleResult("propose", "valid", 0.25), cfg) == 0.25
    assert reward(RoleResult("propose", "invalid"), cfg) == -0.25
    with pytest.raises(ConfigError, match="reward.learnability"):
        load(None, ["reward.learnability=linear"])


def test_a_duplicate_earns_no_learnability():
    frontier = RoleResult("propose", "valid", 0.5, duplicate=True)
    assert reward(frontier, CONFIG) == CONFIG.reward.proposer_duplicate == -1.0
    assert reward(frontier, load(None, ["reward.proposer_duplicate=0"])) == 0.0
    assert proposer(0.5) == 0.5  # the same task, new


def test_penalties_lower_learnability_down_to_what_a_copy_or_a_refusal_earns():
    assert reward(RoleResult("propose", "valid", 0.5, penalty=0.2), CONFIG) == 0.3
    assert reward(RoleResult("propose", "valid", 1.0, penalty=0.3), CONFIG) == -0.3
    # a copy earns -1, a refusal -0.5: new work never earns less than a refused program
    floor = CONFIG.reward.proposer_invalid
    assert reward(RoleResult("propose", "valid", 0.5, penalty=2.0), CONFIG) == floor == -0.5
    equal = load(None, ["reward.proposer_duplicate=-0.25"])  # a copy above a refusal
    assert reward(RoleResult("propose", "valid", 0.5, penalty=2.0), equal) == -0.25
    duplicate = RoleResult("propose", "valid", 0.5, duplicate=True, penalty=0.2)
    assert reward(duplicate, CONFIG) == CONFIG.reward.proposer_duplicate  # a penalty already
    with pytest.raises(ConfigError, match="repetition"):
        load(None, ["reward.repetition=-1"])
    with pytest.raises(ConfigError, match="novelty"):
        load(None, ["reward.novelty=-1"])


def test_novelty_is_the_distance_to_the_closest_earlier_program():
    from selfplay.trainer.repetition import novelty

    earlier = ["def f(n):\n    return n ** 2 if isinstance(n, int) else None"]
    programs = [
        "def f(x):\n    return x ** 3 if isinstance(x, int) else None",  # a constant changed
        "def f(s):\n    return ''.join(sorted(set(s)))",
    ]
    assert novelty(programs, earlier, 0.5) == [1.0, 0.0]
    assert novelty(programs, [], 0.5) == [0.0, 0.0]
    half = novelty(["def f(n):\n    return n ** 2 if n > 0 else None"], earlier, 0.5)[0]
    assert 0 < half < 1


def test_programs_cluster_by_their_shape_not_their_names_or_constants():
    from selfplay.trainer.repetition import cluster_shares

    programs = [
        "def f(a):\n    return a * 3 + 1",
        "def f(value):\n    return value * 7 + 2",  # renamed, other constants: the same shape
        "def f(xs):\n    return sorted(xs)[::-1]",
        "def f(s):\n    t = s.split(',')\n    return [w.strip() for w in t if w]",
    ]
    assert cluster_shares(programs, 0.5) == [0.5, 0.5, 0.25, 0.25]
    assert cluster_shares(programs, 1.0) == [0.5, 0.5, 0.25, 0.25]  # identical token sets
    assert cluster_shares(programs, 0.01) == [1.0] * 4  # every body has a `return`
    assert cluster_shares([], 0.5) == []
