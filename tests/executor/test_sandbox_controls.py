"""Positive controls: ordinary model-style code passes, and computes what plain Python computes.

Each program runs in the sandbox and, as trusted test code, with plain `exec` here; the
canonical outputs must agree. This is what catches a policy rewrite that changes semantics.
"""

from __future__ import annotations

import pytest

from selfplay.executor.values import canonical

PROGRAMS = {
    "builtins RestrictedPython dropped": (
        "def f(xs):\n    pairs = list(zip(xs, sorted(xs)))\n"
        "    return tuple(pairs), bytes([65, 66]), sorted(xs, key=lambda v: -v)",
        "[3, 1, 2]",
    ),
    "item augmented assignment": (
        "def f(s):\n    counts = {}\n    for ch in s:\n        counts[ch] = counts.get(ch, 0)\n"
        "        counts[ch] += 1\n    grid = [[0] * 2 for _ in range(2)]\n    grid[1][0] -= 3\n"
        "    return counts, grid",
        "'banana'",
    ),
    "augmented assignment evaluates once": (
        "def f(xs):\n    calls = []\n    def at(i):\n        calls.append(i)\n        return i\n"
        "    xs[at(0)] += 10\n    xs[at(1):at(2)] += [7]\n    return xs, calls",
        "[1, 2, 3]",
    ),
    "in-place list semantics": (
        "def f(x):\n    a = [1]\n    b = {'k': a}\n    b['k'] += [2]\n    return a is b['k'], a",
        "0",
    ),
    "attribute augmented assignment": (
        "class Counter:\n    total = 0\n    def __init__(self):\n        self.n = 0\n"
        "    def add(self, k):\n        self.n += k\n        Counter.total += k\n        return self\n"
        "def f(k):\n    c = Counter().add(k).add(k)\n    return c.n, Counter.total",
        "5",
    ),
    "classes, dunders, private names": (
        "class Vec:\n    def __init__(self, x, y):\n        self._x, self._y = x, y\n"
        "    def __add__(self, o):\n        return Vec(self._x + o._x, self._y + o._y)\n"
        "    def __eq__(self, o):\n        return (self._x, self._y) == (o._x, o._y)\n"
        "    def __hash__(self):\n        return hash((self._x, self._y))\n"
        "    def __repr__(self):\n        return f'{self.__class__.__name__}({self._x}, {self._y})'\n"
        "def f(n):\n    v = Vec(0, 0)\n    for i in range(n):\n        v = v + Vec(i, 1)\n"
        "    return repr(v), v == Vec(3, 3)",
        "3",
    ),
    "inheritance and super": (
        "class Base:\n    def __init__(self, v):\n        self.v = v\n    def describe(self):\n"
        "        return 'base ' + str(self.v)\nclass Child(Base):\n    def __init__(self, v):\n"
        "        super().__init__(v * 2)\n    def describe(self):\n"
        "        return 'child/' + super().describe()\ndef f(v):\n    return Child(v).describe()",
        "4",
    ),
    "match statement": (
        "def f(items):\n    out = []\n    for item in items:\n        match item:\n"
        "            case {'op': 'add', 'args': [a, b]}:\n                out.append(a + b)\n"
        "            case [x, *rest] if rest:\n                out.append(len(rest))\n"
        "            case str() as s:\n                out.append(s.upper())\n"
        "            case None | 0:\n                out.append('nothing')\n            case _:\n"
        "                out.append('?')\n    return out",
        "[{'op': 'add', 'args': [1, 2]}, [1, 2, 3], 'hi', None, 3.5]",
    ),
    "annotations, dataclass, NamedTuple, enum": (
        "from dataclasses import dataclass, field\nfrom typing import List, NamedTuple, Optional\n"
        "from enum import Enum\nclass Color(Enum):\n    RED = 1\n    BLUE = 2\n"
        "class P(NamedTuple):\n    x: int\n    y: int = 0\n@dataclass(order=True)\n"
        "class Item:\n    weight: int\n    tags: List[str] = field(default_factory=list)\n"
        "def f(n: int) -> Optional[tuple]:\n    total: int = 0\n"
        "    items = sorted(Item(w) for w in range(n, 0, -1))\n"
        "    total += items[0].weight\n    p = P(1)._replace(y=n)\n"
        "    return total, p.y, Color(2).name, [i.weight for i in items]",
        "3",
    ),
    "closures, nonlocal, generators, recursion": (
        "def f(n):\n    count = 0\n    def step():\n        nonlocal count\n        count += 1\n"
        "        return count\n    def gen(k):\n        for i in range(k):\n            yield step() * i\n"
        "    def fact(k):\n        return 1 if k <= 1 else k * fact(k - 1)\n"
        "    return list(gen(n)), count, fact(n)",
        "5",
    ),
    "comprehensions and f-strings": (
        "def f(words):\n    lengths = {w: len(w) for w in words}\n    firsts = {w[0] for w in words}\n"
        "    table = [f'{w:>6}|{n:03d}' for w, n in lengths.items()]\n"
        "    return table, sorted(firsts), '{} and {!r}'.format(*words[:2])",
        "['apple', 'kiwi', 'fig']",
    ),
    "standard library": (
        "import math, re, heapq, bisect, itertools, json, statistics, string\n"
        "from collections import Counter, defaultdict, deque\nfrom functools import lru_cache, reduce\n"
        "from fractions import Fraction\nfrom decimal import Decimal, getcontext\n"
        "@lru_cache(maxsize=None)\ndef fib(k):\n    return k if k < 2 else fib(k - 1) + fib(k - 2)\n"
        "def f(text):\n    getcontext().prec = 10\n    groups = defaultdict(list)\n"
        "    for w in re.findall(r'[a-z]+', text.lower()):\n        groups[w[0]].append(w)\n"
        "    q = deque([3, 1, 2])\n    q.rotate(1)\n    heap = list(q)\n    heapq.heapify(heap)\n"
        "    return (dict(groups), Counter(text).most_common(1), heapq.nsmallest(2, heap),\n"
        "            bisect.bisect([1, 3, 5], 4), list(itertools.accumulate([1, 2, 3])),\n"
        "            json.dumps({'a': [1, 2]}), statistics.median([3, 1, 2]), math.comb(5, 2),\n"
        "            str(Fraction(1, 3) + Fraction(1, 6)), str(Decimal(1) / Decimal(7)),\n"
        "            reduce(lambda a, b: a * b, range(1, 6)), fib(30), string.ascii_lowercase[:3])",
        "'The quick brown fox jumps over the lazy dog'",
    ),
    "exceptions": (
        "class Oops(ValueError):\n    pass\ndef f(xs):\n    out = []\n    for x in xs:\n"
        "        try:\n            if x < 0:\n                raise Oops(f'negative {x}')\n"
        "            out.append(10 // x)\n        except ZeroDivisionError:\n"
        "            out.append('div0')\n        except ValueError as e:\n            out.append(str(e))\n"
        "        finally:\n            out.append('.')\n    return out",
        "[2, 0, -1]",
    ),
    "own context manager": (
        "class Tracker:\n    def __init__(self):\n        self.log = []\n    def __enter__(self):\n"
        "        self.log.append('in')\n        return self\n    def __exit__(self, *exc):\n"
        "        self.log.append('out')\n        return False\ndef f(x):\n    t = Tracker()\n"
        "    with t as inside:\n        inside.log.append(x)\n    return t.log",
        "'body'",
    ),
    "deep recursion with setrecursionlimit": (
        "import sys\nsys.setrecursionlimit(5000)\ndef depth(n):\n    return 0 if n == 0 else 1 + depth(n - 1)\n"
        "def f(n):\n    return depth(n), sys.maxsize > 0",
        "3000",
    ),
    "print is harmless": ("def f(x):\n    print('debug', x)\n    return x", "'quiet'"),
    "floats and special values": (
        "import math\ndef f(x):\n    return [x / 3, -0.0, math.inf, round(2.675, 2), 1e300 * 10]",
        "1.0",
    ),
    "string methods and encodings": (
        "def f(s):\n    return (s.encode('utf-16-le'), s.encode('shift_jis'), s[::-1].title(),\n"
        "            s.zfill(8), ' '.join(reversed(s.split())))",
        "'ab cd'",
    ),
    "keyword arguments in the input": ("def f(a, b=2, *, c=3):\n    return a * b + c", "1, c=10"),
    "getattr and hasattr on own objects": (
        "class A:\n    x = 1\ndef f(name):\n    a = A()\n    setattr(a, name, 5)\n"
        "    return getattr(a, name), hasattr(a, 'missing'), getattr(a, 'nope', None)",
        "'y'",
    ),
    "operator.attrgetter on own objects": (
        "import operator\nclass P:\n    def __init__(self, n):\n        self.n = n\n"
        "def f(ns):\n    return [p.n for p in sorted(map(P, ns), key=operator.attrgetter('n'))]",
        "[3, 1, 2]",
    ),
}


def plain_python(program: str, inp: str) -> str:
    """The reference: the same program under ordinary Python (trusted test code only)."""
    namespace: dict = {}
    exec(program, namespace)
    return canonical(eval(f"namespace['f']({inp})", {"namespace": namespace}))


@pytest.mark.parametrize("name", PROGRAMS)
def test_ordinary_code_runs_like_python(executor, name):
    program, inp = PROGRAMS[name]
    [verdict] = executor.validate([(program, inp)])
    assert verdict.ok, verdict
    assert verdict.output == plain_python(program, inp)


def test_many_programs_in_one_batch(executor):
    cases = [(PROGRAMS[n][0], PROGRAMS[n][1]) for n in PROGRAMS] * 5
    verdicts = executor.validate(cases)
    assert all(v.ok for v in verdicts)


def test_state_does_not_leak_between_runs(executor):
    """Runs share a process; module state one run changes is reset for the next."""
    program = (
        "import decimal, sys\ndef f(x):\n    before = (decimal.getcontext().prec, sys.getrecursionlimit())\n"
        "    decimal.getcontext().prec = 3\n    sys.setrecursionlimit(2000)\n    return before"
    )
    verdicts = executor.validate([(program, str(i)) for i in range(6)])
    assert {v.output for v in verdicts} == {"(28, 1000)"}


def test_expression_inputs_for_benchmark_data(executor):
    program = "CONST = [1, 2]\ndef f(d, g):\n    return sorted(g(k) for k in d)"
    [verdict] = executor.validate(
        [(program, "dict(b=1, a=2), lambda k: k * 2")], inputs="expression"
    )
    assert verdict.ok and verdict.output == "['aa', 'bb']"
    [uses_global] = executor.validate([(program, "{'x': 1}, lambda k: CONST")], inputs="expression")
    assert uses_global.output == "[[1, 2]]"
