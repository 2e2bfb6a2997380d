"""The generated task family: real executor runs, deterministic, splits share no program."""

from selfplay.datasets.generated import TEMPLATES, generated_tasks


def test_splits_share_no_program_and_are_deterministic(executor):
    train = generated_tasks(executor, 120, "train", seed=3)
    heldout = generated_tasks(executor, 60, "heldout", seed=3)
    assert not {t.program for t in train} & {t.program for t in heldout}
    assert len({(t.program, t.inputs) for t in train}) == 120
    again = generated_tasks(executor, 60, "heldout", seed=3)
    assert _content(again) == _content(heldout)  # only the measured CPU times differ
    assert _content(generated_tasks(executor, 60, "heldout", seed=4)) != _content(heldout)


def _content(tasks):
    return [(t.program, t.inputs, t.outputs) for t in tasks]


def test_outputs_are_the_programs_real_outputs(executor):
    tasks = generated_tasks(executor, len(TEMPLATES), "train")
    verdicts = executor.validate([(t.program, t.inputs[0]) for t in tasks])
    assert [v.output for v in verdicts] == [t.outputs[0] for t in tasks]
    assert len({t.program.split("return")[0] for t in tasks}) > 5  # many templates, not one


def test_abduction_tasks_and_unknown_types(executor):
    [task] = generated_tasks(executor, 1, "train", task_type="abduction")
    assert task.type == "abduction"
    import pytest

    with pytest.raises(ValueError, match="deduction and abduction"):
        generated_tasks(executor, 1, "train", task_type="induction")


def test_the_easy_level_has_its_own_programs_in_both_splits(executor):
    import re

    import pytest

    from selfplay.datasets.generated import EASY_TEMPLATES

    train = generated_tasks(executor, 3 * len(EASY_TEMPLATES), "train", level="easy")
    heldout = generated_tasks(executor, 3 * len(EASY_TEMPLATES), "heldout", level="easy")
    assert not {t.program for t in train} & {t.program for t in heldout}
    assert not {t.program for t in train} & {
        t.program for t in generated_tasks(executor, 60, "train")
    }
    # the parameter name is a hole: even the identity has programs in both splits
    identity_program = re.compile(r"def f\((\w+)\):\n    return \1")
    identity = [t for t in train + heldout if identity_program.fullmatch(t.program)]
    assert {t in train for t in identity} == {True, False}
    assert all(t.outputs == t.inputs for t in identity)
    with pytest.raises(ValueError, match="levels are standard, easy"):
        generated_tasks(executor, 1, "train", level="hard")
