"""CRUXEval-O/I scoring with the executor as judge, and `selfplay eval cruxeval` end to end."""

from __future__ import annotations

import json

import pytest

from selfplay.cli import main
from selfplay.engine import SamplingParams
from selfplay.engine.base import Completion, Generation, Message
from selfplay.eval.cruxeval import evaluate, load_problems
from selfplay.eval.cruxeval_formats import (
    EXAMPLE_ANSWERS,
    SYSTEM,
    copies_example,
    published_answer,
    published_prompt,
)
from selfplay.eval.harness import failure
from selfplay.executor import Executor
from selfplay.judge import Judge
from selfplay.types import Task
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
    out = "[ANSWER]\nassert f({}) == {}\n".format
    # CRUXEval-O: problem 0 right twice, 1 right once and unquoted once, 2 wrong twice, 3
    # unreadable and right
    p = problems
    outputs = [
        [out(p[0].input_text, p[0].output_text)] * 2,
        [out(p[1].input_text, p[1].output_text), out(p[1].input_text, "{1: None, 2: no}")],
        [out(p[2].input_text, "12345678"), out(p[2].input_text, "None")],
        ["", out(p[3].input_text, p[3].output_text)],  # nothing written
    ]
    # CRUXEval-I: the gold input is right; any other input is judged by running f on it
    inputs = [[out(q.input_text, q.output_text)] * 2 for q in problems]
    engine = ScriptedEngine([outputs, inputs])
    params = SamplingParams(n=2, temperature=0.8)
    metrics, items = evaluate(engine, Judge(executor), problems, None, params, ks=(1, 2))
    assert metrics["cruxeval_o/pass@1"] == pytest.approx((1 + 0.5 + 0 + 0.5) / 4)
    assert metrics["cruxeval_o/pass@2"] == pytest.approx(3 / 4)
    assert metrics["cruxeval_i/pass@1"] == metrics["cruxeval_i/pass@2"] == 1.0
    assert len(items) == 16
    o = [i for i in items if i["subset"] == "cruxeval_o"]
    assert [(i["id"], i["sample"]) for i in o[:4]] == [
        ("sample_0", 0),
        ("sample_0", 1),
        ("sample_1", 0),
        ("sample_1", 1),
    ]
    assert [i["failure"] for i in o] == [
        *(None, None, None, "not_a_value"),
        *("wrong_value", "wrong_value", "unreadable", None),
    ]
    first = o[0]
    assert first["program"].startswith("def f(nums):") and first["prompt_format"] == "direct"
    assert (first["input"], first["output"]) == (p[0].input_text, p[0].output_text)
    # sample_2 returns its input unchanged: copying is right both ways
    assert [i["trivial"] for i in o[::2]] == [False, False, True, False]
    i_rows = [i for i in items if i["subset"] == "cruxeval_i"]
    assert [i["trivial"] for i in i_rows[::2]] == [False, False, True, False]


def test_the_copy_answer_is_judged_as_the_evaluation_judges(executor):
    """`trivial` is what the copy answer gets from the judge: on CRUXEval-O the single input
    given as the output (several arguments: never), on CRUXEval-I the output given as the
    input. Counted on all 800 problems, as docs/results.md says."""
    problems = load_problems(executor, require_data("cruxeval/cruxeval.jsonl"))
    assert len(problems) == 800
    assert sum(p.output_trivial for p in problems) == 68
    assert sum(p.input_trivial for p in problems) == 181
    by_id = {p.id: p for p in problems}
    assert by_id["sample_2"].output_trivial  # its output is its input
    assert not by_id["sample_3"].output_trivial  # two arguments
    judge = Judge(executor, inputs="expression")
    for p in problems[:40]:
        [[i_copy]] = judge.judge([(p.input_task, [p.input_task.output])])
        assert i_copy.ok == p.input_trivial, p.id


def test_how_an_input_answer_failed(executor):
    """An input answer the program fails on is a wrong value, also where the failure is a
    sandbox guard (sample_441's program assigns an item of the int 37: plain Python raises
    TypeError inside `f`); one whose own evaluation builds no value, whatever stopped it (an
    undefined name, the memory or time limit), is not a value."""
    program = "def f(base, k, v):\n    base[k] = v\n    return base"
    [v] = executor.validate([(program, "{37: 'forty-five'}, '23', 'what?'")], "expression")
    task = Task("abduction", program, (v.input,), (v.output,), cpu_s=v.cpu_s)
    answers = [
        "37, 'forty-five', 'what?'",
        "[], 0, 1",
        "undefined_name, 0, 1",
        "'a' * 10**10, 0, 1",
        "sum(range(10**11)), 0, 1",
    ]
    [verdicts] = Judge(executor, inputs="expression").judge([(task, answers)])
    assert [failure(a, v) for a, v in zip(answers, verdicts, strict=True)] == [
        "wrong_value", "wrong_value", "not_a_value", "not_a_value", "not_a_value"
    ]  # fmt: skip


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
            "engine.backend=transformers",  # the tiny model; vLLM has its own tests
        ]
    )
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["problems"] == 3 and summary["samples"] == 2
    assert summary["prompt_format"] == "direct"
    # where it was made: greedy answers differ across precisions and machines
    assert summary["environment"]["dtype"] in ("float32", "bfloat16")
    assert summary["environment"]["packages"]["torch"]
    for name in ("cruxeval_o/pass@1", "cruxeval_o/pass@2", "cruxeval_i/pass@1"):
        assert 0.0 <= summary[name] <= 1.0
    lines = (out / "samples.jsonl").read_text().splitlines()
    assert len(lines) == 3 * 2 * 2  # problems x samples x subsets
    printed = capsys.readouterr().out
    assert "cruxeval_o/pass@1" in printed and "prompt format direct" in printed
    rows = [json.loads(line) for line in lines]
    assert [(r["id"], r["sample"]) for r in rows[:4]] == [
        ("sample_0", 0),
        ("sample_0", 1),
        ("sample_1", 0),
        ("sample_1", 1),
    ]
    assert {"program", "input", "output", "trivial", "failure"} <= rows[0].keys()


CODE = "def f(d):\n    return {k: v for k, v in d.items()}"


def test_published_prompts_render_the_benchmarks_format():
    system, user = published_prompt("deduction", "direct", CODE, "{'a': 1}", "unused")
    assert system.content == SYSTEM and user.content.startswith("You are given a Python function")
    assert "[ANSWER]\nassert f(17) == 17\n[/ANSWER]" in user.content  # the published few-shot
    assert user.content.endswith(
        f"[PYTHON]\n{CODE}\nassert f({{'a': 1}}) == ??\n[/PYTHON]\n[ANSWER]\n"
    )
    cot = published_prompt("deduction", "cot", CODE, "{'a': 1}", "unused")[1].content
    assert "Execute the program step by step" in cot and cot.endswith("[/PYTHON]\n[THOUGHT]\n")
    direct_i = published_prompt("abduction", "direct", CODE, "unused", "{'a': 1}")[1].content
    assert direct_i.endswith(f"{CODE}\nassert f(??) == {{'a': 1}}\n[/PYTHON]\n[ANSWER]\n")
    assert 'assert f("ba", "nana") == "banana"' in direct_i and "unused" not in direct_i
    cot_i = published_prompt("abduction", "cot", CODE, "unused", "3")[1].content
    assert "First, think step by step." in cot_i and cot_i.endswith(
        "assert f(??) == 3\n[/PYTHON]\n[THOUGHT]\n"
    )


@pytest.mark.parametrize(
    "text, kind, style, expected",
    [
        ("[ANSWER]\nassert f([1, 2]) == [2, 1]\n", "deduction", "direct", "[2, 1]"),
        ("assert f('x') == 'x9ja'", "deduction", "direct", "'x9ja'"),
        ("'x9ja'", "deduction", "direct", "'x9ja'"),
        (
            "1. f(1) == 2 at first\n[/THOUGHT]\n[ANSWER]\nassert f(1) == 3\n",
            "deduction",
            "cot",
            "3",
        ),
        ("[ANSWER]\nassert f('ba', 'nana') == 'banana'\n", "abduction", "direct", "'ba', 'nana'"),
        (
            "So f(??) == 17 needs 16.\n[/THOUGHT]\n[ANSWER]\nassert f(16) == 17",
            "abduction",
            "cot",
            "16",
        ),
        ("assert f(x=[1]) == 1", "abduction", "direct", "x=[1]"),
        # a comment after the call, parentheses in it, is no part of the arguments
        (
            "[ANSWER]\nf('hbtofdeiequ')  # any text without '+' (it is kept as is)\n",
            "abduction",
            "cot",
            "'hbtofdeiequ'",
        ),
        ("f((1), (2))  # (two)", "abduction", "direct", "(1), (2)"),
    ],
)
def test_published_answer_extraction(text, kind, style, expected):
    assert published_answer(text, kind, style) == expected


def test_published_extraction_refuses_what_the_benchmark_could_not_pass():
    assert published_answer("assert 16 == 17", "abduction", "direct").reason == "no_answer"
    assert published_answer("[ANSWER]\n", "deduction", "cot").reason == "no_answer"


def test_published_format_end_to_end(executor):
    problems = load_problems(executor, require_data("cruxeval/cruxeval.jsonl"), limit=2)
    outputs = [[f"[ANSWER]\nassert f({p.input_text}) == {p.output_text}"] for p in problems]
    inputs = [[f"[ANSWER]\nassert f({p.input_text}) == {p.output_text}"] for p in problems]
    # an answer that copies the example's value without writing the document over again
    inputs[1] = [f'[ANSWER]\nassert f(["mq", "px", "zy"]) == {problems[1].output_text}']
    # a reply that writes the prompt's document over again, from its first example
    outputs[1] = ["[PYTHON]\ndef f(n):\n    return n\nassert f(17) == 17\n[/PYTHON]\n"]
    engine = RecordingEngine([outputs, inputs])
    params = SamplingParams(temperature=0)
    metrics, items = evaluate(
        engine, Judge(executor), problems, None, params, prompt_format="direct"
    )
    assert metrics["cruxeval_o/pass@1"] == 0.5 and metrics["cruxeval_i/pass@1"] == 0.5
    assert metrics["cruxeval_o/example_share"] == 0.5
    assert metrics["cruxeval_i/example_share"] == 0.5
    # `17` where problem 1 returns a dict: wrong, and not even of the output's type
    assert metrics["cruxeval_o/wrong_type_share"] == 0.5
    assert metrics["cruxeval_o/restart_share"] == 0.5 and metrics["cruxeval_i/restart_share"] == 0
    assert [row["reply"] for row in items[:2]] == [outputs[0][0], outputs[1][0]]
    assert metrics["cruxeval_i/wrong_type_share"] == 0.5  # a list where a str goes
    assert engine.params[0].stop == ("[/ANSWER]",)
    assert engine.prompts[0][0][1].content.endswith("[ANSWER]\n")
    assert f"assert f(??) == {problems[0].output_text}" in engine.prompts[1][0][1].content
    with pytest.raises(ValueError, match="prompt format"):
        evaluate(engine, Judge(executor), problems, None, params, prompt_format="fancy")


def test_the_completion_format_asks_the_direct_prompt_as_a_text_to_continue(executor):
    """As CRUXEval's harness asks open models: the direct prompt alone, no system message and
    no chat template, continued after its last `[ANSWER]`; read and scored as direct."""
    problems = load_problems(executor, require_data("cruxeval/cruxeval.jsonl"), limit=2)
    outputs = [[f"assert f({p.input_text}) == {p.output_text}\n"] for p in problems]
    inputs = [[f"assert f({p.input_text}) == {p.output_text}\n"] for p in problems]
    outputs[1] = ["assert f(17) == 17\n"]  # the worked example's answer
    engine = RecordingEngine([outputs, inputs])
    params = SamplingParams(temperature=0)
    metrics, items = evaluate(
        engine, Judge(executor), problems, None, params, prompt_format="completion"
    )
    assert metrics["cruxeval_o_completion/pass@1"] == 0.5
    assert metrics["cruxeval_i_completion/pass@1"] == 1.0
    assert metrics["cruxeval_o_completion/example_share"] == 0.5
    assert {row["prompt_format"] for row in items} == {"completion"}
    [prompt] = engine.prompts[0][:1]
    direct = published_prompt(
        "deduction",
        "direct",
        problems[0].output_task.program,
        problems[0].input_text,
        problems[0].output_text,
    )
    assert prompt == (Message("assistant", direct[-1].content),)
    assert engine.params[0].stop == ("[/ANSWER]",)


class RecordingEngine(ScriptedEngine):
    """A scripted engine that keeps the prompts and sampling parameters it was given."""

    def __init__(self, answers):
        super().__init__(answers)
        self.prompts, self.params = [], []

    def generate(self, prompts, params):
        self.prompts.append(list(prompts))
        self.params.append(params)
        return super().generate(prompts, params)


def test_published_formats_are_for_cruxeval_only(capsys):
    assert main(["eval", "gsm8k", "--model", "unused", "--prompt-format", "cot"]) != 0
    assert "cruxeval only" in capsys.readouterr().err


@pytest.mark.parametrize("kind", ["deduction", "abduction"])
@pytest.mark.parametrize("style", ["direct", "cot"])
def test_the_example_answers_are_those_the_published_prompts_show(kind, style):
    """Each recorded example answer is what `published_answer` extracts from one of the
    prompt's own worked `[ANSWER]` blocks, and nothing else is."""
    text = published_prompt(kind, style, "def f(x):\n    return x", "1", "1")[-1].content
    # the worked examples' blocks; the problem's own is left open
    blocks = [b for b in text.split("[ANSWER]\n")[1:] if "[/ANSWER]" in b]
    shown = {published_answer(b.split("\n[/ANSWER]")[0], kind, "direct") for b in blocks}
    assert shown == set(EXAMPLE_ANSWERS[(kind, style)])
    assert all(copies_example(a, kind, style) for a in shown)
    assert not copies_example("[1, 2, 3]", kind, style)


def test_the_example_share_counts_answers_that_are_the_worked_examples():
    from selfplay.eval.cruxeval import example_share

    def rows(subset, style, answers):
        return [{"subset": subset, "prompt_format": style, "answer": a} for a in answers]

    outputs = rows("cruxeval_o", "direct", ["17", "17\n[/PYTHON]", "'x9ja'", "[1]", None])
    assert example_share(outputs, "direct") == pytest.approx(2 / 5)  # '"x9ja"' in the prompt
    inputs = rows("cruxeval_i_cot", "cot", ["16", "15"])
    assert example_share(inputs, "cot") == 0.5
    assert example_share(rows("cruxeval_o_selfplay", "selfplay", ["17"]), "selfplay") is None
    assert example_share([], "direct") is None


def test_a_restart_is_read_from_the_reply_or_from_an_older_record_s_answer():
    from selfplay.eval.cruxeval import row_restarts

    restart = "[PYTHON]\ndef f(n):\n    return n\nassert f(17) == 17\n[/PYTHON]\n[ANSWER]\n"
    row = {"subset": "cruxeval_o", "prompt_format": "direct", "answer": "17\n[/PYTHON]\n[ANSWER]"}
    assert row_restarts({**row, "reply": restart}) is True
    assert row_restarts({**row, "reply": "[ANSWER]\nassert f(1) == 17\n"}) is False
    # without the reply: the extraction's reading of a restart that ran past its assertion
    assert row_restarts(row) is True
    assert row_restarts({**row, "answer": "17"}) is False  # a copy of the value, or too short
    assert row_restarts({**row, "prompt_format": "completion"}) is True
    assert row_restarts({**row, "prompt_format": "selfplay"}) is None
    assert row_restarts({**row, "subset": "cruxeval_i"}) is None  # nothing to read it by
    assert row_restarts({**row, "subset": "cruxeval_i", "reply": restart}) is True
