"""What counts as new work, on proposals recorded by hand and answered by the scripted engine:
copies and duplicates of the pool, trivial and guessable tasks, benchmark programs, proposals
alike, short programs and variants of earlier ones, induction tasks that add nothing, and
programs below the statement floor. What earns learnability, what enters the pool, what the
step's metrics count.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import sqlalchemy as sa

from selfplay import stages
from selfplay.curriculum.schema import TaskRow
from selfplay.distributed import Ranks
from selfplay.proposer.induction import induction_programs
from selfplay.types import Proposal, Proposed, Task
from tests.stages.scripted import (
    REVERSED,
    SORTED,
    TRIPLE,
    one_step,
    proposed,
)


def test_copies_and_duplicates_earn_no_learnability(make_run):
    earlier = Task("deduction", REVERSED, ("'abc'",), ("'cba'",), cpu_s=1e-4)
    run, seed_id = make_run(["selfplay.solver_tasks=1"], more=[earlier])
    spaced = "def f(xs):  # sorts\n\n    return   sorted( xs )\n"
    proposals = [
        proposed(0, "deduction", SORTED, "[3, 1, 2]", [seed_id]),  # the reference, verbatim
        proposed(1, "deduction", spaced, "[2, 1]", [seed_id]),  # its program, spaced out
        proposed(2, "abduction", SORTED, "[5, 4]", [seed_id]),  # its program, as abduction
        proposed(3, "deduction", REVERSED, "'abc'", [seed_id]),  # a pool task not shown
        proposed(4, "deduction", TRIPLE, "4", [seed_id]),  # new work
        proposed(5, "abduction", TRIPLE, "5", [seed_id]),  # new work, another task of it
    ]
    stored, _, rollouts, metrics = one_step(run, proposals)
    assert [s.outcome for s in stored] == ["valid"] * 6
    # copies of the reference stay out of the pool; the pool task not shown keeps its id
    assert [s.added for s in stored] == [False, False, False, False, True, True]
    assert [s.task_id is None for s in stored] == [True, True, True, False, False, False]
    assert [s.duplicate for s in stored] == [True] * 4 + [False] * 2
    rewards = [r.reward for r in rollouts if r.role == "propose"]
    # each new task was answered right once in two: AZR's learnability 1 - 1/2
    assert rewards == [run.config.reward.proposer_duplicate] * 4 + [0.5, 0.5]
    # a copy earns what an unreadable proposal earns: never a positive advantage beside one
    assert run.config.reward.proposer_duplicate == run.config.reward.proposer_malformed
    assert metrics["propose/duplicate_share"] == pytest.approx(4 / 6)
    assert metrics["propose/new_tasks"] == 2
    assert len(run.store) == 4  # the seed, the earlier task and the two new ones


def test_a_renamed_or_repeated_copy_of_a_reference_is_a_duplicate(make_run):
    run, seed_id = make_run(["selfplay.solver_tasks=1"])
    renamed = "def f(items):\n    return sorted(items)"
    twice = f"{SORTED}\n\n{SORTED}"
    proposals = [
        proposed(0, "deduction", renamed, "[2, 1]", [seed_id]),
        proposed(1, "abduction", twice, "[4, 3]", [seed_id]),
        proposed(
            2, "deduction", "def f(items):\n    return sorted(items)[::-1]", "[1, 2]", [seed_id]
        ),
    ]
    stored, _, _, metrics = one_step(run, proposals)
    assert [s.duplicate for s in stored] == [True, True, False]
    assert metrics["propose/duplicate_share"] == pytest.approx(2 / 3)


def test_a_program_that_behaves_as_its_reference_is_a_copy(make_run):
    """The reference's function in other words (same outputs on the proposal's input and on
    probe inputs like it) is a copy; one that agrees on the given input only, or not at all, is
    new work; with `curriculum.behaviour_copies=false` only the text counts."""
    programs = [
        ("deduction", "def f(xs):\n    return list(sorted(xs))", "[3, 1, 2]"),
        ("deduction", "def f(a):\n    b = list(a)\n    b.sort()\n    return b", "[5, 2]"),
        ("deduction", "def f(xs):\n    return sorted(xs)[:2]", "[2, 1]"),  # probes differ
        ("deduction", "def f(xs):\n    return sorted(xs, reverse=True)", "[3, 1, 2]"),
        ("deduction", "def f(n):\n    return 3 * n", "4"),  # the reference fails on it
        # an abduction task that copying would also solve: a copy first, trivial without
        ("abduction", "def f(a):\n    return sorted(list(a))", "[3, 1]"),
    ]
    for overrides, expected in [
        ([], ["copy:behaviour"] * 2 + [""] * 3 + ["copy:behaviour"]),
        (["curriculum.behaviour_copies=false"], [""] * 5 + ["trivial:copy"]),
    ]:
        run, seed_id = make_run(["selfplay.solver_tasks=1", *overrides])
        proposals = [proposed(k, *p, [seed_id, seed_id]) for k, p in enumerate(programs)]
        stored, _, _, metrics = one_step(run, proposals)
        assert [s.no_new_work for s in stored] == expected
        copies = expected.count("copy:behaviour")
        assert metrics["propose/copy_share"] == pytest.approx(copies / len(programs))


def test_trivial_proposals_stay_out_of_the_pool_as_duplicates(make_run):
    """Identity variants (not shown as references), a function that ignores its input and one
    whose output no probe moves are no work for a solver: the duplicate penalty, no pool."""
    run, seed_id = make_run(["selfplay.solver_tasks=1"])
    proposals = [
        proposed(0, "deduction", "def f(word):\n    return word", "'Hello'", [seed_id]),
        proposed(1, "abduction", "def f(s):\n    return s.strip()", "'abc'", [seed_id]),
        proposed(2, "deduction", "def f(x):\n    return 'Hello World'", "3", [seed_id]),
        proposed(3, "deduction", "def f(n):\n    return n * 0", "5", [seed_id]),
        proposed(4, "deduction", TRIPLE, "4", [seed_id]),  # new work
    ]
    stored, _, rollouts, metrics = one_step(run, proposals)
    assert [s.no_new_work for s in stored] == [
        "trivial:copy",  # its output is its input
        "trivial:copy",  # an abduction task its output answers
        "trivial:ignores_input",
        "trivial:constant",
        "",
    ]
    assert [s.task_id is None for s in stored] == [True] * 4 + [False]
    assert len(run.store) == 2  # the seed and the one new task
    rewards = [r.reward for r in rollouts if r.role == "propose"]
    assert rewards[:4] == [run.config.reward.proposer_duplicate] * 4
    assert metrics["propose/trivial_share"] == pytest.approx(4 / 5)
    assert metrics["propose/duplicate_share"] == pytest.approx(4 / 5)
    assert metrics["propose/copy_share"] == metrics["propose/contaminated_share"] == 0
    # each reason by type, counted
    reasons = {k: v for k, v in metrics.items() if k.startswith("propose/no_new_work/")}
    assert reasons == {
        "propose/no_new_work/deduction/trivial:copy": 1,
        "propose/no_new_work/abduction/trivial:copy": 1,
        "propose/no_new_work/deduction/trivial:ignores_input": 1,
        "propose/no_new_work/deduction/trivial:constant": 1,
    }

    kept, _ = make_run(["selfplay.solver_tasks=1", "curriculum.keep_trivial=true"])
    stored, _, _, _ = one_step(kept, proposals[:4])
    assert [s.duplicate for s in stored] == [False] * 4 and len(kept.store) == 5


@pytest.mark.parametrize("shares", [1, 2])
def test_an_abduction_its_output_answers_enters_as_a_deduction_when_asked(make_run, shares):
    """With `curriculum.retype_fixed_abductions` an abduction that its output answers (an
    idempotent f) is judged and pooled as the deduction of its program and input: new work,
    or trivial as a deduction in its own way; one that its input answers as a deduction stays
    an abduction (`trivial:copy`). Off, or under `curriculum.keep_trivial`, nothing is retyped.
    Split across two shares, each keeps its own verdict."""
    upper = "def f(s):\n    t = s.strip()\n    return t.upper()"
    constant = "def f(s):\n    t = s\n    return 'x'"  # f('x') == 'x', and no input moves it
    retype = "curriculum.retype_fixed_abductions=true"
    on = ["", "trivial:copy", "trivial:constant", "", ""]
    off = ["trivial:copy", "trivial:copy", "trivial:copy", "", ""]
    for overrides, expected, retyped in [
        ([retype], on, [True, False, True, False, False]),
        ([], off, [False] * 5),
        ([retype, "curriculum.keep_trivial=true"], [""] * 5, [False] * 5),
    ]:
        run, seed_id = make_run(["selfplay.solver_tasks=1", *overrides])
        run = dataclasses.replace(run, ranks=Ranks(shares=shares))
        proposals = [
            proposed(0, "abduction", upper, "' cat'"),  # 'CAT' again gives 'CAT'
            proposed(1, "abduction", upper, "'DOG'"),  # and as a deduction 'DOG' gives 'DOG'
            proposed(2, "abduction", constant, "'a'"),
            proposed(3, "abduction", TRIPLE, "37"),
            proposed(4, "deduction", upper, "'owl'"),
        ]
        stored, _, _, metrics = one_step(run, proposals)
        assert [s.no_new_work for s in stored] == expected
        asked = [s.validated.proposed.task_type for s in stored]
        assert asked == ["abduction"] * 4 + ["deduction"]  # what the proposer was asked
        pooled_as = [s.validated.task.type for s in stored]
        assert [t != a for t, a in zip(pooled_as, asked, strict=True)] == retyped
        assert metrics["propose/retyped"] == sum(retyped)
        if retyped[0]:  # in the pool as a deduction
            [row] = run.store.get([stored[0].task_id])
            assert row.task.type == "deduction" and row.task.output == "'CAT'"


@pytest.mark.parametrize("shares", [1, 2])
def test_a_task_trivial_at_its_input_enters_at_another_when_asked(make_run, shares):
    """With `curriculum.reinput_trivial` a deduction or abduction that is a copy or constant at
    its input enters the pool at the first input like it where it is work: its verdicts are
    that input's run, `propose/reinput` counts it. An abduction its output answers at every
    input stays `trivial:copy`, unless retyping is on too: then it may enter as a deduction at
    another input. Off, or under `curriculum.keep_trivial`, no input changes. Split across two
    shares, each keeps its own verdict."""
    sort = "def f(xs):\n    ys = list(xs)\n    return sorted(ys)"
    long = "def f(xs):\n    n = len(xs)\n    return 'long' if n > 2 else 'short'"
    parity = "def f(x):\n    y = x % 2\n    return y"
    reinput, retype = "curriculum.reinput_trivial=true", "curriculum.retype_fixed_abductions=true"
    copy, moved = "trivial:copy", [True, True, False, False]
    given = ["[1, 2, 3]", "[1]", "0", "37"]
    for overrides, expected, changed, inputs in [
        ([reinput], ["", "", copy, ""], moved, ["[1, 2, 3, 1]", "[1, 1]", "0", "37"]),
        ([reinput, retype], [""] * 4, [True] * 3 + [False], ["[1, 2, 3, 1]", "[1, 1]", "-2", "37"]),
        ([], [copy, "trivial:constant", copy, ""], [False] * 4, given),
        ([reinput, "curriculum.keep_trivial=true"], [""] * 4, [False] * 4, given),
    ]:
        run, _ = make_run(["selfplay.solver_tasks=1", *overrides])
        run = dataclasses.replace(run, ranks=Ranks(shares=shares))
        proposals = [
            proposed(0, "deduction", sort, "[1, 2, 3]"),  # [1, 2, 3, 1] is work
            proposed(1, "abduction", long, "[1]"),  # 'short' near [1]; [1, 1] is next to 'long'
            proposed(2, "abduction", parity, "0"),  # its output answers it at every input
            proposed(3, "deduction", TRIPLE, "37"),
        ]
        stored, _, _, metrics = one_step(run, proposals)
        assert [s.no_new_work for s in stored] == expected
        assert [s.validated.reinput for s in stored] == changed
        assert metrics["propose/reinput"] == sum(changed)
        assert [s.validated.task.input for s in stored] == inputs
        if changed[0]:
            [ran] = stored[0].validated.verdicts  # the verification record is the new run's
            task = stored[0].validated.task
            assert (ran.input, ran.output, ran.cpu_s) == (task.input, task.output, task.cpu_s)
            ids = [s.task_id for s in stored[:3] if s.task_id is not None]
            pooled = [(r.task.type, r.task.input, r.task.output) for r in run.store.get(ids)]
            assert pooled[:2] == [
                ("deduction", "[1, 2, 3, 1]", "[1, 1, 2, 3]"),
                ("abduction", "[1, 1]", "'short'"),
            ]
            if retype in overrides:  # a deduction at another input, asked as an abduction
                assert pooled[2] == ("deduction", "-2", "0")
                assert metrics["propose/retyped"] == 1


@pytest.mark.parametrize("shares", [1, 2])
def test_a_guessable_abduction_stays_out_of_the_pool_when_asked(make_run, shares):
    """With `curriculum.refuse_stock_inputs` an abduction task that a stock input solves is
    trivial (`trivial:stock_input`): the duplicate penalty, no pool; by default it is new work,
    marked guessable. Split across two shares (as two ranks split the judgement), each task
    keeps its own verdict and mark."""
    stock = "trivial:stock_input"
    for overrides, expected in [
        (["curriculum.refuse_stock_inputs=true"], [stock, "", "", stock, ""]),
        ([], [""] * 5),
        (["curriculum.refuse_stock_inputs=true", "curriculum.keep_trivial=true"], [""] * 5),
    ]:
        run, seed_id = make_run(["selfplay.solver_tasks=1", *overrides])
        run = dataclasses.replace(run, ranks=Ranks(shares=shares))
        proposals = [
            proposed(0, "abduction", TRIPLE, "4", [seed_id]),  # 4 is a stock input
            proposed(1, "abduction", TRIPLE, "37", [seed_id]),
            proposed(2, "deduction", TRIPLE, "4", [seed_id]),
            proposed(3, "abduction", TRIPLE, "10", [seed_id]),  # so is 10
            proposed(4, "abduction", TRIPLE, "38", [seed_id]),
        ]
        stored, _, rollouts, metrics = one_step(run, proposals)
        assert [s.no_new_work for s in stored] == expected
        refused = [why != "" for why in expected]
        assert [s.task_id is None for s in stored] == refused
        rewards = [r.reward for r in rollouts if r.role == "propose"]
        assert [r == run.config.reward.proposer_duplicate for r in rewards] == refused
        assert metrics["propose/trivial_share"] == pytest.approx(sum(refused) / 5)
        # as the database and the index hold them: the guessable tasks marked where they entered
        # the pool, 37 (no stock input) not, the deduction not judged
        judged = [True, False, None, True, False]
        pooled = [(s.task_id, mark) for s, mark in zip(stored, judged, strict=True) if s.task_id]
        ids = [i for i, _ in pooled]
        query = sa.select(TaskRow.id, TaskRow.guessable).where(TaskRow.id.in_(ids))
        with run.store.engine.connect() as conn:
            in_database = dict(conn.execute(query).all())
        assert [in_database[i] for i in ids] == [mark for _, mark in pooled]
        run.store.reload()
        index = run.store.index  # 1 guessable, 0 not, -1 not judged
        held = index["guessable"][index.positions(ids)].tolist()
        assert held == [-1 if mark is None else int(mark) for _, mark in pooled]


def test_a_benchmark_program_stays_out_of_the_pool(make_run):
    from selfplay.datasets.contamination import BenchmarkPrograms, normalise

    benchmark = 'def add(x: int, y: int):\n    """Add two numbers."""\n    return x + y'
    run, seed_id = make_run(["selfplay.solver_tasks=1"])
    run = dataclasses.replace(
        run, benchmarks=BenchmarkPrograms({normalise(benchmark, "add"): "humaneval"})
    )
    proposals = [
        proposed(0, "deduction", "def f(a, b):\n    return a + b", "1, 2", [seed_id]),
        proposed(1, "deduction", "def f(a, b):\n    return a - b", "1, 2", [seed_id]),
    ]
    stored, _, _, metrics = one_step(run, proposals)
    assert [s.no_new_work for s in stored] == ["contaminated:humaneval", ""]
    assert stored[0].task_id is None and len(run.store) == 2
    assert metrics["propose/contaminated_share"] == pytest.approx(1 / 2)


def test_proposals_alike_share_a_repetition_penalty(make_run):
    """R-Zero's batch penalty: two proposals of one shape (constants and names aside) each
    lose lambda * 2/3 of their learnability, the third lambda * 1/3 (down to the penalty
    floor at most)."""
    run, seed_id = make_run(["selfplay.solver_tasks=1", "reward.repetition=0.6"])
    proposals = [
        proposed(0, "deduction", TRIPLE, "4", [seed_id]),
        proposed(1, "deduction", "def f(k):\n    return k * 5", "2", [seed_id]),
        proposed(2, "abduction", REVERSED, "'abc'", [seed_id]),
    ]
    _, _, rollouts, _ = one_step(run, proposals)
    rewards = [r.reward for r in rollouts if r.role == "propose"]
    # each new task is answered right once in two: learnability 0.5 before the penalty
    assert rewards == pytest.approx([0.5 - 0.4, 0.5 - 0.4, 0.5 - 0.2])


def _triples_induction(group: int):
    """An induction proposal on TRIPLE: its program was given to the proposer, not written."""
    induction = Proposal("induction", TRIPLE, ("1", "2", "3", "4"), "triples")
    return dataclasses.replace(proposed(group, "induction", TRIPLE, "1"), parsed=induction)


def test_a_short_program_loses_its_brevity_penalty_graded_by_its_statements(make_run):
    """With a target of 5 statements, a one-line program loses 4/5 of `reward.brevity`, a
    program of 3 statements 2/5, one of 4 1/5, down to the penalty floor at most; an
    induction task, whose program was given, nothing. The step logs the written programs'
    mean statement count and the share with a loop."""
    run, seed_id = make_run(
        ["selfplay.solver_tasks=1", "reward.brevity=0.4", "reward.brevity_statements=5"]
        + ["selfplay.task_types=[deduction, abduction, induction]"]
    )
    three = "def f(s):\n    t = s.upper()\n    u = t[::-1]\n    return u"
    four = "def f(n):\n    t = 0\n    for k in range(n):\n        t += k\n    return t"
    proposals = [
        proposed(0, "deduction", TRIPLE, "4", [seed_id]),
        proposed(1, "abduction", three, "'abc'", [seed_id]),
        proposed(2, "deduction", four, "5", [seed_id]),
        _triples_induction(3),
    ]
    stored, _, rollouts, metrics = one_step(run, proposals)
    assert [s.outcome for s in stored] == ["valid"] * 4
    rewards = [r.reward for r in rollouts if r.role == "propose"]
    # each new task is answered right once in two: learnability 0.5 before the penalty
    assert rewards[:3] == pytest.approx([0.5 - 0.32, 0.5 - 0.16, 0.5 - 0.08])
    assert rewards[3] >= 0  # its learnability, untouched
    assert metrics["propose/statements"] == pytest.approx((1 + 3 + 4) / 3)
    assert metrics["propose/loop_share"] == pytest.approx(1 / 3)

    # a heavy weight stops at what a refused proposal earns (more than a copy's -1)
    run, seed_id = make_run(["selfplay.solver_tasks=1", "reward.brevity=2"])
    _, _, rollouts, _ = one_step(run, [proposed(0, "deduction", TRIPLE, "4", [seed_id])])
    assert [r.reward for r in rollouts if r.role == "propose"] == [
        run.config.reward.proposer_invalid
    ]


def test_a_variant_of_an_earlier_pool_program_loses_its_novelty(make_run):
    """The pool holds SORTED (the seed) and TRIPLE (an earlier step's); a variant of TRIPLE
    loses the whole novelty penalty, a new program nothing, and the step's own tasks (two
    alike) do not count against each other (that is the repetition penalty's part); nor does
    an induction task, whose program was given."""
    earlier = Task("deduction", TRIPLE, ("2",), ("6",), cpu_s=1e-4)
    run, seed_id = make_run(
        ["selfplay.solver_tasks=1", "reward.novelty=0.3", "selfplay.task_types=[deduction, "
         "abduction, induction]"],
        more=[earlier],
    )  # fmt: skip
    proposals = [
        proposed(0, "deduction", "def f(k):\n    return k * 5", "2", [seed_id]),
        proposed(1, "abduction", REVERSED, "'abc'", [seed_id]),
        proposed(2, "deduction", REVERSED, "'xyz'", [seed_id]),
        _triples_induction(3),
    ]
    stored, _, rollouts, _ = one_step(run, proposals)
    assert [s.outcome for s in stored] == ["valid"] * 4
    rewards = [r.reward for r in rollouts if r.role == "propose"]
    assert rewards[:3] == pytest.approx([0.5 - 0.3, 0.5, 0.5])
    assert rewards[3] >= 0  # its learnability, untouched


def test_a_task_twice_in_a_step_is_new_once_also_when_the_step_is_replayed(make_run):
    run, seed_id = make_run(["selfplay.solver_tasks=1", "reward.proposer_duplicate=0"])
    proposals = (
        proposed(0, "deduction", TRIPLE, "4", [seed_id]),
        proposed(1, "deduction", TRIPLE, "4", [seed_id]),
    )
    validated = stages.validate(run, proposals)
    first = stages.store_tasks(run, validated, 3)
    assert [(s.added, s.duplicate) for s in first] == [(True, False), (False, True)]
    # a resumed run replays step 3: the pool already holds its task, which is still its own
    again = stages.store_tasks(run, validated, 3)
    assert [(s.added, s.duplicate) for s in again] == [(False, False), (False, True)]
    # at a later step it is a duplicate of the pool's task
    later = stages.store_tasks(run, validated, 4)
    assert [s.duplicate for s in later] == [True, True]
    rates = (0.5, 0.5)
    rollouts = stages.reward(run, first, rates, (), 3)
    assert [r.reward for r in rollouts] == [0.5, 0.0]  # reward.proposer_duplicate=0


def _induction(group: int, inputs: tuple[str, ...], message: str) -> Proposed:
    """An induction proposal on TRIPLE (the program the propose stage gave it)."""
    parsed = Proposal("induction", TRIPLE, inputs, message)
    return dataclasses.replace(proposed(group, "induction", TRIPLE, inputs[0]), parsed=parsed)


def _programs(run, n, step, salt):
    """The programs a run's induction proposals of `step` get (`induction_programs`)."""
    return induction_programs(run.store, run.executor, run.config.curriculum, n, step, salt)


def test_induction_tasks_that_add_nothing_on_their_program_stay_out_of_the_pool(make_run):
    """The same inputs on a program with another message are a repeat, whether the pool held
    them or the step's earlier proposal; past `curriculum.induction_per_program` tasks on one
    program, a further one is too. A replayed step counts only the tasks of earlier steps."""
    earlier = Task("deduction", TRIPLE, ("2",), ("6",), cpu_s=1e-4)
    run, _ = make_run(
        ["selfplay.solver_tasks=1", "curriculum.induction_per_program=2",
         "selfplay.task_types=[deduction, abduction, induction]"],
        more=[earlier],
    )  # fmt: skip
    assert set(_programs(run, 4, 1, salt=0)) == {SORTED, TRIPLE}
    first = [
        _induction(0, ("1", "2", "3", "4"), "triples"),
        _induction(1, ("4", "3", "2", "1"), "times three"),  # the same set of inputs
        _induction(2, ("5", "6", "7", "8"), "multiplies"),
    ]
    stored = stages.store_tasks(run, stages.validate(run, tuple(first)), 1)
    assert [s.no_new_work for s in stored] == ["", "repeat:inputs", ""]
    assert [s.task_id is None for s in stored] == [False, True, False]
    again = stages.store_tasks(run, stages.validate(run, tuple(first)), 1)  # a resumed run
    assert [(s.no_new_work, s.task_id) for s in again] == [
        (s.no_new_work, s.task_id) for s in stored
    ]
    later = [
        _induction(0, ("1", "2", "3", "4"), "another message"),
        _induction(1, ("9", "10", "11", "12"), "new inputs, but the program is full"),
    ]
    stored, _, rollouts, metrics = one_step(run, later, step=2)
    assert [s.no_new_work for s in stored] == ["repeat:inputs", "repeat:program"]
    assert [r.reward for r in rollouts if r.role == "propose"] == [
        run.config.reward.proposer_duplicate
    ] * 2
    assert metrics["propose/repeat_share"] == 1.0
    assert len(run.store) == 4  # the seed, TRIPLE's deduction task and two induction tasks
    # the program has its share: induction proposals are no longer asked to write for it
    assert set(_programs(run, 4, 3, salt=0)) == {SORTED}

    unlimited, _ = make_run(
        ["selfplay.solver_tasks=1", "curriculum.induction_per_program=0",
         "selfplay.task_types=[deduction, abduction, induction]"],
    )  # fmt: skip
    stages.store_tasks(unlimited, stages.validate(unlimited, tuple(first)), 1)
    stored = stages.store_tasks(unlimited, stages.validate(unlimited, tuple(later)), 2)
    assert [s.no_new_work for s in stored] == ["repeat:inputs", ""]


def test_induction_gets_a_program_when_most_of_the_pool_is_trivial(make_run):
    """A pool of three identity-like tasks and one program worth writing inputs for (held by
    two tasks): whatever the draw's seed, the induction proposal is given that program, once
    (a draw of only `n` candidates, filtered afterwards, left some steps with no induction
    proposal at all)."""
    copies = [
        Task("deduction", f"def f(x):\n    y{k} = x\n    return y{k}", (str(k),), (str(k),),
             cpu_s=1e-4)
        for k in range(3)
    ]  # fmt: skip
    again = Task("abduction", SORTED, ("[2, 1]",), ("[1, 2]",), cpu_s=1e-4)
    run, _ = make_run(["selfplay.task_types=[deduction, abduction, induction]"],
                      more=[*copies, again])  # fmt: skip
    for salt in range(8):
        assert _programs(run, 1, 1, salt=salt) == [SORTED]
    assert _programs(run, 3, 1, salt=0) == [SORTED]  # distinct programs


def test_induction_programs_of_a_pool_with_enough_are_the_first_draws(make_run):
    """Where the draw of `n` tasks gives `n` programs, the wider draw is not taken: a healthy
    pool's induction proposals get the programs they got before the wider draw existed."""
    more = [Task("deduction", p, ("'ab'",), (out,), cpu_s=1e-4)
            for p, out in ((REVERSED, "'ba'"), ("def f(s):\n    return s + s", "'abab'"))]  # fmt: skip
    run, _ = make_run(["selfplay.task_types=[deduction, abduction, induction]"], more=more)
    for salt in range(4):
        drawn = run.store.sample(2, 1, types=stages.WRITTEN_TYPES, salt=salt).tasks
        assert _programs(run, 2, 1, salt=salt) == [t.task.program for t in drawn]


@pytest.mark.parametrize("constrained", [False, True])
def test_the_solver_is_constrained_to_each_tasks_answer_layout_when_asked(make_run, constrained):
    from selfplay.solver.layout import answer_regexes

    run, _ = make_run([f"generation.constrained_answers={str(constrained).lower()}"])
    asked = []
    generate = run.engine.generate
    run.engine.generate = lambda prompts, params: asked.append(params) or generate(prompts, params)
    stored = stages.store_tasks(
        run, stages.validate(run, (proposed(0, "abduction", TRIPLE, "4"),)), 1
    )
    batch, _ = stages.sample(run, 1)
    attempted = stages.solve(run, stored, batch, 1)
    estimate, train = asked[-2:]
    logprobs = [x for a in attempted for x in a.logprobs]
    if not constrained:
        assert estimate.regex is None and train.regex is None
        assert logprobs and not any(math.isnan(x) for x in logprobs)
        return
    assert estimate.regex == answer_regexes(run.config, ["abduction"])
    kinds = [t.task.type for t in batch.tasks]
    assert train.regex == answer_regexes(run.config, kinds)
    # the engine's log-probabilities are the constrained distribution's: the update scores them
    assert logprobs and all(math.isnan(x) for x in logprobs)


@pytest.mark.parametrize("shares", [1, 2])
def test_programs_below_the_statement_floor_are_refused_unrun(make_run, shares):
    run, seed_id = make_run(["selfplay.solver_tasks=1", "roles.min_statements=2"])
    run = dataclasses.replace(run, ranks=Ranks(shares=shares))
    ran = []
    validate_cases = run.executor.validate

    def spy(cases, inputs="literal"):
        ran.extend(program for program, _ in cases)
        return validate_cases(cases, inputs)

    run.executor.validate = spy
    two = "def f(n):\n    m = n * 3\n    return m + 1"
    three = "def f(s):\n    t = s.upper()\n    u = t + '!'\n    return u"
    broken = "def f(n):\n    m = n *\n    return m"
    stored, _, rollouts, metrics = one_step(
        run,
        [
            proposed(0, "deduction", two, "4", [seed_id]),
            proposed(1, "deduction", TRIPLE, "4", [seed_id]),  # one statement
            proposed(2, "abduction", three, "'ab'", [seed_id]),
            proposed(3, "abduction", broken, "4", [seed_id]),  # left to the executor
        ],
    )
    assert [s.outcome for s in stored] == ["valid", "invalid", "valid", "invalid"]
    assert TRIPLE not in ran and {two, three, broken} <= set(ran)
    # each task keeps its own program's output although the refused one was never run
    assert stored[0].validated.task.outputs == ("13",)
    assert stored[2].validated.task.outputs == ("'AB!'",)
    [refusal] = stored[1].validated.verdicts
    assert refusal.reason == "too_simple" and refusal.detail.startswith("1 of at least 2")
    assert stored[3].validated.verdicts[0].reason.startswith("syntax")
    assert metrics["propose/rejected/too_simple"] == 1
    assert metrics["propose/rejected/syntax"] == 1
    rewards = [r.reward for r in rollouts if r.role == "propose"]
    assert rewards[1] == rewards[3] == run.config.reward.proposer_invalid
    assert len(run.store) == 3  # the seed and the two tasks above the floor
