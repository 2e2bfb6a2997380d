"""The math checker on every gold answer of GSM8K (1,319) and MATH-500 (500).

Each gold answer is written again in other surface forms, the way a model might write it
(`\\boxed{}` in a sentence, `$...$`, "the answer is", `<answer>`, thousands separators, units,
a fraction as a decimal or `a/b`), run through `extract_answer` and judged against the gold;
the agreement rates and every disagreement appear under "selfplay measurements". Gold answers
are also paired with answers that differ (another number, another problem's answer), which
must be judged unequal. All pairs of a data set go to the checker in one batch.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from fractions import Fraction

import pytest

from selfplay.config import MathCheckConfig
from selfplay.files import records
from selfplay.mathcheck import MathChecker, extract_answer, gsm8k_gold, math500_gold
from tests.conftest import require_data

pytestmark = pytest.mark.data

_FRACTION = re.compile(r"(-?)\\[dt]?frac\{(\d+)\}\{(\d+)\}")
_DECIMAL = re.compile(r"-?\d+\.\d+")


@pytest.fixture(scope="module")
def checker():
    with MathChecker(MathCheckConfig(workers=2)) as c:
        yield c


def gsm8k_forms(gold: str) -> dict[str, str]:
    """Model texts whose answer is the integer (or decimal) `gold`."""
    number = Fraction(gold)
    grouped = f"{int(number):,}" if number.denominator == 1 else gold
    return {
        "####": f"She pays 3 + 4 = 7.\n#### {gold}",
        "boxed": f"So the total is $\\boxed{{{gold}}}$.",
        "answer is, units": f"The answer is {gold} dollars.",
        "thousands": f"The final answer is ${grouped}$.",
        "currency": f"Answer: \\${grouped}",
        "<answer>": f"<think>3 + 4 = 7</think>\n<answer>{gold}</answer>",
        "last number": f"First 3 + 4 = 7, so in all {grouped}",
        "decimal": f"\\boxed{{{float(number)}}}",
    }


def math500_forms(gold: str) -> dict[str, str]:
    """Model texts whose answer is the LaTeX `gold`, plus numeric rewritings of it."""
    forms = {
        "boxed": f"Therefore, the final answer is $\\boxed{{{gold}}}$. I hope it is correct.",
        "answer is $...$": f"The answer is ${gold}$.",
        "answer is, bare LaTeX": f"So the answer is {gold}",
        "display": f"Hence\n\\[\n\\boxed{{{gold}}}\n\\]",
        "<answer>": f"<think>Let me check.</think>\n<answer>\\({gold}\\)</answer>",
        "no \\left\\right": f"\\boxed{{{gold.replace(chr(92) + 'left', '').replace(chr(92) + 'right', '')}}}",
        "dfrac": f"\\boxed{{{gold.replace(chr(92) + 'frac', chr(92) + 'dfrac')}}}",
    }
    whole = _FRACTION.fullmatch(gold)
    if whole:
        sign, p, q = whole.groups()
        value = Fraction(int(p), int(q)) * (-1 if sign else 1)
        forms["a/b"] = f"The answer is {value}."
        if all(f in (2, 5) for f in _prime_factors(value.denominator)):
            forms["decimal"] = f"\\boxed{{{float(value)}}}"
    if _DECIMAL.fullmatch(gold):
        forms["fraction"] = f"\\boxed{{{Fraction(gold)}}}"
    if re.fullmatch(r"\d{4,}", gold):
        forms["thousands"] = f"The answer is {int(gold):,}."
    return forms


def _prime_factors(n: int) -> set[int]:
    factors, d = set(), 2
    while d * d <= n:
        while n % d == 0:
            factors.add(d)
            n //= d
        d += 1
    return factors | ({n} if n > 1 else set())


def agreement(checker, golds: list[str], make_forms, report, name: str) -> tuple[float, list]:
    pairs, labels = [], []
    for i, gold in enumerate(golds):
        for form, text in make_forms(gold).items():
            pairs.append((gold, extract_answer(text)))
            labels.append((i, form))
    started = time.monotonic()
    verdicts = checker.check_many(pairs)
    elapsed = time.monotonic() - started
    per_form, misses = Counter(), []
    for (i, form), (_, answer), v in zip(labels, pairs, verdicts, strict=True):
        per_form[form, v.ok] += 1
        if not v.ok:
            misses.append((i, form, golds[i], answer, v.reason))
    rate = 1 - len(misses) / len(pairs)
    forms = sorted({form for form, _ in per_form})
    report.append(
        f"{name}: {len(pairs) - len(misses)}/{len(pairs)} surface forms agree ({rate:.2%}) "
        f"in {elapsed:.1f} s ({len(pairs) / elapsed:.0f} checks/s, 2 workers); "
        + ", ".join(
            f"{f} {per_form[f, True]}/{per_form[f, True] + per_form[f, False]}" for f in forms
        )
    )
    report.append(f"{name} disagreements: {misses}")
    return rate, misses


def test_gsm8k_gold_answers_in_other_forms(checker, report):
    golds = [gsm8k_gold(r) for r in records(require_data("gsm8k/test.jsonl"))]
    assert len(golds) == 1319
    rate, misses = agreement(checker, golds, gsm8k_forms, report, "GSM8K")
    assert rate == 1.0, misses


def test_math500_gold_answers_in_other_forms(checker, report):
    golds = [math500_gold(r) for r in records(require_data("math500/test.jsonl"))]
    assert len(golds) == 500
    rate, misses = agreement(checker, golds, math500_forms, report, "MATH-500")
    assert rate >= 0.99, misses


def test_gsm8k_gold_answers_against_wrong_numbers(checker, report):
    golds = [gsm8k_gold(r) for r in records(require_data("gsm8k/test.jsonl"))]
    pairs = []
    for gold in golds:
        value = Fraction(gold)
        pairs += [(gold, str(value + 1)), (gold, str(value * 10 + 1)), (gold, str(-value - 1))]
    verdicts = checker.check_many(pairs)
    wrongly_equal = [p for p, v in zip(pairs, verdicts, strict=True) if v.ok]
    report.append(f"GSM8K wrong numbers judged equal: {len(wrongly_equal)}/{len(pairs)}")
    assert wrongly_equal == []


#: Answers that look alike but differ; each must be judged unequal to its gold.
UNEQUAL = [
    ("\\frac{1}{2}", "0.6"),
    ("\\frac{1}{3}", "0.3"),
    ("\\frac{\\pi}{2}", "\\frac{\\pi}{3}"),
    ("\\left( 3, \\frac{\\pi}{2} \\right)", "\\left( \\frac{\\pi}{2}, 3 \\right)"),
    ("x^2+1", "x^2-1"),
    ("2\\sqrt{2}", "\\sqrt{2}"),
    ("18", "180"),
    ("5", "-5"),
    ("[1,2]", "[1,3]"),
    ("\\{1,2\\}", "\\{1,2,3\\}"),
    ("(-\\infty, 0)", "(0, \\infty)"),
    ("\\text{Evelyn}", "\\text{Angela}"),
    ("\\text{(C)}", "\\text{(D)}"),
    ("3x+2", "3y+2"),
    ("10^{10}", "10^{9}"),
]


def test_pairs_that_must_be_judged_unequal(checker):
    verdicts = checker.check_many(UNEQUAL)
    assert [p for p, v in zip(UNEQUAL, verdicts, strict=True) if v.ok] == []


def test_math500_gold_answers_against_other_problems_answers(checker, report):
    golds = [math500_gold(r) for r in records(require_data("math500/test.jsonl"))]
    pairs = [(g, h) for g, h in zip(golds, golds[1:] + golds[:1]) if g != h]
    verdicts = checker.check_many(pairs)
    judged_equal = [p for p, v in zip(pairs, verdicts, strict=True) if v.ok]
    report.append(
        f"MATH-500 gold vs the next problem's gold judged equal: {len(judged_equal)}/{len(pairs)}"
        f" {judged_equal}"
    )
    assert len(judged_equal) <= 2, judged_equal
