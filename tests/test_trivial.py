"""Trivial answers and tasks (`selfplay.trivial`): the copy answer judged in the sandbox, and
the proposals that are no work for a solver, one kind per test."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest

from selfplay.trivial import (
    OTHER_INPUTS,
    STOCK_INPUTS,
    converted_copy,
    copy_solves,
    deduction_twins,
    ignores_input,
    input_twins,
    literal_arguments,
    probe_inputs,
    stock_inputs,
    trivial_reasons,
)
from selfplay.types import Task


def task(executor, kind: str, program: str, given: str) -> Task:
    [verdict] = executor.validate([(program, given)])
    assert verdict.ok, verdict
    return Task(kind, program, (verdict.input,), (verdict.output,), cpu_s=verdict.cpu_s)


def test_the_copy_answer_of_output_prediction_is_the_single_input(executor):
    tasks = [
        task(executor, "deduction", "def f(a):\n    return a", "'Hello World'"),  # the seed
        task(executor, "deduction", "def f(a):\n    return sorted(a)", "[1, 2, 3]"),
        task(executor, "deduction", "def f(a):\n    return sorted(a)", "[3, 2, 1]"),
        task(executor, "deduction", "def f(a, b):\n    return a", "1, 2"),  # two arguments
        task(executor, "deduction", "def f(a):\n    return a", "a=1"),  # not positional
    ]
    assert copy_solves(executor, tasks) == [True, True, False, False, False]


def test_the_copy_answer_of_input_prediction_is_the_output(executor):
    tasks = [
        task(executor, "abduction", "def f(s):\n    return s.upper()", "'cat'"),  # idempotent
        task(executor, "abduction", "def f(s):\n    return s + 'a'", "'cat'"),
        task(executor, "abduction", "def f(xs):\n    return len(xs)", "[1, 2]"),  # f(2) crashes
    ]
    assert copy_solves(executor, tasks) == [True, False, False]


def test_an_abduction_its_output_answers_may_be_a_deduction_that_is_work(executor):
    upper = "def f(s):\n    return s.upper()"
    tasks = [
        task(executor, "abduction", upper, "'cat'"),  # f('CAT') == 'CAT': predict 'CAT' instead
        task(executor, "abduction", upper, "'CAT'"),  # as a deduction, the input answers it too
        task(executor, "abduction", "def f(s):\n    return s + 'a'", "'cat'"),  # work as it is
        task(executor, "deduction", upper, "'cat'"),  # not an abduction
    ]
    twins = deduction_twins(executor, tasks)
    assert twins[1:] == [None, None, None]
    assert twins[0] == dataclasses.replace(tasks[0], type="deduction")
    assert (twins[0].input, twins[0].output) == ("'cat'", "'CAT'")
    assert deduction_twins(executor, []) == []


def test_a_task_trivial_at_its_input_may_be_work_at_another(executor):
    """A copy or a constant output at the proposed input, with another input like it that is
    work (the first, probe inputs before stock inputs), takes that input and the output the
    sandbox gives on it. An abduction is not moved to a stock input (a stock answer would
    solve it); an idempotent f, a program that ignores its input and a task that is work
    already get none."""
    sort = "def f(xs):\n    return sorted(xs)"
    long = "def f(xs):\n    return 'long' if len(xs) > {} else 'short'"
    tasks = [
        task(executor, "deduction", sort, "[1, 2, 3]"),  # a copy; [1, 2] too, [1, 2, 3, 1] not
        task(executor, "deduction", long.format(4), "[1, 2]"),  # 'short' near; 5 items 'long'
        task(executor, "abduction", long.format(2), "[1]"),  # [1, 1, 1] is 'long'
        task(executor, "abduction", long.format(4), "[1, 2]"),  # no probe input is 'long'
        task(executor, "abduction", "def f(s):\n    return s.upper()", "'cat'"),  # idempotent
        task(executor, "deduction", "def f(n):\n    return 7", "3"),  # ignores its input
        task(executor, "deduction", sort, "[3, 1]"),  # work at its input
    ]
    reasons = trivial_reasons(executor, tasks)
    assert reasons == ["copy", "constant", "constant", "constant", "copy", "ignores_input", ""]
    twins = input_twins(executor, tasks, reasons)
    assert twins[3:] == [None] * 4
    assert [(t.type, t.input, t.output, t.program) for t in twins[:3]] == [
        ("deduction", "[1, 2, 3, 1]", "[1, 1, 2, 3]", sort),
        ("deduction", "[1, 2, 3, 4, 5]", "'long'", long.format(4)),
        ("abduction", "[1, 1]", "'short'", long.format(2)),  # its probe [1, 1, 1] is 'long'
    ]
    assert trivial_reasons(executor, twins[:3]) == ["", "", ""]
    assert all(t.cpu_s > 0 for t in twins[:3])
    assert input_twins(executor, [], []) == []
    # an abduction its output answers at every input may be work as a deduction at another
    parity = task(executor, "abduction", "def f(x):\n    return x % 2", "0")
    assert input_twins(executor, [parity], ["copy"]) == [None]
    [twin] = input_twins(executor, [parity], ["copy"], as_deductions=True)
    assert (twin.type, twin.input, twin.output) == ("deduction", "-2", "0")
    [upper] = input_twins(executor, tasks[4:5], ["copy"], as_deductions=True)
    assert (upper.type, upper.input, upper.output) == ("deduction", "'catxa'", "'CATXA'")
    same = task(executor, "abduction", "def f(s):\n    return s", "'cat'")  # a copy everywhere
    assert input_twins(executor, [same], ["copy"], as_deductions=True) == [None]


def test_an_input_whose_neighbours_crash_is_not_work(executor):
    """'small' wherever f runs: at 10 only one probe input (-12) runs, so the task there is
    not found constant, but it is not work either."""
    small = "def f(n):\n    if n > 10:\n        raise ValueError(n)\n    return 'small'"
    [given] = [task(executor, "deduction", small, "3")]
    assert trivial_reasons(executor, [given]) == ["constant"]
    at_ten = dataclasses.replace(given, inputs=("10",))
    assert trivial_reasons(executor, [at_ten]) == [""]  # one probe ran: not judged
    assert input_twins(executor, [given], ["constant"]) == [None]


def test_the_other_inputs_tried_are_probes_then_stock_inputs():
    """The probe inputs first, then stock inputs that are not probes; never the input itself,
    only inputs with probes of their own, at most `OTHER_INPUTS` in all. Sets are written in
    one order whatever the process's string hashes."""
    from selfplay.trivial import _other_inputs

    given = "[1, 2], 'ab'"
    near, far = _other_inputs(given, nearby=True), _other_inputs(given, nearby=False)
    assert near == probe_inputs(given) and len(near) == 6
    assert len(far) == OTHER_INPUTS - len(near) and not set(far) & set(near)
    assert set(far) <= set(stock_inputs(given)) and given not in near + far
    assert all(len(probe_inputs(t)) >= 2 for t in near + far)
    assert "[]" not in _other_inputs("[1]", nearby=True)  # [] has one probe input
    code = "from selfplay.trivial import probe_inputs; print(probe_inputs(\"{'b', 'a', 'c'}\"))"
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        ran = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert ran.stdout.strip() == "[\"{'a', 'b'}\"]", ran.stderr
    assert probe_inputs("9" * 4300) == []  # each probe past the digit limit of int text


def test_benchmark_inputs_written_as_expressions(executor):
    given = Task("deduction", "def f(d):\n    return d", ("dict(a=1)",), ("{'a': 1}",))
    assert copy_solves(executor, [given], inputs="expression") == [True]


@pytest.mark.parametrize(
    ("program", "expected"),
    [
        ("def f(a):\n    return 5", True),
        ("def f(a):\n    b = 2\n    return b", True),
        ("def f():\n    return 5", True),
        ("def f(a):\n    return a", False),
        ("def f(*args):\n    return len(args)", False),
        ("def f(a):\n    return len(locals())", False),  # reads its parameters indirectly
        ("def g(a):\n    return 5", False),  # no f: not for this check to say
        ("def f(a):\n    return 1\ndef f(a):\n    return a", False),  # the last f is called
    ],
)
def test_a_function_that_reads_no_parameter_ignores_its_input(program, expected):
    assert ignores_input(program) is expected


def test_probes_change_one_argument_at_a_time():
    probes = probe_inputs("[1, 2], 'ab'")
    assert probes[:2] == ["[1], 'ab'", "[1, 2], 'abxa'"]  # the first change of each argument
    assert len(probes) == 6 and len(set(probes)) == 6
    assert all(p != "[1, 2], 'ab'" for p in probes)
    assert probe_inputs("True") == ["False"]
    assert probe_inputs("x={'a': 1, 'b': 2}") == ["x={'a': 1}", "x={'b': 2, 'a': 1}"]
    assert probe_inputs("") == [] and probe_inputs("None") == []


def test_an_output_that_no_probe_moves_is_constant(executor):
    tasks = [
        task(executor, "deduction", "def f(s):\n    t = s\n    return 'x'", "'abc'"),
        task(executor, "deduction", "def f(n):\n    return n - n", "4"),
        task(executor, "deduction", "def f(n):\n    return n * 2", "4"),
        # the probes move the output (1 to 0): not constant
        task(executor, "abduction", "def f(s):\n    return int(s == 'abc')", "'abc'"),
    ]
    assert trivial_reasons(executor, tasks) == ["constant", "constant", "", ""]


def test_trivial_reasons_of_each_kind(executor):
    tasks = [
        task(executor, "deduction", "def f(a):\n    return a", "'Hello World'"),
        task(executor, "deduction", "def f(a):\n    return 'Hello'", "'Hello World'"),
        task(executor, "abduction", "def f(a):\n    return a[::-1] + 'x'", "'Hello'"),
        Task(
            "induction",
            "def f(a):\n    return a",
            ("1", "2", "3", "4"),
            ("1", "2", "3", "4"),
            "m",
            2,
        ),
        Task("induction", "def f(a):\n    return a % 2", ("2", "4", "6", "8"), ("0",) * 4, "m", 2),
        Task(
            "induction",
            "def f(a):\n    return a * 2",
            ("1", "2", "3", "4"),
            ("2", "4", "6", "8"),
            "m",
            2,
        ),
        Task("math", "def f():\n    return 4", ("",), ("4",), "Two and two?"),
    ]
    assert trivial_reasons(executor, tasks) == [
        "copy",
        "ignores_input",
        "",
        "copy",
        "constant",
        "",
        "",
    ]


def test_stock_inputs_keep_the_shape_of_the_given_input():
    assert stock_inputs("37")[:4] == ["0", "1", "2", "3"]
    assert "4" in stock_inputs("4")  # a stock input is its own guess
    assert stock_inputs("'xyz'")[:3] == ["''", "'a'", "'abc'"]
    assert "['a', 'b', 'c']" in stock_inputs("['q']")  # what a base model answers CRUXEval-I with
    two = stock_inputs("[5, 6], n=9")
    assert len(two) == len(set(two)) <= STOCK_INPUTS and "[1, 2, 3], n=3" in two
    assert all(t.endswith(tuple(f"n={k}" for k in (0, 1, 2, 3, 4, 5, 10, -1))) for t in two)
    many = stock_inputs("1, 2, 3, 4, 5, 6")  # two values per argument: 64, cut to the bound
    assert len(many) == STOCK_INPUTS
    assert stock_inputs("None, 7")[:2] == ["None, 0", "None, 1"]  # None has one value
    assert len(stock_inputs("None, 7")) == 8  # every int: None is not varied
    assert stock_inputs("x=7")[:2] == ["x=0", "x=1"]  # by keyword
    assert stock_inputs("b'q'") == ["b''", "b'a'", "b'abc'"]
    assert stock_inputs("10, 'racecar'")[0] == "10, 'racecar'"  # all stock: itself, first
    assert stock_inputs("frozenset({1})") == []  # not a literal: never judged guessable
    assert stock_inputs("") == [] and stock_inputs("f(") == []


def test_an_abduction_task_a_stock_input_solves_is_trivial_when_asked(executor):
    tasks = [
        task(executor, "abduction", "def f(x):\n    return 4 * x", "4"),  # the input is stock
        task(executor, "abduction", "def f(x):\n    return x % 2 + 5", "37"),  # 1 gives 6 too
        task(executor, "abduction", "def f(s):\n    return len(s)", "'xyz'"),  # 'abc' gives 3
        task(executor, "abduction", "def f(x):\n    return 4 * x", "37"),  # work back: 148 / 4
        task(executor, "abduction", "def f(xs):\n    return sum(xs) * 7", "[9, 8]"),
        task(executor, "deduction", "def f(x):\n    return 4 * x", "4"),  # a guess answers no
        task(executor, "abduction", "def f(b):\n    return len(b) * 3", "b'secret'"),
        task(executor, "abduction", "def f(x):\n    return x is None", "None"),  # the only one
    ]
    assert trivial_reasons(executor, tasks, stock=True) == ["stock_input"] * 3 + [""] * 4 + [
        "stock_input"
    ]
    assert trivial_reasons(executor, tasks) == [""] * 8


def test_the_proposer_is_told_that_trivial_tasks_are_discarded():
    from selfplay.proposer import proposer_prompt

    def text(refuse: bool) -> str:
        return proposer_prompt("abduction", [], refuse_trivial=refuse)[-1].content

    assert "must depend on the input" in text(True)
    assert "must depend on the input" not in text(False)
    induction = proposer_prompt("induction", [], program="def f(x):\n    return x * 2",
                                refuse_trivial=True)[-1].content  # fmt: skip
    assert "reveal nothing" in induction


def test_the_abduction_proposer_is_told_that_guessable_inputs_are_discarded():
    from selfplay.proposer import proposer_prompt

    def text(kind: str, refuse: bool) -> str:
        return proposer_prompt(kind, [], refuse_trivial=True, refuse_stock=refuse)[-1].content

    assert "must not be guessable" in text("abduction", True)
    assert "must not be guessable" not in text("abduction", False)
    assert "must not be guessable" not in text("deduction", True)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("3, 'a'", ([3, "a"], {})),
        ("[1, 2],\n  x=1", ([[1, 2]], {"x": 1})),
        ("", ([], {})),
        ("a=1, a=2", None),  # no call of f can give a name twice
        ("**{'a': 1}", None),
        ("*[1]", None),
        ("1) + (2", None),  # closes the call
        ("len('ab')", None),  # an expression
        ("1, ", ([1], {})),
    ],
)
def test_literal_arguments_reads_only_a_literal_argument_list(text, expected):
    assert literal_arguments(text) == expected


@pytest.mark.parametrize(
    ("kind", "inputs", "outputs", "expected"),
    [
        ("deduction", ("'1234'",), ("1234",), True),  # the digits read as a number
        ("abduction", ("-12",), ("'-12'",), True),  # the number written as text
        ("deduction", ("[1, 2]",), ("'[1, 2]'",), True),
        ("deduction", ("'12'",), ("'12'",), False),  # a plain copy: `copy_solves` judges it
        ("deduction", ("'   5  '",), ("5",), False),  # not the same text
        ("deduction", ("'1', 2",), ("'1'",), False),  # two arguments
        ("deduction", ("x='1'",), ("1",), False),  # a keyword argument
        ("deduction", ("'1.0'",), ("1.0",), True),
        ("deduction", ("True",), ("'True'",), True),
        ("deduction", ("'ab'",), ("f'ab'",), False),  # an output that is no literal
        ("induction", ("'1'",), ("1",), False),  # the solver writes the program
    ],
)
def test_a_copy_up_to_type_is_the_one_argument_written_as_another_type(
    kind, inputs, outputs, expected
):
    task = Task(kind, "def f(x):\n    return x", inputs, outputs)
    assert converted_copy(task) is expected
