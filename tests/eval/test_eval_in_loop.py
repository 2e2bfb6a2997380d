"""The in-loop evaluation: each benchmark of `run.eval_benchmarks` scored by its own judge with
the run's engine (a scripted one here, so the scores are known), per-sample results per step in
the run folder, and a tiny-model run that evaluates before its first step and after it."""

from __future__ import annotations

import json

import pytest

from selfplay.config import ConfigError, ExecutorConfig, MathCheckConfig, load
from selfplay.eval import code_benchmarks, math_benchmarks
from selfplay.eval.in_loop import InLoopEval
from selfplay.executor import Executor
from selfplay.files import records
from selfplay.loop import run
from selfplay.mathcheck import MathChecker
from selfplay.trainer.metrics import read_metrics
from tests.conftest import require_data
from tests.eval.test_eval_cruxeval import ScriptedEngine
from tests.test_loop import overrides

pytestmark = pytest.mark.data


def test_each_benchmark_is_scored_by_its_judge_and_logged_per_step(tmp_path):
    crux = records(require_data("cruxeval/cruxeval.jsonl"))[:2]
    gsm = math_benchmarks.load_problems("gsm8k", require_data("gsm8k/test.jsonl"), limit=2)
    mbpp = code_benchmarks.load_problems("mbpp", require_data("mbpp/mbpp.jsonl"), limit=2)
    direct = "[ANSWER]\nassert f({}) == {}\n".format  # the published format, the default
    answers = [
        # CRUXEval-O: 1 of 2
        [[direct(crux[0]["input"], crux[0]["output"])], [direct(crux[1]["input"], "'no'")]],
        [[direct(row["input"], row["output"])] for row in crux],  # CRUXEval-I: 2 of 2
        [[f"<answer>\\boxed{{{gsm[0].gold}}}</answer>"], ["<answer>\\boxed{-1}</answer>"]],
        [[f"```python\n{mbpp[0].record['code']}\n```"], ["no code at all"]],
    ]
    config = load(None, ["run.eval_benchmarks=[cruxeval, gsm8k, mbpp]", "run.eval_problems=2"])
    with Executor(ExecutorConfig()) as executor, MathChecker(MathCheckConfig()) as checker:
        evaluator = InLoopEval(config, executor, checker)
        try:
            metrics = evaluator(ScriptedEngine(answers), tmp_path, 4)
            assert evaluator.code_executor is not None  # started for MBPP, kept for next time
            timeout = evaluator.code_executor.config.run_timeout_s
        finally:
            evaluator.close()
    assert metrics == {
        "eval/cruxeval_o/pass@1": 0.5,
        "eval/cruxeval_i/pass@1": 1.0,
        "eval/cruxeval_o/example_share": 0.0,  # the published format's drift to its example
        "eval/cruxeval_i/example_share": 0.0,
        "eval/cruxeval_o/restart_share": 0.0,  # replies that write the examples over again
        "eval/cruxeval_i/restart_share": 0.0,
        "eval/cruxeval_o/wrong_type_share": 0.5,  # 'no' where a dict is wanted
        "eval/cruxeval_i/wrong_type_share": 0.0,
        "eval/gsm8k/pass@1": 0.5,
        "eval/mbpp/pass@1": 0.5,
    }
    assert timeout >= code_benchmarks.CODE_RUN_TIMEOUT_S  # benchmark tests get more time
    written = {p.name: p for p in (tmp_path / "eval").iterdir()}
    assert sorted(written) == [f"{b}-step000004.jsonl" for b in ("cruxeval", "gsm8k", "mbpp")]
    lines = {
        name: [json.loads(x) for x in p.read_text().splitlines()] for name, p in written.items()
    }
    assert len(lines["cruxeval-step000004.jsonl"]) == 4  # 2 problems x 2 subsets
    mbpp_items = lines["mbpp-step000004.jsonl"]
    assert [(i["id"], i["correct"], i["reason"]) for i in mbpp_items] == [
        ("11", True, "ok"),
        ("12", False, "no_code"),
    ]
    assert [i["correct"] for i in lines["gsm8k-step000004.jsonl"]] == [True, False]


def test_cruxeval_in_the_solvers_format_beside_the_published_one(tmp_path, executor):
    crux = records(require_data("cruxeval/cruxeval.jsonl"))[:1]
    direct = "[ANSWER]\nassert f({}) == {}\n".format(crux[0]["input"], crux[0]["output"])
    wrap = "<answer>\n```{}\n{}\n```\n</answer>".format
    answers = [
        [[direct]],
        [[direct]],
        [[wrap("output", crux[0]["output"])]],
        [[wrap("input", "'wrong'")]],
    ]
    config = load(
        None,
        ["run.eval_problems=1", "run.eval_prompt_formats=[direct, selfplay]", "roles.think=false"],
    )
    metrics = InLoopEval(config, executor, None)(ScriptedEngine(answers), tmp_path, 0)
    assert metrics == {
        "eval/cruxeval_o/pass@1": 1.0,
        "eval/cruxeval_i/pass@1": 1.0,
        "eval/cruxeval_o/example_share": 0.0,
        "eval/cruxeval_i/example_share": 0.0,  # the solver's own format shows no example
        "eval/cruxeval_o/restart_share": 0.0,
        "eval/cruxeval_i/restart_share": 0.0,
        "eval/cruxeval_o/wrong_type_share": 0.0,
        "eval/cruxeval_i/wrong_type_share": 0.0,
        "eval/cruxeval_o_selfplay/pass@1": 1.0,
        "eval/cruxeval_i_selfplay/pass@1": 0.0,
        "eval/cruxeval_o_selfplay/wrong_type_share": 0.0,
        "eval/cruxeval_i_selfplay/wrong_type_share": 1.0,  # 'wrong' where a list is wanted
    }
    rows = [json.loads(x) for x in (tmp_path / "eval/cruxeval-step000000.jsonl").open()]
    assert [(r["subset"], r["prompt_format"]) for r in rows] == [
        ("cruxeval_o", "direct"),
        ("cruxeval_i", "direct"),
        ("cruxeval_o_selfplay", "selfplay"),
        ("cruxeval_i_selfplay", "selfplay"),
    ]
    for formats in ("[]", "[direct, direct]"):
        with pytest.raises(ConfigError, match="eval_prompt_formats"):
            load(None, [f"run.eval_prompt_formats={formats}"])


def test_a_run_evaluates_before_its_first_step_and_every_eval_every(tmp_path, tiny_model_dir):
    for name in ("cruxeval/cruxeval.jsonl", "gsm8k/test.jsonl", "humaneval/HumanEval.jsonl.gz"):
        require_data(name)
    folder = tmp_path / "run"
    args = [
        *overrides(folder, tiny_model_dir, steps=2),
        "run.eval_every=2",
        "run.eval_problems=2",
        "run.eval_benchmarks=[cruxeval, gsm8k, humaneval]",
    ]
    with open(tmp_path / "out.txt", "w") as stream:
        run(load(None, args), out=stream)
    by_step = {m["step"]: m for m in read_metrics(folder)}
    names = ["cruxeval_o", "cruxeval_i", "gsm8k", "humaneval"]
    for step in (0, 2):
        assert all(0.0 <= by_step[step][f"eval/{n}/pass@1"] <= 1.0 for n in names)
    assert not any(k.startswith("eval/") for k in by_step[1])
    files = sorted(p.name for p in (folder / "eval").iterdir())
    assert files == [
        f"{b}-step{s:06d}.jsonl" for b in ("cruxeval", "gsm8k", "humaneval") for s in (0, 2)
    ]


def test_a_run_evaluates_after_its_last_step_whatever_the_step_count():
    from selfplay.config import RunConfig
    from selfplay.loop import _evaluates_after

    run = RunConfig(steps=5, eval_every=2)
    assert [s for s in range(1, 6) if _evaluates_after(run, s)] == [2, 4, 5]
    assert not any(_evaluates_after(RunConfig(steps=5, eval_every=0), s) for s in range(1, 6))


def test_unknown_benchmarks_are_refused():
    with pytest.raises(ConfigError, match="choose from"):
        load(None, ["run.eval_benchmarks=[cruxeval, gsm9k]"])
