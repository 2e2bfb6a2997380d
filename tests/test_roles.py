"""Proposer and solver prompts, and a proposal's way through the executor to a solved task."""

from __future__ import annotations

import dataclasses

import pytest

from selfplay.config import RolesConfig
from selfplay.executor import Executor
from selfplay.executor.modules import ALLOWED_MODULES
from selfplay.proposer import parse_proposal, proposal_regex, proposer_prompt, task_from
from selfplay.solver import parse_answer, reply, solver_prompt, solver_stop
from selfplay.types import ParseFailure, Task, Verdict

SORT = Task("deduction", "def f(xs):\n    return sorted(xs)", ("[9, 5, 7]",), ("[5, 7, 9]",))
COUNT = Task(
    "induction",
    "def f(s):\n    return s.count('a')",
    ("'banana'", "'apple'", "'kiwi'", "'aaa'"),
    ("3", "1", "0", "3"),
    message="counts one letter",
    n_visible=2,
)


def test_proposer_prompt_states_the_executors_rules():
    [system, user] = proposer_prompt("deduction", [SORT])
    assert system.role == "system" and user.role == "user"
    for module in ("math", "itertools", "collections", "functools", "heapq", "re"):
        assert module in ALLOWED_MODULES and module in user.content
    for banned in ("eval", "exec", "open", "id"):
        assert banned in user.content
    assert "random" not in user.content.split("Import only from")[1].split("\n")[0]
    assert "named `f`" in user.content and "deterministic" in user.content
    assert SORT.program in user.content and "<think>" in user.content


def test_references_of_the_matching_shape_are_shown():
    many = [dataclasses.replace(SORT, program=f"def f(x):\n    return x + {k}") for k in range(9)]
    content = proposer_prompt("abduction", [*many[:3], COUNT], RolesConfig())[1].content
    assert "return x + 2" in content and "return x + 3" not in content
    assert COUNT.program not in content  # induction tasks are not shown for abduction
    induction = proposer_prompt("induction", [SORT, COUNT], program="def f(n):\n    return -n")
    text = induction[1].content
    assert "return -n" in text and COUNT.message in text and SORT.program not in text
    assert "no earlier puzzles" in proposer_prompt("deduction", [])[1].content
    with pytest.raises(ValueError):
        proposer_prompt("induction", [COUNT])


def test_a_topic_names_the_idea_to_build_f_around():
    from selfplay.proposer.topics import TOPICS, topic_for

    topic = topic_for(0, 3, 0, 1)
    assert topic in TOPICS and topic == topic_for(0, 3, 0, 1)  # a resumed step draws it again
    assert len({topic_for(0, 3, 0, k) for k in range(len(TOPICS))}) == len(TOPICS)
    assert [topic_for(0, 3, 0, k) for k in range(4)] != [topic_for(0, 4, 0, k) for k in range(4)]
    plain = proposer_prompt("deduction", [SORT])[1].content
    named = proposer_prompt("deduction", [SORT], topic=topic)[1].content
    assert "this idea" not in plain and f"Build `f` around this idea: {topic}." in named
    assert named.replace(f" Build `f` around this idea: {topic}.", "") == plain


def test_asked_last_the_new_puzzle_follows_the_references():
    """`roles.ask_last` moves what to write (with its topic) after the references and the
    rules, just before the answer's layout; the same paragraphs otherwise, and by default
    the ask comes first."""
    topic = "a stack (append and pop)"
    first = proposer_prompt("deduction", [SORT], topic=topic)[1].content
    roles = RolesConfig(ask_last=True)
    last = proposer_prompt("deduction", [SORT], roles, topic=topic)[1].content
    for content in (first, last):
        assert content.index("Earlier puzzles") < content.index("exactly in this format")
    assert first.index("Invent a new puzzle") < first.index("Rules") < first.index(SORT.program)
    assert last.index(SORT.program) < last.index("Rules") < last.index("Invent a new puzzle")
    assert last.index(topic) > last.index(SORT.program) and first.index(topic) < first.index(
        "Rules"
    )
    assert "Invent a new puzzle, unlike the earlier ones:" in last
    assert sorted(last.replace(", unlike the earlier ones", "").split("\n\n")) == sorted(
        first.split("\n\n")
    )
    alone = proposer_prompt("abduction", [], roles, topic=topic)[1].content
    assert "unlike" not in alone and alone.index("no earlier puzzles") < alone.index("Invent")
    long = dataclasses.replace(SORT, program=SORT.program + "\n" + "#" * 1300)  # not shown
    unshown = proposer_prompt("abduction", [long], roles, topic=topic)[1].content
    assert "unlike" not in unshown and "no earlier puzzles" in unshown


def test_references_in_the_assert_layout_are_not_shown_as_an_answer():
    answer = proposer_prompt("deduction", [SORT])[1].content
    shown = proposer_prompt("deduction", [SORT], RolesConfig(reference_layout="assert"))[1].content
    check = f"assert f({SORT.input}) == {SORT.output}"
    assert f"f({SORT.input})\n```\nIt returns {SORT.output}." in answer and check not in answer
    assert f"{SORT.program}\n```\n{check}" in shown and "It returns" not in shown
    # the layout of the answer asked for is the same in both
    assert answer.split("exactly in this format")[1] == shown.split("exactly in this format")[1]


def test_references_in_the_calls_layout_show_no_function():
    shown = proposer_prompt("deduction", [SORT], RolesConfig(reference_layout="calls"))[1].content
    assert f"`f({SORT.input})` returned `{SORT.output}`." in shown
    body = SORT.program.strip().splitlines()[-1].strip()  # a line of the reference's function
    assert body not in shown


def test_prompts_without_thinking():
    content = proposer_prompt("deduction", [], RolesConfig(think=False))[1].content
    assert "<think>" not in content and "<answer>" in content


def test_a_thinking_solver_beside_a_proposer_that_does_not():
    roles = RolesConfig(think=True, prefill=True, proposer_think=False)
    program = COUNT.program  # what an induction proposal writes inputs for
    for task_type in ("deduction", "abduction", "induction", "math"):
        for r, thinks in ((roles, False), (RolesConfig(think=True), True)):
            content = proposer_prompt(task_type, [], r, program=program)[1].content
            assert ("<think>" in content) is thinks and "<answer>" in content
            assert proposal_regex(task_type, r).startswith("<think>") is thinks
    assert solver_prompt(SORT, roles)[-1].content == "<think>\n"


def test_solver_prompts_show_what_the_task_type_allows():
    deduction = solver_prompt(SORT)[1].content
    assert "f([9, 5, 7])" in deduction and "[5, 7, 9]" not in deduction
    abduction = solver_prompt(dataclasses.replace(SORT, type="abduction"))[1].content
    assert "[5, 7, 9]" in abduction and "[9, 5, 7]" not in abduction
    induction = solver_prompt(COUNT)[1].content
    assert "f('banana') == 3" in induction and COUNT.message in induction
    assert "'kiwi'" not in induction and "'aaa'" not in induction  # hidden pairs stay hidden
    assert COUNT.program not in induction


def test_a_prefilled_solver_reply_opens_the_answer_layout():
    unfilled = solver_prompt(SORT, RolesConfig(think=False))
    assert [m.role for m in unfilled] == ["system", "user"] and reply(unfilled, "x") == "x"
    filled = solver_prompt(SORT, RolesConfig(think=False, prefill=True))
    assert filled[:2] == unfilled and filled[2].role == "assistant"
    assert filled[2].content == "<answer>\n```output\n"
    # the completion continues the layout; the parser reads the whole reply
    whole = reply(filled, "[5, 7, 9]\n```\n</answer>")
    assert parse_answer(whole, "deduction").text == "[5, 7, 9]"
    abduction = solver_prompt(
        dataclasses.replace(SORT, type="abduction"),
        filled_roles := RolesConfig(think=False, prefill=True),
    )
    assert abduction[-1].content == "<answer>\n```input\n"
    assert parse_answer(reply(abduction, "[9, 5, 7]\n```"), "abduction").text == "[9, 5, 7]"
    assert solver_prompt(COUNT, filled_roles)[-1].content == "<answer>\n```python\n"
    thinking = solver_prompt(SORT, RolesConfig(think=True, prefill=True))
    assert thinking[-1].content == "<think>\n"


def test_a_prefilled_answer_ends_at_its_closing_fence():
    """Generation stops where the answer block closes, and the reply cut there (the engine
    drops the stop string from the text) reads as the whole reply does."""
    filled = RolesConfig(think=False, prefill=True)
    assert solver_stop(filled) == ("</answer>", "\n```")
    assert solver_stop(RolesConfig(think=True, prefill=True)) == ("</answer>",)
    assert solver_stop(RolesConfig(think=False)) == ("</answer>",)
    assert solver_stop(filled, "math") == ("</answer>",)  # its reply begins no code block
    answers = {
        SORT: "[5, 7, 9]",
        dataclasses.replace(SORT, type="abduction"): "[9, 5, 7]",
        COUNT: "def f(s):\n    return len(s)",
    }
    for task, answer in answers.items():
        prompt = solver_prompt(task, filled)
        whole = parse_answer(reply(prompt, f"{answer}\n```\n</answer>"), task.type)
        cut = parse_answer(reply(prompt, f"{answer}"), task.type)
        assert whole == cut and cut.text == answer


def test_task_from_needs_every_run_valid():
    proposal = parse_proposal(
        "```python\ndef f(x):\n    return x\n```\n```input\n1\n```", "abduction"
    )
    ok = Verdict(True, output="1", input="1", cpu_s=0.01)
    assert task_from(proposal, [ok]) == Task(
        "abduction", proposal.program, ("1",), ("1",), cpu_s=0.01
    )
    assert task_from(proposal, [Verdict(False, "timeout")]) is None
    assert task_from(proposal, []) is None


@pytest.fixture(scope="module")
def executor():
    with Executor() as ex:
        yield ex


def test_a_proposal_travels_to_a_verified_answer(executor):
    """Model text -> proposal -> executor -> task -> solver prompt -> answer -> verification."""
    text = (
        "<think>A function that keeps even numbers and squares them.</think>\n<answer>\n"
        "```python\ndef f(xs):\n    return [x * x for x in xs if x % 2 == 0]\n\n"
        "print(f([1, 2, 3, 4]))\n```\n```input\n[1, 2, 3, 4]\n```\n</answer>"
    )
    proposal = parse_proposal(text, "deduction")
    assert "print" not in proposal.program
    task = task_from(proposal, executor.validate(proposal.cases))
    assert task is not None and task.output == "[4, 16]"
    assert "f([1, 2, 3, 4])" in solver_prompt(task)[1].content
    right = parse_answer("<answer>\n```output\n[4, 16]\n```\n</answer>", "deduction")
    wrong = parse_answer("Output: [2, 4]", "deduction")
    [[good, bad]] = executor.verify_many([(task, [right.text, wrong.text])])
    assert good.ok and not bad.ok

    abduction = dataclasses.replace(task, type="abduction")
    answer = parse_answer("I think `f([2, 4])` works.\nInput: f([3, 2, 4])", "abduction")
    assert executor.verify(abduction, [answer.text])[0].ok


def test_an_induction_proposal_becomes_a_task_with_hidden_pairs(executor):
    program = "def f(s):\n    return s[::-1].upper()"
    inputs = ["'abc'", "'Hello'", "''", "'racecar'", "'a b'"]
    text = "\n".join(f"```input\n{i}\n```" for i in inputs) + "\n```message\nreverses, shouts\n```"
    proposal = parse_proposal(text, "induction", program)
    task = task_from(proposal, executor.validate(proposal.cases), n_visible=3)
    assert task.n_visible == 3 and len(task.hidden_pairs) == 2 and task.message
    solution = "```python\ndef f(s):\n    return ''.join(reversed(s)).upper()\n```"
    answer = parse_answer(solution, "induction")
    assert executor.verify(task, [answer.text])[0].ok
    assert isinstance(parse_answer("def g(): pass", "induction"), ParseFailure)


def test_inputs_equal_once_canonical_are_one_pair_of_an_induction_task(executor):
    """`f([1,2])` and `f([1, 2])` are one input: kept twice, the repeat was a hidden check of a
    shown pair, and the export of the task did not import back."""
    text = "```python\nf([1,2])\nf([1, 2])\nf([3])\nf([4, 5])\n```\nMessage: sums"
    proposal = parse_proposal(text, "induction", "def f(xs):\n    return sum(xs)")
    assert len(proposal.inputs) == 4  # as written; the executor makes them canonical
    verdicts = executor.validate(proposal.cases)
    assert task_from(proposal, verdicts, n_visible=3) is None  # 3 pairs: none left hidden
    task = task_from(proposal, verdicts, n_visible=2)
    assert task.inputs == ("[1, 2]", "[3]", "[4, 5]") and task.outputs == ("3", "3", "9")
    assert task.hidden_pairs == (("[4, 5]", "9"),)
