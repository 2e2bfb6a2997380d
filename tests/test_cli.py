"""The `selfplay validate` / `selfplay verify` contract, run as a user would run it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def selfplay(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "selfplay.cli", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
    )


def jsonl(records: list) -> str:
    return "\n".join(r if isinstance(r, str) else json.dumps(r) for r in records) + "\n"


@pytest.fixture
def task_file(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text(
        jsonl(
            [
                {"id": "a", "program": "def f(x):\n    return x * 2", "input": "21", "output": "42"},
                {"id": "b", "code": "def f(x):\n    return x * 2", "input": "1", "output": "3"},
                {"id": "c", "snippet": "def f(s):\n    return s[::-1]", "input": "'ab'", "extra": 1},
                "{not json",
                "",
                {"id": "e", "program": "import os\ndef f(x):\n    return 1", "input": "1"},
                {"id": "f", "program": "def f(x):\n    return x"},
                ["a list"],
                {"id": 7, "program": "def f(x):\n    return {'b': 1, 'a': 2}", "input": "0",
                 "output": "{'a': 2, 'b': 1}"},
            ]
        )
    )  # fmt: skip
    return path


def test_validate_contract(task_file):
    result = selfplay("validate", str(task_file))
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 8  # the blank line gives no output
    a, b, c, broken, e, missing, not_object, seven = lines
    assert set(a) == {"id", "valid", "output", "reason", "matches_given_output"}
    assert a == {
        "id": "a",
        "valid": True,
        "output": "42",
        "reason": "ok",
        "matches_given_output": True,
    }
    assert b["valid"] and b["matches_given_output"] is False
    assert c["output"] == "'ba'" and c["matches_given_output"] is None
    assert broken["reason"] == "malformed_record" and broken["line"] == 4
    assert e["valid"] is False and e["reason"] == "policy:import"
    assert missing["reason"] == "malformed_record" and "input" in missing["detail"]
    assert not_object["reason"] == "malformed_record" and not_object["line"] == 8
    assert seven["id"] == 7 and seven["matches_given_output"] is True
    assert "line 4" in result.stderr


def test_verify_contract(tmp_path):
    double = "def f(x):\n    return x * 2"
    records = [
        {"id": 1, "type": "deduction", "program": double, "input": "4", "output": "8", "answer": "8"},
        {"id": 2, "type": "deduction", "program": double, "input": "4", "output": "8", "answer": "9"},
        {"id": 3, "type": "abduction", "program": double, "input": "4", "output": "8", "answer": "4"},
        {"id": 4, "type": "abduction", "program": double, "output": "8", "answer": "5"},
        {"id": 5, "type": "induction", "program": double, "inputs": ["1", "2"],
         "outputs": ["2", "4"], "answer": "def f(x):\n    return x + x"},
        {"id": 6, "type": "induction", "inputs": ["1", "2"], "outputs": ["2", "5"],
         "answer": "def f(x):\n    return x + x"},
        {"id": 7, "type": "deduction", "program": double, "input": "4", "output": "9", "answer": "9"},
        {"id": 8, "type": "riddle", "answer": "x"},
        "{broken",
    ]  # fmt: skip
    path = tmp_path / "answers.jsonl"
    path.write_text(jsonl(records))
    result = selfplay("verify", str(path))
    assert result.returncode == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [line.get("id") for line in lines] == [1, 2, 3, 4, 5, 6, 7, 8, None]
    assert set(lines[0]) == {"id", "correct", "score", "reason"}
    assert [line["correct"] for line in lines] == [True, False, True, False] + [True, False] + [
        False, False, False
    ]  # fmt: skip
    assert lines[5]["score"] == 0.5
    assert lines[6]["reason"] == "task:output_mismatch"
    assert lines[7]["reason"] == lines[8]["reason"] == "malformed_record"


def test_stdin_and_overrides():
    record = {"program": "def f(x):\n    while True:\n        pass", "input": "1"}
    result = selfplay("validate", "-", "executor.run_timeout_s=0.2", stdin=jsonl([record]))
    assert json.loads(result.stdout)["reason"] == "timeout"


def test_tool_failures_exit_non_zero(tmp_path):
    assert selfplay("validate", str(tmp_path / "missing.jsonl")).returncode == 1
    bad = selfplay("validate", "-", "executor.workers=one", stdin="")
    assert bad.returncode == 1 and "executor.workers" in bad.stderr
    unknown = selfplay("validate", "-", "executor.nope=1", stdin="")
    assert unknown.returncode == 1 and "unknown config key" in unknown.stderr


def test_examples_main_job():
    result = selfplay("validate", "--examples")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "12/12 examples as expected" in result.stdout
    assert "landlock" in result.stdout and "EPERM" in result.stdout
