"""What a run prints: its size at the start, the step line with the warning signs of a failing
run, and a line per evaluation."""

from __future__ import annotations

import contextvars
import io
from pathlib import Path

import pytest

from selfplay import console
from selfplay.config import load
from selfplay.progress import Progress


def test_the_banner_gives_the_run_s_size_and_where_its_output_goes():
    config = load(
        None,
        [
            "curriculum.run=demo",
            "run.steps=3",
            "run.eval_every=5",
            "run.eval_problems=800",
            "selfplay.proposals=4",
            "selfplay.task_types=[deduction, abduction]",
            "selfplay.solver_tasks=6",
            "selfplay.solver_samples=2",
            "generation.max_new_tokens=256",
            "model.name=smollm2-135m-instruct",
            "engine.backend=vllm",
        ],
    )
    out = io.StringIO()
    progress = Progress(out, 3, Path("store/demo/run.log"))
    progress.banner(config, Path("store/demo"), "cpu", 1, "float32")
    text = out.getvalue()
    for part in (
        "selfplay run demo: 3 steps, folder store/demo",
        "model smollm2-135m-instruct on cpu, update in float32, generation with vllm",
        "proposals per step: 4 prompts x 1 for each of deduction, abduction",
        "answers per step: 4 to each new task, 2 to each of 6 pool tasks; at most 256 tokens",
        "cruxeval (first 800 problems) before the first step, every 5 steps, after the last",
        "store/demo/run.log",
    ):
        assert part in text, part


def test_the_step_line_carries_the_warning_signs():
    out = io.StringIO()
    progress = Progress(out, 20)
    metrics = {
        "timing_s/step": 61.0,
        "propose/valid_rate/deduction": 0.5,
        "propose/duplicate_share": 0.75,
        "propose/trivial_share": 0.25,
        "update/entropy": 0.18,
        "propose/clipped_ratio": 0.0,
        "solve/clipped_ratio": 0.125,
    }
    progress.step(7, metrics)
    line = out.getvalue()
    assert line.startswith("step   7/20") and line.endswith("\n") and "\r" not in line
    assert "no new work 75% (trivial 25%)" in line
    assert "entropy 0.18" in line and "cut prop 0% ans 12%" in line
    progress.step(8, {})  # a step without an update or proposals
    assert "entropy - | cut prop - ans -" in out.getvalue().splitlines()[1]


def test_an_evaluation_line_and_the_stage_labels_the_bars():
    out = io.StringIO()
    progress = Progress(out, 20)
    metrics = {"eval/cruxeval_o/pass@1": 0.25, "eval/cruxeval_i/pass@1": 0.125, "other": 1.0}
    progress.evaluation(0, metrics, 125.0)
    expected = "eval before the first step: pass@1 cruxeval_o 0.250, cruxeval_i 0.125  (02:05)\n"
    assert out.getvalue() == expected
    progress.step(2, {})
    context = contextvars.copy_context()  # the label stays in there
    context.run(progress.stage, "solve")
    assert context[console.activity] == ("step 3/20 solve", "answer")


def test_bf16_on_a_cpu_without_it_stops_the_run_before_its_folder_exists(tmp_path, monkeypatch):
    """An explicit bf16 where the CPU would emulate it is refused with the key to change; auto
    is float32 on a CPU; bf16 where the CPU has it is kept."""
    from selfplay import loop, runs
    from selfplay.config.fields import ConfigError

    monkeypatch.setattr(runs.torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(runs.torch.backends.mps, "is_available", lambda: False)
    monkeypatch.setattr(runs, "cpu_has_bf16", lambda: False)
    folder = tmp_path / "run"
    config = load(None, [f"run.folder={folder}", "trainer.mixed_precision=bf16"])
    with pytest.raises(ConfigError, match=r"no native bfloat16.*trainer.mixed_precision=auto"):
        loop.run(config)
    assert not folder.exists()
    assert runs._mixed_precision("auto") == "no"
    monkeypatch.setattr(runs, "cpu_has_bf16", lambda: True)
    assert runs._mixed_precision("bf16") == "bf16"


@pytest.mark.parametrize(
    ("settings", "refused"),
    [
        (["generation.solve_temperature=0"], "solve_temperature=0 with the solve role"),
        (
            ["generation.temperature=0", "generation.solve_temperature=0.5"],
            "temperature=0 with the propose",
        ),
        (["generation.temperature=0"], "temperature=0 with the propose"),
    ],
)
def test_a_trained_role_sampled_greedily_is_refused_before_the_model_loads(
    tmp_path, settings, refused
):
    """Greedy samples of one prompt are alike: a trained role's groups would carry no advantage."""
    from selfplay import loop
    from selfplay.config.fields import ConfigError

    folder = tmp_path / "run"
    with pytest.raises(ConfigError, match=refused):
        loop.run(load(None, [f"run.folder={folder}", *settings]))
    assert not folder.exists()
    # a role not trained may sample greedily: the proposer of a solver-only run, say
    only = load(
        None,
        [
            "generation.temperature=0",
            "generation.solve_temperature=0.5",
            "selfplay.train_roles=[solve]",
        ],
    )
    only.generation.check_trained(only.selfplay.train_roles)
