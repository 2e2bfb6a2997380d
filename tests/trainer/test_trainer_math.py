"""Advantages and the policy loss against values computed by hand."""

from __future__ import annotations

import math

import pytest
import torch

from selfplay.config import TrainerConfig
from selfplay.trainer.advantages import AdvantageInputs, compute_advantages
from selfplay.trainer.loss import policy_loss


def inputs(rewards, roles, types, prompts):
    return AdvantageInputs(torch.tensor(rewards, dtype=torch.float32), roles, types, prompts)


def test_trr_normalises_each_role_and_type_on_its_own():
    batch = inputs(
        [1.0, 0.0, 0.5, 0.25, 0.0],
        ["solve", "solve", "propose", "propose", "propose"],
        ["deduction", "deduction", "abduction", "abduction", "induction"],
        [0, 0, 1, 2, 3],
    )
    adv = compute_advantages("trr++", batch, eps=0.0)
    # solve/deduction: mean 0.5, std 0.5 -> +1, -1
    # propose/abduction: mean 0.375, std 0.125 -> +1, -1
    # propose/induction: a single sample -> 0
    assert adv.tolist() == pytest.approx([1.0, -1.0, 1.0, -1.0, 0.0])


def test_grpo_groups_by_prompt():
    batch = inputs([1.0, 1.0, 0.0, 3.0, 1.0], ["solve"] * 5, ["deduction"] * 5, [7, 7, 7, 8, 8])
    adv = compute_advantages("grpo", batch, eps=0.0)
    # prompt 7: mean 2/3, std sqrt(2)/3 -> (1/3)/(sqrt2/3) = 1/sqrt2, and -2/3/(sqrt2/3) = -sqrt2
    # prompt 8: mean 2, std 1 -> +1, -1
    s = 1 / math.sqrt(2)
    assert adv.tolist() == pytest.approx([s, s, -math.sqrt(2), 1.0, -1.0])


def test_reinforce_uses_the_whole_batch():
    batch = inputs([2.0, 0.0, 4.0], ["solve", "propose", "solve"], ["a", "b", "c"], [0, 1, 2])
    adv = compute_advantages("reinforce++", batch, eps=0.0)
    std = math.sqrt(8 / 3)  # population std of (2, 0, 4) around 2
    assert adv.tolist() == pytest.approx([0.0, -2 / std, 2 / std])


def test_equal_rewards_carry_no_signal():
    batch = inputs([1.0, 1.0, 1.0], ["solve"] * 3, ["deduction"] * 3, [0, 0, 0])
    for name in ("trr++", "grpo", "reinforce++"):
        assert compute_advantages(name, batch).tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("value, size", [(0.45, 8), (-0.3, 8), (2 / 3, 8), (0.1, 7)])
def test_rewards_equal_but_for_rounding_carry_no_signal(value, size):
    """Rewards that cannot be written exactly in binary: the group's mean and spread are off by
    a rounding error, which normalised to an advantage of a few hundredths for every sample
    (trained on, not skipped). Tied within rounding, they get 0; a real spread still counts."""
    batch = inputs([value] * size, ["propose"] * size, ["deduction"] * size, [0] * size)
    for name in ("trr++", "grpo", "reinforce++"):
        assert compute_advantages(name, batch).tolist() == [0.0] * size
    mixed = AdvantageInputs(
        torch.tensor([0.75 - 0.3, 0.45, 0.45 + 1e-3], dtype=torch.float64),
        ["solve"] * 3, ["deduction"] * 3, [0, 0, 0],
    )  # fmt: skip
    assert compute_advantages("grpo", mixed, eps=0.0).tolist() == pytest.approx(
        [-1 / math.sqrt(2), -1 / math.sqrt(2), math.sqrt(2)], rel=1e-4
    )


def test_unknown_estimator_and_ragged_inputs():
    with pytest.raises(ValueError, match="unknown advantage"):
        compute_advantages("ppo", inputs([1.0], ["solve"], ["d"], [0]))
    with pytest.raises(ValueError, match="equally long"):
        compute_advantages("grpo", inputs([1.0, 2.0], ["solve"], ["d"], [0]))


def test_loss_without_change_is_minus_the_mean_advantage():
    logp = torch.log(torch.tensor([[0.5, 0.25, 0.5]]))
    mask = torch.tensor([[1.0, 1.0, 0.0]])
    loss, stats = policy_loss(logp, logp.clone(), torch.tensor([2.0]), mask, TrainerConfig())
    assert float(loss) == pytest.approx(-2.0)
    assert stats["clip_fraction"] == 0.0 and stats["ratio_mean"] == pytest.approx(1.0)


def test_clipping_with_separate_low_and_high_ranges():
    old = torch.log(torch.tensor([[0.5, 0.5, 0.5, 0.5]]))
    # ratios 1.5, 1.1, 0.5, 0.9
    new = torch.log(torch.tensor([[0.75, 0.55, 0.25, 0.45]]))
    mask = torch.ones(1, 4)
    settings = TrainerConfig(clip_low=0.2, clip_high=0.28, aggregation="token")
    pos, stats = policy_loss(new, old, torch.tensor([1.0]), mask, settings)
    # A > 0: min(r, clip(r, 0.8, 1.28)) = 1.28, 1.1, 0.5, 0.9 -> mean 0.945
    assert float(pos) == pytest.approx(-(1.28 + 1.1 + 0.5 + 0.9) / 4)
    assert stats["clip_fraction"] == pytest.approx(0.25)
    neg, _ = policy_loss(new, old, torch.tensor([-1.0]), mask, settings)
    # A < 0: min(-r, -clip(r)) = -1.5, -1.1, -0.8, -0.9 -> loss = +mean
    assert float(neg) == pytest.approx((1.5 + 1.1 + 0.8 + 0.9) / 4)


def test_token_and_sequence_aggregation_differ_for_different_lengths():
    logp = torch.zeros(2, 3)
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    adv = torch.tensor([1.0, 4.0])
    token, _ = policy_loss(logp, logp, adv, mask, TrainerConfig(aggregation="token"))
    sequence, _ = policy_loss(logp, logp, adv, mask, TrainerConfig(aggregation="sequence"))
    assert float(token) == pytest.approx(-(1 + 1 + 1 + 4) / 4)
    assert float(sequence) == pytest.approx(-(1 + 4) / 2)


def test_kl_penalty_k3():
    new = torch.log(torch.tensor([[0.5]]))
    ref = torch.log(torch.tensor([[0.25]]))
    mask = torch.ones(1, 1)
    settings = TrainerConfig(kl_coef=0.1)
    loss, stats = policy_loss(new, new, torch.tensor([0.0]), mask, settings, ref_logp=ref)
    k3 = 0.5 - math.log(0.5) - 1  # exp(d) - d - 1 with d = log(0.25 / 0.5)
    assert stats["kl_ref_sum"] == pytest.approx(k3)  # one token
    assert float(loss) == pytest.approx(0.1 * k3)
    with pytest.raises(ValueError, match="reference"):
        policy_loss(new, new, torch.tensor([0.0]), mask, settings)


def test_kl_weights_scale_each_samples_kl_term_not_the_reported_kl():
    new = torch.log(torch.tensor([[0.5], [0.5]]))
    ref = torch.log(torch.tensor([[0.25], [0.25]]))
    mask, zero = torch.ones(2, 1), torch.zeros(2)
    settings = TrainerConfig(kl_coef=1.0)
    k3 = 0.5 - math.log(0.5) - 1
    loss, stats = policy_loss(
        new, new, zero, mask, settings, ref_logp=ref, kl_weights=torch.tensor([3.0, 1.0])
    )
    assert float(loss) == pytest.approx((3 * k3 + k3) / 2)
    assert stats["kl_ref_sum"] == pytest.approx(2 * k3)


def test_gradient_points_towards_positive_advantage():
    logits = torch.zeros(1, 2, requires_grad=True)
    logp = torch.log_softmax(logits, -1)[:, :1]  # the sampled token is token 0
    loss, _ = policy_loss(
        logp, logp.detach(), torch.tensor([1.0]), torch.ones(1, 1), TrainerConfig()
    )
    loss.backward()
    assert logits.grad[0, 0] < 0 < logits.grad[0, 1]  # descending raises token 0's logit


def test_an_unknown_sampling_logprob_gives_the_plain_policy_gradient():
    """A format-constrained token (NaN old log-probability, see `engine.base.policy_logprobs`): the
    engine's 0.0 (the layout forced it) would make the ratio 0.05 and clip a negative
    advantage's gradient away; NaN makes it 1, with the gradient of -A * logp."""
    for advantage in (1.0, -1.0):
        logits = torch.log(torch.tensor([[0.05, 0.95]])).requires_grad_(True)
        logp = torch.log_softmax(logits, -1)[:, :1]  # the sampled (forced) token is token 0
        adv = torch.tensor([advantage])
        loss, stats = policy_loss(logp, torch.full((1, 1), math.nan), adv, torch.ones(1, 1),
                                  TrainerConfig())  # fmt: skip
        assert stats["ratio_mean"] == pytest.approx(1.0) and stats["clip_fraction"] == 0.0
        (grad,) = torch.autograd.grad(loss, logits, retain_graph=True)
        expected = torch.autograd.grad(-advantage * logp.sum(), logits, retain_graph=True)[0]
        assert torch.allclose(grad, expected)
        engine, _ = policy_loss(logp, torch.zeros(1, 1), adv, torch.ones(1, 1), TrainerConfig())
        if advantage < 0:  # what the engine's constrained log-probability did
            assert torch.autograd.grad(engine, logits)[0].abs().max() == 0
