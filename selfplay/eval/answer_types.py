"""Whether a wrong answer even has the right type: an input-prediction answer whose arguments
are not of the gold input's types (their number, or the type of one of them), or an
output-prediction answer that is not of the gold output's type.

A model that answers CRUXEval-I's `f(??) == 'hbtofdeiequ'` with `["a", "b", "c"]` did not read
the function: whatever it computes, a list goes in where a string must. Such answers are a
failure apart from a wrong value of the right type, and on CRUXEval-I in the published format
they are most of the wrong answers: the prompt's first worked example passes a list of three
short strings, and the base model and every trained checkpoint answer with that shape where the
function wants something else (`selfplay report --compare` counts them, before and after;
`scripts/wrong_types.py` relates them to the score across checkpoints).

Types are the literals' own, compared at the top level: `int`, `float` and `bool` differ, a
list of strings and a list of ints do not. An answer or a gold value that is no literal (an
expression, a keyword argument) has no type here: such a record is not counted either way.
"""

from __future__ import annotations

import ast

from selfplay.trivial import literal_arguments

__all__ = ["KINDS", "answer_kind", "wrong_type"]

#: The subsets' prefixes and what their answers are: an input (its arguments) or an output.
KINDS = {
    "cruxeval_i": "abduction",
    "cruxeval_o": "deduction",
    "generated_abduction": "abduction",
    "generated_deduction": "deduction",
}
_LONGEST = 20_000  # characters of a literal read; longer ones are not typed


def answer_kind(subset: str) -> str | None:
    """`abduction` (the answer is an input) or `deduction` (an output) for a subset's name,
    None for subsets whose answers are neither (induction, the code benchmarks)."""
    return next((kind for prefix, kind in KINDS.items() if subset.startswith(prefix)), None)


def wrong_type(row: dict) -> bool | None:
    """For a wrong answer of a record that carries its task (`input`, `output`, `answer`):
    whether its type differs from the gold's. None where that cannot be said: a right answer,
    no answer, a subset of another kind, a value that is no literal."""
    kind = answer_kind(str(row.get("subset", "")))
    answer = row.get("answer")
    if kind is None or row.get("correct") or not isinstance(answer, str):
        return None
    gold = row.get("input" if kind == "abduction" else "output")
    if not isinstance(gold, str):
        return None
    read = _arguments if kind == "abduction" else _value
    theirs = read(gold)
    # the whole answer, else its first line (a model that runs on writes the prompt's tags)
    mine = read(answer)
    if mine is None and "\n" in answer.strip():
        mine = read(answer.strip().split("\n")[0])
    if mine is None or theirs is None:
        return None
    return mine != theirs


_UNREADABLE = (ValueError, TypeError, SyntaxError, MemoryError, RecursionError)


def _value(text: str) -> tuple[str] | None:
    text = text.strip()
    if len(text) > _LONGEST:
        return None
    try:
        return (type(ast.literal_eval(text)).__name__,)
    except _UNREADABLE:
        return None


def _arguments(text: str) -> tuple[str, ...] | None:
    """The types of an argument list's values, in order; None unless every one is a literal
    given by position."""
    parsed = literal_arguments(text) if len(text) <= _LONGEST else None
    if parsed is None or parsed[1]:
        return None
    return tuple(type(v).__name__ for v in parsed[0])
