"""Records passed between the stages of a step: frozen dataclasses, never dicts of lists.

Each stage of `selfplay.stages` takes records and returns new ones, so a step's data flow is
in its arguments and every record can be pickled and sent to another process:

    propose -> Proposed; validate -> Validated; store -> Stored; solve -> Attempted;
    verify -> Judged; reward -> Rollout (with its advantage)

Values inside records (inputs, outputs) are text: an input is the argument text inside
`f(...)`, normalised by the executor; an output is canonical text (see
`selfplay.executor.values`). The trusted side never turns them back into objects except
through the executor's literal parser.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

TaskType = Literal["deduction", "abduction", "induction", "math"]
TASK_TYPES: tuple[TaskType, ...] = ("deduction", "abduction", "induction", "math")
# the task types whose program the proposer writes (an induction task's program is given)
WRITTEN_TYPES: tuple[TaskType, ...] = ("deduction", "abduction")


@dataclass(frozen=True)
class Task:
    """A verified code-reasoning task.

    deduction: given `program` and `inputs[0]`, predict `outputs[0]`.
    abduction: given `program` and `outputs[0]`, predict an input that produces it.
    induction: given the first `n_visible` input/output pairs and `message`, write a program;
    it is checked on the remaining (hidden) pairs.
    math: `message` is a problem and `inputs[0]` is empty; the solver answers in words or
    LaTeX and the math checker compares the answer with `outputs[0]`. A proposed math task has
    a `program` whose `f()` (no arguments) computes the answer, and its output is that number's
    canonical text (an int or a float); a labeled one (GSM8K, MATH-500) has no program
    (`program == ""`, see `is_labeled_math`) and its output is the gold answer as LaTeX.
    """

    type: TaskType
    program: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    message: str = ""
    n_visible: int = 0
    cpu_s: float = 0.0  # largest CPU time of one run at validation; sets verification limits

    def __post_init__(self) -> None:
        if len(self.inputs) != len(self.outputs) or not self.inputs:
            raise ValueError("a task needs as many outputs as inputs, and at least one of each")
        if self.type != "induction" and len(self.inputs) != 1:
            raise ValueError(f"a {self.type} task has exactly one input/output pair")

    @property
    def is_labeled_math(self) -> bool:
        """A math problem with a given answer and no program: nothing to run, only to check."""
        return self.type == "math" and not self.program.strip()

    @property
    def input(self) -> str:
        return self.inputs[0]

    @property
    def output(self) -> str:
        return self.outputs[0]

    @property
    def visible_pairs(self) -> tuple[tuple[str, str], ...]:
        return tuple(
            zip(self.inputs[: self.n_visible], self.outputs[: self.n_visible], strict=True)
        )

    @property
    def hidden_pairs(self) -> tuple[tuple[str, str], ...]:
        return tuple(
            zip(self.inputs[self.n_visible :], self.outputs[self.n_visible :], strict=True)
        )


@dataclass(frozen=True)
class Verdict:
    """The executor's judgement of one program run, proposed task or answer.

    `ok` is False for anything the model did wrong, with `reason` saying what: `syntax`,
    `policy:<rule>`, `no_f`, `input:<why>` (what ended the input's own evaluation: an
    exception's type, `timeout`, `memory`, `policy`), `timeout`, `memory`,
    `crash:<ExceptionType>` (`crash:policy`: a guard the program tripped on an answer's input),
    `unserializable`, `output_too_large`, `nondeterministic`, `wrong_output`, `answer:<why>`;
    and, from the validate stage without a run, `too_simple` (`roles.min_statements`).
    For a validation `output` is the canonical output and `input` the normalised input; for a
    verification `score` is the fraction of checked pairs that matched (1.0 or 0.0 except for
    induction).
    """

    ok: bool
    reason: str = "ok"
    output: str | None = None
    input: str | None = None
    score: float = 0.0
    cpu_s: float = 0.0
    detail: str = ""


@dataclass(frozen=True)
class Proposal:
    """A task as the proposer wrote it, parsed but not yet validated.

    deduction/abduction: the model wrote `program` and one input. induction: `program` was
    given to the model (taken from the store) and it wrote several `inputs` and a `message`
    describing the function. math: the model wrote a word problem (`message`) and a program
    whose `f()` computes its answer; `inputs` is `("",)`. Each (program, input) goes to
    `Executor.validate` as it is.
    """

    type: TaskType
    program: str
    inputs: tuple[str, ...]
    message: str = ""

    @property
    def cases(self) -> list[tuple[str, str]]:
        """The (program, input) pairs to validate."""
        return [(self.program, text) for text in self.inputs]


@dataclass(frozen=True)
class Answer:
    """The solver's answer to a task, as text for `Executor.verify`.

    deduction: a predicted output (a literal); abduction: a predicted input (the argument text
    inside `f(...)`); induction: a program defining `f`; math: the answer as the solver wrote
    it (a number or LaTeX), for the math checker.
    """

    type: TaskType
    text: str


@dataclass(frozen=True)
class ParseFailure:
    """Model text from which no proposal or answer could be read; a result, not an error.

    `reason` is a short stable tag (`no_program`, `no_input`, `no_answer`, `unfinished`, ...),
    `detail` a human-readable explanation.
    """

    reason: str
    detail: str = ""

    @property
    def ok(self) -> bool:
        return False


Role = Literal["propose", "solve"]
ProposalOutcome = Literal["malformed", "invalid", "valid"]
AnswerOutcome = Literal["malformed", "wrong", "correct"]
Purpose = Literal["estimate", "train"]
#: how the solver is asked a deduction or abduction task (`roles.solver_layouts`,
#: `solver.prompts.LAYOUTS`)
SolverLayout = Literal["answer", "assert"]


@dataclass(frozen=True)
class Proposed:
    """One proposer completion, parsed (the `propose` stage), with the token ids and
    log-probabilities the policy update needs."""

    task_type: TaskType
    group: int  # the prompt it was sampled from
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    references: tuple[int, ...]  # pool ids shown in the prompt
    parsed: Proposal | ParseFailure
    finish_reason: str = "stop"  # its completion's (`engine.Completion`); length: cut at the limit


@dataclass(frozen=True)
class Validated:
    """A proposal after the `validate` stage: one verdict per executor run (none for a
    malformed one, a single `too_simple` one for a program below `roles.min_statements`, which
    is not run), and the task it makes when every run was valid. `reinput`: the store stage
    gave that task another input than the proposal's, at which it is not trivial
    (`new_work.repaired`); its verdicts are then that input's run."""

    proposed: Proposed
    verdicts: tuple[Verdict, ...] = ()
    task: Task | None = None
    reinput: bool = False

    @property
    def outcome(self) -> ProposalOutcome:
        if isinstance(self.proposed.parsed, ParseFailure):
            return "malformed"
        return "valid" if self.task is not None else "invalid"


#: Why a valid proposal is no new work (`Stored.no_new_work`): its task was in the pool before
#: this step or an earlier proposal of the step made it, or it is such a task with its
#: program's variables renamed or with a program that behaves as its does, or an induction
#: task that adds nothing on its program (`repeat`, `repeat:<why>`); its program copies a
#: reference shown in its prompt (`copy`) or behaves as it does (`copy:behaviour`); it is
#: trivial (`trivial:<why>`, see `selfplay.trivial`); or it reproduces a benchmark program
#: (`contaminated:<benchmark>`).
NO_NEW_WORK = ("repeat", "copy", "trivial", "contaminated")


@dataclass(frozen=True)
class Stored:
    """A validated proposal after its task entered the pool (the `store` stage): the task's
    pool id (None unless valid, and for a copy, a trivial or a contaminated task and an
    induction repeat, which stay out of the pool), whether it was new (False for a task the
    pool held), and why it is no new work, if it is not (`NO_NEW_WORK`, "" for new work). A
    duplicate (any task that is no new work) earns no learnability."""

    validated: Validated
    task_id: int | None = None
    added: bool = False
    no_new_work: str = ""

    @property
    def outcome(self) -> ProposalOutcome:
        return self.validated.outcome

    @property
    def duplicate(self) -> bool:
        return bool(self.no_new_work)

    @property
    def failure(self) -> str:
        """Why the proposal is not valid: `malformed:<why it could not be read>`, the first
        failed run's reason (`syntax`, `crash:TypeError`, ..., `too_simple`), or
        `induction_pairs` (every run passed, too few distinct pairs); "" for a valid one."""
        if self.outcome == "malformed":
            return f"malformed:{self.validated.proposed.parsed.reason}"
        if self.outcome == "invalid":
            bad = next((v for v in self.validated.verdicts if not v.ok), None)
            return bad.reason if bad else "induction_pairs"
        return ""

    @property
    def no_new_work_kind(self) -> str:
        """`no_new_work` without its detail: one of `NO_NEW_WORK`, or ""."""
        return self.no_new_work.split(":")[0]


@dataclass(frozen=True)
class Attempted:
    """One solver completion for a pool task, parsed (the `solve` stage)."""

    task_id: int
    task: Task
    purpose: Purpose  # "estimate" (a new proposal's solve rate) or "train" (frontier batch)
    group: int  # the prompt it was sampled from
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    logprobs: tuple[float, ...]
    parsed: Answer | ParseFailure
    finish_reason: str = "stop"  # its completion's (`engine.Completion`); length: cut at the limit
    shown: tuple[str, ...] = ()  # the answers of the worked examples its prompt showed
    layout: str = "answer"  # its prompt's layout (`roles.solver_layouts`)


@dataclass(frozen=True)
class Judged:
    """An attempt after its answer was judged (the `verify` stage); a malformed answer has
    no verdict."""

    attempted: Attempted
    verdict: Verdict | None = None

    @property
    def outcome(self) -> AnswerOutcome:
        if isinstance(self.attempted.parsed, ParseFailure):
            return "malformed"
        return "correct" if self.verdict is not None and self.verdict.ok else "wrong"


@dataclass(frozen=True)
class Rollout:
    """One sampled completion, with what the policy update needs to learn from it (the
    `reward` stage): its reward and its advantage (0 until the advantages are computed)."""

    role: Role
    task_type: str
    group: int  # the completions sampled for one prompt share a group (GRPO's baseline)
    prompt_ids: tuple[int, ...]
    completion_ids: tuple[int, ...]
    # of each completion token under the policy that sampled it; NaN where unknown (a
    # format-constrained sample: see `engine.base.policy_logprobs`)
    logprobs: tuple[float, ...]
    reward: float
    advantage: float = 0.0
    shown: tuple[str, ...] = ()  # a solver rollout's worked examples' answers (`Attempted.shown`)
    layout: str = ""  # a solver rollout's prompt layout (`Attempted.layout`)

    def __post_init__(self) -> None:
        if len(self.completion_ids) != len(self.logprobs):
            raise ValueError("a rollout needs one log-probability per completion token")
