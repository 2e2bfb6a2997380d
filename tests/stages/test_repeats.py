"""Repeats of the pool in other words: a pooled task proposed again with its program's
variables renamed (`repeat:renamed`), or with a program that behaves as its program does
(`repeat:behaviour`), stays out of the pool as no new work, also when a step is replayed.
"""

from __future__ import annotations

import dataclasses

from selfplay import stages
from selfplay.new_work import canonical_key
from selfplay.types import Task
from tests.stages.scripted import one_step, proposed


def test_a_pooled_task_again_with_its_variables_renamed_is_a_repeat(make_run):
    """`n * n` on 2 is `x * x` on 2 again: the renamed task stays out of the pool
    (`repeat:renamed`), whether the pool held it (added without a canonical key, as an older
    pool's task, which gets one when first looked up) or an earlier proposal of the step made
    it; on another input or as another type it is new work; the pooled task itself is an exact
    repeat. A replayed step judges as the lost run did; a later step's task does not count."""
    square = "def f(x):\n    y = x * x\n    return y"
    pooled = Task("deduction", square, ("2",), ("4",), cpu_s=1e-4)
    run, seed_id = make_run(["selfplay.solver_tasks=1"], more=[pooled])
    renamed = "def f(n):\n    m = n * n  # the square\n    return m"
    again = "def f(k):\n\n    j = k * k\n    return j\n"
    proposals = (
        proposed(0, "deduction", renamed, "2", [seed_id]),  # the pooled task, renamed
        proposed(1, "deduction", renamed, "3", [seed_id]),  # on another input: new work
        proposed(2, "deduction", square, "2", [seed_id]),  # the pooled task itself
        proposed(3, "deduction", again, "3", [seed_id]),  # proposal 1's task, renamed
        proposed(4, "abduction", again, "2", [seed_id]),  # another type: new work
    )
    validated = stages.validate(run, proposals)
    stored = stages.store_tasks(run, validated, 1)
    why = ["repeat:renamed", "", "repeat", "repeat:renamed", ""]
    assert [s.no_new_work for s in stored] == why
    assert [s.added for s in stored] == [False, True, False, False, True]
    assert len(run.store) == 4  # the seed, the square on 2, on 3, and its abduction
    replayed = stages.store_tasks(run, validated, 1)  # a resumed run replays step 1
    assert [s.no_new_work for s in replayed] == why
    assert [s.task_id for s in replayed] == [s.task_id for s in stored]
    key = canonical_key(validated[1].task)
    assert run.store.keyed_tasks("canonical", [key], 0, canonical_key) == {key: []}  # step 1's
    assert [i for i, *_ in run.store.keyed_tasks("canonical", [key], 1, canonical_key)[key]] == [
        stored[1].task_id
    ]
    _, _, _, metrics = one_step(run, proposals[:2], step=2)  # now each is a repeat
    assert metrics["propose/repeat_share"] == 1.0 and metrics["propose/renamed_share"] == 0.5


def test_a_pooled_task_again_with_a_program_that_behaves_alike_is_a_repeat(make_run):
    """`x ** 2` on 3 behaves as a pooled `x * x` on 3 (not shown to the proposer) does on every
    probe input: a repeat (`repeat:behaviour`); `x + 6` on 3 gives the same output but another
    function: new work, and `6 + x` after it in the step a repeat of it. Another type is another
    task. A replayed step judges the same; with `curriculum.behaviour_copies=false` only the
    text counts."""
    pooled = Task("deduction", "def f(x):\n    return x * x", ("3",), ("9",), cpu_s=1e-4)
    proposals = (
        proposed(0, "deduction", "def f(x):\n    return x ** 2", "3", [0]),
        proposed(1, "deduction", "def f(x):\n    return x + 6", "3", [0]),
        proposed(2, "deduction", "def f(n):\n    return 6 + n", "3", [0]),
        proposed(3, "abduction", "def f(x):\n    return x ** 2", "3", [0]),
    )
    run, seed_id = make_run(["selfplay.solver_tasks=1"], more=[pooled])
    proposals = tuple(dataclasses.replace(p, references=(seed_id,)) for p in proposals)
    validated = stages.validate(run, proposals)
    stored = stages.store_tasks(run, validated, 1)
    why = ["repeat:behaviour", "", "repeat:behaviour", ""]
    assert [s.no_new_work for s in stored] == why
    assert [s.added for s in stored] == [False, True, False, True]
    assert [s.no_new_work for s in stages.store_tasks(run, validated, 1)] == why  # replayed
    _, _, _, metrics = one_step(run, proposals[:1], step=2)
    assert metrics["propose/alike_share"] == 1.0 and metrics["propose/renamed_share"] == 0.0

    text_only, seed_id = make_run(["curriculum.behaviour_copies=false"], more=[pooled])
    proposals = tuple(dataclasses.replace(p, references=(seed_id,)) for p in proposals)
    stored = stages.store_tasks(text_only, stages.validate(text_only, proposals), 1)
    assert [s.no_new_work for s in stored] == [""] * 4
