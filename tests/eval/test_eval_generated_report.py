"""The generated family's frozen held-out tasks as an in-loop benchmark, and `selfplay report`
reading a run folder: proposal rates early and late, each benchmark subset before and after
with the exact McNemar test (answers scripted, so every number is known)."""

from __future__ import annotations

import json

import pytest

from selfplay.cli import main
from selfplay.config import load
from selfplay.eval import generated
from selfplay.eval.in_loop import InLoopEval
from selfplay.eval.report import report
from tests.eval.test_eval_cruxeval import ScriptedEngine

WRAP = "<answer>\n```{}\n{}\n```\n</answer>".format


def answers_for(problems, right: dict[str, list[bool]]) -> list[list[list[str]]]:
    """One generate call per kind: the right answer where `right` says so, else a wrong one
    (or, for the last deduction item, an unreadable one)."""
    calls = []
    for kind, layout, gold in (
        ("deduction", "output", lambda t: t.outputs[0]),
        ("abduction", "input", lambda t: t.inputs[0]),
    ):
        own = [p for p in problems if p.task.type == kind]
        texts = [
            [WRAP(layout, gold(p.task)) if ok else WRAP(layout, "'surely not this'")]
            for p, ok in zip(own, right[kind], strict=True)
        ]
        if kind == "deduction" and not right[kind][-1]:
            texts[-1] = ["I do not know"]
        calls.append(texts)
    return calls


def test_generated_tasks_are_evaluated_and_the_report_pairs_them(tmp_path, executor):
    problems = generated.load_problems(executor, 3)
    assert [p.id for p in problems] == [f"{k}/{i}" for k in generated.KINDS for i in range(3)]
    content = lambda ps: [(p.id, p.task.program, p.task.inputs, p.task.outputs) for p in ps]  # noqa: E731
    assert content(generated.load_problems(executor, 3)) == content(problems)  # frozen
    config = load(None, ["run.eval_benchmarks=[generated]", "run.eval_problems=3"])
    evaluator = InLoopEval(config, executor, None)
    before = evaluator(
        ScriptedEngine(
            answers_for(problems, {"deduction": [True, False, False], "abduction": [False] * 3})
        ),
        tmp_path,
        0,
    )
    after = evaluator(
        ScriptedEngine(
            answers_for(
                problems, {"deduction": [True, True, True], "abduction": [True, False, False]}
            )
        ),
        tmp_path,
        4,
    )
    assert before == pytest.approx(
        {"eval/generated_deduction/pass@1": 1 / 3, "eval/generated_abduction/pass@1": 0.0}
    )
    assert after == pytest.approx(
        {"eval/generated_deduction/pass@1": 1.0, "eval/generated_abduction/pass@1": 1 / 3}
    )
    rows = [json.loads(x) for x in (tmp_path / "eval/generated-step000000.jsonl").open()]
    assert [r["reason"] for r in rows[:3]] == ["ok", "wrong_output", "no_answer"]

    steps = [
        {"step": s, "propose/parse_rate/deduction": p, "propose/valid_rate/deduction": v}
        for s, p, v in ((1, 0.25, 0.0), (2, 0.5, 0.25), (3, 0.75, 0.5), (4, 1.0, 0.75))
    ]
    for row, new in zip(steps, (0, 1, 2, 3), strict=True):
        row["propose/new_tasks"] = new
    lines = [json.dumps({"step": 0, **before})] + [json.dumps(s) for s in steps]
    (tmp_path / "metrics.jsonl").write_text("\n".join([*lines, '{"step": 5, "cut off'] + [""]))

    got = report(tmp_path)
    assert got["steps"] == 4 and got["unreadable_metric_lines"] == 1
    proposals = got["proposals"]
    assert proposals["first_steps"] == [1, 1] and proposals["last_steps"] == [4, 4]
    assert proposals["deduction/parse_rate"] == [0.25, 1.0]
    assert proposals["deduction/valid_rate"] == [0.0, 0.75]
    assert proposals["new_tasks"] == [0, 3] and proposals["new_tasks_total"] == 6
    deduction = got["benchmarks"]["generated_deduction"]
    assert deduction == {
        "steps": [0, 4],
        "n": 3,
        "before": 0.3333,
        "after": 1.0,
        "delta": 0.6667,
        "gained": 2,
        "lost": 0,
        "p_value": 0.5,  # two discordant items, both gained: 2 x (1/2)^2
    }
    abduction = got["benchmarks"]["generated_abduction"]
    assert (abduction["gained"], abduction["lost"], abduction["p_value"]) == (1, 0, 1.0)


def test_eval_command_on_the_generated_tasks(tmp_path, tiny_model_dir, capsys):
    out = tmp_path / "eval"
    argv = ["eval", "generated", "--model", str(tiny_model_dir), "--limit", "2"]
    argv += ["--out", str(out), "engine.backend=transformers", "generation.max_new_tokens=8"]
    assert main(argv) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["problems"] == 4  # two of each kind
    assert {k for k in summary if "pass@" in k} == {
        "generated_deduction/pass@1",
        "generated_abduction/pass@1",
    }
    rows = [json.loads(line) for line in (out / "samples.jsonl").read_text().splitlines()]
    assert [r["subset"] for r in rows] == ["generated_deduction"] * 2 + ["generated_abduction"] * 2
    capsys.readouterr()
    assert main([*argv, "--data", "tasks.jsonl"]) != 0
    assert "no --data" in capsys.readouterr().err


def test_report_of_a_run_evaluated_once_and_the_command(tmp_path, capsys):
    (tmp_path / "eval").mkdir()
    (tmp_path / "eval/cruxeval-step000000.jsonl").write_text(
        json.dumps({"subset": "cruxeval_o", "id": "0", "correct": True}) + "\n"
    )
    assert main(["report", str(tmp_path)]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["benchmarks"] == {
        "cruxeval": {"note": "evaluated only at step 0: nothing to compare"}
    }
    assert printed["proposals"] == {} and printed["steps"] == 0
    with pytest.raises(FileNotFoundError, match="no run folder"):
        report(tmp_path / "missing")


def test_report_compares_two_evaluations_made_outside_a_run(tmp_path, capsys):
    def write(folder, correct):
        folder.mkdir()
        rows = [
            {"subset": subset, "id": str(i), "correct": ok}
            for subset, flags in correct.items()
            for i, ok in enumerate(flags)
        ]
        (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    write(tmp_path / "base", {"cruxeval_o": [0, 0, 0, 1] * 5, "cruxeval_i": [1, 0]})
    write(tmp_path / "trained", {"cruxeval_o": [1, 1, 0, 1] * 5, "cruxeval_i": [1, 0, 1]})
    argv = ["report", "--compare", str(tmp_path / "base"), str(tmp_path / "trained")]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    o, i = printed["cruxeval_o"], printed["cruxeval_i"]
    assert (o["n"], o["before"], o["after"], o["gained"], o["lost"]) == (20, 0.25, 0.75, 10, 0)
    assert o["p_value"] == pytest.approx(2 / 2**10, rel=3e-3)  # rounded to 3 digits
    assert i["n"] == 2 and (i["gained"], i["lost"], i["p_value"]) == (0, 0, 1.0)  # shared items
    assert main(["report"]) == 2 and "--compare" in capsys.readouterr().err
    assert main(["report", "--compare", str(tmp_path / "base"), str(tmp_path / "none")]) != 0
    assert "no per-sample evaluation" in capsys.readouterr().err


@pytest.fixture(scope="module")
def executor():
    from selfplay.executor import Executor

    with Executor() as ex:
        yield ex
