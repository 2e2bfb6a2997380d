"""The math checker's worker process: `python -m selfplay.mathcheck.worker MEMORY_MB`.

It reads one JSON array `[gold, answer]` per line on standard input and writes one JSON array
`[equal, reason, detail]` per line on standard output, in order, after a first line `"ready"`
once its imports are done. Parsing LaTeX and comparing with sympy can take unbounded time and
memory (`9^{9^{9^{9}}}` is evaluated eagerly), so the worker has no timeout of its own: the
parent kills it when an answer overruns and starts another (`checker.MathChecker`). Its address
space is capped at what it uses after start-up plus MEMORY_MB, so a blow-up ends as a
`MemoryError` or the worker's death instead of the machine's.

The worker is not sandboxed like the executor's, and needs not be: nothing in it runs model
text as Python. latex2sympy2_extended parses LaTeX with an ANTLR grammar, and math-verify hands
sympy's `parse_expr` only text its expression pattern admits (digits, `.`, blanks and the
operators `+ - * / ^ ( )`).

`compare` is the whole judgement: both sides are parsed by math-verify (LaTeX through
latex2sympy2_extended, else a plain expression) and compared by its `verify` (numbers to 6
decimals when one side is a float, sympy simplification, sets, tuples, intervals, equations).
"""

from __future__ import annotations

import json
import logging
import os
import resource
import sys

from math_verify import ExprExtractionConfig, LatexExtractionConfig, parse, verify

from selfplay.executor.hardening import address_space_in_use

_EXTRACTION = (LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig())


def _parse(text: str) -> list:
    # Boxing the whole text makes math-verify read all of it as one expression; text whose
    # braces do not balance inside a box is read as it is.
    parsed = parse(f"\\boxed{{{text}}}", list(_EXTRACTION), parsing_timeout=None)
    return parsed or parse(text, list(_EXTRACTION), parsing_timeout=None)


def compare(gold: str, answer: str) -> tuple[bool, str, str]:
    """(equal, reason, detail): reason is `ok`, `not_equal` or `unparsable` (of the answer)."""
    gold_parsed = _parse(gold)
    answer_parsed = _parse(answer)
    if not answer_parsed:
        return False, "unparsable", "the answer does not parse as mathematics"
    if not gold_parsed:
        return False, "unparsable", "the gold answer does not parse as mathematics"
    if verify(gold_parsed, answer_parsed, timeout_seconds=None):
        return True, "ok", ""
    return False, "not_equal", ""


def main() -> None:
    memory_mb = int(sys.argv[1])
    # Protocol lines only on the original stdout; anything printed by a library goes to stderr.
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    # math-verify warns once that its own (signal-based) timeout is off: the parent times us.
    logging.getLogger("math_verify").setLevel(logging.ERROR)
    limit = address_space_in_use() + memory_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    out.write('"ready"\n')
    for line in sys.stdin:
        try:
            gold, answer = json.loads(line)
            result = compare(str(gold), str(answer))
        except Exception as err:  # noqa: BLE001  sympy fails in many ways on odd input: a result
            result = (False, f"error:{type(err).__name__}", str(err)[:200])
        out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
