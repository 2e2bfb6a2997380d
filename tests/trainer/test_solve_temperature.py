"""`generation.solve_temperature`: each role sampled, scored and updated at its own temperature."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch
from accelerate import Accelerator

from selfplay.config import TrainerConfig
from selfplay.trainer.update import collate, policy_update, token_logprobs
from selfplay.types import Rollout
from tests.trainer.test_trainer_update import tiny_model


def test_each_role_is_scored_at_its_own_temperature_in_one_batch():
    """`generation.solve_temperature`: a micro-batch mixing both roles scores the proposer's
    rows at the proposer's temperature and the solver's at the solver's, each exactly what a
    batch of that role alone gives; at one temperature for both it is the old scoring."""
    model = tiny_model()
    propose = Rollout("propose", "deduction", 0, (5, 6, 7), (8, 9), (-1.0, -1.0), 1.0)
    solve = Rollout("solve", "deduction", 1, (4, 3), (1, 2, 3), (-1.0,) * 3, 1.0)
    mixed = collate([propose, solve], [1.0, 1.0], pad_id=0)
    with torch.no_grad():
        both, _ = token_logprobs(model, mixed, 1.0, solve_temperature=0.4)
        alone_p, _ = token_logprobs(model, collate([propose], [1.0], pad_id=0), 1.0)
        alone_s, _ = token_logprobs(model, collate([solve], [1.0], pad_id=0), 0.4)
        same, _ = token_logprobs(model, mixed, 0.7, solve_temperature=0.7)
        old, _ = token_logprobs(model, mixed, 0.7)
    assert torch.allclose(both[0, :2], alone_p[0, :2], atol=1e-5)
    assert torch.allclose(both[1, :3], alone_s[0, :3], atol=1e-5)
    assert not torch.allclose(both[1, :3], token_logprobs(model, mixed)[0][1, :3].detach())
    assert torch.equal(same, old)


def test_an_update_at_each_roles_temperature_starts_at_ratio_one():
    """Rollouts of both roles whose log-probabilities are those of each role's temperature
    (as the engine reports them): the update told both temperatures starts at importance
    ratio 1 and KL 0 to a reference equal to the policy; told one, it does not."""
    model = tiny_model()
    data = []
    for k, (role, t) in enumerate([("propose", 1.0), ("solve", 0.4)] * 2):
        r = Rollout(role, "deduction", k, (5 + k, 6, 7), (8, 9, 10), (0.0,) * 3, 0.0)
        with torch.no_grad():
            logp, _ = token_logprobs(model, collate([r], [0.0], pad_id=0), t)
        data.append(replace(r, logprobs=tuple(logp[0].tolist()), reward=float(k % 2)))

    def update(solve_temperature):
        policy = copy.deepcopy(model)
        accelerator = Accelerator(cpu=True)
        optimizer = torch.optim.SGD(policy.parameters(), lr=0.1)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
        policy, optimizer, scheduler = accelerator.prepare(policy, optimizer, scheduler)
        settings = TrainerConfig(micro_batch=4, kl_coef=0.1)
        return policy_update(
            accelerator, policy, optimizer, scheduler, data, [1.0, -1.0, -1.0, 1.0], settings,
            0, copy.deepcopy(model), temperature=1.0, solve_temperature=solve_temperature,
        )  # fmt: skip

    right, wrong = update(0.4), update(None)
    assert right["ratio_mean"] == pytest.approx(1.0, abs=1e-5)
    assert right["approx_kl_old"] == pytest.approx(0.0, abs=1e-6)
    assert right["kl_ref"] == pytest.approx(0.0, abs=1e-6)
    assert abs(wrong["ratio_mean"] - 1.0) > 1e-2


def test_sampling_takes_each_roles_temperature():
    from selfplay.config import ConfigError, GenerationConfig
    from selfplay.engine import sampling

    both = GenerationConfig(temperature=0.8)
    assert sampling(both, 2, role="solve").temperature == 0.8
    own = GenerationConfig(temperature=0.8, solve_temperature=0.3)
    assert sampling(own, 2).temperature == 0.8  # proposals
    assert sampling(own, 2, role="solve").temperature == 0.3
    assert sampling(GenerationConfig(solve_temperature=0), 2, role="solve").temperature == 0
    with pytest.raises(ConfigError, match="solve_temperature"):
        GenerationConfig(solve_temperature=-0.5)


def test_a_proposer_and_a_solver_prompt_of_the_same_text_have_rows_of_their_own():
    """A row is scored at its role's temperature, so rollouts of both roles whose prompts are
    the same tokens must not share one: each is scored as a batch of its role alone."""
    model = tiny_model()
    propose = Rollout("propose", "deduction", 0, (5, 6, 7), (8, 9), (-1.0, -1.0), 1.0)
    solve = Rollout("solve", "deduction", 1, (5, 6, 7), (1, 2, 3), (-1.0,) * 3, 1.0)
    mixed = collate([propose, solve], [1.0, 1.0], pad_id=0)
    assert mixed.input_ids.shape[0] == 2
    with torch.no_grad():
        both, _ = token_logprobs(model, mixed, 1.0, solve_temperature=0.4)
        alone_p, _ = token_logprobs(model, collate([propose], [1.0], pad_id=0), 1.0)
        alone_s, _ = token_logprobs(model, collate([solve], [1.0], pad_id=0), 0.4)
    assert torch.allclose(both[0, :2], alone_p[0, :2], atol=1e-5)
    assert torch.allclose(both[1, :3], alone_s[0, :3], atol=1e-5)
