"""The adaptive entropy bonus: Skywork-OR1's controller step by step and its configuration (a
run whose weight moves with its entropy and resumes with it: tests/test_loop.py)."""

from __future__ import annotations

import pytest

from selfplay.config import ConfigError, load
from selfplay.trainer.entropy_control import EntropyControl


def test_the_weight_grows_while_the_entropy_is_low_and_acts_only_then():
    control = EntropyControl(0.0, target=0.4, step=0.01)
    assert control.coef == 0.0
    for _ in range(3):
        control.update(0.2)  # below the target
    assert control.alpha == pytest.approx(0.03) and control.coef == pytest.approx(0.03)
    control.update(0.5)  # back above: the weight falls and the bonus is off
    assert control.alpha == pytest.approx(0.02) and control.coef == 0.0
    control.update(0.39)
    assert control.coef == pytest.approx(0.03)
    for missing in (None, float("nan")):
        control.update(missing)  # no update ran: nothing to adapt to
    assert control.coef == pytest.approx(0.03)
    for _ in range(10):
        control.update(0.9)
    assert control.alpha == 0.0  # never negative: the bonus is never a penalty
    fixed = EntropyControl(0.05)
    fixed.update(0.01)
    assert fixed.coef == 0.05 and fixed.state() == {}


def test_the_configuration_and_a_checkpoints_state():
    trainer = load(None, ["trainer.entropy_target=0.4", "trainer.entropy_step=0.02"]).trainer
    control = EntropyControl.of(trainer)
    assert (control.alpha, control.target, control.step, control.coef) == (0.0, 0.4, 0.02, 0.0)
    control.update(0.1)
    control.update(0.5)
    saved = {"step": 3, **control.state()}
    assert EntropyControl.of(trainer, saved) == control
    assert EntropyControl.of(trainer, {"step": 3}).alpha == 0.0  # a checkpoint from before it
    # a fixed weight is the configuration's, whatever a checkpoint says
    fixed = load(None, ["trainer.entropy_coef=0.05"]).trainer
    assert EntropyControl.of(fixed, saved).coef == 0.05
    with pytest.raises(ConfigError, match="entropy_coef"):
        load(None, ["trainer.entropy_coef=-0.1"])
    with pytest.raises(ConfigError, match="entropy_step"):
        load(None, ["trainer.entropy_target=0.4", "trainer.entropy_step=0"])
