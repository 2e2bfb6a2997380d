"""Seeds pooled against one base (`selfplay report --pooled`): the exchange test holds its
level where a per-problem sign test does not, and the pooling counts what it leaves out."""

from __future__ import annotations

import json

import numpy as np
import pytest

from selfplay.cli import main
from selfplay.eval.paired import exchange_test, sign_test
from selfplay.eval.pooled import pooled


def _null_sets(count: int, items: int = 800, seeds: int = 2):
    """Evaluations that training did not change: base and checkpoints drawn alike per item,
    most items hard (as on CRUXEval)."""
    rng = np.random.default_rng(7)
    for _ in range(count):
        p = rng.beta(0.4, 1.2, size=items)
        yield (rng.random((seeds + 1, items)) < p).astype(float)


def test_the_exchange_test_holds_its_level_where_a_sign_test_per_problem_does_not():
    exchange = sign = 0
    for k, scores in enumerate(_null_sets(300)):
        exchange += exchange_test(scores[0], scores[1:], draws=1000, seed=k) < 0.05
        change = scores[1:].mean(0) - scores[0]
        sign += sign_test(int((change > 0).sum()), int((change < 0).sum())) < 0.05
    assert 0.01 <= exchange / 300 <= 0.09
    # the shared base sets each problem's sign: most problems are missed by the base and so
    # change up more often than down, though nothing changed
    assert sign / 300 > 0.15


def test_the_exchange_test_finds_a_real_gain_and_is_exact_on_a_small_case():
    rng = np.random.default_rng(3)
    p = rng.beta(0.4, 1.2, size=800)
    base = (rng.random(800) < p).astype(float)
    after = (rng.random((2, 800)) < np.minimum(1, p + 0.06)).astype(float)
    assert exchange_test(base, after, draws=2000) < 0.01
    # one problem, the base wrong and both seeds right: as extreme only when the relabelling
    # keeps the base as it is, 1 time in 3
    assert exchange_test([0.0], [[1.0], [1.0]], draws=30000) == pytest.approx(1 / 3, abs=0.01)
    assert exchange_test([1.0], [[0.0], [0.0]], draws=30000) == pytest.approx(1 / 3, abs=0.01)
    # two-sided: every score flipped gives the same p
    flipped = exchange_test(1 - base, 1 - after, draws=2000)
    assert flipped == exchange_test(base, after, draws=2000)
    assert exchange_test([1.0, 0.0], [[1.0, 0.0]]) == 1.0  # nothing differs
    with pytest.raises(ValueError, match="base"):
        exchange_test([1.0], [])


def _row(i: int, correct: bool, trivial: bool, fmt: str = "direct", output: str = "1") -> dict:
    return {"subset": "cruxeval_o", "id": f"sample_{i}", "sample": 0, "correct": correct,
            "failure": None if correct else "wrong_value", "trivial": trivial, "answer": "x",
            "prompt_format": fmt, "program": "def f(x):\n    return x", "input": str(i),
            "output": output}  # fmt: skip


def _write(folder, rows) -> str:
    folder.mkdir()
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(folder)


def test_pooling_counts_dropped_and_changed_problems_and_sets_trivial_ones_apart(tmp_path, capsys):
    """Ten problems, 0-1 trivial. The base answers 0 and 2 right; seed A gains 3-6, seed B
    gains 3-4 and loses 2; seed B has no problem 9, and its problem 8 is another task."""
    base = [_row(i, i in (0, 2), i < 2) for i in range(10)]
    a = [_row(i, i in (0, 2, 3, 4, 5, 6), i < 2) for i in range(10)]
    b = [_row(i, i in (0, 3, 4), i < 2, output="2" if i == 8 else "1") for i in range(9)]
    paths = [_write(tmp_path / n, rows) for n, rows in (("base", base), ("a", a), ("b", b))]
    got = pooled(paths[0], paths[1:])["cruxeval_o"]
    assert (got["n"], got["dropped"], got["differ"], got["trivial_items"]) == (8, 1, 1, 2)
    assert got["seeds_after"] == [0.75, 0.375] and got["before"] == 0.25
    assert (got["improved"], got["worsened"]) == (4, 1)  # problem 2: 1 -> (1 + 0) / 2
    hard = got["non_trivial"]
    assert (hard["n"], hard["before"], hard["seeds_after"]) == (6, 0.1667, [0.8333, 0.3333])
    assert got["seeds_changes"] == [[4, 0], [2, 1]] and got["seeds_p"] == [0.125, 1.0]
    assert "warning" not in got and 0 < got["p_value"] <= 1
    assert main(["report", "--pooled", *paths]) == 0
    table = capsys.readouterr().out
    assert "non-trivial" in table and "1 dropped, 1 differ" in table and "exchange test" in table
    # an evaluation in another prompt format is named
    _write(tmp_path / "c", [_row(i, True, i < 2, fmt="selfplay") for i in range(10)])
    assert "direct vs" in pooled(paths[0], [tmp_path / "c"])["cruxeval_o"]["warning"]
    # evaluations sampled differently are named
    (tmp_path / "a" / "summary.json").write_text(json.dumps({"temperature": 0.0, "samples": 1}))
    (tmp_path / "b" / "summary.json").write_text(json.dumps({"temperature": 0.8, "samples": 1}))
    assert "temperature 0.8" in pooled(paths[1], [paths[2]])["warning"]
    assert main(["report", "--pooled", paths[0]]) == 2
    assert main(["report", "--pooled", *paths, "--compare", *paths[:2]]) == 2
    assert main(["report", "--pooled", paths[0], str(tmp_path / "none")]) != 0
