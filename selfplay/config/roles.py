"""What the proposer and the solver are shown and asked for (`roles.*`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from selfplay.config.fields import Checked, ConfigError, knob, not_negative, positive
from selfplay.types import SolverLayout

__all__ = ["RolesConfig"]


@dataclass(frozen=True)
class RolesConfig(Checked):
    """What the proposer and the solver are shown and asked for."""

    induction_inputs: int = knob(6, "inputs the proposer writes for an induction task")
    induction_visible: int = knob(3, "of those, pairs shown to the solver (the rest are hidden)")
    reference_chars: int = knob(1200, "longest program text of one reference, in characters")
    min_statements: int = knob(
        0,
        "fewest statements in a proposed deduction/abduction program's functions; 0: any "
        "(selfplay/proposer/complexity.py; from the identity seed alone a floor stalls a run)",
    )
    reference_layout: Literal["answer", "assert", "calls"] = knob(
        "answer",
        "how deduction/abduction references are shown to the proposer: answer, written as the "
        "proposer answers (the function, its final call, what it returned); assert, the "
        "function and `assert f(input) == output`, a layout a copy would have to rewrite; "
        "calls, the call and what it returned, without the function",
    )
    topics: bool = knob(
        False,
        "name one programming idea in each deduction/abduction proposer prompt, drawn per "
        "prompt (selfplay/proposer/topics.py), so that a step's prompts ask for different programs",
    )
    ask_last: bool = knob(
        False,
        "a deduction/abduction proposer prompt shows the references first and asks for the "
        "new puzzle (with its topic) last, just before the answer's layout, instead of "
        "asking first and showing the references last (a small model tends to write what "
        "it read last)",
    )
    worked_examples: int = knob(
        0,
        "solved pool tasks of its type shown above each deduction/abduction task the solver "
        "answers in a run, each with an answer judged wrong for the task, so that copying a "
        "shown answer is a wrong answer; shown without reasoning, also when `think` is on "
        "(selfplay/solver/examples.py); 0: none",
    )
    solver_layouts: tuple[SolverLayout, ...] = knob(
        ("answer",),
        "layouts of the deduction/abduction tasks the solver answers in a run, one drawn per "
        "prompt: answer, the value in an <answer> block (the reply begun for it under "
        "`prefill`); assert, complete `assert f(x) == ??` (or `f(??)`) and write the whole "
        "assertion, the reply never begun, worked examples shown as completed assertions "
        "(selfplay/solver/prompts.py). A new task's solve rate is asked in the first; "
        "evaluation asks in the answer layout",
    )
    bare_programs: bool = knob(
        False,
        "an induction answer in a run (trained, and asked for a new task's solve rate) whose "
        "top-level code is a call or an assertion (the prompt's examples written back out) "
        "earns reward.solver_malformed instead of being judged without that code "
        "(extract.has_test_code); evaluation keeps judging the cleaned program",
    )
    think: bool = knob(True, "ask for reasoning in <think> before the answer")
    proposer_think: bool = knob(
        True,
        "the proposer reasons in <think> too when `think` is on; false: only the solver "
        "does, so that a run with a thinking solver proposes as one without",
    )
    prefill: bool = knob(
        False,
        "begin the solver's reply for the model: with <think> when thinking, else with <answer> "
        "and the answer's code fence (small models then answer in the layout)",
    )

    @property
    def proposer_thinks(self) -> bool:
        """Whether proposer prompts ask for reasoning before the answer."""
        return self.think and self.proposer_think

    def check(self) -> None:
        positive(self, "induction_inputs", "induction_visible", "reference_chars")
        not_negative(self, "min_statements", "worked_examples")
        if not self.solver_layouts or len(set(self.solver_layouts)) < len(self.solver_layouts):
            choices = ", ".join(get_args(SolverLayout))
            raise ConfigError(f"roles.solver_layouts: one or more of {choices}, each once")
        if self.induction_visible >= self.induction_inputs:
            raise ConfigError("roles: induction_visible must be less than induction_inputs")
