"""One adapter per role (`trainer.lora.per_role`): each role's update stays in its adapter,
each role generates with its own, a checkpoint's model is the solver's and resumes both."""

from __future__ import annotations

from dataclasses import replace
from types import SimpleNamespace

import pytest
import torch
from accelerate import Accelerator

from selfplay import stages
from selfplay.config import ConfigError, LoraConfig, TrainerConfig, load
from selfplay.engine.adapters import merged
from selfplay.engine.weights import merged_weights
from selfplay.trainer.checkpoint import Checkpoints
from selfplay.trainer.lora import activate, per_role, role_parameters, wrap
from selfplay.trainer.update import policy_update
from tests.trainer.test_lora import randomised
from tests.trainer.test_trainer_update import rollouts, tiny_model

PER_ROLE = LoraConfig(rank=4, alpha=8.0, per_role=True)


def per_role_model():
    return randomised(wrap(tiny_model(), PER_ROLE))


def mixed(model) -> list:
    """Three proposals and three answers."""
    return [replace(r, role="propose") if i < 3 else r for i, r in enumerate(rollouts(model))]


def snapshot(model, role: str) -> list[torch.Tensor]:
    return [p.detach().clone() for p in role_parameters(model, role)]


def update(model, data, advantages, max_grad_norm=1e9, kl_coef=0.0):
    optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    settings = TrainerConfig(max_grad_norm=max_grad_norm, micro_batch=4, kl_coef=kl_coef)
    reference = None
    if kl_coef:
        from selfplay.trainer.lora import AdapterlessReference

        reference = AdapterlessReference(model)
    return policy_update(
        Accelerator(cpu=True), model, optimizer, scheduler, data, advantages, settings, 0,
        reference,
    )  # fmt: skip


def test_needs_adapters():
    with pytest.raises(ConfigError, match="per_role needs adapters"):
        load(None, ["trainer.lora.per_role=true"])
    assert load(None, ["trainer.lora.rank=4", "trainer.lora.per_role=true"]).trainer.lora.per_role


def test_two_adapters_both_trainable():
    model = wrap(tiny_model(), PER_ROLE)
    assert per_role(model) and not per_role(wrap(tiny_model(), LoraConfig(rank=4)))
    assert model.active_adapter == "solve"
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    assert any(".solve." in n for n in names) and any(".propose." in n for n in names)
    assert all(".lora_" in n for n in names)
    assert len(role_parameters(model, "solve")) == len(role_parameters(model, "propose")) > 0


@pytest.mark.parametrize("max_grad_norm", [1e9, 1e-3])
def test_the_proposers_rollouts_do_not_reach_the_solvers_adapter(max_grad_norm):
    """The solver's adapter takes the same step whether the step also holds proposals (with a
    gradient 100 times the answers', under a clip that binds) or not: each role's loss is
    divided by its own token count and clipped on its own. The proposer's adapter moves only
    with proposals."""
    data = mixed(tiny_model())
    answers = [1.0, -0.5, 1.5]
    both = [100.0, -100.0, 50.0, *answers]
    trained, alone = per_role_model(), per_role_model()
    propose_start = snapshot(trained, "propose")
    stats = update(trained, data, both, max_grad_norm)
    alone_stats = update(alone, data[3:], answers, max_grad_norm)
    # each adapter's norm before the clip is reported; the solver's is the one it had alone
    assert stats["grad_norm_solve"] == pytest.approx(alone_stats["grad_norm_solve"], rel=1e-5)
    assert stats["grad_norm_propose"] > 10 * stats["grad_norm_solve"]
    assert alone_stats["grad_norm_propose"] == 0.0
    assert stats["grad_norm"] == pytest.approx(
        (stats["grad_norm_solve"] ** 2 + stats["grad_norm_propose"] ** 2) ** 0.5
    )
    for a, b in zip(snapshot(trained, "solve"), snapshot(alone, "solve"), strict=True):
        assert torch.allclose(a, b, atol=1e-6)
    untouched = snapshot(per_role_model(), "solve")
    assert any(not torch.equal(a, b) for a, b in zip(snapshot(alone, "solve"), untouched))
    assert all(torch.equal(a, b) for a, b in zip(snapshot(alone, "propose"), propose_start))
    assert any(not torch.equal(a, b) for a, b in zip(snapshot(trained, "propose"), propose_start))


def test_each_role_is_trained_through_its_own_adapter():
    """A proposal's gradient is that of the proposer's policy: updating a per-role model on
    proposals alone moves its proposer adapter as a one-adapter model holding the same
    weights moves its own."""
    data = [replace(r, role="propose") for r in rollouts(tiny_model())]
    advantages = [1.0, -1.0, 0.5, -0.5, 2.0, -2.0]
    model = per_role_model()
    single = randomised(wrap(tiny_model(), LoraConfig(rank=4, alpha=8.0)))
    with torch.no_grad():  # the single adapter made the proposer's
        own = [p for n, p in single.named_parameters() if ".lora_" in n]
        for target, source in zip(own, role_parameters(model, "propose"), strict=True):
            target.copy_(source)
    update(model, data, advantages)
    update(single, data, advantages)
    own = [p for n, p in single.named_parameters() if ".lora_" in n]
    for a, b in zip(role_parameters(model, "propose"), own, strict=True):
        assert torch.allclose(a, b, atol=1e-6)


def test_the_kl_term_runs_through_each_rollouts_adapter():
    """With the KL term on and no advantage, each adapter is pulled toward the base by its own
    role's rollouts: KL per role is reported, and proposals alone leave the solver's adapter
    where it was."""
    data = [replace(r, role="propose") for r in rollouts(tiny_model())]
    model = per_role_model()
    solve_start = snapshot(model, "solve")
    stats = update(model, data, [0.0] * len(data), kl_coef=0.5)
    assert stats["kl_ref_propose"] > 0 and "kl_ref_solve" not in stats
    assert all(torch.equal(a, b) for a, b in zip(snapshot(model, "solve"), solve_start))


class RecordingEngine:
    """Records the weights each `load_weights` call hands over (what a vLLM engine gets)."""

    def __init__(self):
        self.loads = []

    def load_weights(self, model):
        self.loads.append(dict((n, t.clone()) for n, t in merged_weights(model)))


def test_each_role_generates_with_its_own_merged_adapter():
    model = per_role_model()
    engine = RecordingEngine()
    config = load(None, ["trainer.lora.rank=4", "trainer.lora.per_role=true"])
    run = SimpleNamespace(
        config=config, accelerator=Accelerator(cpu=True), model=model, engine=engine,
        engine_role=None,
    )  # fmt: skip
    stages.use_role(run, "propose")
    stages.use_role(run, "propose")  # already loaded: no second load
    stages.use_role(run, "solve")
    assert len(engine.loads) == 2 and run.engine_role == "solve"
    assert model.active_adapter == "solve"
    activate(model, "propose")
    expected = dict(merged_weights(model))
    name = "model.layers.0.self_attn.q_proj.weight"
    assert torch.equal(engine.loads[0][name], expected[name])
    assert not torch.equal(engine.loads[1][name], expected[name])
    activate(model, "solve")
    assert torch.equal(engine.loads[1][name], dict(merged_weights(model))[name])
    stages.sync(run)  # after an update each role's weights load when it next generates
    assert len(engine.loads) == 2


def test_a_checkpoint_saves_the_solver_and_resumes_both(tmp_path):
    from safetensors.torch import load_file

    model = per_role_model()
    accelerator = Accelerator(cpu=True)
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-3)
    prepared, optimizer = accelerator.prepare(model, optimizer)
    update_with(model, optimizer)  # both adapters get optimizer state
    activate(model, "propose")  # whatever the last stage used
    base = tmp_path / "base"
    tiny_model().save_pretrained(base)  # the weights the adapters sit on (the same seed)
    folder = Checkpoints(tmp_path, base_model=str(base)).save(accelerator, prepared, None, 5)
    moments = {role: [optimizer.state[p]["exp_avg"].clone() for p in role_parameters(model, role)]
               for role in ("solve", "propose")}  # fmt: skip
    assert model.active_adapter == "propose"  # saving the solver's changed nothing
    saved = load_file(str(merged(folder / "model") / "model.safetensors"))
    activate(model, "solve")
    solver = dict(merged_weights(model))
    assert saved.keys() == solver.keys() - {"lm_head.weight"}  # tied: saved once, as embeddings
    assert all(torch.equal(saved[k], solver[k]) for k in saved)
    activate(model, "propose")
    name = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(saved[name], dict(merged_weights(model))[name])  # not the proposer's
    fresh = wrap(tiny_model(), PER_ROLE)  # zero B: neither adapter is the saved one yet
    accelerator = Accelerator(cpu=True)
    optimizer = torch.optim.AdamW([p for p in fresh.parameters() if p.requires_grad], lr=1e-3)
    prepared, optimizer = accelerator.prepare(fresh, optimizer)
    Checkpoints(tmp_path).load(accelerator, folder)
    for role in ("solve", "propose"):
        for a, b in zip(role_parameters(fresh, role), role_parameters(model, role), strict=True):
            assert torch.equal(a, b), role
        resumed = [optimizer.state[p]["exp_avg"] for p in role_parameters(fresh, role)]
        assert all(m.abs().sum() > 0 for m in moments[role]), role
        assert all(torch.equal(a, b) for a, b in zip(resumed, moments[role], strict=True)), role


def update_with(model, optimizer):
    """One optimizer step on a proposal and an answer, through their adapters."""
    data = mixed(tiny_model())[2:4]
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda _: 1.0)
    policy_update(Accelerator(cpu=True), model, optimizer, scheduler, data, [1.0, -1.0],
                  TrainerConfig(), 0)  # fmt: skip


def test_embedding_adapters_belong_to_their_role():
    model = wrap(tiny_model(), replace(PER_ROLE, target_modules=("q_proj", "embed_tokens")))
    adapters = {id(p) for name, p in model.named_parameters() if ".lora_" in name}
    solve, propose = (set(map(id, role_parameters(model, r))) for r in ("solve", "propose"))
    assert solve | propose == adapters and not solve & propose and len(solve) == len(propose)


def test_a_per_role_run_trains_both_adapters_and_resumes(tmp_path, formatted_model_dir):
    """The tiny model fine-tuned on the project's formats (`tests/test_loop.py`): its samples'
    rewards differ, so both adapters have a gradient."""
    import json

    from safetensors.torch import load_file

    from selfplay.runs import close_run, open_run
    from tests.trainer.test_lora import two_step_run

    args, kept = two_step_run(tmp_path, formatted_model_dir, "trainer.lora.per_role=true")
    folder = tmp_path / "run"
    state_file = folder / "checkpoints" / "step-000002" / "state" / "model.safetensors"
    assert any(".solve." in k for k in kept) and any(".propose." in k for k in kept)
    metrics = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
    # both roles' rollouts went through the update (the KL term runs every rollout)
    assert any("update/kl_ref_solve" in m and "update/kl_ref_propose" in m for m in metrics)

    state, start = open_run(load(None, [*args, "run.steps=3"]))
    assert start == 3 and per_role(state.model)
    params = [p for group in state.optimizer.param_groups for p in group["params"]]
    assert len(params) == sum(1 for n, _ in state.model.named_parameters() if ".lora_" in n)
    saved = load_file(str(state_file))
    for role in ("solve", "propose"):  # B starts at zero: each adapter trained in the run
        assert any(t.abs().sum() > 0 for n, t in saved.items() if f"lora_B.{role}" in n), role
    current = state.model.state_dict()
    assert saved.keys() <= current.keys()
    assert all(torch.equal(current[name], tensor) for name, tensor in saved.items())
    close_run(state)
