"""Attacks on the sandbox through the front door (`Executor.validate` / `verify`), one per test.

Each must come back invalid (or incorrect), in bounded time, with no side effect. Attacks that
assume RestrictedPython has already been defeated are in `test_isolation.py`.
"""

from __future__ import annotations

import os
import time

import pytest

from selfplay.config import ExecutorConfig
from selfplay.executor import Executor
from selfplay.types import Task

BOUND_S = 6.0  # every attack ends well within this (CPU limit 1 s, wall slack 1 s)


def refused(executor, program: str, inp: str = "1", *, inputs: str = "literal"):
    start = time.monotonic()
    [verdict] = executor.validate([(program, inp)], inputs=inputs)
    elapsed = time.monotonic() - start
    assert not verdict.ok, f"accepted: {verdict}"
    assert elapsed < BOUND_S, f"took {elapsed:.1f} s"
    return verdict


def reason_of(executor, program: str, inp: str = "1") -> str:
    return refused(executor, program, inp).reason


INTROSPECTION = {
    "subclasses": "def f(x):\n    return ().__class__.__base__.__subclasses__()",
    "subclasses via getattr": "def f(x):\n    return getattr(object, '__subcl' + 'asses__')()",
    "getattr dunder at run time": "def f(x):\n    return getattr(f, '__glo' + 'bals__')",
    "function globals": "def f(x):\n    return f.__globals__['__builtins__']",
    "generator frame": "def f(x):\n    g = (i for i in [1])\n    return g.gi_frame.f_back",
    "generator frame via getattr": "def f(x):\n    g = (i for i in [1])\n    return getattr(g, 'gi_' + 'frame')",
    "traceback frame": "def f(x):\n    try:\n        1 / 0\n    except ZeroDivisionError as e:\n"
    "        return e.__traceback__.tb_frame",
    "format attribute walk": "def f(x):\n    return '{0.__class__.__base__}'.format(x)",
    "format via str class": "def f(x):\n    return str.format('{0.__class__.__base__}', x)",
    "format_map attribute walk": "def f(x):\n    return '{v.__init__.__globals__}'.format_map({'v': x})",
    "f-string dunder": "def f(x):\n    return f'{x.__class__.__base__}'",
    "attrgetter dunder": "import operator\ndef f(x):\n    return operator.attrgetter('__class__.__base__')(x)",
    "methodcaller dunder": "import operator\ndef f(x):\n    return operator.methodcaller('__subclasses__')(object)",
    "mro": "def f(x):\n    return [c.__name__ for c in type(x).mro()]",
    "vars": "def f(x):\n    return vars()",
    "builtins name": "def f(x):\n    return __builtins__",
    "three-argument type": "def f(x):\n    return type('X', (), {'__init_subclass__': None})",
    "private attribute of a module": "import collections\ndef f(x):\n    return collections._sys",
    "module attribute that is a module": "import json\ndef f(x):\n    return json.decoder",
    "decimal default context": "from decimal import DefaultContext\ndef f(x):\n    return 1",
    "type hints evaluate strings": "from typing import get_type_hints\ndef f(x):\n    return 1",
    "match keyword on a dunder": "def f(x):\n    match x:\n        case int(__class__=c):\n            return c",
    "match keyword on str.format": "import numbers\ndef f(t):\n    match t:\n"
    "        case str(format=fmt):\n            return fmt(numbers.Integral)",
    "match keyword on the clock": "import datetime\ndef f(x):\n"
    "    match datetime.datetime(2000, 1, 1):\n        case datetime.datetime(now=clock):\n"
    "            return str(clock())",
    "type of a class": "def f(x):\n    C = type(int)('C', (), {'__del__': lambda s: None})\n    return 1",
    "metaclass via __class__": "def f(x):\n    return int.__class__('C', (), {})",
    "metaclass of a module": "import abc\ndef f(x):\n    return abc.ABCMeta('C', (), {})",
    "enum member named as a dunder": "import enum\ndef f(x):\n"
    "    return enum.Enum('E', {'__init_subclass__': classmethod(lambda c, **k: None)})",
    "metaclass imported": "from enum import EnumType\ndef f(x):\n    return EnumType('E', (), {})",
    "setattr dunder": "class A:\n    pass\ndef f(x):\n    setattr(A, '__init_subclass__', 1)",
    "write a library class": "def f(x):\n    ValueError.note = 1\n    return 1",
    "write a module": "import math\ndef f(x):\n    math.pi = 3\n    return math.pi",
    "register into a library ABC": "from collections.abc import Sequence\n"
    "def f(x):\n    Sequence.register(int)\n    return 1",
}


@pytest.mark.parametrize("name", INTROSPECTION)
def test_introspection_escape(executor, name):
    assert reason_of(executor, INTROSPECTION[name]).startswith(("policy:", "crash:AttributeError"))


IMPORTS = {
    "import os": "import os\ndef f(x):\n    return os.getcwd()",
    "import os.path": "import os.path\ndef f(x):\n    return 1",
    "from os import system": "from os import system\ndef f(x):\n    return 1",
    "import subprocess": "import subprocess\ndef f(x):\n    return 1",
    "import ctypes": "import ctypes\ndef f(x):\n    return 1",
    "import socket": "import socket\ndef f(x):\n    return 1",
    "from socket import socket": "from socket import socket\ndef f(x):\n    return 1",
    "import inside a function": "def f(x):\n    import os\n    return 1",
    "__import__": "def f(x):\n    return __import__('os')",
    "importlib": "import importlib\ndef f(x):\n    return importlib.import_module('os')",
    "builtins module": "import builtins\ndef f(x):\n    return builtins.open",
    "sys.modules": "import sys\ndef f(x):\n    return sys.modules['os']",
    "exec": "def f(x):\n    exec('import os')",
    "compile": "def f(x):\n    return compile('1', 's', 'eval')",
    "pickle": "import pickle\ndef f(x):\n    return 1",
    "relative import": "from . import os\ndef f(x):\n    return 1",
    "posix": "import posix\ndef f(x):\n    return 1",
    "via codecs": "import codecs\ndef f(x):\n    return 1",
    "via string module": "import string\ndef f(x):\n    return string.Formatter",
}


@pytest.mark.parametrize("name", IMPORTS)
def test_import_escape(executor, name):
    assert reason_of(executor, IMPORTS[name]).startswith(("policy:", "crash:AttributeError"))


def test_file_read(executor):
    assert reason_of(executor, "def f(x):\n    return open('/etc/hostname').read()") == (
        "policy:forbidden_name"
    )


def test_file_write_leaves_nothing(executor, tmp_path):
    target = tmp_path / "written"
    program = f"def f(x):\n    open({str(target)!r}, 'w').write('x')\n    return 1"
    assert reason_of(executor, program) == "policy:forbidden_name"
    assert not target.exists()


def test_file_access_through_pathlib(executor):
    assert reason_of(executor, "import pathlib\ndef f(x):\n    return 1") == "policy:import"


def test_fork_bomb(executor):
    assert reason_of(executor, "import os\ndef f(x):\n    while True:\n        os.fork()") == (
        "policy:import"
    )


def test_thread_bomb(executor):
    program = "import threading\ndef f(x):\n    while True:\n        threading.Thread().start()"
    assert reason_of(executor, program) == "policy:import"


@pytest.mark.parametrize(
    "program",
    [
        "def f(x):\n    return len([0] * 10 ** 10)",
        "def f(x):\n    return len('a' * (1 << 40))",
        "def f(x):\n    out = []\n    while True:\n        out.append(' ' * 10 ** 6)",
        "def f(x):\n    return len(bytearray(10 ** 11))",
    ],
    ids=["list", "string", "growing", "bytearray"],
)
def test_memory_bomb(executor, program):
    assert reason_of(executor, program) in ("memory", "timeout")


@pytest.mark.parametrize(
    "program",
    [
        "def f(x):\n    return 10 ** 10 ** 10 > 0",
        "import re\ndef f(x):\n    return bool(re.match('(a+)+$', 'a' * 40 + 'b'))",
        "def f(x):\n    return sum(i * i for i in range(10 ** 12))",
    ],
    ids=["big-int-power", "regex-backtracking", "long-sum"],
)
def test_cpu_bomb(executor, program):
    assert reason_of(executor, program) == "timeout"


SWALLOWING_LOOPS = {
    "plain": "def f(x):\n    while True:\n        pass",
    "bare except": "def f(x):\n    while True:\n        try:\n            while True:\n                pass\n"
    "        except:\n            pass",
    "except BaseException": "def f(x):\n    while True:\n        try:\n            while True:\n"
    "                pass\n        except BaseException:\n            pass",
    "finally": "def f(x):\n    try:\n        while True:\n            pass\n    finally:\n"
    "        while True:\n            pass",
    "suppressing context manager": "class Swallow:\n    def __enter__(self):\n        return self\n"
    "    def __exit__(self, *exc):\n        return True\n\ndef f(x):\n    while True:\n"
    "        with Swallow():\n            while True:\n                pass",
    "recursion catching itself": "def f(x):\n    try:\n        return f(x)\n    except Exception:\n"
    "        return f(x)",
    "generator cleanup": "def g():\n    try:\n        yield 1\n    finally:\n        while True:\n"
    "            pass\n\ndef f(x):\n    it = g()\n    next(it)\n    return 1",
}


@pytest.mark.parametrize("name", SWALLOWING_LOOPS)
def test_infinite_loop_that_swallows_exceptions(executor, name):
    assert reason_of(executor, SWALLOWING_LOOPS[name]) in ("timeout", "crash:RecursionError")


def test_signal_tampering(executor):
    program = "import signal\ndef f(x):\n    signal.signal(signal.SIGALRM, signal.SIG_IGN)\n"
    program += "    while True:\n        pass"
    assert reason_of(executor, program) == "policy:import"


def test_output_flood_through_print(executor):
    program = "def f(x):\n    for i in range(10 ** 6):\n        print('flood' * 100)\n    return 1"
    start = time.monotonic()
    [verdict] = executor.validate([(program, "1")])
    assert time.monotonic() - start < BOUND_S
    assert verdict.reason in ("ok", "timeout")
    assert verdict.output in ("1", None)


@pytest.mark.parametrize(
    "program",
    [
        "def f(x):\n    return 'a' * 10 ** 7",
        "def f(x):\n    return list(range(10 ** 6))",
        "def f(x):\n    v = []\n    for _ in range(1000):\n        v = [v]\n    return v",
        "def f(x):\n    return 7 ** 100000",
    ],
    ids=["long-string", "many-items", "deep", "huge-int"],
)
def test_output_too_large(executor, program):
    assert reason_of(executor, program) == "output_too_large"


@pytest.mark.parametrize(
    "program, expected",
    [
        ("def f(x):\n    raise SystemExit(0)", "crash:NameError"),
        ("def f(x):\n    exit(0)", "policy:forbidden_name"),
        ("def f(x):\n    quit()", "policy:forbidden_name"),
        ("import os\ndef f(x):\n    os._exit(0)", "policy:import"),
        ("import sys\ndef f(x):\n    sys.exit(0)", "crash:AttributeError"),
        ("def f(x):\n    raise KeyboardInterrupt", "crash:NameError"),
    ],
    ids=["SystemExit", "exit", "quit", "os._exit", "sys.exit", "KeyboardInterrupt"],
)
def test_exit_code_spoofing(executor, program, expected):
    assert reason_of(executor, program) == expected


@pytest.mark.parametrize(
    "program, inp, expected",
    [
        ("def f(s):\n    return list(set(s))", "'abcdefghij'", "nondeterministic"),
        ("def f(s):\n    return hash(s)", "'abc'", "nondeterministic"),
        ("def f(x):\n    return id(x)", "1", "policy:forbidden_name"),
        (
            "import datetime\ndef f(x):\n    return str(datetime.datetime.now())",
            "1",
            "policy:nondeterminism",
        ),
        (
            "from datetime import date\ndef f(x):\n    return str(date.today())",
            "1",
            "policy:nondeterminism",
        ),
        ("import random\ndef f(x):\n    return random.random()", "1", "policy:import"),
        ("import time\ndef f(x):\n    return time.time()", "1", "policy:import"),
        (
            "def f(x):\n    return ''.join({'b': 1, 'a': 2, 'c': 3}.keys() | {'d'})",
            "1",
            "nondeterministic",
        ),
        ("def f(x):\n    return str(f)", "1", "nondeterministic"),  # '<function f at 0x...>'
        ("def f(x):\n    return repr(map(int, x))", "'12'", "nondeterministic"),
        ("def f(s):\n    return str(reversed(s)).upper()", "'abc'", "nondeterministic"),
    ],
    ids=[
        "set-order",
        "hash",
        "id",
        "datetime-now",
        "date-today",
        "random",
        "time",
        "keys-union",
        "address",
        "map-address",
        "address-upper-case",
    ],
)
def test_nondeterminism(executor, program, inp, expected):
    assert reason_of(executor, program, inp) == expected


def test_random_without_a_seed_is_seeded_with_zero():
    """`random.seed(None)` and `Random(None)` would read OS entropy or the clock; a run that
    cannot differ from the next runs once, so they must not."""
    programs = [
        "import random\ndef f(x):\n    random.seed(None)\n    return random.random()",
        "import random\ndef f(x):\n    return random.Random(None).random()",
        "import random\ndef f(x):\n    return random.Random().random()",
    ]
    with Executor(ExecutorConfig(extra_modules=("random",))) as ex:
        verdicts = ex.validate([(p, "1") for p in programs] * 2)
    assert {(v.ok, v.output) for v in verdicts} == {(True, "0.8444218515250481")}


@pytest.mark.parametrize(
    "program",
    [
        "class Eq:\n    def __eq__(self, other):\n        return True\n    __hash__ = None\n"
        "def f(x):\n    return Eq()",
        "class S(str):\n    def __eq__(self, other):\n        return True\ndef f(x):\n    return S('x')",
        "class L(list):\n    pass\ndef f(x):\n    return L([1])",
        "from collections import Counter\ndef f(x):\n    return Counter('aab')",
    ],
    ids=["always-equal", "str-subclass", "list-subclass", "Counter"],
)
def test_equality_spoofing_output_is_refused(executor, program):
    assert reason_of(executor, program) == "unserializable"


def test_equality_spoofing_deduction_answers(executor):
    task = Task("deduction", "def f(x):\n    return 1", ("0",), ("1",), cpu_s=0.001)
    verdicts = executor.verify(task, ["True", "1.0", "'1'", "1"])
    assert [v.ok for v in verdicts] == [False, False, False, True]


def test_payload_in_a_given_output_never_runs(executor, tmp_path):
    canary = tmp_path / "pwned"
    payload = f"__import__('os').system('touch {canary}')"
    task = Task("deduction", "def f(x):\n    return x", ("1",), ("1",), cpu_s=0.001)
    [verdict] = executor.verify(task, [payload])
    assert verdict.reason == "answer:not_literal"
    [abduction] = executor.verify(Task("abduction", task.program, ("1",), ("1",)), [payload])
    assert abduction.reason == "answer:not_literal"
    assert not canary.exists()


def test_payload_in_a_program_output_is_only_text(executor, tmp_path):
    canary = tmp_path / "pwned"
    program = f"def f(x):\n    return \"__import__('os').system('touch {canary}')\""
    [verdict] = executor.validate([(program, "1")])
    assert verdict.ok and verdict.output.startswith('"__import__')
    assert not canary.exists()


def test_payload_in_an_input_is_refused(executor, tmp_path):
    canary = tmp_path / "pwned"
    for payload in (f"__import__('os').system('touch {canary}')", "1); import os; (2"):
        assert refused(executor, "def f(x):\n    return x", payload).reason.startswith("input:")
    assert not canary.exists()


# CRUXEval sample_6: f sorts a dict's items and returns `list(...)[-2:]`; the gold output is
# [('74', 31)]. An input answer in expression mode that rebinds the `list` f calls used to be
# judged right for any dict.
REBINDING = (
    "def f(dic):\n    for k, v in sorted(dic.items(), key=lambda x: len(str(x)))[:-1]:\n"
    "        dic.pop(k)\n    return list(dic.items())"
)


def test_an_input_answer_cannot_rebind_a_name_the_program_uses(executor):
    task = Task(
        "abduction",
        REBINDING,
        ("{'11': 52, '65': 34, 'a': 12, '4': 52, '74': 31}",),
        ("[('74', 31)]",),
        cpu_s=0.001,
    )
    attack = "(list := lambda *a, **k: [('74', 31)]) and {}"
    [verdict] = executor.verify(task, [attack], inputs="expression")
    assert not verdict.ok and verdict.reason == "policy:assignment"
    [gold] = executor.verify(task, [task.input], inputs="expression")
    assert gold.ok


def test_an_input_answer_cannot_change_a_global_the_program_reads(executor):
    """Without `:=`: an input that empties a global list `f` reads (0 is not an answer: f(0)
    is False) changes only its own instance of the program; reading the globals stays allowed,
    as CRUXEval's sample_258 input `thigh_o_two[:]` needs."""
    program = "LIMIT = [3]\ndef f(x):\n    return x > LIMIT[0]"
    task = Task("abduction", program, ("5",), ("True",), cpu_s=0.001)
    attack = "LIMIT.clear() or LIMIT.append(-1) or 0"
    [verdict] = executor.verify(task, [attack], inputs="expression")
    assert not verdict.ok and verdict.reason == "wrong_output"
    [reading] = executor.verify(task, ["LIMIT[0] + 1"], inputs="expression")
    assert reading.ok


def test_an_input_answer_cannot_fill_the_programs_mutable_default(executor):
    """The input sees the program's data, not its functions: it cannot call `f` first."""
    program = "def f(x, seen=[]):\n    seen.append(x)\n    return len(seen)"
    task = Task("abduction", program, ("0",), ("2",), cpu_s=0.001)
    [verdict] = executor.verify(task, ["f(0) and 0"], inputs="expression")
    assert not verdict.ok and verdict.reason == "answer:NameError"


def test_an_input_answer_cannot_change_the_decimal_context_the_program_computes_in(executor):
    """The decimal context is per process, shared by the program's two instances: an input
    that lowers its precision (through a name the program imported) would make f(1) round
    to 0.33, an output no honest input gives."""
    program = "from decimal import Decimal, getcontext\ndef f(x):\n"
    program += "    return str(Decimal(x) / Decimal(3))"
    task = Task("abduction", program, ("1",), ("'0.33'",), cpu_s=0.001)
    attack = "setattr(getcontext(), 'prec', 2) or 1"
    [verdict] = executor.verify(task, [attack], inputs="expression")
    assert not verdict.ok and verdict.reason == "answer:NameError"


def test_an_input_answer_cannot_lower_the_recursion_limit_the_program_runs_under(executor):
    program = "import sys\ndef g(n):\n    return 0 if n == 0 else 1 + g(n - 1)\n"
    program += "def f(n):\n    try:\n        return g(n)\n    except RecursionError:\n"
    program += "        return -1"
    task = Task("abduction", program, ("50",), ("-1",), cpu_s=0.001)
    [verdict] = executor.verify(task, ["sys.setrecursionlimit(40) or 50"], inputs="expression")
    assert not verdict.ok and verdict.reason == "answer:NameError"


def test_deeply_nested_answer_is_refused_quickly(executor):
    task = Task("deduction", "def f(x):\n    return 1", ("0",), ("1",), cpu_s=0.001)
    start = time.monotonic()
    [verdict] = executor.verify(task, ["[" * 100_000 + "]" * 100_000])
    assert not verdict.ok and time.monotonic() - start < 2


def test_trusted_process_is_untouched(executor):
    """After all of the above the trusted process still has its own environment and cwd."""
    cwd, environ = os.getcwd(), dict(os.environ)
    refused(executor, "import os\ndef f(x):\n    os.chdir('/')\n    os.environ.clear()")
    assert os.getcwd() == cwd and dict(os.environ) == environ
