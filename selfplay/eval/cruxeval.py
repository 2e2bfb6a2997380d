"""CRUXEval-O and CRUXEval-I, judged by the sandboxed executor (through `selfplay.judge`).

CRUXEval-O (output prediction) is a deduction task: given the function and the input, predict
the output; an answer is correct when its canonical value equals the gold output's. CRUXEval-I
(input prediction) is an abduction task: given the function and the output, write an input;
an answer is correct when the function, run on it in the sandbox, returns the gold output.
Inputs are read in expression mode (`dict(a=1)` and lambdas occur in the data and in answers),
compiled under the same policy as programs and evaluated only inside the sandbox.

An input answer is evaluated before the program runs, among the data of its own instance of the
program (not its functions, classes or modules), and may not bind names, so it cannot change
the program it is judged with (see `selfplay.executor.worker._input_namespace`).

Generation, judging and pass@k are the harness's (`harness.py`); what is CRUXEval's own is
here: the problems, the prompt and answer parsing for each subset, the records. The prompt
format is the benchmark's published one (`direct`, the default, or `cot`, see
`cruxeval_formats.py`), so that scores compare with published tables, asked as a chat model
is asked it (a system message, the prompt as the user's turn); or `completion`: the direct
prompt as a text the model continues, without chat template or system message, as the
benchmark's own harness asks open models (instruction-tuned ones included), where a reply
cannot begin anywhere but after the prompt's last `[ANSWER]`; or the solver's own
(`selfplay`, as in training). A subset's name says its format unless it is `direct`:
`cruxeval_o`, `cruxeval_o_selfplay`, `cruxeval_i_cot`.

Each record carries the problem's program, its gold input and output (as the data file writes
them), the sample's index, the prompt format, how a wrong sample failed (`harness.failure`) and
`trivial`: whether the copy answer solves the item (`selfplay.trivial`: the gold output given as
the input for CRUXEval-I, the single input given as the output for CRUXEval-O), so that a
report can set apart what copying alone gets right. In a published format, a subset's metrics
also give `example_share`: the share of answers that are the prompt's worked example's
(`cruxeval_formats.EXAMPLE_ANSWERS`), the shortcut a solver trained on copies drifts to (the
base coder: 37 and 68 of 800), so that an in-run evaluation shows the drift by its step. In
every format they give `wrong_type_share`: the share of answers that are wrong and not even of
the gold's type (`answer_types`; the base coder in the published format: 54 and 414 of 800),
where that drift shows first. In a published format they also give `restart_share`: the share
of replies that begin a new `[PYTHON]` block, writing the prompt's few-shot document over again
instead of an answer (`cruxeval_formats.restarts`); what such a reply answers is what follows
the first `==` it writes, most often the first example's `17`. Each record keeps the reply.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from selfplay.eval import cruxeval_formats, harness
from selfplay.eval.answer_types import wrong_type
from selfplay.eval.harness import Sample
from selfplay.files import data_root, records
from selfplay.judge import Judge
from selfplay.solver import parse_answer, reply, solver_prompt, solver_stop
from selfplay.trivial import copy_solves
from selfplay.types import Answer, ParseFailure, Task

__all__ = [
    "Problem",
    "load_problems",
    "evaluate",
    "row_copies_example",
    "row_restarts",
    "example_share",
    "PROMPT_FORMATS",
    "subset_name",
    "format_free",
]

SUBSETS = {"cruxeval_o": "deduction", "cruxeval_i": "abduction"}
PROMPT_FORMATS = ("direct", "cot", "completion", "selfplay")
DEFAULT_FORMAT = "direct"


@dataclass(frozen=True)
class Problem:
    id: str
    output_task: Task  # CRUXEval-O
    input_task: Task  # CRUXEval-I
    input_text: str = ""  # the input and output as the data file writes them (the published
    output_text: str = ""  # prompts show these)
    output_trivial: bool = False  # the input given as the output is right (CRUXEval-O)
    input_trivial: bool = False  # the output given as the input is right (CRUXEval-I)


def published_style(prompt_format: str) -> str | None:
    """The published prompt a format asks with (`cruxeval_formats.STYLES`): `completion` is
    the direct prompt as a text to complete; None for the solver's own format."""
    if prompt_format == "completion":
        return "direct"
    return prompt_format if prompt_format in cruxeval_formats.STYLES else None


def subset_name(subset: str, prompt_format: str) -> str:
    """`cruxeval_o` in the published direct format, else suffixed: `cruxeval_o_selfplay`."""
    return subset if prompt_format == DEFAULT_FORMAT else f"{subset}_{prompt_format}"


def format_free(name: str) -> str:
    """A subset's name without its prompt format: `cruxeval_o_cot` -> `cruxeval_o` (what
    `subset_name` added); other names as they are."""
    for prompt_format in PROMPT_FORMATS:
        base = name.removesuffix(f"_{prompt_format}")
        if base != name and base in SUBSETS:
            return base
    return name


def row_copies_example(row: dict) -> bool | None:
    """Whether a CRUXEval record's answer is its prompt's worked example's (a solver that
    drifts to it answers every problem alike); None for other records and for the solver's own
    prompt format, which shows no example values."""
    subset, answer = str(row.get("subset", "")), row.get("answer")
    style = published_style(str(row.get("prompt_format")))
    kind = SUBSETS.get(subset[: len("cruxeval_o")])  # cruxeval_o_cot: cruxeval_o in cot
    if kind is None or style is None:
        return None
    return isinstance(answer, str) and cruxeval_formats.copies_example(answer, kind, style)


def row_restarts(row: dict) -> bool | None:
    """Whether a CRUXEval record's reply wrote the published prompt's few-shot document over
    again (`cruxeval_formats.restarts`); None in the solver's own format. A record without its
    reply (written before replies were kept) is judged by its answer, for output prediction
    only (None for input prediction), and then as a lower bound: the first example's answer
    running on into that example's `[/PYTHON]` line, as the extraction reads a restart that
    goes past its first assertion."""
    if row_copies_example(row) is None:
        return None
    if isinstance(row.get("reply"), str):
        return cruxeval_formats.restarts(row["reply"])
    if not str(row.get("subset", "")).startswith("cruxeval_o"):
        return None
    answer = row.get("answer")
    return isinstance(answer, str) and bool(_RESTARTED.match(answer))


# The answer CRUXEval-O's extraction reads from a reply that restarts the direct prompt's
# document: what follows the first example's `==`, its `[/PYTHON]` line included.
_RESTARTED = re.compile(r"17\s*\n\[/PYTHON\]")


def example_share(rows: list[dict], prompt_format: str) -> float | None:
    """The share of a subset's records whose answer is its prompt's worked example's; None in
    the solver's own format, whose prompt shows no example."""
    if published_style(prompt_format) is None or not rows:
        return None
    return sum(bool(row_copies_example(r)) for r in rows) / len(rows)


def default_path() -> Path:
    return data_root() / "cruxeval" / "cruxeval.jsonl"


def load_problems(executor, path: str | Path | None = None, limit: int = 0) -> list[Problem]:
    """The problems, with gold outputs recomputed (and checked) by the executor and each
    subset's copy answer judged (`Problem.output_trivial`, `input_trivial`)."""
    rows = records(path or default_path())
    rows = rows[:limit] if limit else rows
    verdicts = executor.validate([(r["code"], r["input"]) for r in rows], inputs="expression")
    tasks = []
    for row, v in zip(rows, verdicts, strict=True):
        if not v.ok:
            raise ValueError(f"CRUXEval {row['id']} does not validate: {v.reason} {v.detail}")
        pair = ((v.input,), (v.output,))
        tasks.append(
            (
                Task("deduction", row["code"], *pair, cpu_s=v.cpu_s),
                Task("abduction", row["code"], *pair, cpu_s=v.cpu_s),
            )
        )
    trivial = copy_solves(executor, [t for pair in tasks for t in pair], inputs="expression")
    return [
        Problem(row["id"], *pair, row["input"], row["output"], *trivial[2 * i : 2 * i + 2])
        for i, (row, pair) in enumerate(zip(rows, tasks, strict=True))
    ]


def evaluate(
    engine,
    judge: Judge,
    problems: list[Problem],
    roles,
    params,
    ks: tuple[int, ...] = (1,),
    prompt_format: str = DEFAULT_FORMAT,
) -> tuple[dict[str, float], list[dict]]:
    """(metrics, per-sample records) for both subsets, named by `subset_name`; `params` are
    the SamplingParams, `prompt_format` one of PROMPT_FORMATS. The judge reads predicted
    inputs as expressions, whatever mode it was built with."""
    if prompt_format not in PROMPT_FORMATS:
        raise ValueError(f"prompt format {prompt_format!r}: choose from {PROMPT_FORMATS}")
    judge = replace(judge, inputs="expression")
    stop = solver_stop(roles) if prompt_format == "selfplay" else cruxeval_formats.STOP
    params = replace(params, stop=stop)
    metrics, items = {}, []
    for subset, kind in SUBSETS.items():
        scores, rows = _evaluate_subset(
            subset, kind, engine, judge, problems, roles, params, ks, prompt_format
        )
        metrics.update(scores)
        items.extend(rows)
    return metrics, items


def _evaluate_subset(subset, kind, engine, judge, problems, roles, params, ks, prompt_format):
    """One subset through the harness: its task, the prompt and parse of the format, its rows."""
    name, style = subset_name(subset, prompt_format), published_style(prompt_format)

    def task(problem: Problem) -> Task:
        return problem.output_task if kind == "deduction" else problem.input_task

    def read(problem: Problem, completion) -> str | ParseFailure:
        if prompt_format != "selfplay":
            return cruxeval_formats.published_answer(completion.text, kind, style)
        answer = parse_answer(reply(prompt(problem), completion.text), kind, completion.cut)
        return answer.text if isinstance(answer, Answer) else answer

    def row(sample: Sample) -> dict:
        problem = sample.problem
        trivial = problem.output_trivial if kind == "deduction" else problem.input_trivial
        return {
            "subset": name,
            "id": problem.id,
            "sample": sample.index,
            "prompt_format": prompt_format,
            "program": problem.output_task.program,
            "input": problem.input_text,
            "output": problem.output_text,
            "trivial": trivial,
            "answer": sample.answer,
            "correct": sample.verdict.ok,
            "reason": sample.verdict.reason,
            "failure": harness.failure(sample.answer, sample.verdict),
            "reply": sample.reply,
        }

    def prompt(problem: Problem):
        if prompt_format == "selfplay":
            return solver_prompt(task(problem), roles)
        code, given = task(problem).program, (problem.input_text, problem.output_text)
        completing = prompt_format == "completion"
        return cruxeval_formats.published_prompt(kind, style, code, *given, completing)

    metrics, rows = harness.evaluate(
        problems,
        prompt,
        judge,
        engine=engine,
        params=params,
        read=read,
        task=task,
        name=name,
        ks=ks,
        row=row,
    )
    share = example_share(rows, prompt_format)
    if share is not None:
        metrics[f"{name}/example_share"] = share
        restarts = sum(cruxeval_formats.restarts(r["reply"]) for r in rows)
        metrics[f"{name}/restart_share"] = restarts / len(rows)
    if rows:
        metrics[f"{name}/wrong_type_share"] = sum(wrong_type(r) is True for r in rows) / len(rows)
    return metrics, rows
