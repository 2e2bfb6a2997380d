"""Canonical, type-exact text for the values that cross the sandbox boundary.

Both sides use this module: the sandbox turns a program's return value into canonical text, and
the trusted process turns model-written text (a predicted output, an input) back into a value and
then into canonical text. Two values are equal for the executor exactly when their canonical
texts are equal. The rules:

* Allowed types, matched exactly (no subclasses): None, bool, int, float, str, bytes, list,
  tuple, dict, set, frozenset, nested. Anything else (a Counter, a user class, a generator) is
  `Unserializable`, which makes a task invalid. `True` is not `1` and `1` is not `1.0`.
* Floats print as `repr` (shortest round-trip). Every NaN is `float('nan')`; infinities are
  `float('inf')` and `-float('inf')`; `-0.0` stays distinct from `0.0`.
* Dicts sort their items and sets their elements by canonical text, so order never matters
  for them (as with Python's `==`), and never depends on the hash seed. Lists and tuples keep
  their order.
* Caps (`Limits`): nesting depth, number of items, int digits and total characters. Exceeding
  one raises `TooLarge`. A value that contains itself exceeds the depth cap.

`parse_literal` is the only way model text becomes a value in the trusted process: it walks the
`ast` of the text and accepts literals only (the forms this module prints, plus `float('nan')`
style spellings); it never evaluates, executes or unpickles anything.
"""

from __future__ import annotations

import ast
import math
import warnings
from dataclasses import dataclass

__all__ = [
    "Limits",
    "ValueRejected",
    "Unserializable",
    "TooLarge",
    "NotLiteral",
    "canonical",
    "parse_literal",
    "canonical_from_text",
    "parse_call_args",
]


@dataclass(frozen=True)
class Limits:
    """Caps on one value (an output, an input, a predicted answer)."""

    max_chars: int = 20_000
    max_depth: int = 32
    max_items: int = 10_000
    max_int_digits: int = 4_300


class ValueRejected(ValueError):
    """Base of the typed refusals below; `reason` is the executor's reason code."""

    reason = "value"


class Unserializable(ValueRejected):
    reason = "unserializable"


class TooLarge(ValueRejected):
    reason = "output_too_large"


class NotLiteral(ValueRejected):
    reason = "not_literal"


_NAN = "float('nan')"
_INF = "float('inf')"
_NEG_INF = "-float('inf')"
_BITS_PER_DIGIT = math.log2(10)


def _float_text(x: float) -> str:
    if x != x:
        return _NAN
    if x in (math.inf, -math.inf):
        return _INF if x > 0 else _NEG_INF
    return repr(x)


class _Printer:
    """One pass over a value, counting items as it goes."""

    def __init__(self, limits: Limits):
        self.limits = limits
        self.items = 0

    def text(self, value: object, depth: int) -> str:
        limits = self.limits
        if depth > limits.max_depth:
            raise TooLarge(f"nesting deeper than {limits.max_depth}")
        self.items += 1
        if self.items > limits.max_items:
            raise TooLarge(f"more than {limits.max_items} items")
        kind = type(value)
        if value is None or kind is bool:
            out = repr(value)
        elif kind is int:
            # Estimate the digits from the bit length first: str() of a huge int is slow and
            # raises past the interpreter's own digit limit.
            if value.bit_length() > limits.max_int_digits * _BITS_PER_DIGIT + 1:
                raise TooLarge(f"int with more than {limits.max_int_digits} digits")
            out = repr(value)
            if len(out.lstrip("-")) > limits.max_int_digits:
                raise TooLarge(f"int with more than {limits.max_int_digits} digits")
        elif kind is float:
            out = _float_text(value)
        elif kind is str or kind is bytes:
            if len(value) > limits.max_chars:
                raise TooLarge(f"{kind.__name__} longer than {limits.max_chars}")
            out = repr(value)
        elif kind is list:
            out = "[" + ", ".join([self.text(v, depth + 1) for v in value]) + "]"
        elif kind is tuple:
            parts = [self.text(v, depth + 1) for v in value]
            out = "(" + parts[0] + ",)" if len(parts) == 1 else "(" + ", ".join(parts) + ")"
        elif kind is dict:
            pairs = sorted(
                (self.text(k, depth + 1), self.text(v, depth + 1)) for k, v in value.items()
            )
            out = "{" + ", ".join(k + ": " + v for k, v in pairs) + "}"
        elif kind is set or kind is frozenset:
            parts = sorted(self.text(v, depth + 1) for v in value)
            body = "{" + ", ".join(parts) + "}"
            if kind is set:
                out = body if parts else "set()"
            else:
                out = "frozenset(" + body + ")" if parts else "frozenset()"
        else:
            raise Unserializable(f"values of type {kind.__name__!r} cannot leave the sandbox")
        if len(out) > limits.max_chars:
            raise TooLarge(f"canonical text longer than {limits.max_chars} characters")
        return out


def canonical(value: object, limits: Limits = Limits()) -> str:
    """The canonical text of `value`; raises `Unserializable` or `TooLarge`."""
    return _Printer(limits).text(value, 0)


# ---------------------------------------------------------------------------------------------
# Literal parsing (trusted side): text -> value, without evaluating anything.

_FLOAT_WORDS = {
    "nan": math.nan,
    "+nan": math.nan,
    "-nan": math.nan,
    "inf": math.inf,
    "+inf": math.inf,
    "infinity": math.inf,
    "-inf": -math.inf,
    "-infinity": -math.inf,
}
_LITERAL_CONSTANTS = (int, float, str, bytes, bool, type(None))


class _Reader:
    def __init__(self, limits: Limits):
        self.limits = limits
        self.items = 0

    def value(self, node: ast.AST, depth: int) -> object:
        if depth > self.limits.max_depth:
            raise TooLarge(f"nesting deeper than {self.limits.max_depth}")
        self.items += 1
        if self.items > self.limits.max_items:
            raise TooLarge(f"more than {self.limits.max_items} items")
        if isinstance(node, ast.Constant):
            if type(node.value) not in _LITERAL_CONSTANTS:
                raise NotLiteral(f"constant of type {type(node.value).__name__}")
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = self.value(node.operand, depth + 1)
            if type(inner) not in (int, float):
                raise NotLiteral("sign applied to a non-number")
            return -inner if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.List):
            return [self.value(e, depth + 1) for e in node.elts]
        if isinstance(node, ast.Tuple):
            return tuple(self.value(e, depth + 1) for e in node.elts)
        if isinstance(node, ast.Set):
            return self._hashable(set, [self.value(e, depth + 1) for e in node.elts])
        if isinstance(node, ast.Dict):
            if any(k is None for k in node.keys):
                raise NotLiteral("'**' in a dict literal")
            keys = [self.value(k, depth + 1) for k in node.keys]
            values = [self.value(v, depth + 1) for v in node.values]
            try:
                return dict(zip(keys, values, strict=True))
            except TypeError as err:
                raise NotLiteral(f"unhashable dict key: {err}") from None
        if isinstance(node, ast.Call):
            return self._call(node, depth)
        if isinstance(node, ast.Name) and node.id in ("inf", "nan"):  # how repr prints them
            return _FLOAT_WORDS[node.id]
        raise NotLiteral(f"{type(node).__name__} is not a literal")

    def _hashable(self, kind: type, elements: list) -> object:
        try:
            return kind(elements)
        except TypeError as err:
            raise NotLiteral(f"unhashable element: {err}") from None

    def _call(self, node: ast.Call, depth: int) -> object:
        """`set()`, `set([...])`, `frozenset(...)` and `float('nan')`-style spellings."""
        func = node.func
        if not isinstance(func, ast.Name) or node.keywords or len(node.args) > 1:
            raise NotLiteral("calls are not literals")
        if func.id == "float" and len(node.args) == 1:
            arg = node.args[0]
            text = isinstance(arg, ast.Constant) and isinstance(arg.value, str)
            word = arg.value.strip().lower() if text else None  # float(1.5) is no literal either
            if word in _FLOAT_WORDS:
                return _FLOAT_WORDS[word]
            raise NotLiteral("float() of something other than 'nan' or 'inf'")
        if func.id in ("set", "frozenset"):
            kind = set if func.id == "set" else frozenset
            if not node.args:
                return kind()
            arg = node.args[0]
            if not isinstance(arg, (ast.List, ast.Tuple, ast.Set)):
                raise NotLiteral(f"{func.id}() of a non-literal")
            return self._hashable(kind, [self.value(e, depth + 1) for e in arg.elts])
        raise NotLiteral(f"call of {func.id!r} is not a literal")


def _parse(text: str, limits: Limits, mode: str) -> ast.AST:
    if not isinstance(text, str):
        raise NotLiteral(f"expected text, got {type(text).__name__}")
    if len(text) > limits.max_chars:
        raise TooLarge(f"text longer than {limits.max_chars} characters")
    try:
        with warnings.catch_warnings():  # invalid escapes in model text are not our warnings
            warnings.simplefilter("ignore")
            return ast.parse(text.strip(), mode=mode)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as err:
        raise NotLiteral(f"not valid Python: {err.__class__.__name__}: {err}") from None


def parse_literal(text: str, limits: Limits = Limits()) -> object:
    """The value written as `text`, which must be a literal; raises a `ValueRejected`."""
    tree = _parse(text, limits, "eval")
    return _Reader(limits).value(tree.body, 0)


def canonical_from_text(text: str, limits: Limits = Limits()) -> str:
    """Canonical text of a model-written (or sandbox-written) literal."""
    return canonical(parse_literal(text, limits), limits)


def parse_call_args(text: str, limits: Limits = Limits()) -> str:
    """Check that `text` is a literal argument list and return it normalised.

    `text` is what goes inside `f(...)`: `[1, 2], 'a'` or `x=3`. Every argument must be a
    literal. The normalised text keeps the order of dict and set literals exactly as written
    (it can change what the program does), so it is the text to run, not a comparison key.
    """
    if len(text) > limits.max_chars:
        raise TooLarge(f"input longer than {limits.max_chars} characters")
    tree = _parse("f(" + text + "\n)", limits, "eval")
    call = tree.body
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "f"):
        raise NotLiteral("input is not an argument list")
    reader = _Reader(limits)
    parts = []
    for arg in call.args:
        if isinstance(arg, ast.Starred):
            raise NotLiteral("'*' in an input")
        reader.value(arg, 1)
        parts.append(ast.unparse(arg))
    for kw in call.keywords:
        if kw.arg is None:
            raise NotLiteral("'**' in an input")
        reader.value(kw.value, 1)
        parts.append(f"{kw.arg}={ast.unparse(kw.value)}")
    return ", ".join(parts)
