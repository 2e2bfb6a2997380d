"""Two CPU processes (torchrun, gloo) share a step of the tiny model's run.

* A 2-process step equals one process's step over the same samples (the one process cuts its
  generation into the same two seeded shares): the same pool contents and attempts, the same
  rewards and advantages exactly, and the same parameter update up to float32 summation order
  (the ranks' gradients are summed by the all-reduce, not in one backward pass).
* Both ranks hold identical parameters after every update, and the pool holds each task once.
* A rank killed with SIGKILL mid-step, and the launch started again, resumes from the last
  checkpoint with each step's metrics once and no attempt counted twice.
* A run checkpointed by 2 processes resumes with 1, and one checkpointed by 1 with 2: the
  weights, optimizer, scheduler, step and the RNG states that exist carry over, and the line
  saying what does not is printed.
* 2 processes evaluating in the run (`run.eval_every`) write the records and scores one
  process's evaluation of the same weights writes.
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


def _launch(command: list[str], timeout: int = 600) -> str:
    """Runs `command`; its standard output and error."""
    done = subprocess.run(command, capture_output=True, text=True, env=_env(), timeout=timeout)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    return done.stdout + done.stderr


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


def _equal(a, b) -> bool:
    """Nested states (dicts, lists, tensors, numbers) equal exactly."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_equal(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_equal(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def test_a_run_resumes_on_another_number_of_processes(tmp_path, formatted_model_dir):
    _, args = _prepared(tmp_path, "run", formatted_model_dir, steps=3)
    out = {name: tmp_path / name for name in ("two", "one", "again")}
    worker = [str(WORKER), "--steps", "1"]
    _launch([*TORCHRUN, *worker, "--checkpoint", "--out", str(out["two"]), *args])
    said = _launch([sys.executable, *worker, "--checkpoint", "--out", str(out["one"]), *args])
    assert "resuming on 1 process from a checkpoint of 2: " in said
    assert "the RNG states of rank 1 do not" in said
    said = _launch([*TORCHRUN, *worker, "--out", str(out["again"]), *args])
    assert "resuming on 2 processes from a checkpoint of 1: " in said
    assert "rank 1 has no saved RNG state and starts from run.seed's" in said

    held = {
        (name, r, when): torch.load(out[name] / f"rank{r}-{when}.pt", weights_only=False)
        for name, ranks in (("two", 2), ("one", 1), ("again", 2))
        for r in range(ranks)
        for when in ("opened", "closed")
    }
    # 2 -> 1: rank 0's weights, optimizer, scheduler and RNG after step 1, and step 2 next
    one = held["one", 0, "opened"]
    assert one["start"] == 2
    for key in ("params", "optimizer", "scheduler", "rng"):
        assert _equal(one[key], held["two", 0, "closed"][key]), key
    assert one["optimizer"]["state"], "the optimizer's moments must carry over"
    # 1 -> 2: both ranks get the one process's weights, optimizer and scheduler after step 2;
    # rank 0 its RNG, rank 1 the state run.seed gives a rank that opens a run
    for r in (0, 1):
        again = held["again", r, "opened"]
        assert again["start"] == 3
        for key in ("params", "optimizer", "scheduler"):
            assert _equal(again[key], held["one", 0, "closed"][key]), (r, key)
    assert _equal(held["again", 0, "opened"]["rng"], held["one", 0, "closed"]["rng"])
    assert _equal(held["again", 1, "opened"]["rng"], held["two", 1, "opened"]["rng"])
    # and the resumed ranks train together: identical weights after the step
    assert _equal(held["again", 0, "closed"]["params"], held["again", 1, "closed"]["params"])


def test_two_processes_evaluate_as_one_process_does(tmp_path, formatted_model_dir):
    folder, args = _prepared(tmp_path, "run", formatted_model_dir, steps=1)
    evaluation = ["run.eval_every=1", "run.eval_problems=3", "run.eval_benchmarks=[generated]"]
    _launch([*TORCHRUN, "-m", "selfplay.cli", "run", *args, *evaluation])
    metrics = {m["step"]: m for m in read_metrics(folder)}
    # the same weights in one process: the model the run starts from (step 0) and the
    # checkpoint after step 1, evaluated by `selfplay eval` (greedy, float32 as the run)
    for step, model in ((0, formatted_model_dir), (1, folder)):
        alone = tmp_path / f"alone{step}"
        command = [sys.executable, "-m", "selfplay.cli", "eval", "generated", "--model"]
        command += [str(model), "--limit", "3", "--out", str(alone), *args, "model.dtype=float32"]
        _launch(command)
        split = (folder / "eval" / f"generated-step{step:06d}.jsonl").read_text()
        assert split == (alone / "samples.jsonl").read_text(), step
        records = [json.loads(line) for line in split.splitlines()]
        assert len(records) == 6  # 3 problems of each kind, one sample each
        assert any(r["answer"] for r in records), "some answers must be read to compare"
        summary = json.loads((alone / "summary.json").read_text())
        for kind in ("deduction", "abduction"):
            name = f"generated_{kind}/pass@1"
            assert metrics[step][f"eval/{name}"] == summary[name], (step, name)
