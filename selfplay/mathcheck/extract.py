"""Reading a final answer out of model text, and the gold answers of GSM8K and MATH-500.

`extract_answer` looks, in this order, at the part of the text that holds the answer (the last
`<answer>` section, else what follows `</think>`, else all of it; see `selfplay.extract`):

1. the last `\\boxed{...}` (or `\\fbox{...}`), braces nested to any depth;
2. the last GSM8K-style `#### 42` line;
3. the last "the (final) answer is ..." / "Answer: ..." phrase, up to the end of its line;
4. the whole `<answer>` section when it is a single line;
5. the last number (`-1,234.5`, `3/4`).

The text found is cleaned (`clean_answer`): math delimiters (`$...$`, `\\(...\\)`), a final full
stop, a leading currency sign, thousands separators of a plain number and trailing words after a
number (`18 dollars`, `5 cm`) are removed. Nothing here judges equivalence: that is the math
checker's job (`selfplay.mathcheck.checker`).
"""

from __future__ import annotations

import re

from selfplay import extract

__all__ = ["extract_answer", "clean_answer", "last_boxed", "gsm8k_gold", "math500_gold"]

_BOXED = re.compile(r"\\(?:boxed|fbox)\s*\{")
_HASHES = re.compile(r"^\s*####\s*(.+?)\s*$", re.M)
# The last "answer is" / "answer:" of a line (the greedy `.*` skips earlier ones).
_PHRASE = re.compile(r"^.*\banswer\b\**\s*(?:is\b|:|=)\**\s*:?\s*(.+)$", re.I | re.M)
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:\s*/\s*\d+)?|-?\.\d+")
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
# `18 dollars`, `5 cm`, `3 apples per day`: a number followed only by words (no math)
_NUMBER_THEN_WORDS = re.compile(r"(-?\d[\d,]*(?:\.\d+)?)\s*(?:[A-Za-z]{2,}\.?\s*)+")
_TEXT_UNITS = re.compile(r"^(-?\d[\d,]*(?:\.\d+)?)\s*\\(?:text|mbox|mathrm)\{\s*[A-Za-z ]+\}$")
_DELIMITERS = (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]"))
# Words after a number that are mathematics, not units: `2 pi`, `3 sqrt 2`.
_MATH_WORDS = {"pi", "sqrt", "sin", "cos", "tan", "log", "ln", "exp", "i", "e"}


def last_boxed(text: str) -> str | None:
    """The contents of the last `\\boxed{...}` whose braces close; None if there is none."""
    for match in reversed(list(_BOXED.finditer(text))):
        depth, start = 1, match.end()
        for i in range(start, len(text)):
            if text[i] == "{":
                depth += 1
            elif text[i] == "}":
                depth -= 1
                if depth == 0:
                    return text[start:i]
    return None


def extract_answer(text: str) -> str | None:
    """The final answer written in `text`, cleaned; None when no answer can be found."""
    if not isinstance(text, str) or not text.strip():
        return None
    region = extract.answer_region(text)
    found = last_boxed(region)
    if found is None:
        hashes = _HASHES.findall(region)
        phrases = _PHRASE.findall(region)
        single_line = "<answer>" in text.lower() and "\n" not in region.strip()
        if hashes:
            found = hashes[-1]
        elif phrases:
            found = _first_sentence(phrases[-1])
        elif single_line and region.strip():
            found = region
        else:
            numbers = _NUMBER.findall(region)
            found = numbers[-1] if numbers else None
    if found is None:
        return None
    found = clean_answer(found)
    return found or None


def _first_sentence(text: str) -> str:
    """`$42$. So she earns...` -> `$42$`: a phrase's answer ends at a full stop and a space."""
    return re.split(r"(?<!\d)\.\s|\.\s+(?=[A-Z])", text, maxsplit=1)[0]


def clean_answer(text: str) -> str:
    """An answer without delimiters, final full stop, currency sign, thousands separators or
    trailing unit words."""
    text = text.strip()
    boxed = last_boxed(text)
    if boxed is not None and text.startswith(("\\boxed", "\\fbox")):
        text = boxed.strip()
    changed = True
    while changed:
        before = text
        text = text.strip().rstrip(".").strip()
        for left, right in _DELIMITERS:
            if text.startswith(left) and text.endswith(right) and len(text) > len(left + right):
                text = text[len(left) : -len(right)].strip()
        text = re.sub(r"^\\?\$\s*(?=[\d.-])", "", text)  # `$18`, `\$18`
        changed = text != before
    units = _TEXT_UNITS.match(text)
    if units:
        text = units.group(1)
    words = _NUMBER_THEN_WORDS.fullmatch(text)
    if words and not set(re.findall(r"[A-Za-z]+", text[words.end(1) :])) & _MATH_WORDS:
        text = words.group(1)
    if _THOUSANDS.fullmatch(text):
        text = text.replace(",", "")
    return text


def gsm8k_gold(record: dict) -> str:
    """A GSM8K record's final answer: the text after the last `####`, without commas."""
    answer = record.get("answer")
    if not isinstance(answer, str) or "####" not in answer:
        raise ValueError("a GSM8K record needs an `answer` text ending in `#### <number>`")
    return answer.rsplit("####", 1)[1].strip().replace(",", "")


def math500_gold(record: dict) -> str:
    """A MATH-500 record's final answer: its `answer` field (LaTeX), else the last `\\boxed{}`
    of its `solution` (the MATH data set's own records have only a solution)."""
    answer = record.get("answer")
    if isinstance(answer, str) and answer.strip():
        return answer.strip()
    solution = record.get("solution")
    boxed = last_boxed(solution) if isinstance(solution, str) else None
    if boxed is None or not boxed.strip():
        raise ValueError(
            "a MATH-500 record needs a non-empty `answer` field or a `solution` with `\\boxed{}`"
        )
    return boxed.strip()
