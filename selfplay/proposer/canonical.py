"""A program's canonical text, for telling a proposal that copies a reference from new work.

Two programs that differ only in comments, layout, quoting, annotations, the names of their
parameters and local variables, or in a definition repeated, get the same text:

    def f(a):\\n    return a                          def f(v0):\\n    return v0
    def f(x):  # same\\n    return x          ->      def f(v0):\\n    return v0
    def f(a): return a\\n\\ndef f(a): return a         def f(v0):\\n    return v0

Names a program binds (parameters, assignment and loop targets, comprehension variables,
`except ... as`) are renamed `v0`, `v1`, ... in the order
the syntax tree is walked, so two programs of the same shape get the same names; names it only
reads (builtins such as `len`, the functions it defines such as `f`) are kept. Of top-level
definitions with the same name only the last is kept (the one a call runs). Text that does not
parse is compared by its words.
"""

from __future__ import annotations

import ast

__all__ = ["canonical_program"]


def canonical_program(program: str) -> str:
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError, RecursionError):
        return " ".join(program.split())
    tree.body = _last_definitions(tree.body)
    defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef | ast.ClassDef)}
    names: dict[str, str] = {}
    for node in ast.walk(tree):
        bound = _bound_name(node)
        if bound is not None and bound not in defined and bound not in names:
            names[bound] = f"v{len(names)}"
    try:
        return ast.unparse(_Rename(names).visit(tree))
    except RecursionError:
        return " ".join(program.split())


def _last_definitions(body: list[ast.stmt]) -> list[ast.stmt]:
    """The statements with each top-level function or class defined once, where it was last."""
    last = {s.name: i for i, s in enumerate(body) if isinstance(s, ast.FunctionDef | ast.ClassDef)}
    return [
        s
        for i, s in enumerate(body)
        if not isinstance(s, ast.FunctionDef | ast.ClassDef) or last[s.name] == i
    ]


def _bound_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.arg):
        return node.arg
    if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
        return node.id
    if isinstance(node, ast.ExceptHandler):
        return node.name
    return None


class _Rename(ast.NodeTransformer):
    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.FunctionDef:
        node.returns = None  # annotations do not change what a program computes
        self.generic_visit(node)
        return node

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self.names.get(node.arg, node.arg)
        node.annotation = None
        return node

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.names.get(node.id, node.id)
        return node

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> ast.ExceptHandler:
        if node.name:
            node.name = self.names.get(node.name, node.name)
        self.generic_visit(node)
        return node
