"""The proposer: prompts that ask the model for new tasks, and parsing of what it writes.

prompt = proposer_prompt("deduction", references, cfg.roles)
proposal = parse_proposal(completion.text, "deduction")   # Proposal or ParseFailure
verdicts = executor.validate(proposal.cases)
task = task_from(proposal, verdicts, n_visible=cfg.roles.induction_visible)

A math proposal's verdict goes through `math_verdict` first: its `f()` must return a number.
`task_from` does both; the training loop, which keeps the verdicts, calls `proposal_verdicts`
and then `build_task`. Which pool programs an induction prompt gives the proposer to write
inputs for: `induction.induction_programs`.
"""

import re
from collections.abc import Sequence
from dataclasses import replace

from selfplay.proposer.layout import proposal_regex, proposal_regexes
from selfplay.proposer.parse import parse_proposal
from selfplay.proposer.prompts import proposer_prompt, rules
from selfplay.types import Proposal, Task, Verdict

__all__ = [
    "proposer_prompt",
    "parse_proposal",
    "proposal_regex",
    "proposal_regexes",
    "rules",
    "task_from",
    "proposal_verdicts",
    "build_task",
    "math_verdict",
]

# The canonical text of an int or a finite float (`42`, `-0.5`, `1e-05`); not bool, inf or nan.
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?")


def math_verdict(verdict: Verdict) -> Verdict:
    """The validation of a math task's `f()`: refused (`math:not_a_number`) unless it returned
    an int or a finite float, the kind of answer a word problem has."""
    if verdict.ok and not _NUMBER.fullmatch(verdict.output or ""):
        detail = f"f() returned {(verdict.output or '')[:80]}"
        return replace(verdict, ok=False, reason="math:not_a_number", detail=detail)
    return verdict


def proposal_verdicts(proposal: Proposal, verdicts: Sequence[Verdict]) -> tuple[Verdict, ...]:
    """The executor's verdicts on a proposal's runs as the proposer judges them: a math
    task's must also be a number (`math_verdict`)."""
    if proposal.type == "math":
        return tuple(math_verdict(v) for v in verdicts)
    return tuple(verdicts)


def task_from(proposal: Proposal, verdicts: Sequence[Verdict], n_visible: int = 0) -> Task | None:
    """The task a validated proposal makes from the executor's verdicts, or None if any of its
    runs was invalid."""
    return build_task(proposal, proposal_verdicts(proposal, verdicts), n_visible)


def build_task(proposal: Proposal, verdicts: Sequence[Verdict], n_visible: int = 0) -> Task | None:
    """The task of verdicts already judged by `proposal_verdicts`, or None if any run was
    invalid.

    Inputs and outputs are the executor's normalised and canonical texts. An induction task
    shows its first `n_visible` pairs and is checked on the rest, so it needs more pairs than
    that. Inputs equal once canonical (`f([1,2])` and `f([1, 2])`) are one pair, the first
    run's: a repeat would check a shown pair as a hidden one, and the importer, which keeps one
    pair per input, would not take the task back from an export.
    """
    if len(verdicts) != len(proposal.inputs) or not all(v.ok for v in verdicts):
        return None
    inputs = tuple(v.input for v in verdicts)
    outputs = tuple(v.output for v in verdicts)
    cpu = max(v.cpu_s for v in verdicts)
    if proposal.type == "math":
        return Task("math", proposal.program, inputs, outputs, proposal.message, cpu_s=cpu)
    if proposal.type != "induction":
        return Task(proposal.type, proposal.program, inputs, outputs, cpu_s=cpu)
    pairs: dict[str, str] = {}
    for given, output in zip(inputs, outputs, strict=True):
        pairs.setdefault(given, output)  # in the order written, each input's first run
    if len(pairs) <= n_visible or n_visible < 1:
        return None
    inputs, outputs = tuple(pairs), tuple(pairs.values())
    return Task("induction", proposal.program, inputs, outputs, proposal.message, n_visible, cpu)
