"""The generated family's frozen held-out tasks as an in-loop benchmark, and `selfplay report`
reading a run folder: proposal rates early and late, each benchmark subset before and after
with the exact McNemar test (answers scripted, so every number is known)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace

import pytest

from selfplay.cli import main
from selfplay.config import load
from selfplay.eval import generated
from selfplay.eval.in_loop import InLoopEval
from selfplay.eval.report import compare, report
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
    assert {k: deduction[k] for k in ("steps", "n", "before", "after", "delta")} == {
        "steps": [0, 4],
        "n": 3,
        "before": 0.3333,
        "after": 1.0,
        "delta": 0.6667,
    }
    assert (deduction["gained"], deduction["lost"]) == (2, 0)
    assert deduction["p_value"] == 0.5  # two discordant items, both gained: 2 x (1/2)^2
    # one gain from a wrong value, one from an unreadable answer; no item is trivial
    assert deduction["gained_from"] == {"unreadable": 1, "not_a_value": 0, "wrong_value": 1}
    assert deduction["trivial_items"] == 0 and deduction["non_trivial"]["gained"] == 2
    abduction = got["benchmarks"]["generated_abduction"]
    assert (abduction["gained"], abduction["lost"], abduction["p_value"]) == (1, 0, 1.0)
    assert {r["set"] for r in rows} == {generated.VERSION}


def test_the_generated_set_holds_no_trivial_task(executor):
    """Frozen anew (generated-v2): not the seed, no program whose output equals its input or
    does not move with it, none that ignores its input, nothing copying solves."""
    from selfplay.proposer.canonical import canonical_program
    from selfplay.runs import IDENTITY_SEED
    from selfplay.trivial import copy_solves, trivial_reasons

    problems = generated.load_problems(executor)
    tasks = [p.task for p in problems]
    assert len(tasks) == 2 * generated.DEFAULT_PROBLEMS
    seed = canonical_program(IDENTITY_SEED[0])
    assert not any(canonical_program(t.program) == seed for t in tasks)
    assert not any(copy_solves(executor, tasks))
    assert not any(p.trivial for p in problems)
    assert not any(trivial_reasons(executor, tasks))
    identity_like = copy_solves(executor, [replace(t, type="deduction") for t in tasks])
    assert not any(identity_like)  # no output equals its input, abduction items included
    assert len({(t.type, t.program, t.input) for t in tasks}) == len(tasks)
    # frozen: the same items on every machine (a change to the templates or to the trivial
    # checks that moves an item is a new version of the set, `generated.VERSION`)
    content = json.dumps([(p.id, p.task.program, p.task.input, p.task.output) for p in problems])
    assert hashlib.sha256(content.encode()).hexdigest() == GENERATED_V2
    # and a smaller set is the start of the larger one, so evaluations of both pair up
    smaller = generated.load_problems(executor, 50)
    items = {p.id: (p.task.program, p.task.input, p.task.output) for p in problems}
    assert all(items[p.id] == (p.task.program, p.task.input, p.task.output) for p in smaller)


GENERATED_V2 = "2a8cfc69a7ded88e1a7a0244d9690567a45988e51f04f5d4d85b78349b021dcb"


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
    assert main(["report", str(tmp_path), "--json"]) == 0
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
    argv = ["report", "--compare", str(tmp_path / "base"), str(tmp_path / "trained"), "--json"]
    assert main(argv) == 0
    printed = json.loads(capsys.readouterr().out)
    o, i = printed["cruxeval_o"], printed["cruxeval_i"]
    assert (o["n"], o["before"], o["after"], o["gained"], o["lost"]) == (20, 0.25, 0.75, 10, 0)
    assert o["p_value"] == pytest.approx(2 / 2**10, rel=3e-3)  # rounded to 3 digits
    assert i["n"] == 2 and (i["gained"], i["lost"], i["p_value"]) == (0, 0, 1.0)  # shared items
    assert o["non_trivial"] is None  # these records do not say which items copying solves
    assert main(["report"]) == 2 and "--compare" in capsys.readouterr().err
    assert main(["report", "--compare", str(tmp_path / "base"), str(tmp_path / "none")]) != 0
    assert "no per-sample evaluation" in capsys.readouterr().err
    other = tmp_path / "other"
    write(other, {"cruxeval_o_selfplay": [1]})  # another format: no item in common
    assert main(["report", "--compare", str(tmp_path / "base"), str(other)]) == 1
    assert "share no evaluated item" in capsys.readouterr().err


@pytest.fixture(scope="module")
def executor():
    from selfplay.executor import Executor

    with Executor() as ex:
        yield ex


def _record(i: int, sample: int, correct: bool, failure: str | None, trivial: bool) -> dict:
    answer = None if failure == "unreadable" else "x"
    return dict(
        subset="cruxeval_i",
        id=f"sample_{i}",
        sample=sample,
        correct=correct,
        failure=failure,
        trivial=trivial,
        prompt_format="direct",
        answer=answer,
    )


def test_compare_pairs_every_sample_and_sets_trivial_items_apart(tmp_path, capsys):
    """Problems 0-3 are trivial (copying solves them), 4-9 are not; two samples each. The
    trained model gains every trivial sample and, of the others, 2 samples once unreadable,
    3 once not a value and 1 once a wrong value; it loses 1 sample to a wrong value."""
    base, trained = [], []
    for i in range(10):
        for sample in range(2):
            trivial = i < 4
            base.append(_record(i, sample, False, "wrong_value", trivial))
            trained.append(_record(i, sample, trivial, None if trivial else "wrong_value", trivial))
    changes = {
        (4, 0): "unreadable",
        (4, 1): "unreadable",
        (5, 0): "not_a_value",
        (5, 1): "not_a_value",
        (6, 0): "not_a_value",
        (7, 0): "wrong_value",
    }
    for (i, sample), failed in changes.items():
        base[2 * i + sample] = _record(i, sample, False, failed, False)
        trained[2 * i + sample] = _record(i, sample, True, None, False)
    base[18] = _record(9, 0, True, None, False)  # lost to a wrong value
    for name, rows in (("base", base), ("trained", trained)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = compare(tmp_path / "base", tmp_path / "trained")["cruxeval_i"]
    assert (got["n"], got["gained"], got["lost"]) == (20, 14, 1)  # every sample is paired
    assert got["trivial_items"] == 8
    hard = got["non_trivial"]
    assert (hard["n"], hard["gained"], hard["lost"]) == (12, 6, 1)
    assert hard["gained_from"] == {"unreadable": 2, "not_a_value": 3, "wrong_value": 1}
    assert hard["lost_to"] == {"unreadable": 0, "not_a_value": 0, "wrong_value": 1}
    assert hard["p_value"] == pytest.approx(0.125)  # 7 discordant, 1 against: 2 x 8 / 128
    assert got["p_value"] < 0.001 and "warning" not in got
    # samples of one problem are not independent: the sign test on the problems as well
    problems = got["problems"]
    assert {k: problems[k] for k in ("n", "improved", "worsened", "p_value")} == {
        "n": 10,
        "improved": 8,
        "worsened": 1,
        "p_value": 0.0391,
    }
    assert problems["non_trivial"] == {"n": 6, "improved": 4, "worsened": 1, "p_value": 0.375}
    # pass@2 per problem: a right sample on problem 9 before; on 0-7 after (6 and 7: one of
    # two); problems 4-9 are the non-trivial ones
    anyone = problems["any_right"]
    assert anyone["all"] == {
        "n": 10,
        "samples": 2,
        "before": 0.1,
        "after": 0.8,
        "gained": 8,
        "lost": 1,
        "p_value": 0.0391,
    }
    assert anyone["non_trivial"] == {
        "n": 6,
        "samples": 2,
        "before": 0.1667,
        "after": 0.6667,
        "gained": 4,
        "lost": 1,
        "p_value": 0.375,
    }
    argv = ["report", "--compare", str(tmp_path / "base"), str(tmp_path / "trained")]
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert (
        "non-trivial" in table and "gained from unreadable 2, not a value 3, wrong value 1" in table
    )
    assert "problems with a right sample (pass@2), non-trivial: 0.167 -> 0.667 of 6" in table
    assert "per problem (several samples each), non-trivial: 4 improved, 1 worsened of 6" in table

    (tmp_path / "trained" / "samples.jsonl").write_text(
        "".join(json.dumps({**r, "prompt_format": "selfplay"}) + "\n" for r in trained)
    )
    assert (
        "direct vs selfplay"
        in compare(tmp_path / "base", tmp_path / "trained")["cruxeval_i"]["warning"]
    )


def _write(folder, rows) -> None:
    folder.mkdir()
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_pass_at_n_pairs_problems_by_any_right_sample_not_by_their_share(tmp_path, capsys):
    """Two samples a problem: problem 0 goes from one right sample to two (its share rises, it
    had a right sample before and after), problem 1 from two to one, problem 2 from none to
    one, problem 3 from one to none, problems 4-5 from none to two; problem 6 has one paired
    sample, right after only. The sign test sees 5 up / 2 down, pass@n 4 gained / 1 lost."""
    outcomes = {  # problem: (before, after) per sample
        0: [(True, True), (False, True)],
        1: [(True, True), (True, False)],
        2: [(False, True), (False, False)],
        3: [(True, False), (False, False)],
        4: [(False, True), (False, True)],
        5: [(False, True), (False, True)],
        6: [(False, True)],
    }
    base, trained = [], []
    for i, pairs in outcomes.items():
        for sample, (b, a) in enumerate(pairs):
            base.append(_record(i, sample, b, None if b else "wrong_value", False))
            trained.append(_record(i, sample, a, None if a else "wrong_value", False))
    for rows in (base, trained):
        for r in rows:
            del r["trivial"]  # records that do not say which items copying solves
    _write(tmp_path / "base", base)
    _write(tmp_path / "trained", trained)
    problems = compare(tmp_path / "base", tmp_path / "trained")["cruxeval_i"]["problems"]
    assert (problems["improved"], problems["worsened"]) == (5, 2)
    assert problems["non_trivial"] is None
    anyone = problems["any_right"]
    assert anyone["non_trivial"] is None
    assert anyone["all"] == {
        "n": 7,
        "samples": [1, 2],
        "before": 0.4286,
        "after": 0.8571,
        "gained": 4,
        "lost": 1,
        "p_value": 0.375,
    }
    assert main(["report", "--compare", str(tmp_path / "base"), str(tmp_path / "trained")]) == 0
    table = capsys.readouterr().out
    assert "problems with a right sample (pass@n), all: 0.429 -> 0.857 of 7, 4 gained" in table
    assert "non-trivial: " not in table.split("per problem", 1)[1]


def test_compare_across_formats_pairs_one_subset_asked_two_ways(tmp_path, capsys):
    """The same model asked CRUXEval-I directly and with chain of thought: the subsets are
    named apart (`cruxeval_i`, `cruxeval_i_cot`) and pair only when asked to, with the
    formats' difference said. A file that holds one subset in two formats is refused."""
    direct = [_record(i, 0, i < 2, None if i < 2 else "wrong_value", False) for i in range(6)]
    cot = [
        _record(i, 0, i < 5, None if i < 5 else "wrong_value", False)
        | {"subset": "cruxeval_i_cot", "prompt_format": "cot"}
        for i in range(6)
    ]

    def write(name, rows):
        (tmp_path / name).mkdir(exist_ok=True)
        (tmp_path / name / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    write("direct", direct)
    write("cot", cot)
    with pytest.raises(ValueError, match="share no evaluated item.*--across-formats pairs"):
        compare(tmp_path / "direct", tmp_path / "cot")
    # a subset of another benchmark whose name ends like a format is its own subset
    other = _record(0, 0, True, None, False) | {"subset": "generated_abduction_cot"}
    write("direct", [*direct, other | {"correct": False}])
    write("cot", [*cot, other])
    got = compare(tmp_path / "direct", tmp_path / "cot", across_formats=True)
    assert [k for k in got if isinstance(got[k], dict)] == ["cruxeval_i", "generated_abduction_cot"]
    assert got["across_formats"] and got["generated_abduction_cot"]["gained"] == 1
    row = got["cruxeval_i"]
    assert (row["n"], row["gained"], row["lost"]) == (6, 3, 0)
    assert "direct vs cot" in row["warning"]
    argv = ["report", "--compare", str(tmp_path / "direct"), str(tmp_path / "cot")]
    assert main([*argv, "--across-formats", "--json", "--no-figures"]) == 0
    assert json.loads(capsys.readouterr().out)["cruxeval_i"]["gained"] == 3
    assert main([*argv, "--across-formats", "--figures", str(tmp_path / "figures")]) == 0
    assert "paired across prompt formats" in capsys.readouterr().out
    assert list((tmp_path / "figures").glob("*.png"))
    assert main(["report", str(tmp_path), "--across-formats"]) == 2
    assert "--across-formats" in capsys.readouterr().err
    write("both", direct + cot)
    assert main([*argv[:2], str(tmp_path / "both"), str(tmp_path / "cot"), "--across-formats"]) == 1
    assert "more than one prompt format" in capsys.readouterr().err


def test_compare_leaves_out_items_whose_task_changed_under_the_same_id(tmp_path):
    def rows(outputs):
        return [
            {**_record(i, 0, True, None, False), "program": "def f(x):\n    return x + 1",
             "input": str(i), "output": out}
            for i, out in enumerate(outputs)
        ]  # fmt: skip

    for name, outputs in (("a", ["1", "2", "3"]), ("b", ["1", "2", "4"])):
        (tmp_path / name).mkdir()
        (tmp_path / name / "samples.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rows(outputs))
        )
    got = compare(tmp_path / "a", tmp_path / "b")["cruxeval_i"]
    assert got["n"] == 2 and "1 items differ in content" in got["warning"]


def test_a_run_report_gives_every_evaluation_on_all_and_non_trivial_items(tmp_path, capsys):
    (tmp_path / "eval").mkdir()
    right = {0: [0, 0, 1, 0], 20: [1, 1, 1, 0], 40: [1, 0, 1, 1]}
    for step, flags in right.items():
        rows = [
            _record(i, 0, bool(ok), None if ok else "wrong_value", trivial=i == 0)
            for i, ok in enumerate(flags)
        ]
        path = tmp_path / f"eval/cruxeval-step{step:06d}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = report(tmp_path)["benchmarks"]["cruxeval_i"]
    assert got["steps"] == [0, 40] and (got["gained"], got["lost"]) == (2, 0)

    def point(step, accuracy, correct, hard_accuracy, hard_correct):  # 3 of 4 are not trivial
        return dict(step=step, n=4, accuracy=accuracy, correct=correct) | dict(
            non_trivial_accuracy=hard_accuracy, non_trivial_n=3, non_trivial_correct=hard_correct
        )

    assert got["curve"] == [
        point(0, 0.25, 1, 0.3333, 1),
        point(20, 0.75, 3, 0.6667, 2),
        point(40, 0.75, 3, 0.6667, 2),
    ]
    assert main(["report", str(tmp_path)]) == 0
    assert "by step, all (non-trivial): 0: 0.250 (0.333), 20: 0.750" in capsys.readouterr().out


def test_the_share_of_no_new_work_is_weighted_by_valid_proposals_from_step_5(tmp_path):
    rows = [{"step": s, "propose/parse_rate/deduction": 1.0} for s in range(1, 8)]
    for row, (valid, copy, trivial) in zip(
        rows, [(9, 1.0, 0.0)] * 4 + [(10, 0.1, 0.2), (0, float("nan"), float("nan")), (5, 0.4, 0.0)]
    ):
        row.update({"propose/valid": valid, "propose/copy_share": copy})
        row.update({"propose/trivial_share": trivial, "propose/duplicate_share": copy + trivial})
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    waste = report(tmp_path)["proposals"]["no_new_work"]
    assert waste["steps"] == [5, 7] and waste["valid"] == 15  # steps 1-4 are the seed's
    assert waste["copy"] == pytest.approx((10 * 0.1 + 5 * 0.4) / 15, abs=1e-4)
    assert waste["trivial"] == pytest.approx(2 / 15, abs=1e-4)
    assert waste["all"] == pytest.approx(5 / 15, abs=1e-4)
    assert waste["repeat"] is None  # no step recorded it
    assert not {"reasons", "retyped", "reinput"} & set(waste)  # an older run's metrics


def test_the_report_sums_no_new_work_by_type_and_reason_from_step_5(tmp_path, capsys):
    rows = [{"step": s, "propose/parse_rate/abduction": 1.0} for s in range(1, 8)]
    for row in rows:
        row.update({"propose/valid": 4, "propose/retyped": 1.0, "propose/reinput": 2.0})
        row["propose/no_new_work/abduction/trivial:copy"] = 1.0
    rows[-1]["propose/no_new_work/deduction/copy:behaviour"] = 2.0
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    waste = report(tmp_path)["proposals"]["no_new_work"]
    assert waste["reasons"] == {"abduction/trivial:copy": 3, "deduction/copy:behaviour": 2}
    assert waste["retyped"] == 3 and waste["reinput"] == 6  # steps 5 to 7
    assert main(["report", str(tmp_path), "--no-figures"]) == 0
    out = capsys.readouterr().out
    assert "by type and reason: abduction/trivial:copy 3, deduction/copy:behaviour 2" in out
    assert "abductions judged as deductions: 3" in out
    assert "trivial tasks given another input: 6" in out


def test_the_report_counts_every_logged_proposal_by_outcome_and_cut(tmp_path, capsys):
    """`proposals.jsonl` (every proposal, trained on or not): how many of each outcome were
    cut at the token limit, and why the others were not valid; a broken line is counted."""
    rows = [
        {"step": s, "propose/parse_rate/deduction": 1.0, "propose/proposals": 3} for s in (1, 2, 3)
    ]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    logged = [
        {"step": 1, "outcome": "malformed", "reason": "malformed:unfinished", "cut": True},
        {"step": 1, "outcome": "malformed", "reason": "malformed:no_input", "cut": False},
        {"step": 1, "outcome": "invalid", "reason": "crash:TypeError", "cut": False},
        {"step": 2, "outcome": "valid", "reason": "", "cut": True},
        {"step": 2, "outcome": "malformed", "reason": "malformed:unfinished", "cut": True},
    ]
    lines = "".join(json.dumps(r) + "\n" for r in logged)
    (tmp_path / "proposals.jsonl").write_text(lines + '{"step": 2, "outc\n')
    log = report(tmp_path)["proposal_log"]
    assert log["proposals"] == 5 and log["unreadable_lines"] == 1 and log["steps"] == [1, 2]
    assert log["outcomes"] == {"malformed": [3, 2], "invalid": [1, 0], "valid": [1, 1]}
    assert log["not_valid_reasons"] == {
        "malformed:unfinished": 2,
        "malformed:no_input": 1,
        "crash:TypeError": 1,
    }
    assert log["steps_not_logged"] == [2, 3]  # the metrics count 3 proposals at each step
    assert main(["report", str(tmp_path), "--no-figures"]) == 0
    out = capsys.readouterr().out
    assert "proposals of steps 1-2 (proposals.jsonl): 5: malformed 3 (2 cut), invalid 1" in out
    assert "why not valid (the 3 commonest): malformed:unfinished 2, malformed:no_input 1" in out
    assert "1 unreadable lines of proposals.jsonl" in out
    assert "does not hold every proposal the metrics count at 2 steps (2-3)" in out
    (tmp_path / "proposals.jsonl").unlink()
    assert report(tmp_path)["proposal_log"] == {}  # an older run's folder


def test_the_report_shows_how_long_the_proposed_programs_are_early_and_late(tmp_path, capsys):
    rows = [{"step": s, "propose/parse_rate/deduction": 1.0} for s in range(1, 9)]
    for row, (count, loop) in zip(rows, [(1.0, 0.0)] * 2 + [(2.0, 0.5)] * 4 + [(4.0, 0.5)] * 2):
        row.update({"propose/statements": count, "propose/loop_share": loop})
    # a step without a new program logs NaN, and an older run's steps lack the keys
    rows[1].update({"propose/statements": float("nan"), "propose/loop_share": float("nan")})
    del rows[-1]["propose/statements"], rows[-1]["propose/loop_share"]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    proposals = report(tmp_path)["proposals"]
    assert proposals["statements"] == [1.0, 4.0]  # the first and the last quarter's means
    assert proposals["loop_share"] == [0.0, 0.5]
    assert main(["report", str(tmp_path)]) == 0
    assert "statements" in capsys.readouterr().out


def test_compare_counts_answers_copied_from_the_published_prompts_example(tmp_path, capsys):
    """A CRUXEval-O answer `17` (the first worked example's output, here followed by the
    prompt's tag, as a drifting model writes it) copies the prompt; the solver's own format
    shows no example, so its records are not counted."""

    def write(folder, answers, subset="cruxeval_o", prompt_format="direct"):
        folder.mkdir()
        rows = [
            dict(subset=subset, id=str(i), correct=False, prompt_format=prompt_format, answer=a)
            for i, a in enumerate(answers)
        ]
        (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    write(tmp_path / "base", ["17", "'abc'", None, "[1, 2]"])
    write(tmp_path / "trained", ["17\n[/PYTHON]", '"x9ja"', "17", " 17 "])
    got = compare(tmp_path / "base", tmp_path / "trained")
    assert got["cruxeval_o"]["example_answers"] == [1, 4]
    # of them, the one that runs on into the example's `[/PYTHON]` wrote the prompt again
    assert got["cruxeval_o"]["restarts"] == [0, 1]
    assert main(["report", "--compare", str(tmp_path / "base"), str(tmp_path / "trained")]) == 0
    out = capsys.readouterr().out
    assert "answers copying the prompt's worked example: 1 -> 4" in out
    assert "replies writing the prompt over again: 0 -> 1" in out
    write(tmp_path / "own", ["17"], prompt_format="selfplay")
    assert compare(tmp_path / "own", tmp_path / "own")["cruxeval_o"]["example_answers"] is None


@pytest.mark.parametrize(
    ("subset", "answer", "gold_input", "gold_output", "expected"),
    [
        # input prediction: the arguments' number and types against the gold input's
        ("cruxeval_i", '["a", "b", "c"]', "'hbtofdeiequ'", "'x'", True),
        ("cruxeval_i", '["a", "b", "c"], "a"', "['x'], 'y'", "1", False),
        ("cruxeval_i", '"abc"', "'abc', 2", "1", True),  # one argument where two are wanted
        ("cruxeval_i", "1.0", "1", "1", True),  # float is not int
        ("cruxeval_i", "True", "1", "1", True),  # nor is bool
        ("cruxeval_i", "[1, 2]", "['a']", "1", False),  # the elements are not compared
        ("cruxeval_i", "x + 1", "1", "1", None),  # no literal: not typed either way
        ("cruxeval_i", "n=1", "1", "1", None),  # a keyword argument
        ("cruxeval_i", "*[1]", "1", "1", None),  # an unpacked one
        ("cruxeval_i", "1)  # f(x", "1", "1", None),  # what a cut at the last `)` leaves: no crash
        ("cruxeval_i", "None)  # x", "1", "1", None),
        ("cruxeval_i", "[1, 2],\n  3", "1, 2", "1", True),  # an argument list over two lines
        ("cruxeval_i", "1, 2\n[/ANSWER]", "1, 2", "1", False),  # else the first line is read
        ("cruxeval_i", "", "", "1", False),  # no arguments where none are wanted
        ("generated_abduction", "(1, 2)", "(3, 4)", "0", False),  # a tuple is one argument
        ("generated_abduction", "1, 2", "(3, 4)", "0", True),
        # output prediction: the value's type against the gold output's; the first line
        ("cruxeval_o", "17\n[/PYTHON]", "'x'", "'xa'", True),
        ("cruxeval_o", "'17'", "'x'", "'xa'", False),
        ("generated_deduction", "{}", "1", "{'a': 1}", False),
        ("humaneval", "1", "1", "'x'", None),  # answers neither an input nor an output
    ],
)
def test_a_wrong_answer_is_typed_against_the_gold(
    subset, answer, gold_input, gold_output, expected
):
    from selfplay.eval.answer_types import wrong_type

    row = dict(subset=subset, answer=answer, input=gold_input, output=gold_output, correct=False)
    assert wrong_type(row) is expected
    assert wrong_type({**row, "correct": True}) is None  # a right answer is not counted
    assert wrong_type({**row, "answer": None}) is None
    assert wrong_type({**row, "answer": "[" * 30_000}) is None  # too long to read, no crash


def test_compare_counts_the_wrong_answers_of_a_wrong_type(tmp_path, capsys):
    """Five non-trivial CRUXEval-I items whose function takes a string. The trained model
    loses items 0 and 4 to a list and a number (wrong types), item 1 to another string (the
    right type), and gains item 2 from the base's list; item 3 is trivial and answered with a
    list by both."""

    def row(i, answer, correct, trivial=False):
        failure = None if correct else "wrong_value"
        return _record(i, 0, correct, failure, trivial) | dict(
            program="def f(s):\n    return s", input="'ab'", output="'ab'", answer=answer
        )

    base = [
        row(0, "'ab'", True),
        row(1, "'ab'", True),
        row(2, "[1]", False),
        row(3, "[1]", False, True),
        row(4, "'ab'", True),
    ]
    trained = [
        row(0, '["a"]', False),
        row(1, "'zz'", False),
        row(2, "'ab'", True),
        row(3, "[2]", False, True),
        row(4, "17\n[/PYTHON]", False),  # the first line is read
    ]
    for name, rows in (("base", base), ("trained", trained)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = compare(tmp_path / "base", tmp_path / "trained")["cruxeval_i"]
    assert got["wrong_type_answers"] == [2, 3]  # the trivial item's lists counted in all
    assert got["non_trivial"]["wrong_type_answers"] == [1, 2]
    assert got["non_trivial"]["wrong_type_changes"] == [1, 2]  # gained from one, lost to two
    assert main(["report", "--compare", str(tmp_path / "base"), str(tmp_path / "trained")]) == 0
    assert "answers of a wrong type: 1 -> 2 (gained from one 1, lost to one 2)" in (
        capsys.readouterr().out
    )
    # records that cannot say (no task recorded) give no counts at all
    for name in ("base", "trained"):
        rows = [json.loads(x) for x in (tmp_path / name / "samples.jsonl").read_text().splitlines()]
        (tmp_path / name / "samples.jsonl").write_text(
            "".join(json.dumps({k: v for k, v in r.items() if k != "input"}) + "\n" for r in rows)
        )
    got = compare(tmp_path / "base", tmp_path / "trained")["cruxeval_i"]["non_trivial"]
    assert got["wrong_type_answers"] is None and got["wrong_type_changes"] is None
