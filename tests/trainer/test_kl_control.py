"""The adaptive KL coefficient: PPO's controller step by step and its configuration (a run
whose coefficient moves with its KL and resumes with it: tests/test_loop.py)."""

from __future__ import annotations

import pytest

from selfplay.config import ConfigError, load
from selfplay.trainer.kl_control import KLControl


def test_the_coefficient_moves_toward_the_target_by_at_most_a_fifth_per_horizon():
    kl = KLControl(0.1, target=0.02, horizon=5.0)
    kl.update(0.03)  # 50% over the target: the error is clipped to 20%
    assert kl.coef == pytest.approx(0.1 * (1 + 0.2 / 5))
    kl.update(0.019)  # 5% under
    assert kl.coef == pytest.approx(0.1 * (1 + 0.2 / 5) * (1 - 0.05 / 5))
    before = kl.coef
    for missing in (None, float("nan")):
        kl.update(missing)  # no update ran: nothing to adapt to
    assert kl.coef == before
    low = KLControl(0.1, target=0.02, horizon=5.0, entropy_floor=0.3)
    low.update(0.01, entropy=0.25)  # under the KL target, but the entropy is too low
    assert low.coef == pytest.approx(0.1 * 1.04)
    low.update(0.01, entropy=0.4)
    assert low.coef == pytest.approx(0.1 * 1.04 * 0.96)
    fixed = KLControl(0.1)
    fixed.update(5.0)
    assert fixed.coef == 0.1


def test_the_configuration_refuses_a_target_without_a_start():
    trainer = load(None, ["trainer.kl_coef=0.05", "trainer.kl_target=0.01"]).trainer
    assert KLControl.of(trainer) == KLControl(0.05, 0.01, 5.0, 0.0)
    saved = KLControl(0.07, 0.01).state()  # a checkpoint of an adapted coefficient
    assert KLControl.of(trainer, saved).coef == 0.07
    with pytest.raises(ConfigError, match="kl_target"):
        load(None, ["trainer.kl_target=0.01"])
    with pytest.raises(ConfigError, match="entropy_floor"):
        load(None, ["trainer.kl_coef=0.1", "trainer.entropy_floor=0.2"])
    with pytest.raises(ConfigError, match="kl_horizon"):
        load(None, ["trainer.kl_coef=0.1", "trainer.kl_target=0.01", "trainer.kl_horizon=0"])
    with pytest.raises(ConfigError, match="kl_horizon"):  # -20% / 0.2 would zero the coefficient
        load(None, ["trainer.kl_coef=0.1", "trainer.kl_target=0.01", "trainer.kl_horizon=0.2"])


def test_a_resumed_run_goes_on_from_an_adapted_coefficient_only():
    """A run resumed with a target goes on from the coefficient its checkpoint adapted; one
    whose checkpoint held the coefficient fixed, or ran no KL term (0, which no target would
    ever move: the update refused it), starts from the configured kl_coef."""
    adapted = load(None, ["trainer.kl_coef=0.1", "trainer.kl_target=0.05"]).trainer
    assert KLControl.of(adapted, {"kl_coef": 0.0, "kl_target": 0.0}).coef == 0.1
    assert KLControl.of(adapted, {"kl_coef": 0.3, "kl_target": 0.0}).coef == 0.1  # was fixed
    assert KLControl.of(adapted, {"kl_coef": 0.03, "kl_target": 0.05}).coef == 0.03
    assert KLControl.of(adapted, {"step": 4}).coef == 0.1
    # a checkpoint from before the target was saved: its coefficient where above 0
    assert KLControl.of(adapted, {"kl_coef": 0.04}).coef == 0.04
    assert KLControl.of(adapted, {"kl_coef": 0.0}).coef == 0.1
    fixed = load(None, ["trainer.kl_coef=0.2"]).trainer  # no target: the config's, always
    assert KLControl.of(fixed, {"kl_coef": 0.03, "kl_target": 0.05}).coef == 0.2
    assert KLControl(0.0).state() == {"kl_coef": 0.0, "kl_target": 0.0}


def test_with_both_roles_trained_the_coefficient_steers_on_the_role_that_drifted_most():
    """An update whose proposals are most of its tokens at a low KL, and whose answers drifted
    past the target: the token mean (`kl_ref`) is under the target, the answers' KL over it.
    By default the coefficient rises with the answers' KL; `trainer.kl_steer=all_tokens`
    follows the token mean down, as runs did before. One trained role: the same either way."""
    both = {"kl_ref": 0.06, "kl_ref_propose": 0.03, "kl_ref_solve": 0.26, "entropy": 0.6}
    trainer = load(
        None, ["trainer.kl_coef=0.2", "trainer.kl_target=0.15", "trainer.kl_horizon=2"]
    ).trainer
    worst = KLControl.of(trainer)
    assert worst.steer == "worst_role" and worst.steered(both) == 0.26
    stats = dict(both)
    worst.adapt(worst.apply(trainer), stats)
    assert worst.coef == pytest.approx(0.2 * 1.1)  # 73% over: clipped to +20%, over 2 steps
    assert stats["kl_steered"] == 0.26 and stats["kl_coef"] == 0.2
    mean = KLControl.of(
        load(
            None, ["trainer.kl_coef=0.2", "trainer.kl_target=0.15", "trainer.kl_steer=all_tokens"]
        ).trainer
    )
    assert mean.steered(both) == 0.06
    mean.update(mean.steered(both))
    assert mean.coef < 0.2
    solve_only = {"kl_ref": 0.12, "kl_ref_solve": 0.12}
    assert worst.steered(solve_only) == mean.steered(solve_only) == 0.12
    assert worst.steered({"kl_ref": 0.05}) == 0.05  # an update that reports no role's KL
    # a role's KL that overflowed: nothing to adapt to, as the token mean would say
    assert worst.steered({"kl_ref_solve": float("inf"), "kl_ref_propose": 0.03}) is None
    fixed = KLControl(0.2)  # no target: nothing steered on, nothing logged as such
    stats = dict(both)
    fixed.adapt(fixed.apply(trainer), stats)
    assert "kl_steered" not in stats and fixed.coef == 0.2
    with pytest.raises(ConfigError, match="kl_steer"):
        load(None, ["trainer.kl_coef=0.2", "trainer.kl_steer=mean"])


def test_per_role_each_role_has_a_coefficient_adapted_on_its_own_kl():
    """`trainer.kl_steer=per_role`: the solver's coefficient rises with the answers' KL past
    the target while the proposer's falls with its own under it; the update gets the solver's
    as kl_coef and the proposer's as its weight in the KL term. A role missing from an
    update keeps its coefficient; both travel with a checkpoint, and a checkpoint of a single
    coefficient starts both from it."""
    both = {"kl_ref": 0.06, "kl_ref_propose": 0.03, "kl_ref_solve": 0.26, "entropy": 0.6}
    args = ["trainer.kl_coef=0.2", "trainer.kl_target=0.15", "trainer.kl_horizon=2"]
    trainer = load(None, [*args, "trainer.kl_steer=per_role"]).trainer
    kl = KLControl.of(trainer)
    assert (kl.coef, kl.propose_coef) == (0.2, 0.2)
    applied = kl.apply(trainer)
    assert (applied.kl_coef, applied.propose_kl_weight) == (0.2, pytest.approx(1.0))
    stats = dict(both)
    kl.adapt(applied, stats)
    assert kl.coef == pytest.approx(0.2 * 1.1)  # 73% over the target: +20% over 2 steps
    assert kl.propose_coef == pytest.approx(0.2 * 0.9)  # 80% under: -20% over 2 steps
    assert (stats["kl_coef"], stats["kl_coef_propose"]) == (0.2, 0.2)  # those the update used
    assert "kl_steered" not in stats  # each role's own KL is logged already
    applied = kl.apply(trainer)
    assert applied.kl_coef == pytest.approx(0.22)
    assert applied.kl_coef * applied.propose_kl_weight == pytest.approx(0.18)
    kl.adapt(applied, {"kl_ref": 0.3, "kl_ref_solve": 0.3})  # no proposal in this update
    assert (kl.coef, kl.propose_coef) == (pytest.approx(0.2 * 1.1**2), pytest.approx(0.18))
    saved = kl.state()
    assert saved["kl_coef_propose"] == pytest.approx(0.18)
    resumed = KLControl.of(trainer, saved)
    assert (resumed.coef, resumed.propose_coef) == (saved["kl_coef"], saved["kl_coef_propose"])
    zero = KLControl.of(trainer, saved | {"kl_coef_propose": 0.0})  # 0 adapts to nothing
    assert zero.propose_coef == saved["kl_coef"]
    single = KLControl.of(trainer, {"kl_coef": 0.3, "kl_target": 0.15})
    assert (single.coef, single.propose_coef) == (0.3, 0.3)
    assert "kl_coef_propose" not in KLControl.of(load(None, args).trainer).state()
    low = KLControl.of(
        load(None, [*args, "trainer.kl_steer=per_role", "trainer.entropy_floor=0.7"]).trainer
    )
    low.adapt(low.apply(trainer), dict(both))  # entropy 0.6 under the floor: both rise
    assert (low.coef, low.propose_coef) == (pytest.approx(0.22), pytest.approx(0.22))
    # a configured proposer's KL weight scales its own coefficient's pull
    halved = load(None, [*args, "trainer.kl_steer=per_role", "trainer.propose_kl_weight=0.5"])
    applied = kl.apply(halved.trainer)
    assert applied.kl_coef * applied.propose_kl_weight == pytest.approx(0.5 * 0.18)
    with pytest.raises(ConfigError, match="kl_target"):
        load(None, ["trainer.kl_coef=0.2", "trainer.kl_steer=per_role"])
