"""LoRA training (`trainer.lora`): configuration, merged weights, the update, a run and resume."""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from accelerate import Accelerator

from selfplay.config import ConfigError, LoraConfig, ModelConfig, TrainerConfig, load
from selfplay.engine.adapters import is_adapter_folder
from selfplay.engine.model import resolve
from selfplay.engine.weights import is_lora, merged_weights
from selfplay.trainer.lora import AdapterlessReference, wrap
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
        ("trainer.lora.alpha=0", "^trainer.lora.alpha must be positive$"),
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
    from selfplay.runs import _with_adapters

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


def two_step_run(tmp_path, model_dir, *more: str) -> tuple[list[str], set[str]]:
    """A 2-step LoRA run of the model in `model_dir` (rank 4, a KL term) with the overrides
    `more`: (its overrides, to resume it with, and the tensor names its step-2 state keeps)."""
    from safetensors import safe_open

    from selfplay.loop import run
    from selfplay.runs import _resolved
    from tests.test_loop import overrides, seed_pool

    folder = tmp_path / "run"
    folder.mkdir()
    args = [
        *overrides(folder, model_dir, steps=2),
        "trainer.lora.rank=4",
        "trainer.kl_coef=0.01",
        *more,
    ]
    seed_pool(_resolved(load(None, args), folder))
    with open(tmp_path / "out.txt", "w") as out:
        run(load(None, args), out=out)
    with safe_open(
        str(folder / "checkpoints" / "step-000002" / "state" / "model.safetensors"), "pt"
    ) as f:
        return args, set(f.keys())


def test_a_lora_run_checkpoints_and_resumes(tmp_path, tiny_model_dir):

    from selfplay.runs import close_run, open_run
    from selfplay.trainer.checkpoint import Checkpoints

    args, kept = two_step_run(tmp_path, tiny_model_dir)
    folder = tmp_path / "run"
    # the model folder is the solver's adapter in peft's format, on the run's model.name
    adapter = folder / "checkpoints" / "step-000002" / "model"
    assert is_adapter_folder(adapter) and not (adapter / "model.safetensors").exists()
    config = json.loads((adapter / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == str(tiny_model_dir) and config["r"] == 4
    # the resumable state keeps the adapters only: the base weights are the run's model
    assert kept and all(".lora_A." in k or ".lora_B." in k for k in kept)

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

    # a state whose adapters do not match the run's is refused, not half loaded
    from safetensors.torch import load_file, save_file

    latest = Checkpoints(folder).latest() / "state" / "model.safetensors"
    tensors = load_file(str(latest))
    save_file({k: v for k, v in list(tensors.items())[1:]}, str(latest))
    with pytest.raises(ValueError, match="adapter tensors missing"):
        open_run(load(None, [*args, "run.steps=5"]))
    save_file(tensors, str(latest))
    # so is one of another rank, said as such, and the run's config.yaml stays as it was
    recorded, before = (folder / "config.yaml").read_text(), sorted(folder.glob("config.*"))
    with pytest.raises(ValueError, match="was the run's trainer.lora changed"):
        open_run(load(None, [*args, "run.steps=5", "trainer.lora.rank=8"]))
    assert (folder / "config.yaml").read_text() == recorded
    assert sorted(folder.glob("config.*")) == before

    # a state written whole (as accelerate writes it without the hook) still resumes
    state, _ = open_run(load(None, [*args, "run.steps=5"]))
    state.accelerator.save_state(str(latest.parent))
    assert len(load_file(str(latest))) > len(tensors)
    close_run(state)
    state, start = open_run(load(None, [*args, "run.steps=5"]))
    assert start == 4
    assert all(torch.equal(v, saved[k]) for k, v in state.model.state_dict().items())
    close_run(state)

    # a folder with checkpoints resumes with its own pool only: none there is an error (the
    # pools it finds named), not a model of step 4 going on from an empty pool
    from selfplay.curriculum import StoreError

    other = tmp_path / "other.sqlite"
    config_text = (folder / "config.yaml").read_text()
    with pytest.raises(StoreError, match=r"no run named 'test' \(it holds: none\); point"):
        open_run(load(None, [*args, "run.steps=5", f"curriculum.store={other}"]))
    # refused before the model loads: the folder's config kept, no empty pool file made
    assert (folder / "config.yaml").read_text() == config_text and not other.exists()
    # the folder's own pool under another run name: the pool is renamed with the folder
    with pytest.raises(
        StoreError, match="it holds: test.*selfplay pool rename --store .* --run test copy"
    ):
        open_run(load(None, [*args, "run.steps=5", "curriculum.run=copy"]))
    # a pool elsewhere, copied: it resumes once its run has the run's name
    shutil.copy(folder / "pool.sqlite", other)
    copied = [*args, "run.steps=5", f"curriculum.store={other}", "curriculum.run=copy"]
    with pytest.raises(StoreError, match="it holds: test.*copy it too"):
        open_run(load(None, copied))
    rename = [sys.executable, "-m", "selfplay.cli", "pool", "rename", "--store", str(other)]
    done = subprocess.run([*rename, "copy"], capture_output=True, text=True)
    assert done.returncode == 0 and "'test' is now 'copy'" in done.stderr, done.stderr
    for bad, why in (
        (["--run", "copy", ""], "1 to 200 characters"),
        (["--run", "x", "y"], "no run named 'x'"),
    ):
        failed = subprocess.run([*rename, *bad], capture_output=True, text=True)
        assert failed.returncode == 1 and why in failed.stderr and "Traceback" not in failed.stderr
    template = [*rename[:-1], str(tmp_path / "{run}.sqlite"), "copy"]
    failed = subprocess.run(template, capture_output=True, text=True)
    assert failed.returncode == 1 and "not a template" in failed.stderr
    state, start = open_run(load(None, copied))
    assert start == 4 and state.store.local.run == "copy" and len(state.store.local) > 0
    close_run(state)
    again = subprocess.run([*rename, "--run", "copy", "copy"], capture_output=True, text=True)
    assert again.returncode == 1 and "already has a run named 'copy'" in again.stderr

    evaluation_merges_the_adapter(folder, merged, tiny_model_dir, tmp_path)


def evaluation_merges_the_adapter(folder, merged, tiny_model_dir, tmp_path):
    """Evaluation loads the latest checkpoint's adapter merged, once, into a plain transformers
    model equal to what the run pushed to vLLM (`merged`); peft loads the adapter too."""
    from transformers import AutoModelForCausalLM

    from selfplay.eval.commands import resolve_model
    from selfplay.trainer.checkpoint import Checkpoints

    _, source = resolve_model(str(folder), [])
    latest = Checkpoints(folder).latest() / "model"
    assert Path(source) == latest / "merged" and not list(latest.glob(".prepare-*"))
    plain = AutoModelForCausalLM.from_pretrained(source)
    for name, tensor in plain.state_dict().items():
        assert torch.equal(tensor, merged[name]), name
    made = (latest / "merged" / "model.safetensors").stat().st_mtime_ns
    assert resolve(ModelConfig(name=str(latest))) == source  # found, not merged again
    assert (latest / "merged" / "model.safetensors").stat().st_mtime_ns == made
    # an adapter whose base is not here says so, and leaves no work folder behind
    moved = tmp_path / "moved"
    shutil.copytree(latest, moved, ignore=shutil.ignore_patterns("merged"))
    config = json.loads((moved / "adapter_config.json").read_text())
    config["base_model_name_or_path"] = str(tmp_path / "gone")
    (moved / "adapter_config.json").write_text(json.dumps(config))
    with pytest.raises(FileNotFoundError, match="an adapter of the model .*gone"):
        resolve_model(str(moved), [])
    assert sorted(p.name for p in moved.iterdir()) == sorted(
        p.name for p in latest.iterdir() if p.name != "merged"
    )
    # peft loads the adapter onto its base as any adapter
    from peft import PeftModel

    adapted = PeftModel.from_pretrained(
        AutoModelForCausalLM.from_pretrained(tiny_model_dir), latest
    )
    assert all(torch.equal(t, merged[n]) for n, t in merged_weights(adapted))


def test_adapter_only_state_under_ddp_names(tmp_path):
    """Under DDP the state names every tensor `module.<name>`: the save hook keeps the
    adapters under those names and the load hook puts them back into a fresh model, wrapped
    or (a run resumed by one process) not."""
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    from selfplay.trainer.checkpoint import _keep_only_trainable, _load_lora_models

    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1
    )
    try:
        trained = DistributedDataParallel(randomised(wrap(tiny_model(0), LORA)))
        state = [trained.state_dict()]
        _keep_only_trainable([trained], state, None)
        assert state[0] and all(k.startswith("module.") and ".lora_" in k for k in state[0])
        from safetensors.torch import save_file

        save_file(state[0], str(tmp_path / "model.safetensors"))
        fresh = DistributedDataParallel(wrap(tiny_model(0), LORA))
        models = [fresh]
        _load_lora_models(models, tmp_path)
        assert models == []  # loaded here, not by accelerate's strict loader
        for (name, a), b in zip(trained.state_dict().items(), fresh.state_dict().values()):
            assert torch.equal(a, b), name
        # resumed by one process: the same state, under the model's own names
        alone = wrap(tiny_model(0), LORA)
        models = [alone]
        _load_lora_models(models, tmp_path)
        assert models == []
        for (name, a), b in zip(trained.state_dict().items(), alone.state_dict().values()):
            assert torch.equal(a, b), name
    finally:
        dist.destroy_process_group()


def _adapters(model) -> dict[str, torch.Tensor]:
    return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}


@pytest.mark.parametrize("per_role", [False, True])
def test_an_init_seed_sets_the_adapters_apart_from_the_run_seed(per_role):
    """`init_seed`: the same adapters whatever the global seed, other ones for another init
    seed, B still zero, and the global random stream left as a plain wrap leaves it."""
    config = LoraConfig(rank=4, alpha=8.0, per_role=per_role)
    seeded = LoraConfig(rank=4, alpha=8.0, per_role=per_role, init_seed=5)
    made = {}
    for run_seed in (0, 1):
        for name, lora in (("plain", config), ("seeded", seeded)):
            model = tiny_model()
            torch.manual_seed(run_seed)
            made[name, run_seed] = _adapters(wrap(model, lora)), torch.rand(3)
    for run_seed in (0, 1):  # the run's stream after the wrap is the plain wrap's
        assert torch.equal(made["plain", run_seed][1], made["seeded", run_seed][1])
    plain, seeded_0, seeded_1 = made["plain", 0][0], made["seeded", 0][0], made["seeded", 1][0]
    assert plain.keys() == seeded_0.keys() and len(plain) > 0
    assert all(torch.equal(seeded_0[n], seeded_1[n]) for n in plain)
    a_names = [n for n in plain if "lora_A" in n]
    assert not any(torch.equal(plain[n], seeded_0[n]) for n in a_names)
    assert all(not seeded_0[n].any() for n in plain if "lora_B" in n)
    other = _adapters(wrap(tiny_model(), LoraConfig(rank=4, alpha=8.0, per_role=per_role,
                                                    init_seed=6)))  # fmt: skip
    assert not any(torch.equal(other[n], seeded_0[n]) for n in a_names)
    with pytest.raises(ConfigError, match="init_seed"):
        load(None, ["trainer.lora.init_seed=-2"])
