"""The optimizer step on a tiny real model: parameters move, micro-batching is exact."""

from __future__ import annotations

import copy
from dataclasses import replace

import pytest
import torch
from accelerate import Accelerator
from transformers import LlamaConfig, LlamaForCausalLM

from selfplay.config import TrainerConfig
from selfplay.trainer.update import collate, policy_update, token_logprobs
from selfplay.trainer.update_stats import propose_share, solve_shares
from selfplay.types import Rollout


def tiny_model(seed: int = 0) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(config)


def rollouts(model, count: int = 6) -> list[Rollout]:
    """Completions with their true log-probabilities under `model` (as an engine reports)."""
    g = torch.Generator().manual_seed(1)
    out = []
    for i in range(count):
        prompt = torch.randint(1, 64, (3 + i % 3,), generator=g).tolist()
        completion = torch.randint(1, 64, (2 + i % 4,), generator=g).tolist()
        batch = collate(
            [
                Rollout(
                    "solve",
                    "deduction",
                    i,
                    tuple(prompt),
                    tuple(completion),
                    (0.0,) * len(completion),
                    0.0,
                )
            ],
            [0.0],
            pad_id=0,
        )
        with torch.no_grad():
            logp, _ = token_logprobs(model, batch)
        old = tuple(logp[0][batch.mask[0] > 0].tolist())
        out.append(
            Rollout("solve", "deduction", i, tuple(prompt), tuple(completion), old, float(i % 2))
        )
    return out


def train_once(
    model,
    data,
    advantages,
    micro_batch: int,
    lr: float = 0.5,
    kl_coef=0.0,
    reference=None,
    share_prompts: bool = True,
    propose_weight: float = 1.0,
    propose_kl_weight: float = 1.0,
    aggregation: str = "token",
    mini_batches: int = 1,
    ppo_epochs: int = 1,
    entropy_coef: float = 0.0,
) -> dict:
    accelerator = Accelerator(cpu=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=lr)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    settings = TrainerConfig(
        micro_batch=micro_batch,
        max_grad_norm=1e9,
        kl_coef=kl_coef,
        share_prompts=share_prompts,
        propose_weight=propose_weight,
        propose_kl_weight=propose_kl_weight,
        aggregation=aggregation,
        mini_batches=mini_batches,
        ppo_epochs=ppo_epochs,
        entropy_coef=entropy_coef,
    )
    return policy_update(
        accelerator, model, optimizer, scheduler, data, advantages, settings, 0, reference
    )


def test_collate_puts_a_prompt_once_before_its_completions():
    a = Rollout("solve", "deduction", 0, (5, 6, 7), (8, 9), (-0.5, -0.25), 1.0)
    b = Rollout("solve", "deduction", 0, (5, 6, 7), (10,), (-2.0,), 1.0)
    c = Rollout("solve", "deduction", 1, (4,), (1, 2, 3), (-1.0, -2.0, -3.0), 1.0)
    batch = collate([a, b, c], [1.0, 1.0, 1.0], pad_id=0)
    assert batch.input_ids.tolist() == [[5, 6, 7, 8, 9, 10], [0, 0, 4, 1, 2, 3]]  # left-padded
    assert batch.position_ids.tolist() == [[0, 1, 2, 3, 4, 3], [0, 0, 0, 1, 2, 3]]
    assert batch.row.tolist() == [0, 0, 1]
    assert batch.keep == 4  # the last 4 positions: each row's completions and the token before
    # kept index i is position 2 + i: the prompt's last token predicts every first token
    assert batch.source.tolist() == [[0, 1, 0], [0, 0, 0], [0, 1, 2]]
    assert batch.targets.tolist() == [[8, 9, 0], [10, 0, 0], [1, 2, 3]]
    assert batch.mask.tolist() == [[1, 1, 0], [1, 0, 0], [1, 1, 1]]
    assert batch.old_logp.tolist() == [[-0.5, -0.25, 0], [-2.0, 0, 0], [-1.0, -2.0, -3.0]]
    sees = batch.attention_mask[0, 0]
    assert sees[5].tolist() == [True, True, True, False, False, True]  # 10: prompt and itself
    assert sees[4].tolist() == [True, True, True, True, True, False]  # 9: prompt, 8, itself
    assert not batch.attention_mask[1, 0, 2:, :2].any()  # no token sees the padding
    alone = collate([a, b, c], [1.0] * 3, pad_id=0, share_prompts=False)
    assert alone.input_ids.shape[0] == 3 and alone.row.tolist() == [0, 1, 2]


def grouped_rollouts(model, prompts: int = 3, per_prompt: int = 3) -> list[Rollout]:
    """Several completions of each prompt (a GRPO group), of different lengths."""
    g = torch.Generator().manual_seed(2)
    out = []
    for p in range(prompts):
        prompt = tuple(torch.randint(1, 64, (4 + 3 * p,), generator=g).tolist())
        for j in range(per_prompt):
            completion = tuple(torch.randint(1, 64, (1 + (j * 2 + p) % 5,), generator=g).tolist())
            logp = (0.0,) * len(completion)
            out.append(Rollout("solve", "deduction", p, prompt, completion, logp, 0.0))
    return out


@pytest.mark.parametrize("attention", ["sdpa", "eager"])
def test_shared_prompts_score_and_train_as_separate_sequences(attention):
    """A group's completions packed behind one copy of their prompt get the log-probabilities
    and the gradient that each would get in a sequence of its own."""
    model = tiny_model()
    model.config._attn_implementation = attention
    data = grouped_rollouts(model)
    advantages = torch.linspace(-1.0, 1.0, len(data))
    scored = {}
    for shared in (True, False):
        model.zero_grad()
        batch = collate(data, advantages.tolist(), 0, share_prompts=shared, attention=attention)
        logp, entropy = token_logprobs(model, batch)
        (logp * batch.mask * batch.advantages.unsqueeze(-1)).sum().backward()
        grads = [p.grad.clone() for p in model.parameters()]
        scored[shared] = (logp.detach() * batch.mask, entropy * batch.mask, grads)
    assert collate(data, advantages.tolist(), 0).input_ids.shape[0] == 3  # one row a prompt
    (logp, entropy, grads), (alone_logp, alone_entropy, alone_grads) = scored[True], scored[False]
    assert torch.allclose(logp, alone_logp, atol=1e-5)
    assert torch.allclose(entropy, alone_entropy, atol=1e-5)
    for g, h in zip(grads, alone_grads, strict=True):
        assert torch.allclose(g, h, atol=1e-5, rtol=1e-4)


def test_sharing_prompts_gives_the_same_update():
    data = grouped_rollouts(tiny_model())
    advantages = [1.0, -0.5, 0.25, -1.0, 2.0, 0.0, 0.5, -2.0, 1.5]
    shared, alone = tiny_model(), tiny_model()
    train_once(shared, data, advantages, micro_batch=4)
    train_once(alone, data, advantages, micro_batch=4, share_prompts=False)
    for (name, a), b in zip(shared.state_dict().items(), alone.state_dict().values(), strict=True):
        assert torch.allclose(a, b, atol=1e-5), name


def test_zero_advantage_rollouts_change_nothing_and_cost_nothing():
    data = rollouts(tiny_model())
    advantages = [1.0, 0.0, -0.5, 0.0, 2.0, 0.0]
    skipping, reference = tiny_model(), tiny_model()
    stats = train_once(skipping, data, advantages, micro_batch=2)
    assert stats["zero_advantage_skipped"] == 3
    signal = sum(len(r.completion_ids) for r, a in zip(data, advantages) if a != 0)
    assert stats["signal_tokens"] == signal < stats["tokens"]
    # the same step with those rollouts run through the model at a negligible advantage
    train_once(reference, data, [a if a else 1e-30 for a in advantages], micro_batch=2)
    for (name, a), b in zip(
        skipping.state_dict().items(), reference.state_dict().values(), strict=True
    ):
        assert torch.allclose(a, b, atol=1e-6), name


def test_no_signal_no_step():
    model = tiny_model()
    before = copy.deepcopy(model.state_dict())
    stats = train_once(model, rollouts(model), [0.0] * 6, micro_batch=2)
    assert stats["optimizer_steps"] == 0
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())


def test_parameters_change_and_stats_are_reported():
    model = tiny_model()
    before = copy.deepcopy(model.state_dict())
    data = rollouts(model)
    stats = train_once(model, data, [1.0, -1.0] * 3, micro_batch=2)
    changed = [k for k, v in model.state_dict().items() if not torch.equal(v, before[k])]
    assert changed, "a training step must change the parameters"
    assert stats["ratio_mean"] == pytest.approx(1.0, abs=1e-4)  # on-policy first step
    assert stats["clip_fraction"] == 0.0 and stats["entropy"] > 0 and stats["grad_norm"] > 0


def test_micro_batching_gives_the_same_step():
    data = rollouts(tiny_model())
    advantages = [1.0, -0.5, 0.25, -1.0, 2.0, 0.0]
    one, whole = tiny_model(), tiny_model()
    train_once(one, data, advantages, micro_batch=1)
    train_once(whole, data, advantages, micro_batch=len(data))
    for (name, a), b in zip(one.state_dict().items(), whole.state_dict().values(), strict=True):
        assert torch.allclose(a, b, atol=1e-5), name


def test_positive_advantage_raises_the_sampled_tokens_probability():
    model = tiny_model()
    data = rollouts(model, count=1)
    train_once(model, data, [1.0], micro_batch=1, lr=0.05)
    batch = collate(data, [1.0], pad_id=0)
    with torch.no_grad():
        logp, _ = token_logprobs(model, batch)
    assert logp[batch.mask > 0].sum() > batch.old_logp[batch.mask > 0].sum()


@pytest.mark.parametrize("aggregation", ["token", "sequence"])
def test_kl_to_the_reference_pulls_the_policy_back(aggregation):
    """With every advantage 0, only the KL term acts: it moves the policy towards the
    reference, and zero-advantage rollouts are no longer skipped. The KL reported is the mean
    per token whatever the loss's aggregation (the completions differ in length, so a mean of
    per-completion means would differ)."""
    model, reference = tiny_model(seed=0), tiny_model(seed=1)
    data = rollouts(model)
    with pytest.raises(ValueError, match="reference"):
        train_once(tiny_model(), data, [0.0] * 6, micro_batch=2, kl_coef=0.1)

    def kl() -> float:
        batch = collate(data, [0.0] * 6, pad_id=0)
        with torch.no_grad():
            new, _ = token_logprobs(model, batch)
            ref, _ = token_logprobs(reference, batch)
        delta = (ref - new)[batch.mask > 0]
        return float((delta.exp() - delta - 1).mean())

    before = kl()
    kl_only = {"lr": 0.05, "kl_coef": 1.0, "reference": reference, "aggregation": aggregation}
    stats = train_once(model, data, [0.0] * 6, 2, **kl_only)
    assert stats["zero_advantage_skipped"] == 0 and stats["optimizer_steps"] == 1
    assert stats["kl_ref"] == pytest.approx(before, rel=1e-4)
    assert kl() < before
    # over two mini-batches of unequal tokens and two epochs, at a rate of 0 (the KL stays),
    # still the mean per token of the whole update
    now = kl()
    kl_only["lr"] = 0.0
    stats = train_once(model, data, [0.0] * 6, 1, mini_batches=2, ppo_epochs=2, **kl_only)
    assert stats["optimizer_steps"] == 4
    assert stats["kl_ref"] == pytest.approx(now, rel=1e-4)


def _mean_entropy(model, data) -> float:
    batch = collate(data, [0.0] * len(data), pad_id=0)
    with torch.no_grad():
        _, entropy = token_logprobs(model, batch)
    return float(entropy[batch.mask > 0].mean())


@pytest.mark.parametrize("aggregation", ["token", "sequence"])
def test_the_entropy_bonus_widens_the_policy_and_keeps_zero_advantage_rollouts(aggregation):
    """With every advantage 0, only the entropy bonus acts: no rollout is skipped, the loss is
    minus the weight times the aggregated entropy, and the step raises the entropy. Cut into
    micro-batches it is the same step."""
    model, split = tiny_model(), tiny_model()
    data = rollouts(model)
    before = _mean_entropy(model, data)
    bonus = {"lr": 0.5, "entropy_coef": 0.5, "aggregation": aggregation}
    stats = train_once(model, data, [0.0] * 6, micro_batch=6, **bonus)
    assert stats["zero_advantage_skipped"] == 0 and stats["optimizer_steps"] == 1
    assert stats["signal_tokens"] == stats["tokens"]
    if aggregation == "token":
        assert stats["loss"] == pytest.approx(-0.5 * before, rel=1e-4)
    assert stats["loss"] < 0 and _mean_entropy(model, data) > before
    train_once(split, data, [0.0] * 6, micro_batch=1, **bonus)
    for (name, a), b in zip(model.state_dict().items(), split.state_dict().values(), strict=True):
        assert torch.allclose(a, b, atol=1e-5), name
    # without the bonus the same rollouts are skipped and nothing moves
    assert train_once(tiny_model(), data, [0.0] * 6, micro_batch=6)["optimizer_steps"] == 0


def test_the_entropy_reported_is_per_token_over_the_update_however_it_is_cut():
    """The controllers read `entropy`: the mean over every completion token, not a mean of
    micro-batch means (micro-batches are sorted by length, so those would weigh a short
    answer's tokens more). The rollouts differ in length, so the two would differ."""
    data = rollouts(tiny_model())
    want = _mean_entropy(tiny_model(), data)
    for micro_batch in (1, 4, 6):
        stats = train_once(tiny_model(), data, [1.0] * 6, micro_batch=micro_batch, lr=0.0)
        assert stats["entropy"] == pytest.approx(want, rel=1e-5)


def test_the_entropy_gradient_is_autograds_and_keeps_zero_advantage_rollouts_while_it_adapts():
    from selfplay.trainer.loss import zero_advantage_adds_nothing
    from selfplay.trainer.update import _Entropy

    logits = torch.randn(2, 3, 11, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(2, 3, dtype=torch.float64)
    logp = torch.log_softmax(logits, -1)
    (ours,) = torch.autograd.grad((_Entropy.apply(logp) * weights).sum(), logits)
    logp = torch.log_softmax(logits, -1)
    (plain,) = torch.autograd.grad((-(logp.exp() * logp).sum(-1) * weights).sum(), logits)
    assert torch.allclose(ours, plain, atol=1e-12)
    assert zero_advantage_adds_nothing(TrainerConfig())
    for setting in ({"kl_coef": 0.1}, {"entropy_coef": 0.1}, {"entropy_target": 0.5}):
        assert not zero_advantage_adds_nothing(TrainerConfig(**setting)), setting


def test_mini_batches_mix_short_and_long_rollouts_and_are_sorted_within():
    """Sorted-then-cut mini-batches put all short answers in one optimizer step and all long
    proposals in the other; a seeded shuffle mixes them, each mini-batch sorted for padding."""
    import random

    from selfplay.trainer.update import _mini_batches

    lengths = [10] * 8 + [200] * 8
    minis = _mini_batches(lengths, 2, random.Random(0))
    assert sorted(i for m in minis for i in m) == list(range(16))
    for mini in minis:
        assert 0 < sum(lengths[i] == 10 for i in mini) < len(mini)
        assert [lengths[i] for i in mini] == sorted(lengths[i] for i in mini)
    assert minis == _mini_batches(lengths, 2, random.Random(0))
    assert minis != _mini_batches(lengths, 2, random.Random(1))


def test_the_reported_learning_rate_is_the_one_the_step_used():
    """With a warm-up of 4 optimizer steps, the first update (one step) reports lr/4, the rate
    that step used, not the next step's lr/2; warm-up counts optimizer steps."""
    model = tiny_model()
    data = rollouts(model)
    accelerator = Accelerator(cpu=True)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.4)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: min(1.0, (s + 1) / 4))
    settings = TrainerConfig(micro_batch=2, max_grad_norm=1e9, mini_batches=2)
    advantages = [1.0, -1.0] * 3
    first = policy_update(accelerator, model, optimizer, scheduler, data, advantages, settings, 0)
    assert first["optimizer_steps"] == 2
    assert first["lr"] == pytest.approx(0.2)  # the second step's rate: 0.4 * 2/4
    second = policy_update(accelerator, model, optimizer, scheduler, data, advantages, settings, 0)
    assert second["lr"] == pytest.approx(0.4)


def test_the_proposers_share_of_the_update_follows_the_aggregation():
    def rollout(role, tokens, advantage):
        ids = tuple(range(1, tokens + 1))
        return Rollout(role, "deduction", 0, (1,), ids, (0.0,) * tokens, 0.0, advantage)

    # one proposal of 8 tokens and four answers of 2, advantages of the same size: by token
    # the proposal carries half of the weight, by sequence one fifth; a zero advantage nothing
    batch = [rollout("propose", 8, -1.0), rollout("propose", 30, 0.0)]
    batch += [rollout("solve", 2, a) for a in (1.0, -1.0, 1.0, -1.0)]
    assert propose_share(batch, "token") == 0.5
    assert propose_share(batch, "sequence") == 0.2
    assert propose_share(batch, "token", propose_weight=0.25) == pytest.approx(2 / 10)
    assert propose_share(batch, "token", propose_weight=0.0) == 0.0
    assert propose_share(batch[1:2], "token") is None  # no advantage weight, no share
    with pytest.raises(ValueError, match="aggregation"):
        propose_share(batch, "mean")
    model = tiny_model()
    stats = train_once(model, rollouts(model), [1.0, 0.0, -0.5, 0.0, 2.0, 0.0], micro_batch=2)
    assert stats["propose_share"] == 0.0  # answers alone
    assert stats["solve_share/deduction"] == 1.0  # all of them deduction answers


def test_each_task_types_share_of_the_solvers_update_follows_the_aggregation():
    def rollout(role, task_type, tokens, advantage):
        ids = tuple(range(1, tokens + 1))
        return Rollout(role, task_type, 0, (1,), ids, (0.0,) * tokens, 0.0, advantage)

    # an induction answer of 12 tokens against two deduction answers of 2 and one abduction
    # answer of 4, advantages of the same size; a proposal and a zero advantage count nothing
    batch = [rollout("propose", "deduction", 50, 1.0), rollout("solve", "abduction", 9, 0.0)]
    batch += [rollout("solve", "induction", 12, -1.0), rollout("solve", "abduction", 4, 1.0)]
    batch += [rollout("solve", "deduction", 2, a) for a in (1.0, -1.0)]
    assert solve_shares(batch, "token") == {"abduction": 0.2, "deduction": 0.2, "induction": 0.6}
    assert solve_shares(batch, "sequence") == {
        "abduction": 0.25,
        "deduction": 0.5,
        "induction": 0.25,
    }
    assert solve_shares(batch[:2], "token") == {}  # no answer with an advantage


@pytest.mark.parametrize("kl_coef", [0.0, 0.1])
def test_the_proposers_weight_scales_its_advantages_in_the_update(kl_coef):
    """The weight acts as advantages scaled by hand would, with the KL term on as well (which
    it leaves alone)."""
    model = tiny_model()
    data = [replace(r, role="propose") if i < 3 else r for i, r in enumerate(rollouts(model))]
    advantages = [1.0, -0.5, 2.0, -1.0, 0.5, 1.5]
    by_hand = [a * 0.25 if r.role == "propose" else a for r, a in zip(data, advantages)]
    reference = tiny_model(seed=1) if kl_coef else None
    kl = {"kl_coef": kl_coef, "reference": reference}
    weighted, scaled = tiny_model(), tiny_model()
    stats = train_once(weighted, data, advantages, micro_batch=2, propose_weight=0.25, **kl)
    train_once(scaled, data, by_hand, micro_batch=2, **kl)
    for (name, a), b in zip(weighted.state_dict().items(), scaled.state_dict().values()):
        assert torch.allclose(a, b, atol=1e-6), name
    expected = propose_share([replace(r, advantage=a) for r, a in zip(data, by_hand)], "token")
    assert stats["propose_share"] == pytest.approx(expected)
    silent = train_once(tiny_model(), data, advantages, micro_batch=2, propose_weight=0.0, **kl)
    assert silent["propose_share"] == 0.0
    assert silent["zero_advantage_skipped"] == (0 if kl_coef else 3)


@pytest.mark.parametrize("aggregation", ["token", "sequence"])
def test_the_proposers_kl_weight_scales_its_kl_term_alone(aggregation):
    """With no advantage, the KL term is the whole loss: at a proposal KL weight of 0 only the
    answers' KL moves the model, and the proposals' part of the step grows in proportion to
    their weight. The reported KL stays the unweighted one."""
    data = [
        replace(r, role="propose") if i < 3 else r for i, r in enumerate(rollouts(tiny_model()))
    ]
    zero = [0.0] * len(data)
    kl = {"kl_coef": 0.5, "reference": tiny_model(seed=1), "aggregation": aggregation}
    start = tiny_model()
    runs = {w: tiny_model() for w in (0.0, 1.0, 3.0)}
    stats = {w: train_once(m, data, zero, micro_batch=2, propose_kl_weight=w, **kl)
             for w, m in runs.items()}  # fmt: skip
    assert stats[0.0]["kl_ref"] == pytest.approx(stats[3.0]["kl_ref"])
    # the KL per role, per token: the whole is their token-weighted mean
    tokens = {role: sum(len(r.completion_ids) for r in data if r.role == role)
              for role in ("propose", "solve")}  # fmt: skip
    by_role = stats[1.0]["kl_ref_propose"] * tokens["propose"]
    by_role += stats[1.0]["kl_ref_solve"] * tokens["solve"]
    assert by_role / sum(tokens.values()) == pytest.approx(stats[1.0]["kl_ref"])
    assert stats[1.0]["kl_ref_propose"] != pytest.approx(stats[1.0]["kl_ref_solve"])
    steps = {}
    for w, model in runs.items():
        moved = [b - a for a, b in zip(start.state_dict().values(), model.state_dict().values())]
        steps[w] = torch.cat([m.flatten() for m in moved])
    assert steps[1.0].abs().max() > 0
    # the step is linear in the proposals' weight: w = 3 is w = 0 plus 3 times their part
    proposals = steps[1.0] - steps[0.0]
    assert proposals.abs().max() > 1e-6
    assert torch.allclose(steps[3.0], steps[0.0] + 3 * proposals, atol=1e-6)
