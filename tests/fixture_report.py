"""Parse the stored model completions and judge them with the executor (tests and the script
that regenerates the fixtures share this)."""

from __future__ import annotations

from collections import defaultdict

from selfplay.proposer import parse_proposal, task_from
from selfplay.solver import parse_answer
from selfplay.types import ParseFailure, Task


def parsed(record: dict):
    """The proposal or answer parsed from one fixture record (or its `ParseFailure`)."""
    truncated = record["finish_reason"] == "length"
    if record["role"] == "proposer":
        return parse_proposal(
            record["text"], record["type"], record["program"], truncated=truncated
        )
    return parse_answer(record["text"], record["type"], truncated=truncated)


def task_of(record: dict) -> Task:
    fields = dict(record["task"])
    fields["inputs"], fields["outputs"] = tuple(fields["inputs"]), tuple(fields["outputs"])
    return Task(**fields)


def report(records: list[dict], executor) -> dict:
    """Counts per role and type: completions, parsed, valid proposals, correct answers."""
    counts: dict = defaultdict(lambda: {"completions": 0, "parsed": 0})
    proposals, answers, failures = [], [], []
    for record in records:
        key = f"{record['role']}/{record['type']}"
        counts[key]["completions"] += 1
        result = parsed(record)
        if isinstance(result, ParseFailure):
            failures.append(f"{key}:{result.reason}")
            continue
        counts[key]["parsed"] += 1
        if record["role"] == "proposer":
            proposals.append((key, result))
        else:
            answers.append((key, task_of(record), result))
    verdicts = executor.validate([c for _, p in proposals for c in p.cases])
    start = 0
    for key, proposal in proposals:
        part = verdicts[start : start + len(proposal.inputs)]
        start += len(proposal.inputs)
        valid = task_from(proposal, part, n_visible=1) is not None
        counts[key]["valid"] = counts[key].get("valid", 0) + valid
    judged = executor.verify_many([(task, [a.text]) for _, task, a in answers])
    for (key, _, _), [verdict] in zip(answers, judged, strict=True):
        counts[key]["correct"] = counts[key].get("correct", 0) + verdict.ok
    return {"counts": dict(sorted(counts.items())), "failures": failures}
