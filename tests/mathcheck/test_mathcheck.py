"""Math answers: extraction from model text, and the checker's judgement, time limit and
recovery (the real math-verify in real worker processes)."""

from __future__ import annotations

import threading
import time

import pytest

from selfplay.config import MathCheckConfig
from selfplay.mathcheck import MathChecker, extract_answer, gsm8k_gold, math500_gold

#: Evaluated eagerly by the LaTeX parser: a power tower that never finishes.
HANGS = "9^{9^{9^{9}}}"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "so $\\boxed{\\frac{1}{2}}$ first, then \\boxed{\\dfrac{\\sqrt{3}}{2}}.",
            "\\dfrac{\\sqrt{3}}{2}",
        ),
        ("\\boxed{\\left\\{ \\frac{a}{b} \\right\\}}", "\\left\\{ \\frac{a}{b} \\right\\}"),
        ("She makes 9 * 2 = $18.\n#### 1,018", "1018"),
        ("Thus the final answer is $42$. I hope it is correct.", "42"),
        ("Final Answer: The final answer is $\\frac{3}{4}$. I hope it is correct.", "\\frac{3}{4}"),
        ("**Answer:** $\\$1,200$", "1200"),
        ("The answer is 18 dollars.", "18"),
        ("The answer is 5 \\text{ cm}.", "5"),
        ("The answer is 2 pi.", "2 pi"),
        ("<think>maybe 3</think><answer>x = 5</answer>", "x = 5"),
        ("<answer>\nFirst 3, then 4, so 7 in all.\nDone.\n</answer>", "7"),
        ("He has 12 apples and 3 pears, 15 in total.", "15"),
        ("The share is -3/4 of it", "-3/4"),
        ("\\boxed{unclosed", None),
        ("no numbers here", None),
        ("", None),
    ],
)
def test_extract_answer(text, expected):
    assert extract_answer(text) == expected


def test_gold_readers_and_their_errors():
    assert gsm8k_gold({"answer": "3 + 4 = <<3+4=7>>7\n#### 1,450,000"}) == "1450000"
    assert math500_gold({"answer": " \\frac{\\pi}{2} "}) == "\\frac{\\pi}{2}"
    with pytest.raises(ValueError, match="####"):
        gsm8k_gold({"answer": "7"})
    with pytest.raises(ValueError, match="answer"):
        math500_gold({"problem": "x"})


@pytest.fixture(scope="module")
def checker():
    with MathChecker(MathCheckConfig(timeout_s=2.0)) as c:
        yield c


def test_equal_and_unequal_answers(checker):
    pairs = [
        ("\\frac{1}{2}", "0.5"),
        ("\\frac{1}{2}", "1/2"),
        ("x^2+1", "1 + x^{2}"),
        ("\\left( 3, \\frac{\\pi}{2} \\right)", "(3,\\pi/2)"),
        ("\\frac{1}{2}", "0.6"),
        ("x^2+1", "x^2-1"),
        ("(3, \\frac{\\pi}{2})", "(\\frac{\\pi}{2}, 3)"),
        ("18", None),
    ]
    verdicts = checker.check_many(pairs)
    assert [v.ok for v in verdicts] == [True] * 4 + [False] * 4
    assert [v.reason for v in verdicts[4:]] == ["not_equal"] * 3 + ["no_answer"]
    assert verdicts[0].score == 1.0 and verdicts[4].score == 0.0


def test_a_hanging_check_is_cut_off_and_the_worker_replaced(checker):
    restarts = checker.restarts
    started = time.monotonic()
    verdicts = checker.check_many([("3", "3"), ("1", HANGS), ("4", "2+2"), ("5", "4")])
    elapsed = time.monotonic() - started
    assert [v.reason for v in verdicts] == ["ok", "timeout", "ok", "not_equal"]
    assert "2.0 s" in verdicts[1].detail
    assert checker.restarts == restarts + 1
    assert elapsed < 2.0 + 30  # the time limit plus a worker's start, not the tower's
    # the replacement keeps working, and a second hang in one batch is contained too
    again = checker.check_many([(HANGS, "1"), ("7", "7"), ("2", HANGS), ("0.25", "\\frac14")])
    assert [v.reason for v in again] == ["timeout", "ok", "timeout", "ok"]
    assert checker.restarts == restarts + 3


def test_a_worker_that_dies_is_replaced(checker):
    restarts = checker.restarts
    killer = threading.Timer(0.5, lambda: checker._workers[0].process.kill())
    killer.start()
    verdicts = checker.check_many([("1", HANGS), ("2", "2")])
    killer.join()
    assert [v.reason for v in verdicts] == ["worker_died", "ok"]
    assert checker.restarts == restarts + 1
    # one that ends between two batches is replaced before the next, blaming no answer
    checker._workers[0].process.kill()
    checker._workers[0].process.wait()
    assert [v.reason for v in checker.check_many([("2", "2"), ("3", "4")])] == ["ok", "not_equal"]
    assert checker.restarts == restarts + 2


def test_a_pool_of_workers_keeps_the_order_of_answers():
    pairs = [(str(n), str(n if n % 3 else n + 1)) for n in range(60)]
    with MathChecker(MathCheckConfig(workers=2, timeout_s=5.0)) as pool:
        verdicts = pool.check_many(pairs)
        assert len(pool._workers) == 2
    assert [v.ok for v in verdicts] == [n % 3 != 0 for n in range(60)]


def test_bad_gold_is_an_error(checker):
    with pytest.raises(ValueError, match="gold"):
        checker.check_many([("", "1")])
