"""LoRA training (`trainer.lora`): configuration, merged weights, the update, a run and resume."""

from __future__ import annotations

import copy

import pytest
import torch
from accelerate import Accelerator

from selfplay.config import ConfigError, LoraConfig, TrainerConfig, load
from selfplay.trainer.lora import AdapterlessReference, is_lora, merged_weights, wrap
from selfplay.trainer.update import collate, policy_update, token_logprobs
from tests.trainer.test_trainer_update import rollouts, tiny_model

LORA = LoraConfig(rank=4, alpha=8.0)


def randomised(model):
    """`model` with random adapters: peft starts B at zero, where merging changes nothing."""
    torch.manual_seed(3)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn_like(p) * 0.3)
    return model


@pytest.mark.parametrize(
    "override, message",
    [
        ("trainer.lora.rank=-1", "rank must be 0"),
        ("trainer.lora.alpha=0", "alpha must be positive"),
        ("trainer.lora.dropout=1.0", "dropout must be in"),
        ("trainer.lora.target_modules=[]", "at least one module"),
        ("trainer.lora.ranks=4", "unknown config key trainer.lora.ranks"),
    ],
)
def test_bad_settings_are_refused(override, message):
    with pytest.raises(ConfigError, match=message):
        load(None, [override])


def test_off_by_default_and_on_with_a_rank():
    assert not load(None, []).trainer.lora.enabled
    lora = load(None, ["trainer.lora.rank=8", "trainer.lora.target_modules=[q_proj]"]).trainer.lora
    assert lora.enabled and lora.target_modules == ("q_proj",)


def test_target_modules_must_exist():
    with pytest.raises(ConfigError, match="qkv_proj"):
        wrap(tiny_model(), LoraConfig(rank=4, target_modules=("q_proj", "qkv_proj")))


def test_merged_weights_equal_peft_merge_and_unload():
    model = randomised(wrap(tiny_model(), LORA))
    ours = dict(merged_weights(model))
    theirs = copy.deepcopy(model).merge_and_unload().state_dict()
    assert ours.keys() == theirs.keys()
    assert not any("lora" in k or "base_layer" in k for k in ours)
    for name, tensor in theirs.items():
        assert torch.allclose(ours[name], tensor, atol=1e-6, rtol=0), name
    base = tiny_model().state_dict()
    assert not torch.equal(
        ours["model.layers.0.mlp.down_proj.weight"], base["model.layers.0.mlp.down_proj.weight"]
    )  # the adapters are in it


def test_only_the_adapters_train():
    model = wrap(tiny_model(), LORA)
    base = {k: v.clone() for k, v in model.state_dict().items() if "lora_" not in k}
    lora = {k: v.clone() for k, v in model.state_dict().items() if "lora_" in k}
    assert all(("lora_" in n) == p.requires_grad for n, p in model.named_parameters())
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-2)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    data = rollouts(tiny_model())
    advantages = [1.0, -1.0] * 3
    stats = policy_update(
        Accelerator(cpu=True), model, optimizer, scheduler, data, advantages,
        TrainerConfig(lr=1e-2), pad_id=0,
    )  # fmt: skip
    assert stats["optimizer_steps"] == 1
    after = model.state_dict()
    assert all(torch.equal(after[k], v) for k, v in base.items())
    assert any(not torch.equal(after[k], v) for k, v in lora.items())


def test_adapters_train_under_gradient_checkpointing():
    """Frozen embeddings give the checkpointed layers no input that requires a gradient,
    which reentrant checkpointing (transformers 4's default) needs; the adapters still get
    gradients."""
    from selfplay.loop import _with_adapters

    model = tiny_model()
    model.gradient_checkpointing_enable()
    model = _with_adapters(model, TrainerConfig(gradient_checkpointing=True, lora=LORA))
    data = rollouts(tiny_model())
    model.train()
    batch = collate(data, [1.0, -1.0] * 3, pad_id=0)
    logp, _ = token_logprobs(model, batch)
    (logp * batch.mask * batch.advantages[:, None]).sum().backward()
    grads = [p.grad for n, p in model.named_parameters() if "lora_B" in n]
    assert grads and all(g is not None and g.abs().sum() > 0 for g in grads)


def test_the_kl_reference_is_the_base_model():
    model = randomised(wrap(tiny_model(), LORA))
    data = rollouts(tiny_model())
    batch = collate(data, [0.0] * len(data), pad_id=0)
    inputs = dict(input_ids=batch.input_ids, attention_mask=batch.attention_mask)
    with torch.no_grad():
        expected = tiny_model()(**inputs).logits
        adapted = model(**inputs).logits
        reference = AdapterlessReference(model)(**inputs).logits
    assert torch.allclose(reference, expected, atol=1e-6)
    assert not torch.allclose(adapted, expected, atol=1e-3)
    assert model.training  # the reference's eval mode does not stick


def test_a_lora_run_checkpoints_and_resumes(tmp_path, tiny_model_dir):
    from transformers import AutoModelForCausalLM

    from selfplay.eval.commands import resolve_model
    from selfplay.loop import _resolved, close_run, open_run, run
    from selfplay.trainer.checkpoint import Checkpoints
    from tests.test_loop import overrides, seed_pool

    folder = tmp_path / "run"
    folder.mkdir()
    args = [
        *overrides(folder, tiny_model_dir, steps=2),
        "trainer.lora.rank=4",
        "trainer.kl_coef=0.01",
    ]
    config = load(None, args)
    seed_pool(_resolved(config, folder))
    with open(tmp_path / "out.txt", "w") as out:
        run(config, out=out)
    assert (folder / "checkpoints" / "step-000002" / "model" / "model.safetensors").exists()

    # resumed: adapters only in the optimizer; perturbed adapters survive a checkpoint
    state, start = open_run(load(None, [*args, "run.steps=3"]))
    assert start == 3 and is_lora(state.model)
    params = [p for group in state.optimizer.param_groups for p in group["params"]]
    assert params and all(p.requires_grad for p in params)
    assert len(params) == sum(1 for n, _ in state.model.named_parameters() if "lora_" in n)
    randomised(state.model)
    saved = {k: v.clone() for k, v in state.model.state_dict().items()}
    merged = {k: v.clone() for k, v in merged_weights(state.model)}
    Checkpoints(folder).save(state.accelerator, state.model, state.tokenizer, 3)
    close_run(state)
    state, start = open_run(load(None, [*args, "run.steps=4"]))
    assert start == 4
    assert all(torch.equal(v, saved[k]) for k, v in state.model.state_dict().items())
    close_run(state)

    # evaluation loads the checkpoint's merged model, a plain transformers model
    _, source = resolve_model(str(folder), [])
    plain = AutoModelForCausalLM.from_pretrained(source)
    for name, tensor in plain.state_dict().items():
        assert torch.equal(tensor, merged[name]), name
