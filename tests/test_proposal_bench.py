"""benchmarks/proposal_bench.py judges proposals as a run's stages do: a program below the
statement floor is not valid, and a copy of a shown reference in other words (a program that
behaves as the reference's does) is a copy, counted also apart, unless
`curriculum.behaviour_copies` is off."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from selfplay.engine import chat
from selfplay.types import Task

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "proposal_bench.py"


def _script():
    spec = importlib.util.spec_from_file_location("proposal_bench", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def _task(program: str, given: str, output: str) -> Task:
    return Task("deduction", program, (given,), (output,))


def test_copies_in_other_words_count_as_copies(executor):
    shape = _script().shape
    doubled = _task("def f(n):\n    return n * 2", "5", "10")
    loop = "def f(xs):\n    total = 0\n    for x in xs:\n        total += x * x\n    return total"
    proposed = [
        (_task("def f(x):\n    return x * 2", "7", "14"), [doubled]),  # renamed: a copy
        (_task("def f(k):\n    return k + k", "3", "6"), [doubled]),  # behaves as it: a copy
        (_task("def f(k):\n    return k * 3 - 1", "3", "8"), [doubled]),  # new
        (_task(loop, "[1, 2, 3]", "14"), []),  # new, shown nothing
    ]
    judged = shape(executor, proposed)
    assert judged["copies"] == 2 and judged["behaviour_copies"] == 1
    assert judged["new"] == 2 and judged["no_new_work_share"] == 0.5
    by_text = shape(executor, proposed, behaviour=False)
    assert by_text["copies"] == 1 and by_text["behaviour_copies"] == 0 and by_text["new"] == 3


def test_a_program_below_the_floor_is_not_valid(executor, tmp_path):
    """As the validate stage does, a deduction below `roles.min_statements` is refused unrun;
    completions saved by --save judge again the same (`--judge-saved`)."""
    import json

    from selfplay import config as config_module

    script = _script()
    one_line = "<answer>\n```python\ndef f(n):\n    return n * 7\n\nf(3)\n```\n</answer>"
    longer = (
        "<answer>\n```python\ndef f(n):\n    total = 0\n    for k in range(n):\n"
        "        total += k * k\n    return total\n\nf(4)\n```\n</answer>"
    )
    requests = [("deduction", None, chat(f"puzzle {k}"), []) for k in range(2)]
    saved = tmp_path / "completions.jsonl"
    saved.write_text(
        "".join(
            json.dumps({"mode": "constrained", "type": "deduction", "text": t, "finish": "stop"})
            + "\n"
            for t in (one_line, longer)
        )
    )
    completions = script.saved_completions(saved, "constrained", requests)  # no hashes kept
    for floor, valid in ((0, 2), (3, 1)):
        config = config_module.load(None, [f"roles.min_statements={floor}"])
        judged = script.judge(config, executor, requests, completions)["deduction"]
        assert judged["parsed"] == 2 and judged["valid"] == valid and judged["new"] == valid
        assert judged.get("failed:too_simple", 0) == 2 - valid
    with pytest.raises(SystemExit, match="not the 3 prompts"):
        script.saved_completions(saved, "constrained", [*requests, requests[0]])
    hashed = tmp_path / "hashed.jsonl"
    rows = [json.loads(line) for line in saved.read_text().splitlines()]
    hashed.write_text(
        "".join(
            json.dumps(r | {"prompt": script.prompt_hash(q[2])}) + "\n"
            for r, q in zip(rows, requests, strict=True)
        )
    )
    assert len(script.saved_completions(hashed, "constrained", requests)) == 2
    with pytest.raises(SystemExit, match="written for other prompts"):
        script.saved_completions(hashed, "constrained", requests[::-1])


def test_trivial_reasons_and_retyped_abductions_are_counted_as_the_store_stage_judges(executor):
    """Each trivial reason counts apart; under `curriculum.retype_fixed_abductions` an
    abduction its output answers is judged as its deduction, and under
    `curriculum.reinput_trivial` a task constant at its input at another input where it is not
    (`new_work.replacements`)."""
    from selfplay import config as config_module
    from selfplay.engine.base import Completion

    script = _script()
    upper = "def f(s):\n    t = s.strip()\n    return t.upper()"
    same = "def f(s):\n    t = s.strip()\n    return t"
    long = "def f(xs):\n    n = len(xs)\n    return 'long' if n > 2 else 'short'"
    # f(output) == output; as a deduction, 'dog'; 'short' near [1], [1, 1] next to 'long'
    sort = "def f(xs):\n    ys = list(xs)\n    return sorted(ys)"
    texts = [(upper, "' cat'"), (same, "'dog'"), (long, "[1]"), (sort, "[1, 2, 3]")]
    kinds = ["abduction"] * 3 + ["deduction"]  # sorted [1, 2, 3] is a copy, [1, 2, 3, 1] not
    requests = [(kind, None, chat(f"puzzle {k}"), []) for k, kind in enumerate(kinds)]
    completions = [
        Completion(
            f"<answer>\n```python\n{p}\n\nf({g})\n```\n</answer>", (1,) * 8, (0.0,) * 8, "stop"
        )
        for p, g in texts
    ]
    plain = script.judge(config_module.load(None, []), executor, requests, completions)
    assert plain["abduction"]["trivial"] == 3 and plain["abduction"]["trivial:copy"] == 2
    assert "retyped" not in plain["abduction"] and plain["abduction"]["new"] == 0
    assert plain["deduction"]["trivial:copy"] == 1 and "reinput" not in plain["deduction"]
    asked = config_module.load(None, ["curriculum.retype_fixed_abductions=true"])
    retyped = script.judge(asked, executor, requests, completions)["abduction"]
    assert retyped["retyped"] == 1 and retyped["new"] == 1 and retyped["trivial:copy"] == 1
    assert retyped["trivial:constant"] == 1 and "reinput" not in retyped
    both = ["curriculum.retype_fixed_abductions=true", "curriculum.reinput_trivial=true"]
    moved = script.judge(config_module.load(None, both), executor, requests, completions)
    assert moved["deduction"]["reinput"] == 1 and moved["deduction"]["new"] == 1
    assert "retyped" not in moved["deduction"]
    moved = moved["abduction"]
    assert moved["retyped"] == 1 and moved["reinput"] == 1 and moved["new"] == 2
    assert moved["trivial"] == moved["trivial:copy"] == 1
