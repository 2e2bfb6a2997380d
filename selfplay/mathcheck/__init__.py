"""Math answers: reading them out of model text and judging them against gold answers.

    answer = extract_answer(completion_text)            # `\\boxed{}`, `####`, "the answer is"...
    with MathChecker(config.mathcheck) as checker:
        verdicts = checker.check_many([(gold, answer), ...])

`extract.py` finds the answer and reads the gold answers of GSM8K and MATH-500; `checker.py`
judges equivalence with math-verify (sympy) in worker processes under a time limit
(`worker.py` is what runs there).
"""

from selfplay.mathcheck.checker import MathChecker, MathCheckError
from selfplay.mathcheck.extract import clean_answer, extract_answer, gsm8k_gold, math500_gold

__all__ = [
    "MathChecker",
    "MathCheckError",
    "extract_answer",
    "clean_answer",
    "gsm8k_gold",
    "math500_gold",
]
