"""The self-play loop end to end on CPU with a tiny model: two steps, and a killed run resumed.

A randomly initialised model writes nothing that parses, so every reward would be equal and
every advantage zero. The tiny model here is first fine-tuned for a minute on a handful of
completions in the project's formats (proposals with a call of `f`, induction inputs with a
message, solver answers), so that its samples mix valid and invalid proposals and right and
wrong answers: the pool grows and the policy gradient is not zero.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace

import pytest
import torch
from sqlalchemy import func, select

from selfplay.config import load
from selfplay.curriculum import Provenance, TaskStore
from selfplay.files import records
from selfplay.loop import run, run_step
from selfplay.runs import _resolved, open_run
from selfplay.trainer.metrics import read_metrics
from selfplay.types import Task

SEEDS = [
    ("def f(xs):\n    return sorted(xs)", "[3, 1, 2]", "[1, 2, 3]"),
    ("def f(s):\n    return s[::-1]", "'abc'", "'cba'"),
    ("def f(n):\n    return n * n", "7", "49"),
]


# The program the tiny model learns to propose, one per task type (neither is in the pool).
FORMATTED_PROGRAMS = {
    "deduction": "def f(x):\n    return x * 2\n\nf(3)",
    "abduction": "def f(xs):\n    return xs + [0]\n\nf([1])",
}


def _sft_examples(tokenizer):
    """(prompt ids, completion ids) pairs: prompts as the loop writes them at the first step,
    with every ordered pair of seeded tasks as references, and completions in the expected
    formats. The tiny model learns these prompts by heart and not much beyond them: a prompt
    with references it was not shown gets garbage even greedily, so a step would propose
    nothing valid."""
    from itertools import permutations

    from selfplay.engine.template import render
    from selfplay.proposer import proposer_prompt
    from selfplay.solver import solver_prompt

    pool = [Task("deduction", p, (i,), (o,)) for p, i, o in SEEDS]
    pairs = []
    for refs in permutations(pool, 2):
        for kind in ("deduction", "abduction"):
            # the prompt as the loop writes it with `curriculum.keep_trivial` off (the default)
            prompt = proposer_prompt(kind, list(refs), refuse_trivial=True)
            pairs.append((prompt, f"```python\n{FORMATTED_PROGRAMS[kind]}\n```"))
    calls = "\n".join(f"f({k})" for k in range(1, 5))
    for task in pool:
        pairs.append(
            (
                proposer_prompt("induction", [], program=task.program, refuse_trivial=True),
                f"```python\n{calls}\n```\n```message\nsame as given\n```",
            )
        )
        pairs.append((solver_prompt(task), f"```output\n{task.outputs[0]}\n```"))
        pairs.append(
            (solver_prompt(replace(task, type="abduction")), f"```input\n{task.inputs[0]}\n```")
        )
    examples = []
    for chat, body in pairs:
        prompt = tokenizer(render(tokenizer, chat), add_special_tokens=False)["input_ids"]
        text = f"<answer>\n{body}\n</answer>{tokenizer.eos_token}"
        completion = tokenizer(text, add_special_tokens=False)["input_ids"]
        examples.append((prompt, completion))
    return examples


@pytest.fixture(scope="module")
def formatted_model_dir(tiny_model_dir, tmp_path_factory):
    """The tiny model after a short supervised pass over completions in the project's formats
    (see the module docstring). Only the completion positions go through the output layer."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    examples = _sft_examples(tokenizer)
    torch.manual_seed(0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=4e-3)
    model.train()
    for _ in range(60):
        for prompt, completion in examples:
            ids = torch.tensor([prompt + completion])
            hidden = model.model(input_ids=ids).last_hidden_state
            logits = model.lm_head(hidden[0, len(prompt) - 1 : -1])
            torch.nn.functional.cross_entropy(logits, torch.tensor(completion)).backward()
        optimizer.step()
        optimizer.zero_grad()
    folder = tmp_path_factory.mktemp("formatted-tiny")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def overrides(folder, model_dir, steps: int = 2) -> list[str]:
    return [
        f"run.folder={folder}",
        f"model.name={model_dir}",
        f"run.steps={steps}",
        "run.checkpoint_every=1",
        "run.tensorboard=true",
        "curriculum.run=test",
        "curriculum.references=2",
        "selfplay.proposals=2",
        "selfplay.attempts=2",
        "selfplay.solver_tasks=3",
        "selfplay.solver_samples=2",
        "generation.max_new_tokens=64",
        "generation.temperature=0.5",
        "trainer.lr=1e-3",
        "trainer.micro_batch=8",
        "executor.workers=2",
        "engine.backend=transformers",  # the tiny model; vLLM has its own tests
    ]


def seed_pool(config) -> None:
    store = TaskStore.open(
        config.curriculum.store.replace("{run}", "test"), "test", config.curriculum
    )
    tasks = [Task("deduction", p, (i,), (o,), cpu_s=1e-4) for p, i, o in SEEDS]
    store.add_tasks(tasks, Provenance("seed", 0, "", "test"))
    store.close()


def test_two_steps(tmp_path, formatted_model_dir):
    folder = tmp_path / "run"
    config = load(None, overrides(folder, formatted_model_dir))
    config = _resolved(config, folder)
    folder.mkdir()
    seed_pool(config)
    state, start = open_run(config)
    assert start == 1
    assert state.store.answers == config.selfplay.solver_samples  # what the sampler weighs by
    before = {k: v.clone() for k, v in state.model.state_dict().items()}
    metrics = [run_step(state, step) for step in (1, 2)]
    changed = [k for k, v in state.model.state_dict().items() if not torch.equal(v, before[k])]
    assert changed, "training must change the parameters"
    for m in metrics:
        for stage in ("propose", "validate", "store", "sample", "solve", "verify", "reward",
                      "update", "sync"):  # fmt: skip
            assert f"timing_s/{stage}" in m
        assert m["propose/proposals"] == 3 * 2  # three task types, two prompts each
        assert "curriculum/pool_size" in m and m["update/tokens"] > 0
    with state.store.engine.connect() as connection:
        from selfplay.curriculum.schema import Attempt

        attempts = connection.execute(select(func.count()).select_from(Attempt)).scalar()
    assert attempts >= 3  # the seeded tasks were attempted and recorded
    assert len(state.store) > len(SEEDS)  # the seeds and new tasks
    assert sum(m["propose/new_tasks"] for m in metrics) > 0
    from selfplay.runs import close_run

    close_run(state)


def test_run_writes_metrics_checkpoints_and_summary(tmp_path, tiny_model_dir):
    folder = tmp_path / "run"
    config = load(None, overrides(folder, tiny_model_dir, steps=2))
    folder.mkdir()
    seed_pool(_resolved(config, folder))
    out = open(tmp_path / "out.txt", "w")  # noqa: SIM115
    run(config, out=out)
    out.close()
    text = (tmp_path / "out.txt").read_text()
    assert "step   2/2" in text and "export the pool" in text
    assert text.startswith(f"selfplay run test: 2 steps, folder {folder}")
    assert "entropy" in text and "cut prop" in text
    assert "INFO" not in text and "WARNING" not in text  # the libraries' lines are in run.log
    assert "Loading weights" not in text  # transformers' bar is off
    assert (folder / "run.log").is_file()
    assert [m["step"] for m in read_metrics(folder)] == [1, 2]
    counts = {"answers": 0, "correct": 0}
    for m in read_metrics(folder):
        for key, value in m.items():
            if key.startswith(("solve/answers/", "solve/correct/")):
                counts[key.split("/")[1]] += int(value)
    assert counts["answers"] > 0
    assert f"judged correct: {counts['correct']} of {counts['answers']}" in text
    samples = [json.loads(line) for line in (folder / "samples.jsonl").read_text().splitlines()]
    assert {s["step"] for s in samples} == {1, 2}
    assert {s["role"] for s in samples} <= {"propose", "solve"}
    metrics = read_metrics(folder)
    assert len(samples) == sum(m["reward/rollouts"] for m in metrics)
    assert all(isinstance(s["text"], str) and s["tokens"] > 0 for s in samples)
    # every proposal, with its verdict, as the metrics counted them
    proposals = records(folder / "proposals.jsonl")
    for m in metrics:
        mine = [x for x in proposals if x["step"] == m["step"]]
        assert len(mine) == m["propose/proposals"]
        assert sum(x["outcome"] == "valid" for x in mine) == m["propose/valid"]
        assert sum(x["added"] for x in mine) == m["propose/new_tasks"]
    assert all(x["reason"] for x in proposals if x["outcome"] != "valid")
    assert (folder / "config.yaml").exists() and (folder / "tensorboard").is_dir()
    assert (folder / "checkpoints" / "step-000002" / "model" / "model.safetensors").exists()
    (session,) = [json.loads(line) for line in (folder / "sessions.jsonl").read_text().splitlines()]
    assert session["first_step"] == 1 and session["processes"] == 1
    assert session["dtype"] in ("float32", "bfloat16") and session["packages"]["torch"]
    assert session["update"] == "float32"  # trainer.mixed_precision=auto, resolved
    # running again finds the run finished
    out = open(tmp_path / "again.txt", "w")  # noqa: SIM115
    run(config, out=out)
    out.close()
    assert "already finished" in (tmp_path / "again.txt").read_text()


def test_a_run_adapts_its_kl_coefficient_and_resumes_with_it(tmp_path, formatted_model_dir):
    folder = tmp_path / "run"
    folder.mkdir()
    args = [*overrides(folder, formatted_model_dir, steps=2), "trainer.kl_coef=0.1"]
    args += ["trainer.kl_target=1e-9", "trainer.kl_horizon=2"]  # every KL is above the target
    seed_pool(_resolved(load(None, args), folder))
    with open(tmp_path / "out.txt", "w") as out:
        run(load(None, args), out=out)
    steps = read_metrics(folder)
    coefs = [m["update/kl_coef"] for m in steps]
    # the first update starts from the initial weights: KL 0, under the target (-20% error
    # over a horizon of 2 steps); the second from trained ones, over it (+20%)
    assert steps[0]["update/kl_ref"] == 0 and steps[1]["update/kl_ref"] > 0
    assert coefs == pytest.approx([0.1, 0.1 * 0.9])
    # what it steered on: the higher of the two trained roles' KLs (`trainer.kl_steer`)
    roles = [steps[1][f"update/kl_ref_{role}"] for role in ("solve", "propose")]
    assert steps[1]["update/kl_steered"] == pytest.approx(max(roles))
    saved = json.loads((folder / "checkpoints/step-000002/checkpoint.json").read_text())
    assert saved["kl_coef"] == pytest.approx(0.1 * 0.9 * 1.1)
    resumed = [a for a in args if not a.startswith("run.steps=")] + ["run.steps=3"]
    with open(tmp_path / "again.txt", "w") as out:
        run(load(None, resumed), out=out)
    assert read_metrics(folder)[-1]["update/kl_coef"] == pytest.approx(saved["kl_coef"])
    # resumed with a fixed coefficient: the configuration's, not the checkpoint's
    fixed = [a for a in resumed if not a.startswith(("run.steps=", "trainer.kl"))]
    fixed += ["run.steps=4", "trainer.kl_coef=0.05"]
    with open(tmp_path / "fixed.txt", "w") as out:
        run(load(None, fixed), out=out)
    assert read_metrics(folder)[-1]["update/kl_coef"] == pytest.approx(0.05)
    # each session of the run, the two resumed ones too, says where it started; a finished
    # run run again trains nothing and adds none
    with open(tmp_path / "finished.txt", "w") as out:
        run(load(None, fixed), out=out)
    assert "already finished" in (tmp_path / "finished.txt").read_text()
    sessions = [json.loads(line) for line in (folder / "sessions.jsonl").read_text().splitlines()]
    assert [s["first_step"] for s in sessions] == [1, 3, 4]


def test_per_role_kl_coefficients_are_logged_checkpointed_and_resumed(
    tmp_path, formatted_model_dir
):
    """`trainer.kl_steer=per_role` in a run that trains both roles: each step logs the
    proposer's coefficient beside the solver's, both move by the rule (under the target at
    the first step, over it at the second), the checkpoint keeps both, and a resumed run goes
    on from each (here set apart in the checkpoint, as two roles' KLs would set them)."""
    folder = tmp_path / "run"
    folder.mkdir()
    args = [*overrides(folder, formatted_model_dir, steps=2), "trainer.kl_coef=0.1"]
    args += ["trainer.kl_target=1e-9", "trainer.kl_horizon=2", "trainer.kl_steer=per_role"]
    seed_pool(_resolved(load(None, args), folder))
    with open(tmp_path / "out.txt", "w") as out:
        run(load(None, args), out=out)
    steps = read_metrics(folder)
    for role in ("", "_propose"):
        assert [m[f"update/kl_coef{role}"] for m in steps] == pytest.approx([0.1, 0.09])
    assert all(m["update/kl_ref_propose"] >= 0 for m in steps)
    assert not any("update/kl_steered" in m for m in steps)
    path = folder / "checkpoints/step-000002/checkpoint.json"
    saved = json.loads(path.read_text())
    assert saved["kl_coef"] == saved["kl_coef_propose"] == pytest.approx(0.1 * 0.9 * 1.1)
    path.write_text(json.dumps(saved | {"kl_coef_propose": 0.02}))
    resumed = [a for a in args if not a.startswith("run.steps=")] + ["run.steps=3"]
    with open(tmp_path / "again.txt", "w") as out:
        run(load(None, resumed), out=out)
    last = read_metrics(folder)[-1]
    assert last["update/kl_coef"] == pytest.approx(saved["kl_coef"])
    assert last["update/kl_coef_propose"] == pytest.approx(0.02)


def test_a_decaying_learning_rate_follows_the_run_and_a_longer_resume_stretches_it(
    tmp_path, formatted_model_dir
):
    """`trainer.lr_schedule=linear` over a 2-step run of one optimizer step each: the rates
    used are lr and lr / 2. Resumed to 4 steps, the schedule is planned over 4 and goes on at
    the same optimizer step: step 3 trains at lr x (1 - 2/4), not at the old schedule's end
    (0), and the resume says so."""
    folder = tmp_path / "run"
    folder.mkdir()
    args = [*overrides(folder, formatted_model_dir, steps=2), "trainer.lr=1e-3"]
    args += ["trainer.lr_schedule=linear", "trainer.kl_coef=0.1"]  # KL: every rollout trains
    seed_pool(_resolved(load(None, args), folder))
    with open(tmp_path / "out.txt", "w") as out:
        run(load(None, args), out=out)
    assert [m["update/lr"] for m in read_metrics(folder)] == pytest.approx([1e-3, 5e-4])
    longer = [a for a in args if not a.startswith("run.steps=")] + ["run.steps=4"]
    with open(tmp_path / "again.txt", "w") as out, contextlib.redirect_stderr(out):
        run(load(None, longer), out=out)
    rates = [m["update/lr"] for m in read_metrics(folder)]
    assert rates == pytest.approx([1e-3, 5e-4, 5e-4, 2.5e-4])
    said = (tmp_path / "again.txt").read_text()
    assert "resumed with the rate at optimizer step 2 0 -> 0.0005" in said, said


def test_a_run_resumed_before_its_first_checkpoint_logs_step_0_once(tmp_path, tiny_model_dir):
    """Without a checkpoint a run starts from step 1 and logs step 0 (its seeding) again: the
    line the lost session wrote goes, so the metrics hold each step once."""
    folder = tmp_path / "run"
    args = [*overrides(folder, tiny_model_dir, steps=1), "run.checkpoint_every=5"]
    args += ["selfplay.seed_proposals=1", "selfplay.seed_round=1", "run.tensorboard=false"]
    run(load(None, args), out=open(os.devnull, "w"))  # noqa: SIM115
    import shutil

    shutil.rmtree(folder / "checkpoints")  # as if it stopped in step 1, before any checkpoint
    run(load(None, args), out=open(os.devnull, "w"))  # noqa: SIM115
    assert [m["step"] for m in read_metrics(folder)] == [0, 1]


def test_a_run_adapts_its_entropy_bonus_and_resumes_with_it(tmp_path, formatted_model_dir):
    folder = tmp_path / "run"
    folder.mkdir()
    args = [*overrides(folder, formatted_model_dir, steps=2), "trainer.entropy_target=100"]
    args += ["trainer.entropy_step=0.01"]  # every entropy is below the target
    seed_pool(_resolved(load(None, args), folder))
    with open(tmp_path / "out.txt", "w") as out:
        run(load(None, args), out=out)
    steps = read_metrics(folder)
    # the first update has the configured start (0), each later one a step more
    assert [m["update/entropy_coef"] for m in steps] == pytest.approx([0.0, 0.01])
    saved = json.loads((folder / "checkpoints/step-000002/checkpoint.json").read_text())
    assert saved["entropy_alpha"] == pytest.approx(0.02) and saved["entropy_below"] is True
    resumed = [a for a in args if not a.startswith("run.steps=")] + ["run.steps=3"]
    with open(tmp_path / "again.txt", "w") as out:
        run(load(None, resumed), out=out)
    assert read_metrics(folder)[-1]["update/entropy_coef"] == pytest.approx(0.02)


def _pool_rows(folder) -> tuple[list, list]:
    from selfplay.curriculum.schema import Attempt, TaskReference, TaskRow

    store = TaskStore.open(str(folder / "pool.sqlite"), "test")
    with store.engine.connect() as connection:
        tasks = connection.execute(
            select(TaskRow.id, TaskRow.hash, TaskRow.step).order_by(TaskRow.id)
        ).all()
        references = connection.execute(select(TaskReference.task_id, TaskReference.reference_id))
        attempts = connection.execute(
            select(Attempt.task_id, Attempt.step, Attempt.n, Attempt.correct).order_by(Attempt.id)
        ).all()
        rows = [tuple(t) for t in tasks], sorted(map(tuple, references)), [*map(tuple, attempts)]
    store.close()
    return rows


def test_a_step_lost_after_its_pool_writes_runs_again_as_it_ran(tmp_path, formatted_model_dir,
                                                                 capsys):  # fmt: skip
    """A run killed after step 3 wrote to the pool but before its checkpoint: the resumed run
    takes the pool back to step 2 and step 3 proposes, pools and records what it did the
    first time (the same prompts, seeds and weights on the same engine)."""
    folder = tmp_path / "run"
    folder.mkdir()
    args = overrides(folder, formatted_model_dir, steps=3)
    seed_pool(_resolved(load(None, args), folder))
    run(load(None, args), out=open(os.devnull, "w"))  # noqa: SIM115
    first = _pool_rows(folder)
    samples = (folder / "samples.jsonl").read_text()
    proposals = (folder / "proposals.jsonl").read_text()
    assert any(step == 3 for _, step, *_ in first[2])  # step 3 recorded answers
    import shutil

    shutil.rmtree(folder / "checkpoints" / "step-000003")
    capsys.readouterr()
    run(load(None, args), out=open(os.devnull, "w"))  # noqa: SIM115
    removed = sum(step == 3 for _, _, step in first[0]), sum(a[1] == 3 for a in first[2])
    said = f"pool: {removed[0]} tasks and {removed[1]} attempts recorded after step 2 removed"
    assert said in capsys.readouterr().err
    again = _pool_rows(folder)
    assert again == first
    assert (folder / "samples.jsonl").read_text() == samples
    assert (folder / "proposals.jsonl").read_text() == proposals


@pytest.mark.slow
def test_a_killed_run_resumes(tmp_path, tiny_model_dir):
    folder = tmp_path / "run"
    folder.mkdir()
    args = overrides(folder, tiny_model_dir, steps=4)
    config = load(None, args)
    seed_pool(_resolved(config, folder))
    command = [sys.executable, "-m", "selfplay.cli", "run", *args]
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    deadline = time.monotonic() + 300
    while not (folder / "checkpoints" / "step-000002").exists():
        assert proc.poll() is None, proc.stdout.read().decode()
        assert time.monotonic() < deadline, "the run did not reach its second checkpoint"
        time.sleep(0.2)
    time.sleep(1.0)  # into step 3
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    resumed = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    steps = [m["step"] for m in read_metrics(folder)]
    assert steps == [1, 2, 3, 4], steps  # each step once, lost ones dropped and redone
    # the samples of a lost step are dropped too: each step's rollouts appear once
    lines = (folder / "samples.jsonl").read_text().splitlines()
    per_step = [sum(json.loads(line)["step"] == s for line in lines) for s in steps]
    assert per_step == [int(m["reward/rollouts"]) for m in read_metrics(folder)]
    proposals = [x["step"] for x in records(folder / "proposals.jsonl")]
    assert [proposals.count(s) for s in steps] == [
        int(m["propose/proposals"]) for m in read_metrics(folder)
    ]
    store = TaskStore.open(str(folder / "pool.sqlite"), "test", config.curriculum)
    from selfplay.curriculum.schema import Attempt

    with store.engine.connect() as connection:
        rows = connection.execute(
            select(Attempt.task_id, Attempt.step, Attempt.model_version)
        ).all()
    assert len(rows) == len(set(rows))  # nothing counted twice
    assert {step for _, step, _ in rows} >= {1, 2, 3, 4}
    store.close()
    assert (
        json.loads((folder / "checkpoints" / "step-000004" / "checkpoint.json").read_text())["step"]
        == 4
    )


def test_a_run_that_fails_before_writing_anything_leaves_no_folder(tmp_path, monkeypatch, capsys):
    """A model that cannot load (a bad name) stops the run after its log was opened but before
    anything of the run was written: its folder is removed, and the terminal says why."""
    from selfplay import runs

    def no_model(*_, **__):
        raise OSError("smollm-x is not a local folder and not a model name")

    monkeypatch.setattr(runs, "load_model", no_model)
    folder = tmp_path / "store" / "demo"
    config = load(None, [f"run.folder={folder}", "model.name=smollm-x"])
    with pytest.raises(OSError, match="smollm-x") as info:
        run(config)
    assert not folder.exists()
    assert any(f"{folder} held only" in note for note in info.value.__notes__)
    assert f"folder {folder}" in capsys.readouterr().out  # the banner came before
