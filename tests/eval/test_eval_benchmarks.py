"""GSM8K, MATH-500 (math checker as judge), HumanEval and MBPP (their tests in the sandbox):
scoring with a scripted engine whose answers are known, and `selfplay eval` end to end."""

from __future__ import annotations

import json

import pytest

from selfplay.cli import main
from selfplay.config import ExecutorConfig, MathCheckConfig
from selfplay.engine import SamplingParams
from selfplay.eval import code_benchmarks, math_benchmarks
from selfplay.executor import Executor
from selfplay.judge import Judge
from selfplay.mathcheck import MathChecker
from tests.conftest import require_data
from tests.eval.test_eval_cruxeval import ScriptedEngine

pytestmark = pytest.mark.data

PARAMS = SamplingParams(n=2, temperature=0.8)


@pytest.fixture(scope="module")
def math_judge():
    with MathChecker(MathCheckConfig()) as c:
        yield Judge(None, c)


@pytest.fixture(scope="module")
def code_judge():
    with Executor(code_benchmarks.executor_config(ExecutorConfig())) as ex:
        yield code_benchmarks.CodeTestJudge(ex)


def test_gsm8k_scoring(math_judge):
    path = require_data("gsm8k/test.jsonl")
    problems = math_benchmarks.load_problems("gsm8k", path, limit=3)
    assert [p.gold for p in problems] == ["18", "3", "70000"]
    answers = [
        ["<think>16 - 3 - 4 = 9</think>\n<answer>\\boxed{18}", "She makes $18 a day.\n#### 18"],
        ["<answer>\\boxed{3}</answer>", "<answer>\\boxed{4}</answer>"],
        ["I do not know.", "The answer is $70,000."],
    ]
    engine = ScriptedEngine([answers])
    metrics, items = math_benchmarks.evaluate(
        engine, math_judge, problems, None, PARAMS, ks=(1, 2), name="gsm8k"
    )
    assert metrics["gsm8k/pass@1"] == pytest.approx((1 + 0.5 + 0.5) / 3)
    assert metrics["gsm8k/pass@2"] == 1.0
    assert [i["correct"] for i in items] == [True, True, True, False, False, True]
    assert [i["reason"] for i in items[2:5]] == ["ok", "not_equal", "no_answer"]
    assert items[5]["answer"] == "70000"


def test_math500_scoring(math_judge):
    path = require_data("math500/test.jsonl")
    problems = math_benchmarks.load_problems("math500", path, limit=2)
    assert problems[0].gold == "\\left( 3, \\frac{\\pi}{2} \\right)"
    assert problems[0].id == "test/precalculus/807.json"
    answers = [
        ["<answer>$\\boxed{(3, \\pi/2)}$</answer>", "<answer>\\boxed{(\\pi/2, 3)}</answer>"],
        [f"So the answer is $\\boxed{{{problems[1].gold}}}$.", "<answer>\\boxed{p + q}"],
    ]
    metrics, items = math_benchmarks.evaluate(
        ScriptedEngine([answers]), math_judge, problems, None, PARAMS, ks=(1, 2), name="math500"
    )
    assert [i["correct"] for i in items] == [True, False, True, False]
    assert metrics["math500/pass@1"] == 0.5 and metrics["math500/pass@2"] == 1.0


def test_humaneval_scoring(code_judge):
    problems = code_benchmarks.load_problems(
        "humaneval", require_data("humaneval/HumanEval.jsonl.gz"), limit=3
    )
    first, second, third = (p.record for p in problems)
    block = "<answer>\n```python\n{}\n```\n</answer>".format
    answers = [
        # the whole function (prompt and canonical body), and a wrong one
        [
            block(first["prompt"] + first["canonical_solution"]),
            block(first["prompt"] + "    return None"),
        ],
        # the body alone continues the prompt's signature
        [block(second["canonical_solution"]), "no code at all"],
        [block("def truncate_number(number):\n    return number % 1.0"), block("import os")],
    ]
    metrics, items = code_benchmarks.evaluate(
        ScriptedEngine([answers]), code_judge, problems, None, PARAMS, (1, 2), "humaneval"
    )
    assert [i["correct"] for i in items] == [True, False, True, False, True, False]
    assert items[1]["reason"] == "crash:AssertionError"
    assert items[3]["reason"] == "no_code"
    assert items[5]["reason"].startswith("policy:")
    assert metrics["humaneval/pass@1"] == pytest.approx(0.5)
    assert metrics["humaneval/pass@2"] == 1.0


def test_mbpp_scoring_on_the_test_split(code_judge):
    problems = code_benchmarks.load_problems("mbpp", require_data("mbpp/mbpp.jsonl"), limit=2)
    assert [p.id for p in problems] == ["11", "12"]
    block = "```python\n{}\n```".format
    answers = [
        [block(problems[0].record["code"])] * 2,
        [block("def sort_matrix(m):\n    return m"), "<answer>\nsorted\n</answer>"],
    ]
    metrics, items = code_benchmarks.evaluate(
        ScriptedEngine([answers]), code_judge, problems, None, PARAMS, (1,), "mbpp"
    )
    assert [i["correct"] for i in items] == [True, True, False, False]
    assert items[2]["reason"] == "crash:AssertionError" and items[3]["reason"] == "no_code"
    assert metrics == {"mbpp/pass@1": 0.5}


@pytest.mark.parametrize(
    ("benchmark", "data"),
    [
        ("gsm8k", "gsm8k/test.jsonl"),
        ("math500", "math500/test.jsonl"),
        ("humaneval", "humaneval/HumanEval.jsonl.gz"),
        ("mbpp", "mbpp/mbpp.jsonl"),
    ],
)
def test_eval_command(benchmark, data, tmp_path, tiny_model_dir, capsys):
    out = tmp_path / "eval"
    argv = ["eval", benchmark, "--model", str(tiny_model_dir), "--data", str(require_data(data))]
    argv += ["--limit", "2", "--samples", "2", "--k", "1", "2", "--out", str(out)]
    argv += ["engine.backend=transformers"]  # the tiny model; vLLM has its own tests
    assert main([*argv, "generation.max_new_tokens=16", "executor.workers=2"]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["benchmark"] == benchmark and summary["problems"] == 2
    for k in (1, 2):
        assert 0.0 <= summary[f"{benchmark}/pass@{k}"] <= 1.0
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert len(rows) == 2 * 2 and {r["benchmark"] for r in rows} == {benchmark}
    assert all(isinstance(r["correct"], bool) and r["reason"] for r in rows)
    assert f"{benchmark}/pass@1" in capsys.readouterr().out


def test_eval_command_refuses_k_above_samples(tiny_model_dir, capsys):
    argv = ["eval", "gsm8k", "--model", str(tiny_model_dir), "--k", "4", "--samples", "2"]
    assert main(argv) == 1
    assert "pass@4 needs at least 4 samples" in capsys.readouterr().err


def test_eval_command_names_a_broken_data_line(tmp_path, tiny_model_dir, capsys):
    data = tmp_path / "broken.jsonl"
    data.write_text('{"question": "1 + 1?", "answer": "#### 2"}\n{"question": "no gold"}\n')
    argv = ["eval", "gsm8k", "--model", str(tiny_model_dir), "--data", str(data)]
    argv += ["--out", str(tmp_path / "out"), "engine.backend=transformers"]
    assert main([*argv, "generation.max_new_tokens=4"]) == 1
    assert "broken.jsonl:2" in capsys.readouterr().err


def test_a_missing_model_folder_is_named_as_one(tmp_path):
    """`--model` naming a folder that is not there (a checkpoint not yet written) is refused
    as a missing folder, not passed to the hub as a malformed id; a hub id stays a hub id."""
    from selfplay.eval.commands import resolve_model

    for spec in (str(tmp_path / "run" / "checkpoints" / "step-000020" / "model"),
                 "store/run/checkpoints/step-000020/model", "./model"):  # fmt: skip
        with pytest.raises(FileNotFoundError, match="no such folder"):
            resolve_model(spec, [])
    assert resolve_model("HuggingFaceTB/SmolLM2-135M-Instruct", [])[1] == (
        "HuggingFaceTB/SmolLM2-135M-Instruct"
    )


def test_a_guard_the_code_trips_while_it_runs_is_a_wrong_value_not_refused_code(code_judge):
    """Code the sandbox refuses to compile is no runnable answer (`not_a_value`); a guard the
    code trips only once its tests run it is the code failing them, as a crash does."""
    from selfplay.eval.harness import failure

    [problem] = code_benchmarks.load_problems(
        "humaneval", require_data("humaneval/HumanEval.jsonl.gz"), limit=3
    )[2:]
    answers = [
        "def truncate_number(number):\n    return type('A', (), {})",  # a guard, at run time
        "import os\ndef truncate_number(number):\n    return number % 1.0",  # refused to compile
        "def truncate_number(number):\n    return 1 / 0",
    ]
    [verdicts] = code_judge.judge([(problem, answers)])
    assert [v.reason for v in verdicts] == [
        "crash:policy",
        "policy:import",
        "crash:ZeroDivisionError",
    ]
    assert verdicts[0].detail.startswith("builtin: type() with three arguments")
    assert [failure(a, v) for a, v in zip(answers, verdicts, strict=True)] == [
        "wrong_value",
        "not_a_value",
        "wrong_value",
    ]
