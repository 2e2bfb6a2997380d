"""RestrictedPython's subscript and loop rewrites, located as its `copy_locations` would locate
them, and the node helpers the policy's own rewrites use.

RestrictedPython's `copy_locations` runs `ast.fix_missing_locations` over the whole new
subtree, so each wrap walks the (already located) code below it again: nested subscripts and
loops cost a walk per level. `LocatedRewrites` gives only the new nodes their location; what
it builds is RestrictedPython's (`tests/executor/test_policy.py` compares the compiled code).
"""

from __future__ import annotations

import ast

__all__ = ["LocatedRewrites", "locate", "unlocated", "load", "call"]


class LocatedRewrites:
    """Mixed into the policy's transformer, before RestrictedPython's, whose
    `node_contents_visit` and `gen_unpack_spec` it uses."""

    def visit_Subscript(self, node: ast.Subscript):
        """`c[k]` becomes `_getitem_(c, k)`; `c[k] = v` and `del c[k]`: `_write_(c)[k]`."""
        node = self.node_contents_visit(node)
        if isinstance(node.ctx, ast.Load):
            name = ast.Name("_getitem_", ast.Load())
            new = ast.Call(name, [node.value, node.slice], [])
            locate(node, new, name)
            return new
        name = ast.Name("_write_", ast.Load())
        node.value = ast.Call(name, [node.value], [])
        locate(node, node.value, name)
        return node

    def guard_iter(self, node: ast.For | ast.comprehension):
        """`for x in it` iterates `_getiter_(it)`; `for a, (b, c) in it`
        `_iter_unpack_sequence_(it, spec, _getiter_)`, the spec saying which parts unpack."""
        node = self.node_contents_visit(node)
        if isinstance(node.target, ast.Tuple):
            spec = self.gen_unpack_spec(node.target)  # new nodes only
            new = call("_iter_unpack_sequence_", node.iter, spec, load("_getiter_"))
            locate(node.iter, new, new.func, *unlocated(spec), new.args[2])
        else:
            new = call("_getiter_", node.iter)
            locate(node.iter, new, new.func)
        node.iter = new
        return node


def locate(old: ast.AST, *new: ast.AST) -> None:
    """Give new nodes the location of `old`."""
    for node in new:
        node.lineno, node.col_offset = old.lineno, old.col_offset
        node.end_lineno, node.end_col_offset = old.end_lineno, old.end_col_offset


def unlocated(tree: ast.AST) -> list[ast.AST]:
    """The nodes of a tree built by the transformer, none of them located yet."""
    found, stack = [], [tree]
    while stack:
        node = stack.pop()
        if node._attributes:  # not a context (Load, Store, Del)
            found.append(node)
        stack.extend(ast.iter_child_nodes(node))
    return found


def load(name: str) -> ast.Name:
    return ast.Name(name, ast.Load())


def call(func: str, *args: ast.expr) -> ast.Call:
    return ast.Call(load(func), list(args), [])
