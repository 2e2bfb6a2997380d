"""A fixed family of small code-reasoning tasks from program templates: the controlled task set
of the learning benchmark (`benchmarks/learning_bench.py`) and a frozen held-out set for runs.

Each template is a short Python function with constants to fill in (arithmetic, string and
list operations, a branch, a loop), the kind of program self-play proposes early on. A
program's text decides its split (a hash of the text), so the train and held-out splits never
share a program, only the templates; the held-out items test whether what the solver learned on
some programs carries over to others. Outputs are computed by the project's executor, so every
task is a real, deterministic run, exactly as a validated proposal would be.

Two levels: `standard` (the templates below, two or three operations each) and `easy` (one
operation, for models too small to answer the standard level). The family is deterministic
for a (seed, split, count, level, nontrivial): the same tasks on every machine. With
`nontrivial`, a task that is no work for a solver (`selfplay.trivial.trivial_reasons`: its copy
answer solves it, its output equals its input or does not move with it) is drawn again: the
frozen held-out set of `selfplay.eval.generated` is made so.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import Literal

from selfplay.trivial import trivial_reasons
from selfplay.types import Task

__all__ = ["EASY_TEMPLATES", "LEVELS", "TEMPLATES", "Template", "generated_tasks"]

Split = Literal["train", "heldout"]
HELDOUT_SHARE = 5  # one program text in five belongs to the held-out split

_WORDS = ("cat", "apple", "river", "stone", "banana", "moon", "tiger", "paper", "cloud", "lemon")
_LETTERS = "aeinorst"


def _int(rng: random.Random) -> str:
    return str(rng.randint(0, 20))


def _pair(rng: random.Random) -> str:
    return f"{rng.randint(0, 9)}, {rng.randint(0, 9)}"


def _word(rng: random.Random) -> str:
    return repr(rng.choice(_WORDS))


def _ints(rng: random.Random) -> str:
    return repr([rng.randint(0, 9) for _ in range(rng.randint(3, 5))])


@dataclass(frozen=True)
class Template:
    """A program with `{a}`, `{b}`, `{c}` holes and a generator of its inputs."""

    program: str
    argument: Callable[[random.Random], str]

    def fill(self, rng: random.Random) -> str:
        return self.program.format(
            a=rng.randint(2, 9), b=rng.randint(1, 9), c=repr(rng.choice(_LETTERS))
        )


TEMPLATES: tuple[Template, ...] = (
    Template("def f(x):\n    return x + {a}", _int),
    Template("def f(x):\n    return x * {a} - {b}", _int),
    Template("def f(x):\n    return x % {a}", _int),
    Template("def f(x):\n    return x // {a} + {b}", _int),
    Template("def f(x, y):\n    return x * y + {a}", _pair),
    Template("def f(x):\n    if x > {a}:\n        return x - {a}\n    return {b} * x", _int),
    Template(
        "def f(n):\n    total = 0\n    for i in range(n):\n        total += {a}\n    return total",
        _int,
    ),
    Template("def f(s):\n    return s[::-1] + {c}", _word),
    Template("def f(s):\n    return s.upper() + {c}", _word),
    Template("def f(s):\n    return s[{b}:] + s[:{b}]", _word),
    Template("def f(s):\n    return s.count({c}) * {a}", _word),
    Template("def f(s):\n    return len(s) + {a}", _word),
    Template("def f(s):\n    return s.replace({c}, '')", _word),
    Template("def f(xs):\n    return sum(xs) + {a}", _ints),
    Template("def f(xs):\n    return [x * {a} for x in xs]", _ints),
    Template("def f(xs):\n    return sorted(xs)[{b} % len(xs)]", _ints),
    Template("def f(xs):\n    return [x for x in xs if x > {b}]", _ints),
    Template("def f(xs):\n    return max(xs) - min(xs) + {a}", _ints),
)


_NAMES = ("x", "n", "value", "item", "number", "k", "v", "a", "b", "z")


@dataclass(frozen=True)
class EasyTemplate(Template):
    """A one-operation program whose parameter name is a hole too (`{p}`), so that even the
    identity has many program texts and both splits get programs of every template."""

    def fill(self, rng: random.Random) -> str:
        return self.program.format(
            p=rng.choice(_NAMES),
            a=rng.randint(2, 5),
            b=rng.randint(1, 3),
            c=repr(rng.choice(_LETTERS)),
        )


# The easy level: one operation on the argument, most answers a small edit of the input. For
# models too small for the standard level (SmolLM2-135M answers 1 in 180 of it greedily),
# where reinforcement learning has some right answers to reinforce.
EASY_TEMPLATES: tuple[Template, ...] = (
    EasyTemplate("def f({p}):\n    return {p}", _int),
    EasyTemplate("def f({p}):\n    return {p}", _word),
    EasyTemplate("def f({p}):\n    return {p} + {b}", _int),
    EasyTemplate("def f({p}):\n    return {p} - {b}", _int),
    EasyTemplate("def f({p}):\n    return {p} * {a}", _int),
    EasyTemplate("def f({p}):\n    return {p} > {a}", _int),
    EasyTemplate("def f({p}):\n    return {p} + {c}", _word),
    EasyTemplate("def f({p}):\n    return {c} + {p}", _word),
    EasyTemplate("def f({p}):\n    return {p}.upper()", _word),
    EasyTemplate("def f({p}):\n    return len({p})", _word),
    EasyTemplate("def f({p}):\n    return {p}[0]", _word),
    EasyTemplate("def f({p}):\n    return {p}[0]", _ints),
    EasyTemplate("def f({p}):\n    return {p}[-1]", _ints),
    EasyTemplate("def f({p}):\n    return len({p})", _ints),
    EasyTemplate("def f({p}):\n    return max({p})", _ints),
    EasyTemplate("def f({p}):\n    return {p} + [{b}]", _ints),
)
LEVELS: dict[str, tuple[Template, ...]] = {"standard": TEMPLATES, "easy": EASY_TEMPLATES}


def _split_of(program: str) -> Split:
    digest = hashlib.sha256(program.encode()).digest()
    return "heldout" if digest[0] % HELDOUT_SHARE == 0 else "train"


def _candidates(
    rng: random.Random, split: Split, templates: tuple[Template, ...]
) -> Iterator[tuple[str, str]]:
    """Distinct (program, input) pairs of `split`, `templates` tried in turn: one stream for a
    (seed, split, type, level), so that a smaller set is the start of a larger one."""
    seen: set[tuple[str, str]] = set()
    tries = misses = 0
    while True:
        tries += 1
        template = templates[tries % len(templates)]
        program = template.fill(rng)
        pair = (program, template.argument(rng))
        if _split_of(program) == split and pair not in seen:
            seen.add(pair)
            misses = 0
            yield pair
        elif (misses := misses + 1) > _MISSES:
            raise RuntimeError(f"the templates give no new {split} task in {_MISSES} tries")


_MISSES = 10_000  # tries without a new pair before the templates count as exhausted


def generated_tasks(
    executor,
    count: int,
    split: Split,
    seed: int = 0,
    task_type: str = "deduction",
    level: str = "standard",
    nontrivial: bool = False,
) -> list[Task]:
    """`count` tasks of the family's `split` (`deduction`: predict the output; `abduction`:
    find an input) from the templates of `level` (`LEVELS`), their outputs computed by
    `executor` (an `Executor`); with `nontrivial`, none that is trivial (module doc)."""
    if task_type not in ("deduction", "abduction"):
        raise ValueError(f"the generated family has deduction and abduction tasks, not {task_type}")
    if level not in LEVELS:
        raise ValueError(f"the generated family's levels are {', '.join(LEVELS)}, not {level}")
    seeded = f"{seed}:{split}:{task_type}" + ("" if level == "standard" else f":{level}")
    stream = _candidates(random.Random(seeded), split, LEVELS[level])
    tasks: list[Task] = []
    for _ in range(_ROUNDS):
        batch = _run(executor, list(itertools.islice(stream, count - len(tasks))))
        batch = [replace(t, type=task_type) for t in batch]
        if nontrivial:
            batch = [
                t for t, why in zip(batch, trivial_reasons(executor, batch), strict=True) if not why
            ]
        tasks += batch
        if len(tasks) == count:
            return tasks
    raise RuntimeError(f"the templates cannot give {count} nontrivial {split} {task_type} tasks")


_ROUNDS = 20  # draws of candidates for the tasks that the trivial ones left to make


def _run(executor, pairs: list[tuple[str, str]]) -> list[Task]:
    """The pairs as deduction tasks, their outputs computed by the executor."""
    verdicts = executor.validate(pairs)
    failed = [(p, v.reason) for p, v in zip(pairs, verdicts, strict=True) if not v.ok]
    if failed:
        raise RuntimeError(f"a template program failed to run: {failed[0]}")
    return [
        Task("deduction", program, (v.input,), (v.output,), cpu_s=v.cpu_s)
        for (program, _), v in zip(pairs, verdicts, strict=True)
    ]
