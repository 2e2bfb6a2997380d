"""Checkpoints restore model, optimizer, scheduler, RNG and step; partial ones are ignored."""

from __future__ import annotations

import random

import pytest
import torch
from accelerate import Accelerator
from transformers import AutoModelForCausalLM

from selfplay.trainer.checkpoint import Checkpoints, configured_rates
from tests.trainer.test_trainer_update import tiny_model


def prepared(seed: int):
    accelerator = Accelerator(cpu=True)
    model = tiny_model(seed)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0 / (1 + s))
    return accelerator, *accelerator.prepare(model, optimizer, scheduler)


def one_step(model, optimizer, scheduler) -> None:
    ids = torch.randint(1, 64, (2, 6))
    model(input_ids=ids, labels=ids).loss.backward()
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()


def test_save_and_resume(tmp_path):
    accelerator, model, optimizer, scheduler = prepared(0)
    one_step(model, optimizer, scheduler)
    checkpoints = Checkpoints(tmp_path, keep_last=2)
    saved = checkpoints.save(accelerator, model, None, step=7, extra={"note": "x"})
    expected_next = (torch.rand(1).item(), random.random())

    accelerator2, model2, optimizer2, scheduler2 = prepared(1)  # different weights
    meta = checkpoints.load(accelerator2, checkpoints.latest())
    assert meta == {"step": 7, "note": "x"}
    assert (torch.rand(1).item(), random.random()) == expected_next  # RNG restored
    for a, b in zip(model.state_dict().values(), model2.state_dict().values(), strict=True):
        assert torch.equal(a, b)
    assert scheduler2.state_dict()["last_epoch"] == scheduler.state_dict()["last_epoch"] == 1
    assert optimizer2.state_dict()["state"].keys() == optimizer.state_dict()["state"].keys()
    reloaded = AutoModelForCausalLM.from_pretrained(saved / "model")
    assert torch.equal(reloaded.model.embed_tokens.weight, model.model.embed_tokens.weight)


def test_partial_checkpoints_are_ignored_and_old_ones_pruned(tmp_path):
    accelerator, model, optimizer, scheduler = prepared(0)
    checkpoints = Checkpoints(tmp_path, keep_last=2)
    for step in (1, 2, 3):
        checkpoints.save(accelerator, model, None, step=step)
    (checkpoints.root / "step-000004.partial" / "state").mkdir(parents=True)  # killed mid-save
    assert [p.name for p in checkpoints.completed()] == ["step-000002", "step-000003"]
    assert checkpoints.latest().name == "step-000003"
    # a pruned checkpoint that an evaluation's merge was writing into goes at the next prune,
    # and so does a save killed before its rename (step 4 is never saved again: it would stay)
    (checkpoints.root / "step-000001" / "model" / ".prepare-1@host-x").mkdir(parents=True)
    checkpoints.save(accelerator, model, None, step=5)
    assert sorted(p.name for p in checkpoints.root.iterdir()) == ["step-000003", "step-000005"]


def test_a_resume_trains_at_the_configured_rate_and_weight_decay(tmp_path):
    """Loading a checkpoint restores the saving session's rate, weight decay and base rates:
    `configured_rates` puts the configured ones back, at the schedule's position, keeping the
    moments; with nothing changed it says and changes nothing."""
    accelerator, model, optimizer, scheduler = prepared(0)
    one_step(model, optimizer, scheduler)
    one_step(model, optimizer, scheduler)
    checkpoints = Checkpoints(tmp_path)
    checkpoints.save(accelerator, model, None, step=2)
    accelerator2, _, optimizer2, scheduler2 = prepared(1)
    checkpoints.load(accelerator2, checkpoints.latest())
    assert optimizer2.param_groups[0]["lr"] == pytest.approx(
        1e-3 / 3
    )  # the saved session's, at epoch 2
    moments = optimizer2.state_dict()["state"]
    assert configured_rates(optimizer2, scheduler2, 1e-3, 0.01) is None
    note = configured_rates(optimizer2, scheduler2, 3e-4, 0.1)
    assert note.startswith("resumed with trainer.lr 0.001 -> 0.0003")
    group = optimizer2.param_groups[0]
    assert (group["initial_lr"], group["weight_decay"]) == (3e-4, 0.1)
    assert group["lr"] == pytest.approx(1e-4) and scheduler2.get_last_lr() == [group["lr"]]
    assert optimizer2.state_dict()["state"].keys() == moments.keys()
    scheduler2.step()  # and the schedule goes on from the new base rate
    assert optimizer2.param_groups[0]["lr"] == pytest.approx(3e-4 / 4)


def test_a_resume_under_another_schedule_trains_at_its_rate_at_the_same_position(tmp_path):
    """Saved under the schedule 1 / (1 + s) after 2 optimizer steps (lr / 3), loaded under one
    that halves the rate at each step, with the same base rate: the rate becomes the new
    schedule's at step 2, and the line says that the rate changed, not the base."""
    accelerator, model, optimizer, scheduler = prepared(0)
    one_step(model, optimizer, scheduler)
    one_step(model, optimizer, scheduler)
    checkpoints = Checkpoints(tmp_path)
    checkpoints.save(accelerator, model, None, step=2)
    accelerator2 = Accelerator(cpu=True)
    model2 = tiny_model(1)
    optimizer2 = torch.optim.AdamW(model2.parameters(), lr=1e-3)
    halving = torch.optim.lr_scheduler.LambdaLR(optimizer2, lambda s: 0.5**s)
    _, optimizer2, scheduler2 = accelerator2.prepare(model2, optimizer2, halving)
    checkpoints.load(accelerator2, checkpoints.latest())
    note = configured_rates(optimizer2, scheduler2, 1e-3, 0.01)
    assert note.startswith("resumed with the rate at optimizer step 2 0.000333333 -> 0.00025")
    assert "trainer.lr" not in note
    assert optimizer2.param_groups[0]["lr"] == pytest.approx(2.5e-4)
    assert scheduler2.get_last_lr() == [pytest.approx(2.5e-4)]


def test_what_a_resume_on_another_world_size_leaves_behind_is_said_in_one_line():
    from selfplay.trainer.checkpoint import world_change

    assert world_change(2, 2) is None and world_change(0, 2) is None  # same, or unknown
    fewer = world_change(2, 1)
    assert fewer.startswith("resuming on 1 process from a checkpoint of 2:")
    assert fewer.endswith("the RNG states of rank 1 do not")
    more = world_change(1, 3)
    assert more.startswith("resuming on 3 processes from a checkpoint of 1:")
    assert more.endswith("ranks 1, 2 have no saved RNG state and start from run.seed's")
    assert world_change(1, 2).endswith("rank 1 has no saved RNG state and starts from run.seed's")
    assert "\n" not in fewer + more


def test_a_state_saved_under_ddp_loads_into_one_process_and_back(tmp_path):
    """DDP's state names every tensor `module.<name>`, one process's its own: the load hook
    loads either into either (tied embeddings included), and leaves a state of the model's
    own naming to accelerate."""
    import torch.distributed as dist
    from accelerate.utils import save
    from torch.nn.parallel import DistributedDataParallel

    from selfplay.trainer.checkpoint import _load_models

    def saved(model, folder) -> None:
        folder.mkdir()
        state = Accelerator(cpu=True).get_state_dict(model, unwrap=False)
        save(state, folder / "model.safetensors", safe_serialization=True)

    def equal(a, b) -> bool:
        return all(torch.equal(x, y) for x, y in zip(a.values(), b.values(), strict=True))

    dist.init_process_group(
        "gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1
    )
    try:
        wrapped = DistributedDataParallel(tiny_model(0))
        saved(wrapped, tmp_path / "ddp")
        alone = tiny_model(1)
        models = [alone]
        _load_models(models, tmp_path / "ddp")
        assert models == []  # loaded by the hook
        assert equal(alone.state_dict(), wrapped.module.state_dict())
        assert alone.lm_head.weight is alone.model.embed_tokens.weight  # still tied

        saved(tiny_model(2), tmp_path / "one")
        again = DistributedDataParallel(tiny_model(3))
        models = [again]
        _load_models(models, tmp_path / "one")
        assert models == []
        assert equal(again.module.state_dict(), tiny_model(2).state_dict())

        models = [DistributedDataParallel(tiny_model(4))]
        _load_models(models, tmp_path / "ddp")
        assert len(models) == 1  # the same naming: accelerate loads it
    finally:
        dist.destroy_process_group()
