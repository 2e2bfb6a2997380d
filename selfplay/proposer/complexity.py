"""How much a proposed program does, read from its syntax: the statements it runs.

`statements(program)` counts the statements inside the program's functions (`f` and its
helpers, methods included): an assignment, a `return`, an `if` or a loop each count one, and
the statements in a block count too. Definitions themselves, imports, `pass` and docstrings do
not count. `def f(x): return x` has 1; CRUXEval's programs have a median of 4 (22% of them 2
or fewer).

`roles.min_statements` refuses deduction and abduction proposals below a floor: a zero-data
proposer otherwise settles on one-line programs (`return x * x`) that every answer solves,
which earn 0 where a copy earns the duplicate penalty, and so carry the group's positive
advantage while teaching the solver no tracing.
"""

from __future__ import annotations

import ast

__all__ = ["statements", "too_simple"]

# definitions (nested functions count as functions of their own), imports and `pass`
_NOT_COUNTED = (
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Import,
    ast.ImportFrom,
    ast.Pass,
)


def statements(program: str) -> int:
    """The statements inside the functions of `program` (0 if it does not parse)."""
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError, RecursionError):
        return 0
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    return sum(_count(f.body) for f in functions)


def _count(body: list[ast.stmt]) -> int:
    total = 0
    for k, node in enumerate(body):
        if isinstance(node, _NOT_COUNTED):
            continue
        if k == 0 and _is_docstring(node):
            continue
        total += 1
        for field in ("body", "orelse", "finalbody"):
            total += _count(getattr(node, field, []) or [])
        for handler in getattr(node, "handlers", []) or []:
            total += _count(handler.body)
        for case in getattr(node, "cases", []) or []:
            total += _count(case.body)
    return total


def _is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def too_simple(program: str, min_statements: int) -> str | None:
    """Why `program` is below the floor (None when it is not, or there is no floor)."""
    if min_statements <= 0:
        return None
    found = statements(program)
    if found >= min_statements:
        return None
    return f"too_simple: {found} statements in its functions, fewer than {min_statements}"
