"""How much a proposed program does, read from its syntax: the statements in its functions.

`statements(program)` counts the statements inside the program's functions (`f`, its helpers
and methods): an assignment, a `return`, an `if` (an `elif` is one more), a loop or a `try`
each count one, and the statements in their blocks count too. Definitions themselves,
imports, `pass`, `global`, `nonlocal`, a function's docstring and other bare constants do not.
`def f(x): return x` has 1; CRUXEval's programs have a median of 4 (22% of them 2 or fewer).

`roles.min_statements` refuses deduction and abduction proposals below a floor: a zero-data
proposer otherwise settles on one-line programs (`return x * x`) that every answer solves,
which earn 0 where a copy earns the duplicate penalty, and so carry the group's positive
advantage while teaching the solver no tracing. The count is a floor on length, not a measure
of difficulty: a dense one-line comprehension is refused, and padding passes.

Off by default, as measured (docs/results.md): from AZR's identity seed alone
(`recipes/cpu_learn.yaml` with `roles.min_statements=3`), the coder wrote no valid deduction or
abduction task in its first steps, and with every readable proposal at the same penalty the
proposer had no gradient towards longer programs: the one-line variants that lead away from
the seed are refused too. A floor needs references
that already show longer programs (a seeded pool), or a penalty graded by the count.

`brevity(program, target)` is that graded penalty's share, `reward.brevity` its weight: a new
deduction or abduction task whose functions have s < `reward.brevity_statements` statements
has `reward.brevity` * (1 - s / target) taken off its learnability (`stages.reward`), so that
among new tasks solved alike a longer program earns more, and the one-line variants a run
starts from are still valid. Like every penalty it stops at the penalty floor (what a copy or
a refusal earns, whichever is more; `rewards.penalty_floor`): the gradient between lengths
holds while `reward.brevity` * (1 - 1 / target), plus the repetition and novelty penalties,
stays below the gap between learnability and that floor (0.5 for a task every answer solves,
at the defaults); with `reward.brevity` 0.5 and the target 4, a
one-liner loses 0.375. Padding (`y = x; return y`) counts as a statement here too: the
run's `propose/loop_share` says whether longer programs also do more. `loops(program)` says
whether a function of it has a loop or a comprehension (58% of CRUXEval's programs).

Off by default, as measured (docs/results.md): 10 seeded steps with `reward.brevity=0.4`
wrote no longer programs than the same run without it (median 1 statement, no loop). Of the
80 deduction and abduction proposals, 65 earned the duplicate penalty anyway (copies of the
references, refusals, and new one-liners whose brevity and repetition penalties reached it)
and 4 anything between it and the top: while the proposer mostly copies, a penalty on new
tasks has almost nothing to grade.
"""

from __future__ import annotations

import ast

__all__ = ["brevity", "loops", "statements", "too_simple"]

# definitions (nested functions count as functions of their own), imports and no-ops
_NOT_COUNTED = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Import,
    ast.ImportFrom,
    ast.Pass,
    ast.Global,
    ast.Nonlocal,
)


# loops and comprehensions
_LOOPS = (
    ast.For,
    ast.AsyncFor,
    ast.While,
    ast.ListComp,
    ast.SetComp,
    ast.DictComp,
    ast.GeneratorExp,
)


def _functions(program: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef] | None:
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError, RecursionError):
        return None
    return [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]


def statements(program: str) -> int | None:
    """The statements inside the functions of `program`; None if it does not parse."""
    functions = _functions(program)
    return None if functions is None else sum(_count(f.body) for f in functions)


def loops(program: str) -> bool | None:
    """Whether a function of `program` holds a loop or a comprehension; None if it does not
    parse."""
    functions = _functions(program)
    if functions is None:
        return None
    return any(isinstance(n, _LOOPS) for f in functions for n in ast.walk(f))


def brevity(program: str, target: int) -> float:
    """How far below `target` statements `program` is, as a share of `target`: 1 - s / target
    for s < target, else 0 (and 0 when it does not parse: the executor refuses it)."""
    found = statements(program)
    if found is None or target <= 0:
        return 0.0
    return max(0.0, 1.0 - found / target)


def _count(body: list[ast.stmt]) -> int:
    total = 0
    for node in body:
        if isinstance(node, _NOT_COUNTED) or _is_constant(node):
            continue
        total += 1
        for field in ("body", "orelse", "finalbody"):
            total += _count(getattr(node, field, []) or [])
        for handler in getattr(node, "handlers", []) or []:
            total += _count(handler.body)
        for case in getattr(node, "cases", []) or []:
            total += _count(case.body)
    return total


def _is_constant(node: ast.stmt) -> bool:
    """A bare constant: a docstring, `...`, a string left as a comment."""
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)


def too_simple(program: str, min_statements: int) -> str | None:
    """Why `program` is below the floor, for a verdict's detail; None when it is not, when
    there is no floor, or when it does not parse (the executor then says `syntax`)."""
    if min_statements <= 0:
        return None
    found = statements(program)
    if found is None or found >= min_statements:
        return None
    return f"{found} of at least {min_statements} statements in its functions"
