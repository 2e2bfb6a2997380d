"""One evaluation loop for every benchmark: generate n samples per problem, read an answer out
of each, judge all answers in one batch, score pass@k, and keep one record per sample. Under
several ranks (`sharded.across`) each rank does the first three for its share of the problems
and the answers and verdicts are gathered in problem order before the rest (`sharded.py`).

A benchmark module (`cruxeval.py`, `math_benchmarks.py`, `code_benchmarks.py`) supplies only
what is its own:

    prompt(problem)             the prompt the model answers
    read(problem, completion)   the answer text, or a `ParseFailure` saying why there is none
    task(problem)               what the answers are judged against (a `Task` for `Judge`)
    judge                       anything with `judge([(task, answers), ...])` returning one
                                list of verdicts per item: `selfplay.judge.Judge`, or the code
                                benchmarks' `CodeTestJudge`
    row(sample)                 the per-sample record (default: `sample_record`)

Generation stops at the end of the answer section unless the sampling parameters name their
own stop strings. An answer that could not be read is not judged: its sample is wrong, with the
parse failure's reason. With n samples per problem pass@1 is the mean share of correct samples
and pass@k the unbiased estimator (`passk.py`); with n = 1 at temperature 0 it is greedy pass@1.

Every record says how a wrong sample failed (`failure`): `unreadable` (no answer could be read
from the text), `not_a_value` (an answer was read, but it is no value, or no argument list
that evaluates: a syntax error, an undefined name, a construct refused, a limit its own
evaluation ran into), or `wrong_value` (a value the judge compares and finds wrong, or an
input the program crashes or loops on, a run-time guard the program trips on it included). A
gain from the first two is a gain in notation; only the third is a wrong value turned right.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from selfplay import console
from selfplay.distributed import share_seed
from selfplay.eval import sharded
from selfplay.eval.passk import pass_at_k_metrics
from selfplay.extract import ANSWER_STOP
from selfplay.types import ParseFailure, Verdict

__all__ = ["FAILURES", "Sample", "evaluate", "failure", "sample_record"]

FAILURES = ("unreadable", "not_a_value", "wrong_value")
# Verdict reasons of an answer that is not a value (or not an argument list that evaluates):
# refused before anything ran, or failing while its arguments were evaluated, whatever ended
# that (`answer:timeout`, `answer:memory`, `answer:policy` included). Once the program runs on
# them, its failure is a wrong value: a guard it trips is `crash:policy` (`verify.py`).
_NOT_A_VALUE = ("answer:", "input:", "policy:", "syntax", "program_too_large")


@dataclass(frozen=True)
class Sample:
    """One judged sample: its problem, its index among the problem's samples, the answer read
    from it (None when none could be read) and the verdict on that answer."""

    problem: Any
    index: int
    answer: str | None
    verdict: Verdict
    reply: str = ""  # the completion's text, as the model wrote it


def failure(answer: str | None, verdict: Verdict) -> str | None:
    """How a sample failed (one of `FAILURES`, see the module doc), None when it is right."""
    if verdict.ok:
        return None
    if answer is None:
        return "unreadable"
    return "not_a_value" if verdict.reason.startswith(_NOT_A_VALUE) else "wrong_value"


def sample_record(name: str, sample: Sample, **fields) -> dict:
    """The usual per-sample record; `fields` (e.g. the gold answer) go before the answer."""
    return {
        "benchmark": name,
        "id": sample.problem.id,
        "sample": sample.index,
        **fields,
        "answer": sample.answer,
        "correct": sample.verdict.ok,
        "reason": sample.verdict.reason,
        "failure": failure(sample.answer, sample.verdict),
    }


def evaluate(
    problems: Sequence,
    prompt: Callable,
    judge,
    *,
    engine,
    params,
    read: Callable[[Any, Any], str | ParseFailure],
    task: Callable,
    name: str,
    ks: Sequence[int] = (1,),
    row: Callable[[Sample], dict] | None = None,
) -> tuple[dict[str, float], list[dict]]:
    """(metrics `{name}/pass@{k}`, per-sample records) of `problems`; see the module doc."""
    params = replace(params, stop=params.stop or ANSWER_STOP)
    shares = sharded.current().shares

    def answer(part: list, k: int) -> list[tuple[list, list[Verdict], list[str]]]:
        """(answers read, verdicts, replies) of each problem of share k: generated, read and
        judged by this rank; the replies go to every rank with the rest."""
        own = replace(params, seed=share_seed(params.seed, k, shares))
        with console.doing(f"eval {name}"):
            generations = engine.generate([prompt(p) for p in part], own)
        answers = [
            [read(p, c) for c in g.completions] for p, g in zip(part, generations, strict=True)
        ]
        items = [
            (task(p), [a for a in given if isinstance(a, str)])
            for p, given in zip(part, answers, strict=True)
        ]
        replies = [[c.text for c in g.completions] for g in generations]
        return list(zip(answers, judge.judge(items), replies, strict=True))

    answered = sharded.answer(answer, problems)  # every share's, in problem order
    samples = [
        _samples(p, given, verdicts, replies)
        for p, (given, verdicts, replies) in zip(problems, answered, strict=True)
    ]
    counts = [(len(own), sum(s.verdict.ok for s in own)) for own in samples]
    row = row or (lambda s: sample_record(name, s))
    return pass_at_k_metrics(name, counts, ks), [row(s) for own in samples for s in own]


def _samples(
    problem, answers: list, verdicts: Sequence[Verdict], replies: Sequence[str]
) -> list[Sample]:
    """A problem's samples, each with its reply: the judge's verdicts in order, a parse
    failure's where none was read."""
    judged = iter(verdicts)
    return [
        Sample(problem, i, a, next(judged), text)
        if isinstance(a, str)
        else Sample(problem, i, None, Verdict(False, a.reason, detail=a.detail), text)
        for i, (a, text) in enumerate(zip(answers, replies, strict=True))
    ]
