"""Paired evaluations pooled over seeds (`selfplay report --compare B1 A1 --compare B2 A2`):
the problem, not the checkpoint, is the unit, and a problem one pair gains and another loses
counts for neither."""

from __future__ import annotations

import json

import pytest

from selfplay.cli import main
from selfplay.eval.paired import sign_test
from selfplay.eval.pooled import compare_pairs


def write(folder, right, trivial=(), extra=0, program="def f(x):\n    return x"):
    """CRUXEval-O records of problems 0..len(right)-1 (plus `extra` more), right where
    `right[i]`, the copy answer solving the problems in `trivial`."""
    folder.mkdir()
    rows = [
        {
            "subset": "cruxeval_o",
            "id": str(i),
            "correct": bool(ok),
            "trivial": i in trivial,
            "program": program if i else "def f(x):\n    return 0",
            "input": str(i),
            "output": str(i),
        }
        for i, ok in enumerate([*right, *[0] * extra])
    ]
    (folder / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder


@pytest.fixture
def pairs(tmp_path):
    base = write(tmp_path / "base", [0] * 9 + [1], trivial={0})
    seed0 = write(tmp_path / "seed0", [1] * 6 + [0] * 3 + [1], extra=1)  # problems 0-5 gained
    # problems 0-3 gained, 6 gained and 4 lost against seed 0's gain (net 0), 9 lost
    seed1 = write(tmp_path / "seed1", [1] * 4 + [0, 0, 1, 0, 0, 0])
    return [(base, seed0), (base, seed1)]


def test_pairs_pool_per_problem(pairs):
    result = compare_pairs(pairs)
    assert [r["cruxeval_o"]["gained"] for r in result["pairs"]] == [6, 5]
    pooled = result["pooled"]["cruxeval_o"]["all"]
    # changes: 0-3 +2, 4 +1, 5 +1, 6 +1, 9 -1 (only the 10 problems both pairs evaluated)
    assert (pooled["n"], pooled["improved"], pooled["worsened"]) == (10, 7, 1)
    assert pooled["p_value"] == pytest.approx(sign_test(7, 1), rel=3e-3)
    assert (pooled["gained"], pooled["lost"]) == (11, 1)
    assert (pooled["before"], pooled["after"]) == (0.1, pytest.approx((7 + 5) / 20))
    hard = result["pooled"]["cruxeval_o"]["non_trivial"]  # problem 0 is trivial
    assert (hard["n"], hard["improved"], hard["worsened"]) == (9, 6, 1)


def test_a_problem_gained_by_one_pair_and_lost_by_another_counts_for_neither(tmp_path):
    # two seeds' runs, each without and with a change: problem 1 gained by the first, lost
    # by the second
    without0, with0 = write(tmp_path / "a0", [0, 0]), write(tmp_path / "b0", [1, 1])
    without1, with1 = write(tmp_path / "a1", [1, 1]), write(tmp_path / "b1", [1, 0])
    result = compare_pairs([(without0, with0), (without1, with1)])
    pooled = result["pooled"]["cruxeval_o"]["all"]
    assert (pooled["improved"], pooled["worsened"], pooled["p_value"]) == (1, 0, 1.0)
    assert (pooled["gained"], pooled["lost"], pooled["delta"]) == (2, 1, 0.25)


def test_a_problem_whose_task_differs_in_a_pair_is_left_out(tmp_path):
    base = write(tmp_path / "base", [0, 0, 0])
    same = write(tmp_path / "same", [1, 1, 1])
    other = write(tmp_path / "other", [1, 1, 1], program="def f(x):\n    return [x]")
    pooled = compare_pairs([(base, same), (base, other)])["pooled"]["cruxeval_o"]["all"]
    assert pooled["n"] == 1  # problem 0 has the same program in every file


def test_one_pair_is_not_pooled(pairs):
    with pytest.raises(ValueError, match="at least two pairs"):
        compare_pairs(pairs[:1])


def test_the_command_pools_pairs_given_twice(pairs, capsys):
    argv = ["report", "--no-figures"]
    for before, after in pairs:
        argv += ["--compare", str(before), str(after)]
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert "pair 1" in table and "pair 2" in table and "pooled over 2 pairs" in table
    assert main([*argv, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert len(printed["pairs"]) == 2 and printed["pooled"]["cruxeval_o"]["all"]["improved"] == 7
