"""A small built-in example set: what `selfplay validate --examples` checks.

Ordinary model-style programs that must validate, and hostile ones that must be refused, each
with the verdict it should get. It doubles as a quick health check of a new machine.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Example:
    name: str
    program: str
    input: str
    expect: str  # "ok" or the expected reason


EXAMPLES: tuple[Example, ...] = (
    Example("sort", "def f(xs):\n    return sorted(xs, reverse=True)", "[3, 1, 2]", "ok"),
    Example(
        "count letters",
        "from collections import Counter\n\ndef f(s: str) -> dict:\n"
        "    counts = {}\n    for ch in s:\n        counts[ch] = counts.get(ch, 0) + 1\n"
        "    return dict(Counter(counts).most_common(2))",
        "'mississippi'",
        "ok",
    ),
    Example(
        "class and match",
        "class Point:\n    def __init__(self, x, y):\n        self.x, self.y = x, y\n\n"
        "def f(pairs):\n    out = []\n    for p in (Point(a, b) for a, b in pairs):\n"
        "        match p:\n            case Point(x=0):\n                out.append('axis')\n"
        "            case _:\n                out.append(f'{p.x}:{p.y}')\n    return out",
        "[(0, 1), (2, 3)]",
        "ok",
    ),
    Example(
        "recursion with memo",
        "from functools import lru_cache\n\n@lru_cache(maxsize=None)\ndef f(n):\n"
        "    return n if n < 2 else f(n - 1) + f(n - 2)",
        "60",
        "ok",
    ),
    Example("import os", "import os\n\ndef f(x):\n    return os.getcwd()", "1", "policy:import"),
    Example(
        "subclass escape",
        "def f(x):\n    return [c.__name__ for c in ().__class__.__base__.__subclasses__()]",
        "1",
        "policy:dunder",
    ),
    Example("infinite loop", "def f(x):\n    while True:\n        x += 1", "0", "timeout"),
    Example("memory bomb", "def f(x):\n    return len([0] * 10 ** 10)", "1", "memory"),
    Example("set order", "def f(s):\n    return list(set(s))", "'abcdefgh'", "nondeterministic"),
    Example(
        "not a value", "class Box:\n    pass\n\ndef f(x):\n    return Box()", "1", "unserializable"
    ),
    Example("crash", "def f(x):\n    return 1 // x", "0", "crash:ZeroDivisionError"),
    Example("input with code", "def f(x):\n    return x", "__import__('os')", "input:not_literal"),
)
