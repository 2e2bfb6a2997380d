"""The sandbox's rules for `match` statements, which RestrictedPython 9 refuses outright.

Patterns are not expressions: the match machinery reads a class pattern's attributes and a
value pattern's dotted names without going through `_getattr_`, so the transformer cannot
guard them at run time and checks them here instead. Class patterns may name public
attributes only (no `_` prefix, none of the introspection attributes, none that the run-time
guards refuse or replace for some objects: `guards.GUARDED_PUBLIC_NAMES`); value patterns and
mapping keys are literals or dotted names under the same rule, and no name in a pattern may be
a forbidden builtin. Capture names (`case [x, *rest]`, `case {**rest}`, `as y`) go through the
same name check as assignments. `SandboxTransformer` (`policy.py`) takes these methods in.
"""

from __future__ import annotations

import ast

from selfplay.executor.guards import (
    DENIED_PUBLIC_ATTRIBUTES,
    FORBIDDEN_BUILTINS,
    GUARDED_PUBLIC_NAMES,
)

__all__ = ["MatchStatementRules"]


class MatchStatementRules:
    """`visit_Match*` methods for a RestrictedPython node transformer (a mixin: it relies on
    the transformer's `visit`, `node_contents_visit`, `check_name`, `count_levels` and
    `deny`)."""

    def visit_Match(self, node: ast.Match):
        return self.node_contents_visit(node)

    def visit_match_case(self, node: ast.match_case):
        return self.node_contents_visit(node)

    def visit_MatchValue(self, node: ast.MatchValue):
        return self._pattern_expression(node)

    def visit_MatchSingleton(self, node: ast.MatchSingleton):
        return node

    def visit_MatchSequence(self, node: ast.MatchSequence):
        return self.node_contents_visit(node)

    def visit_MatchMapping(self, node: ast.MatchMapping):
        for key in node.keys:
            self._check_dotted(key)
        self.check_name(node, node.rest)
        node.patterns = [self.visit(p) for p in node.patterns]
        return node

    def visit_MatchClass(self, node: ast.MatchClass):
        # The match machinery reads these attributes without `_getattr_`: public names only.
        self._check_dotted(node.cls)
        for attr in node.kwd_attrs:
            if attr.startswith("_") or attr in DENIED_PUBLIC_ATTRIBUTES:
                self.deny(node, "dunder", f'class pattern on attribute "{attr}"')
            elif attr in GUARDED_PUBLIC_NAMES:  # `case str(format=fmt)`: an unguarded format
                self.deny(node, "introspection", f'class pattern on attribute "{attr}"')
        node.patterns = [self.visit(p) for p in node.patterns]
        node.kwd_patterns = [self.visit(p) for p in node.kwd_patterns]
        return node

    def visit_MatchStar(self, node: ast.MatchStar):
        self.check_name(node, node.name)
        return node

    def visit_MatchAs(self, node: ast.MatchAs):
        self.check_name(node, node.name)
        return self.node_contents_visit(node)

    def visit_MatchOr(self, node: ast.MatchOr):
        return self.node_contents_visit(node)

    def _pattern_expression(self, node: ast.MatchValue):
        """Value patterns are literals or dotted names; they must stay untransformed."""
        self._check_dotted(node.value)
        return node

    def _check_dotted(self, expr: ast.expr) -> None:
        self.count_levels(expr)  # not visited, but compiled: the nesting cap covers it
        for sub in ast.walk(expr):
            if isinstance(sub, ast.Attribute) and (
                sub.attr.startswith("_") or sub.attr in DENIED_PUBLIC_ATTRIBUTES
            ):
                self.deny(sub, "dunder", f'pattern on attribute "{sub.attr}"')
            elif isinstance(sub, ast.Name):
                self.check_name(sub, sub.id)
                if sub.id in FORBIDDEN_BUILTINS:
                    self.deny(sub, "forbidden_name", f'"{sub.id}" is not available')
