"""Trivial answers and trivial tasks: what is right without reasoning.

The copy answer restates what a task shows:

    deduction   the input given as the output (a call with one positional argument)
    abduction   the output given as the input
    induction   none (the solver writes a program)

An item its copy answer solves is trivial (`copy_solves`). Evaluations mark such items, so that
a report can tell a solver that learned to copy from one that learned to trace: on CRUXEval-I
the gold output given as the input is right on 181 of 800 problems, on CRUXEval-O the input
given as the output on 68.

A proposed task is trivial (`trivial_reasons`) when it is no work for a solver:

    copy           its copy answer solves it; an induction task, when every output equals its
                   input
    ignores_input  its function `f` reads none of its parameters
    constant       its output does not move with its input: every probe input (the given input
                   with one argument changed, `probe_inputs`) that runs gives the same output;
                   an induction task, when all of its outputs are equal
    stock_input    (abduction, with `stock=True`) a stock input, one a solver could give
                   without reading the output, gives its output: `stock_inputs`, the given
                   input with every argument replaced by a common value of its type (0 to 5,
                   10, 'abc', [1, 2, 3], ['a', 'b', 'c'], ...). Refusing such tasks starved a
                   run's pool of abductions and did not keep its CRUXEval-I (docs/results.md)

An abduction task its copy answer solves may still be a deduction task that is work: the same
program and input, the output to predict (`deduction_twins`, `curriculum.retype_fixed_abductions`).
A task that is a copy or constant at its input may be work at another input like it: a probe
input or a stock one (`input_twins`, `curriculum.reinput_trivial`).

The curriculum keeps trivial proposals out of the pool and pays them the duplicate penalty
(`stages.store_tasks`). Every judgement runs in the sandbox (the executor): the trusted side
only parses the literal inputs it already normalised to build the probe and stock inputs.
"""

from __future__ import annotations

import ast
import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import replace

from selfplay.types import Task

__all__ = [
    "MIN_PROBES",
    "converted_copy",
    "copy_solves",
    "deduction_twins",
    "ignores_input",
    "input_twins",
    "literal_arguments",
    "probe_inputs",
    "stock_inputs",
    "stock_solves",
    "trivial_reasons",
]

# The copy answer of a deduction task, computed in the sandbox: the value of the one argument.
_ONE_ARGUMENT = (
    "def f(*args, **kwargs):\n"
    "    if len(args) != 1 or kwargs:\n"
    "        raise TypeError('not one positional argument')\n"
    "    return args[0]"
)
PROBES = 6  # probe inputs run per deduction or abduction task
MIN_PROBES = 2  # a task is constant only if at least this many probes ran
STOCK_INPUTS = 48  # most stock inputs run per abduction task
OTHER_INPUTS = 12  # most other inputs tried per task that is trivial at its own (`input_twins`)
#: the reasons another input can take away (`input_twins`): not a program that ignores its input
INPUT_REASONS = frozenset({"copy", "constant"})

# Common values of each type: what a solver that does not read a task's output would answer.
_STOCK: dict[type, tuple] = {
    bool: (True, False),
    int: (0, 1, 2, 3, 4, 5, 10, -1),
    float: (0.0, 1.0, 0.5, 2.0),
    str: ("", "a", "abc", "hello", "Hello World", "hello world", "racecar", "123"),
    list: ([], [1, 2, 3], ["a", "b", "c"], [1, 2, 3, 4, 5], [0], [1], [3, 2, 1]),
    tuple: ((), (1, 2, 3), ("a", "b", "c"), (1, 2)),
    dict: ({}, {"a": 1}, {"a": 1, "b": 2}),
    set: (set(), {1, 2, 3}),
    bytes: (b"", b"a", b"abc"),
    type(None): (None,),
}


def copy_solves(executor, tasks: Sequence[Task], inputs: str = "literal") -> list[bool]:
    """Per task, whether its copy answer solves it (`inputs`: how its inputs are read, the
    executor's input mode). Math tasks have none: False."""
    values = _argument_values(executor, tasks, inputs)
    abduction = [i for i, t in enumerate(tasks) if t.type == "abduction"]
    verdicts = executor.verify_many([(tasks[i], [tasks[i].output]) for i in abduction], inputs)
    out = [False] * len(tasks)
    for i, [verdict] in zip(abduction, verdicts, strict=True):
        out[i] = verdict.ok
    for i, task in enumerate(tasks):
        if task.type in ("deduction", "induction"):
            out[i] = all(v == o for v, o in zip(values[i], task.outputs, strict=True))
    return out


def deduction_twins(executor, tasks: Sequence[Task]) -> list[Task | None]:
    """Per task, for an abduction task that its copy answer solves (its output given back as
    the input: f(output) == output, an idempotent `f`), the deduction of the same program and
    input, unless that one's copy answer (the input given as the output) solves it too; else
    None. Up to four executor calls for the whole batch. What the solver must do for such a
    deduction is trace `f` on an input that it changes: the proposal, trivial as an
    abduction, is work as a deduction (`curriculum.retype_fixed_abductions`)."""
    asked = [i for i, t in enumerate(tasks) if t.type == "abduction"]  # only these are run
    solved = copy_solves(executor, [tasks[i] for i in asked]) if asked else []
    fixed = [i for i, copy in zip(asked, solved, strict=True) if copy]
    twins = [replace(tasks[i], type="deduction") for i in fixed]
    out: list[Task | None] = [None] * len(tasks)
    copies = copy_solves(executor, twins) if twins else []
    for i, twin, copy in zip(fixed, twins, copies, strict=True):
        out[i] = None if copy else twin
    return out


def input_twins(
    executor,
    tasks: Sequence[Task],
    reasons: Sequence[str],
    stock: bool = False,
    as_deductions: bool = False,
) -> list[Task | None]:
    """Per task, for a deduction or abduction task trivial at its input for a reason another
    input can take away (`reasons[i]`, from `trivial_reasons`, in `INPUT_REASONS`: a copy, a
    constant output), the same program on the first other input at which it is judged work;
    else None. Work: not trivial (`trivial_reasons`, with `stock` as it judges), and at least
    `MIN_PROBES` of its own probe inputs ran, so that a constant output would have been seen
    (an input whose neighbours crash is not work). The new output is the sandbox's run of the
    program, as a proposal's is.

    The inputs tried, at most `OTHER_INPUTS`, come in two rounds, the second only for tasks
    the first left without one: the task's probe inputs (one argument changed,
    `probe_inputs`), then its stock inputs (common values of its types, `stock_inputs`), each
    with `MIN_PROBES` probe inputs of its own. An abduction is tried at probe inputs only: at
    a stock input a stock answer solves it by construction. `f(x) == x` for the x proposed but
    not for x + 1, or a branch that returns the same value for every list near the one
    proposed, is work to trace at another input. An idempotent `f` (`abs`, `sorted`) stays a
    copy as an abduction at every input; with `as_deductions` such an abduction is tried as
    the deduction of its program at the other inputs after (`x % 2` proposed on 0: the
    deduction on -2). Four executor calls a round (five with `stock`)."""
    out: list[Task | None] = [None] * len(tasks)
    asked = [
        i
        for i, (t, why) in enumerate(zip(tasks, reasons, strict=True))
        if t.type in ("deduction", "abduction") and why in INPUT_REASONS
    ]
    for nearby in (True, False):
        tried = [(i, _other_inputs(tasks[i].input, nearby)) for i in asked if out[i] is None]
        cases = [(tasks[i].program, text) for i, texts in tried for text in texts]
        if not cases:
            continue
        verdicts = iter(executor.validate(cases))
        candidates: list[tuple[int, Task]] = []
        for i, texts in tried:
            task, ran = tasks[i], [v for v in [next(verdicts) for _ in texts] if v.ok]
            kinds = [task.type] if nearby or task.type == "deduction" else []
            if as_deductions and task.type == "abduction":
                kinds.append("deduction")
            candidates += [
                (i, replace(task, type=kind, inputs=(v.input,), outputs=(v.output,), cpu_s=v.cpu_s))
                for kind in kinds
                for v in ran
            ]
        judged = _judged(executor, [t for _, t in candidates], stock)
        for (i, other), (why, probes) in zip(candidates, judged, strict=True):
            if not why and len(probes) >= MIN_PROBES and out[i] is None:
                out[i] = other
    return out


def _other_inputs(text: str, nearby: bool) -> list[str]:
    """The inputs `input_twins` tries for a task with input `text`: its probe inputs
    (`nearby`), or its stock inputs that are not probe inputs; none the input itself, each
    with `MIN_PROBES` probe inputs of its own (`[]` has one: a task there could not be found
    constant), at most `OTHER_INPUTS` in the two rounds."""
    probes = probe_inputs(text)
    texts = probes if nearby else [t for t in stock_inputs(text) if t not in probes]
    judged = [t for t in texts if t != text and len(probe_inputs(t)) >= MIN_PROBES]
    return judged[: OTHER_INPUTS - (0 if nearby else len(probes))]


def _argument_values(executor, tasks: Sequence[Task], inputs: str) -> list[list[str | None]]:
    """Per deduction or induction task, the canonical value of each input's one positional
    argument (None where the input is not one such argument), from one executor call."""
    owners = [
        (i, j)
        for i, t in enumerate(tasks)
        if t.type in ("deduction", "induction")
        for j in range(len(t.inputs))
    ]
    cases = [(_ONE_ARGUMENT, tasks[i].inputs[j]) for i, j in owners]
    verdicts = executor.validate(cases, inputs=inputs) if cases else []
    values: list[list[str | None]] = [[] for _ in tasks]
    for (i, _), verdict in zip(owners, verdicts, strict=True):
        values[i].append(verdict.output if verdict.ok else None)
    return values


def ignores_input(program: str) -> bool:
    """Whether the program's `f` reads none of its parameters (or has none): its output cannot
    depend on its input. False when there is no `f` to read, or when `f` could read its
    parameters indirectly (`locals()`, `vars()`)."""
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError, RecursionError):
        return False
    entry = [s for s in tree.body if isinstance(s, ast.FunctionDef) and s.name == "f"]
    if not entry:
        return False
    f = entry[-1]
    a = f.args
    params = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
    params |= {p.arg for p in (a.vararg, a.kwarg) if p is not None}
    read = {
        n.id
        for statement in f.body
        for n in ast.walk(statement)
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
    }
    return not (params & read) and not read & {"locals", "vars"}


def probe_inputs(text: str, count: int = PROBES) -> list[str]:
    """Up to `count` inputs like `text` (a literal argument list, as the executor normalised
    it) with one argument changed each: an int moved, a string lengthened, shortened or
    reversed, a container with an item dropped or added, a bool flipped. The first change of
    every argument comes before the second of any, so that each argument is probed."""
    parsed = literal_arguments(text)
    if parsed is None:
        return []
    args, kwargs = parsed
    slots = [("arg", i) for i in range(len(args))] + [("kw", k) for k in kwargs]
    changes = [list(_variants(args[key] if kind == "arg" else kwargs[key])) for kind, key in slots]
    probes: list[str] = []
    for round_ in range(max((len(c) for c in changes), default=0)):
        for (kind, key), own in zip(slots, changes, strict=True):
            if round_ >= len(own) or len(probes) >= count:
                continue
            new_args, new_kwargs = list(args), dict(kwargs)
            if kind == "arg":
                new_args[key] = own[round_]
            else:
                new_kwargs[key] = own[round_]
            probe = _text(new_args, new_kwargs)
            if probe is not None and probe != text and probe not in probes:
                probes.append(probe)
    return probes


def stock_inputs(text: str, count: int = STOCK_INPUTS) -> list[str]:
    """Up to `count` inputs of the shape of `text` (a literal argument list, as the executor
    normalised it) made of stock values: every argument replaced by a common value of its type
    (`_STOCK`). With one argument that is all of its type's values; with several, the first
    values of each in every combination (as many per argument as keep the product near
    `count`, at least two; past that, the first `count` combinations). The given input comes
    first when every value of it is a stock one, whatever its arity. Empty where an argument has
    a type without stock values (a frozenset, a nan): such a task is not judged guessable."""
    parsed = literal_arguments(text)
    if parsed is None:
        return []
    args, kwargs = parsed
    values = [*args, *kwargs.values()]
    stock = [_STOCK.get(type(v)) for v in values]
    if not values or any(s is None for s in stock):
        return []
    varied = sum(len(s) > 1 for s in stock) or 1
    per = max(2, int(count ** (1 / varied) + 1e-9))
    given = _text(args, kwargs)
    made = [given] if given and all(v in s for v, s in zip(values, stock, strict=True)) else []
    for combo in itertools.product(*(s[:per] for s in stock)):
        if len(made) >= count:
            break
        candidate = _text(
            list(combo[: len(args)]), dict(zip(kwargs, combo[len(args) :], strict=True))
        )
        if candidate is not None and candidate not in made:
            made.append(candidate)
    return made


def converted_copy(task: Task) -> bool:
    """Whether a deduction or abduction task's output is its one argument written as another
    type: `'1234'` -> `1234`, `-12` -> `'-12'`, `[1, 2]` -> `'[1, 2]'` (`str` of the one value
    equals `str` of the other, and their types differ). Such a task is near a copy, yet the
    copy check passes it: a deduction's values differ, and an abduction gets through where its
    `f` does not map its output to itself. Narrow: a padded `'  5 '` -> `5`, `1` -> `1.0` or
    `(1, 2)` -> `[1, 2]` is not counted, and a program that does real work but lands on such
    a pair at its input is. A diagnostic of the pool (`selfplay pool stats --programs`), read
    on the trusted side from the literal texts alone; not a reason the curriculum refuses a
    task."""
    if task.type not in ("deduction", "abduction"):
        return False
    arguments = literal_arguments(task.input)
    if arguments is None or len(arguments[0]) != 1 or arguments[1]:
        return False
    try:
        output = ast.literal_eval(task.output)
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return False
    [argument] = arguments[0]
    return type(argument) is not type(output) and str(argument) == str(output)


def literal_arguments(text: str) -> tuple[list, dict] | None:
    """The positional and keyword values of a literal argument list, read as the arguments of a
    call of f; None where it is not one (an expression, `*` or `**`, a keyword given twice,
    text that closes the call)."""
    try:
        call = ast.parse(f"f({text}\n)", mode="eval").body
        if not isinstance(call, ast.Call):
            return None
        args = [ast.literal_eval(a) for a in call.args]
        kwargs = {k.arg: ast.literal_eval(k.value) for k in call.keywords}
    except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
        return None
    if None in kwargs or len(kwargs) != len(call.keywords):  # `**` or a name given twice
        return None
    return args, kwargs


def _variants(value) -> Iterator:
    """Values of the same type as `value`, a small step away from it."""
    if isinstance(value, bool):
        yield not value
    elif isinstance(value, int):
        yield from (value + 1, -value - 2, 2 * value + 7)  # one of another sign
    elif isinstance(value, float):
        if math.isfinite(value):
            yield from (value + 1.5, -value - 0.5)
    elif isinstance(value, str):
        yield from (value + "xa", value[1:] if value else "b", value[::-1] + "e")
    elif isinstance(value, list | tuple):
        kind = type(value)
        yield from (kind(value[:-1]), kind([*value, *value[:1]] or [1]), kind(value[::-1]))
    elif isinstance(value, dict):
        items = list(value.items())
        yield dict(items[:-1])
        if items:
            yield dict(items[1:] + items[:1])
    elif isinstance(value, set | frozenset):  # in a fixed order: str hashes vary by process
        yield type(value)(sorted(value, key=repr)[:-1])


def _text(args: list, kwargs: dict) -> str | None:
    """The argument list's text, or None where a value has no literal text (a frozenset, an
    int past Python's digit limit for text). A set's items are written in a fixed order (the
    order of their texts): a set of strings iterates in an order that varies by process."""
    try:
        text = ", ".join([_repr(a) for a in args] + [f"{k}={_repr(v)}" for k, v in kwargs.items()])
        call = ast.parse(f"f({text}\n)", mode="eval").body
        for node in (*call.args, *(k.value for k in call.keywords)):
            ast.literal_eval(node)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    return text


def _repr(value) -> str:
    """`repr`, with a set's items in the order of their texts."""
    if isinstance(value, set) and value:
        return "{" + ", ".join(sorted(repr(v) for v in value)) + "}"
    return repr(value)


def trivial_reasons(executor, tasks: Sequence[Task], stock: bool = False) -> list[str]:
    """Per task, why it is trivial (`copy`, `ignores_input`, `constant`, with `stock` also
    `stock_input`; see the module doc), or "" when it is not. Three executor calls for the
    whole batch (four with `stock`); math tasks are never trivial here (their program takes
    no input)."""
    return [why for why, _ in _judged(executor, tasks, stock)]


def _judged(executor, tasks: Sequence[Task], stock: bool) -> list[tuple[str, list[str]]]:
    """Per task, `trivial_reasons`' reason and the outputs of its probe inputs that ran."""
    if not tasks:
        return []
    copies = copy_solves(executor, tasks)
    outputs = _outputs(executor, tasks)
    guessed = stock_solves(executor, tasks) if stock else [False] * len(tasks)
    judged = []
    for task, copy, own, guess in zip(tasks, copies, outputs, guessed, strict=True):
        if task.type == "math":
            why = ""
        elif copy:
            why = "copy"
        elif ignores_input(task.program):
            why = "ignores_input"
        elif task.type == "induction":
            why = "constant" if len(set(task.outputs)) == 1 else ""
        elif len(own) >= MIN_PROBES and all(o == task.output for o in own):
            why = "constant"
        elif guess:
            why = "stock_input"
        else:
            why = ""
        judged.append((why, own))
    return judged


def _outputs(executor, tasks: Sequence[Task]) -> list[list[str]]:
    """Per deduction or abduction task, the outputs its program gives on its probe inputs
    (`probe_inputs`) that run, from one executor call."""
    cases = [
        (i, probe)
        for i, t in enumerate(tasks)
        if t.type in ("deduction", "abduction")
        for probe in probe_inputs(t.input)
    ]
    verdicts = executor.validate([(tasks[i].program, p) for i, p in cases]) if cases else []
    outputs: list[list[str]] = [[] for _ in tasks]
    for (i, _), verdict in zip(cases, verdicts, strict=True):
        if verdict.ok:
            outputs[i].append(verdict.output)
    return outputs


def stock_solves(executor, tasks: Sequence[Task]) -> list[bool]:
    """Per task, whether it is an abduction task that one of its stock inputs (`stock_inputs`)
    solves, judged as the solver's answers are (`verify_many`: the judge's time limits), in one
    executor call."""
    asked = [(i, stock_inputs(t.input)) for i, t in enumerate(tasks) if t.type == "abduction"]
    asked = [(i, guesses) for i, guesses in asked if guesses]
    verdicts = executor.verify_many([(tasks[i], g) for i, g in asked]) if asked else []
    solves = [False] * len(tasks)
    for (i, _), judged in zip(asked, verdicts, strict=True):
        solves[i] = any(v.ok for v in judged)
    return solves
