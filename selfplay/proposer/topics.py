"""Topics: one programming idea named in each deduction and abduction proposer prompt.

A small proposer writes what it is shown. From AZR's identity seed, a 0.5B coder copies the
reference in about half of its valid proposals whatever they earn, and shown no reference it
writes the identity again (docs/results.md): the pool stays one-line variants of the seed, and
a solver trained on them learns to copy, not to trace. `roles.topics` names one idea per
prompt ("Build `f` around this idea: a dictionary that counts things."), drawn from `TOPICS`
by the run seed, the step and the prompt, so that the prompts of a step ask for different
programs and a copy of the reference is no longer the completion that fits the prompt best.

The ideas are general Python constructs and operations on the value types the executor
allows; none names a task, a benchmark or a solution.

Off by default, as measured (docs/results.md): with the identity seed as the only reference, 7
of the base coder's 46 valid proposals at step 0 were new work against 0 of 41 without
(`benchmarks/proposal_bench.py --references seed`), but in a 10-step seeded run, whose
references are new tasks after the seeding, copies of the references stayed at about half of
the valid proposals and the share of no new work did not fall (67% against 64%).
"""

from __future__ import annotations

import random

from selfplay.types import WRITTEN_TYPES

__all__ = ["TOPICS", "topic_for", "prompt_topic"]

TOPICS = (
    "a loop over the characters of a string",
    "a dictionary that counts things",
    "sorting with a key function",
    "a while loop that stops on a condition",
    "slicing strings or lists",
    "string methods such as split, join, replace or strip",
    "integer arithmetic with // and %",
    "a list comprehension with a condition",
    "building a new list while walking over another",
    "enumerate and the position of each item",
    "inserting into and removing from a list",
    "a recursive helper function",
    "set operations (union, intersection, difference)",
    "tuples and unpacking",
    "a running total or running maximum",
    "nested loops over two sequences",
    "iterating over a dictionary's items",
    "conditions combining and, or and not",
    "zip over two sequences",
    "character codes with ord and chr",
    "two indices moving towards each other",
    "a stack (append and pop)",
    "grouping items into a dictionary of lists",
    "swapping items of a list",
    "finding positions with str.find or list.index",
    "upper and lower case letters",
    "digits of a number",
    "merging two dictionaries",
    "counting with str.count or list.count",
    "reversing part of a sequence",
    "an early return from inside a loop",
    "a flag that changes as a loop goes on",
)


def topic_for(seed: int, step: int, salt: int, prompt: int) -> str:
    """The topic of proposer prompt `prompt` of the task type numbered `salt` at `step`: the
    same for a resumed step; the prompts of one step and type take the topics of one shuffle
    in turn, so that no two of them share a topic until every topic is used."""
    order = list(TOPICS)
    random.Random(f"topic:{seed}:{step}:{salt}").shuffle(order)
    return order[prompt % len(order)]


def prompt_topic(config, task_type: str, step: int, prompt: int) -> str | None:
    """The topic a run names in its proposer prompt `prompt` of `task_type` at `step` (the
    type numbered by its place in `selfplay.task_types`); None when `roles.topics` is off or
    the type is not one whose program the proposer writes."""
    if not config.roles.topics or task_type not in WRITTEN_TYPES:
        return None
    order = config.selfplay.task_types
    salt = order.index(task_type) if task_type in order else len(order)
    return topic_for(config.run.seed, step, salt, prompt)
