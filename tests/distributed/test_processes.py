"""Two CPU processes (torchrun, gloo) share a step of the tiny model's run.

* A 2-process step equals one process's step over the same samples (the one process cuts its
  generation into the same two seeded shares): the same pool contents and attempts, the same
  rewards and advantages exactly, and the same parameter update up to float32 summation order
  (the ranks' gradients are summed by the all-reduce, not in one backward pass).
* Both ranks hold identical parameters after every update, and the pool holds each task once.
* A rank killed with SIGKILL mid-step, and the launch started again, resumes from the last
  checkpoint with each step's metrics once and no attempt counted twice.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from sqlalchemy import select

from selfplay.config import load
from selfplay.curriculum import TaskStore
from selfplay.runs import _resolved
from selfplay.trainer.metrics import read_metrics
from tests.test_loop import overrides, seed_pool

pytestmark = pytest.mark.slow

WORKER = Path(__file__).with_name("step_worker.py")
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]


def _env() -> dict[str, str]:
    root = str(Path(__file__).parents[2])  # this checkout's package, in every process
    path = os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])
    return dict(os.environ, PYTHONPATH=path, PYTHONUNBUFFERED="1", OMP_NUM_THREADS="1")


def _prepared(tmp_path, name, model_dir, steps) -> tuple[Path, list[str]]:
    folder = tmp_path / name
    folder.mkdir()
    # fp32: the comparisons below bound float32 rounding of another summation order; bf16
    # autocast (the default on CPUs that have it) rounds each product to 8 mantissa bits.
    args = [*overrides(folder, model_dir, steps=steps), "run.threads=1"]
    args.append("trainer.mixed_precision=no")
    seed_pool(_resolved(load(None, args), folder))
    return folder, args


def _launch(command: list[str], timeout: int = 600) -> None:
    done = subprocess.run(command, capture_output=True, text=True, env=_env(), timeout=timeout)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]


def test_two_processes_make_one_process_step(tmp_path, formatted_model_dir):
    _, one_args = _prepared(tmp_path, "one", formatted_model_dir, steps=1)
    _, two_args = _prepared(tmp_path, "two", formatted_model_dir, steps=2)
    one, two = tmp_path / "one-out", tmp_path / "two-out"
    _launch([sys.executable, str(WORKER), "--out", str(one), "--shares", "2", *one_args])
    _launch([*TORCHRUN, str(WORKER), "--out", str(two), "--steps", "2", *two_args])

    alone = torch.load(one / "rank0-step1.pt")
    ranks = [torch.load(two / f"rank{r}-step1.pt") for r in range(2)]
    assert ranks[0]["completions"] == alone["completions"]  # the same samples
    assert ranks[0]["rewards"] == alone["rewards"]
    assert ranks[0]["advantages"] == alone["advantages"]  # computed over the whole step
    assert any(a != 0 for a in alone["advantages"]), "the step must carry a gradient"
    # The gradient: its norm (before clipping) and the loss, as one process computes them,
    # up to float32 sums in another order over micro-batches of other padding widths (seen:
    # 2e-5; a policy-gradient loss near 0 differs by 1e-9). AdamW normalises each
    # coordinate's step, so the parameters alone would not show a gradient scaled by the world
    # size (the one-process test of the loss shows it exactly).
    for name in ("update/grad_norm", "update/loss"):
        expected = pytest.approx(alone["metrics"][name], rel=1e-4, abs=1e-6)
        assert ranks[0]["metrics"][name] == expected
    # AdamW's first step moves a parameter by lr * g / (|g| + eps): where a gradient is near
    # zero, the rounding of another summation order decides its sign and can move the
    # parameter differently by up to 2 lr (seen: 6 of 13 million), and where it is small, by
    # a fraction of lr (seen: the rest 1.3e-3 of the update's size apart on one CPU, under 1e-3
    # on another). So: every parameter within 2 lr, at most one in 10,000 apart by more than
    # lr / 10, and the others' update within 1e-2 of the update's size. (A rank's gradient left
    # out would flip the sign of the first step of a large share of the parameters.)
    lr = alone["metrics"]["update/lr"]
    initial = _initial(formatted_model_dir)
    gap = size = 0.0
    apart = count = 0
    for name, value in alone["params"].items():
        diff = (ranks[0]["params"][name] - value).abs()
        assert float(diff.max()) <= 2 * lr, name
        far = diff > lr / 10
        apart += int(far.sum())
        count += diff.numel()
        gap += float((diff[~far] ** 2).sum())
        size += float(((value - initial[name]) ** 2).sum())
    assert size**0.5 > 1e-3, "the update must change the parameters"
    assert apart <= count // 10_000, (apart, count)
    assert gap**0.5 <= 1e-2 * size**0.5, (gap**0.5, size**0.5, apart)
    pool_one = json.loads((one / "pool.json").read_text())
    for step in (1, 2):
        a, b = (torch.load(two / f"rank{r}-step{step}.pt")["params"] for r in range(2))
        assert all(torch.equal(a[k], b[k]) for k in a), f"ranks differ after step {step}"
    assert ranks[0]["metrics"]["propose/proposals"] == alone["metrics"]["propose/proposals"]
    pool_two = json.loads((two / "pool.json").read_text())
    step_one = [a for a in pool_two["attempts"] if a[1] == 1]
    assert step_one == pool_one["attempts"]
    assert [t for t in pool_two["tasks"] if t in pool_one["tasks"]] == pool_one["tasks"]
    keys = [json.dumps(t[:4]) for t in pool_two["tasks"]]
    assert len(keys) == len(set(keys)), "the pool holds a task twice"


_INITIAL: dict[str, dict] = {}


def _initial(model_dir) -> dict:
    if str(model_dir) not in _INITIAL:
        from transformers import AutoModelForCausalLM

        _INITIAL[str(model_dir)] = AutoModelForCausalLM.from_pretrained(model_dir).state_dict()
    return _INITIAL[str(model_dir)]


def test_a_killed_rank_resumes_with_nothing_lost_or_counted_twice(tmp_path, formatted_model_dir):
    folder, args = _prepared(tmp_path, "run", formatted_model_dir, steps=3)
    command = [*TORCHRUN, "-m", "selfplay.cli", "run", *args]
    launch = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=_env(), cwd=tmp_path
    )
    deadline = time.monotonic() + 400
    while not (folder / "checkpoints" / "step-000001").exists():
        assert launch.poll() is None, launch.stdout.read().decode()[-4000:]
        assert time.monotonic() < deadline, "the run did not reach its first checkpoint"
        time.sleep(0.2)
    time.sleep(1.0)  # into step 2
    os.kill(_rank_pid(launch.pid, 1), signal.SIGKILL)
    launch.wait(timeout=120)
    assert launch.returncode != 0
    _launch(command)
    assert [m["step"] for m in read_metrics(folder)] == [1, 2, 3]
    assert all(m["run/world_size"] == 2 for m in read_metrics(folder))
    store = TaskStore.open(str(folder / "pool.sqlite"), "test", load(None, args).curriculum)
    from selfplay.curriculum.schema import Attempt

    with store.engine.connect() as connection:
        rows = connection.execute(
            select(Attempt.task_id, Attempt.step, Attempt.model_version)
        ).all()
    assert len(rows) == len(set(rows))  # nothing counted twice
    assert {step for _, step, _ in rows} == {1, 2, 3}  # nothing lost
    store.close()
    # the checkpoint's model folder holds the weights under the model's own names (DDP's saved
    # state names them `module.<name>`), equal to the state's
    from safetensors import safe_open

    last = sorted((folder / "checkpoints").glob("step-*"))[-1]
    state, model = {}, {}
    with safe_open(last / "state" / "model.safetensors", "pt") as f:
        for name in f.keys():  # noqa: SIM118 (a safetensors file is not iterable)
            state[name.removeprefix("module.")] = f.get_tensor(name)
    with safe_open(last / "model" / "model.safetensors", "pt") as f:
        for name in f.keys():  # noqa: SIM118
            model[name] = f.get_tensor(name)
    with safe_open(formatted_model_dir / "model.safetensors", "pt") as f:
        assert set(model) == set(f.keys())
    assert all(torch.equal(tensor, state[name]) for name, tensor in model.items())


def _rank_pid(launcher: int, rank: int) -> int:
    """The process id of a torchrun worker by its RANK."""
    import psutil

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for child in psutil.Process(launcher).children():  # the workers, not their helpers
            try:
                if child.environ().get("RANK") == str(rank):
                    return child.pid
            except psutil.Error:
                continue
        time.sleep(0.2)
    raise AssertionError(f"no process of rank {rank} under {launcher}")
