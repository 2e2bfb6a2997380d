"""CRUXEval-O/I scoring with the executor as judge, and `selfplay eval cruxeval` end to end."""

from __future__ import annotations

import json

import pytest

from selfplay.cli import main
from selfplay.engine import SamplingParams
from selfplay.engine.base import Completion, Generation
from selfplay.eval.cruxeval import evaluate, load_problems
from selfplay.executor import Executor
from selfplay.judge import Judge
from tests.conftest import require_data


class ScriptedEngine:
    """Answers every prompt with given texts (the generation protocol, no model): the judge's
    arithmetic is then known exactly."""

    tokenizer = None

    def __init__(self, answers):
        self.answers = answers  # one list of answer texts per prompt, in order
        self.calls = 0

    def generate(self, prompts, params):
        out = []
        for texts in self.answers[self.calls]:
            completions = tuple(Completion(t, (1,), (0.0,), "stop") for t in texts)
            out.append(Generation((1,), completions))
        self.calls += 1
        assert len(out) == len(prompts)
        return out


@pytest.fixture(scope="module")
def executor():
    with Executor() as ex:
        yield ex


def test_gold_answers_score_one_and_wrong_ones_zero(executor):
    problems = load_problems(executor, require_data("cruxeval/cruxeval.jsonl"), limit=4)
    assert [p.id for p in problems] == ["sample_0", "sample_1", "sample_2", "sample_3"]
    wrap = "<answer>\n```{}\n{}\n```\n</answer>".format
    # CRUXEval-O: problem 0 right twice, 1 right once, 2 wrong twice, 3 unreadable and right
    outputs = [
        [wrap("output", problems[0].output_task.outputs[0])] * 2,
        [wrap("output", problems[1].output_task.outputs[0]), wrap("output", "'no'")],
        [wrap("output", "12345678"), wrap("output", "None")],
        ["I do not know", wrap("output", problems[3].output_task.outputs[0])],
    ]
    # CRUXEval-I: the gold input is right; any other input is judged by running f on it
    inputs = [[wrap("input", p.input_task.inputs[0])] * 2 for p in problems]
    engine = ScriptedEngine([outputs, inputs])
    params = SamplingParams(n=2, temperature=0.8)
    metrics, items = evaluate(engine, Judge(executor), problems, None, params, ks=(1, 2))
    assert metrics["cruxeval_o/pass@1"] == pytest.approx((1 + 0.5 + 0 + 0.5) / 4)
    assert metrics["cruxeval_o/pass@2"] == pytest.approx(3 / 4)
    assert metrics["cruxeval_i/pass@1"] == metrics["cruxeval_i/pass@2"] == 1.0
    assert len(items) == 16
    unreadable = [i for i in items if i["subset"] == "cruxeval_o" and i["answer"] is None]
    assert len(unreadable) == 1 and not unreadable[0]["correct"]


def test_eval_command_on_a_model_folder(tmp_path, tiny_model_dir, capsys):
    data = require_data("cruxeval/cruxeval.jsonl")
    out = tmp_path / "eval"
    code = main(
        [
            "eval",
            "cruxeval",
            "--model",
            str(tiny_model_dir),
            "--data",
            str(data),
            "--limit",
            "3",
            "--samples",
            "2",
            "--k",
            "1",
            "2",
            "--out",
            str(out),
            "generation.max_new_tokens=16",
            "executor.workers=2",
        ]
    )
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["problems"] == 3 and summary["samples"] == 2
    for name in ("cruxeval_o/pass@1", "cruxeval_o/pass@2", "cruxeval_i/pass@1"):
        assert 0.0 <= summary[name] <= 1.0
    lines = (out / "samples.jsonl").read_text().splitlines()
    assert len(lines) == 3 * 2 * 2  # problems x samples x subsets
    assert "cruxeval_o/pass@1" in capsys.readouterr().out
