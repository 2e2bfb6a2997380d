"""Checkpoints restore model, optimizer, scheduler, RNG and step; partial ones are ignored."""

from __future__ import annotations

import random

import torch
from accelerate import Accelerator
from transformers import AutoModelForCausalLM

from selfplay.trainer.checkpoint import Checkpoints
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
