"""Configuration: frozen dataclasses with one line of documentation per field.

Every knob of the system is a field here, with its default; nothing else silently overrides it.
A recipe (YAML) only overrides fields; `section.field=value` arguments on the command line
override the recipe; the resolved configuration is written into the run folder. Unknown keys,
wrong types and out-of-range values are refused with the dotted name of the field.

`selfplay config` prints every field with its type, default and documentation. This package
depends on nothing but itself and `selfplay.types`: the machinery (mapping <-> dataclass,
overrides, errors) is in `fields.py`; the `curriculum` and `trainer.lora` sections are in
`curriculum.py` and `lora.py`; this module holds the other sections and `Config`. A field with a
fixed set of values is a `Literal`, which that machinery checks and documents; a section's
`check` does only range and cross-field checks.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, ClassVar, Literal, get_args

from selfplay.config.curriculum import LEARNABILITY_SHAPES, CurriculumConfig, LearnabilityShape
from selfplay.config.fields import (
    Checked,
    ConfigError,
    from_dict,
    knob,
    not_negative,
    positive,
    read_data,
    section,
    to_dict,
)
from selfplay.config.fields import describe as describe_fields
from selfplay.config.lora import LoraConfig
from selfplay.config.roles import RolesConfig
from selfplay.config.trainer import AdvantageEstimator, LrSchedule, TrainerConfig
from selfplay.types import TASK_TYPES, Role, TaskType

__all__ = [
    "knob",
    "ExecutorConfig",
    "ISOLATION_LAYERS",
    "IsolationLayer",
    "CurriculumConfig",
    "LEARNABILITY_SHAPES",
    "ModelConfig",
    "EngineConfig",
    "GenerationConfig",
    "LoraConfig",
    "RolesConfig",
    "TrainerConfig",
    "AdvantageEstimator",
    "LrSchedule",
    "MathCheckConfig",
    "SeedConfig",
    "Config",
    "ConfigError",
    "load",
    "from_dict",
    "to_dict",
    "describe",
]


#: the opt-in modules of `selfplay.executor.modules.OPTIONAL_MODULES` (a test keeps them equal;
#: naming them here keeps the sandbox's module tables out of every configuration import)
ExtraModule = Literal["random", "hashlib"]
#: the layers `ExecutorConfig.isolation` may require: bubblewrap's namespaces (set up by
#: `selfplay.executor.runner`) and the three `selfplay.executor.hardening` applies
IsolationLayer = Literal["namespaces", "landlock", "seccomp", "rlimits"]
ISOLATION_LAYERS: tuple[IsolationLayer, ...] = get_args(IsolationLayer)
Layer = Annotated[IsolationLayer, "isolation layer"]  # names a bad value in the error


@dataclass(frozen=True)
class ExecutorConfig(Checked):
    """The sandboxed executor that validates tasks and verifies answers."""

    workers: int = knob(0, "sandbox worker processes; 0 = one per CPU core (at least 2)")
    run_timeout_s: float = knob(1.0, "CPU seconds one validation run may use")
    verify_time_factor: float = knob(
        20.0, "a verification run may use this multiple of its task's CPU time at validation"
    )
    verify_time_floor_s: float = knob(
        0.002, "but never less than this many CPU seconds (a CRUXEval run takes ~15 us)"
    )
    wall_slack_s: float = knob(
        1.0, "a run is killed after 2 x its CPU limit + this many wall seconds"
    )
    memory_mb: int = knob(512, "address space a sandboxed process may add beyond its start, MiB")
    compilers: int = knob(
        -1,
        "trusted helper processes that check and compile a large batch's programs while the "
        "sandbox runs them (`executor/compiler.py`); -1 = one per CPU core, 0 = none",
    )
    runs_per_child: int = knob(
        256, "runs one forked child executes before it is replaced (1 = a fresh process per run)"
    )
    always_rerun: bool = knob(
        False,
        "validate every case with two runs in two workers (two hash seeds); by default only a "
        "case that can tell two processes apart runs twice (executor/validate.py)",
    )
    max_program_chars: int = knob(20_000, "longest program accepted")
    max_value_chars: int = knob(20_000, "longest canonical text of an input, output or answer")
    max_value_depth: int = knob(32, "deepest nesting of an input, output or answer")
    max_value_items: int = knob(10_000, "most items in one input, output or answer")
    max_int_digits: int = knob(4_300, "most digits of an int in an input, output or answer")
    extra_modules: tuple[ExtraModule, ...] = knob(
        (), "opt-in modules for benchmark test code (random is reseeded every run)"
    )
    hash_seed: int = knob(1, "PYTHONHASHSEED of worker 0; worker i uses hash_seed + i")
    startup_timeout_s: float = knob(30.0, "seconds a worker may take to start")
    batch_grace_s: float = knob(
        10.0, "a worker whose batch overruns the sum of its runs' limits by this is killed"
    )
    isolation: tuple[Layer, ...] = knob(ISOLATION_LAYERS, "isolation layers that must be active")
    accept_missing: tuple[Layer, ...] = knob(
        (), "layers of `isolation` a run may go without when the machine lacks them"
    )
    bwrap: str = knob("bwrap", "bubblewrap executable used for the namespaces layer")

    def check(self) -> None:
        if self.workers == 1:
            raise ConfigError("executor.workers must be 0 or at least 2 (determinism needs two)")
        if self.compilers < -1:
            raise ConfigError("executor.compilers must be -1 (one per core), 0 or more")
        positive(self, "run_timeout_s", "verify_time_factor", "verify_time_floor_s", "memory_mb")
        positive(self, "runs_per_child", "max_value_chars", "max_value_depth", "max_value_items")
        positive(self, "max_program_chars", "startup_timeout_s")  # 0: nothing runs, nothing starts
        not_negative(self, "wall_slack_s", "batch_grace_s", "max_int_digits")


@dataclass(frozen=True)
class RewardConfig(Checked):
    """Rewards of both roles (see selfplay/trainer/rewards.py)."""

    learnability: LearnabilityShape = knob("azr", "proposer reward shape of a valid task")
    proposer_invalid: float = knob(-0.5, "proposer reward for a task the executor refuses")
    proposer_duplicate: float = knob(
        -1.0,
        "proposer reward for a valid task that is no new work (in the pool, a copy of a "
        "reference, trivial): what an unreadable one earns (selfplay/trainer/rewards.py)",
    )
    proposer_malformed: float = knob(-1.0, "proposer reward when no task can be read")
    repetition: float = knob(
        0.0,
        "R-Zero's batch repetition penalty: a new task's learnability loses this times the "
        "share of the step's valid proposals in its cluster (selfplay/trainer/repetition.py)",
    )
    repetition_similarity: float = knob(
        0.5,
        "token Jaccard similarity from which two proposals' programs share a cluster, and "
        "above which the novelty penalty grows",
    )
    novelty: float = knob(
        0.0,
        "novelty penalty: a new task loses up to this much as its program nears one the pool "
        "held before the step (selfplay/trainer/repetition.py)",
    )
    novelty_window: int = knob(512, "the pool's newest tasks the novelty penalty compares with")
    brevity: float = knob(
        0.0,
        "brevity penalty: a new deduction or abduction task whose functions have s statements, "
        "fewer than reward.brevity_statements, loses this times (1 - s / brevity_statements), "
        "down to what a copy or a refusal earns (its usable range: "
        "selfplay/proposer/complexity.py)",
    )
    brevity_statements: int = knob(
        4, "the statement count from which the brevity penalty is 0 (CRUXEval's median: 4)"
    )
    solver_wrong: float = knob(-0.5, "solver reward for a well-formed wrong answer")
    solver_malformed: float = knob(-1.0, "solver reward when no answer can be read")

    def check(self) -> None:
        if min(self.repetition, self.novelty, self.brevity) < 0:
            raise ConfigError("reward.repetition, reward.novelty and reward.brevity must be >= 0")
        if not 0 < self.repetition_similarity <= 1:
            raise ConfigError("reward.repetition_similarity must be in (0, 1]")
        positive(self, "novelty_window")
        positive(self, "brevity_statements")


@dataclass(frozen=True)
class ModelConfig(Checked):
    """The one model that plays both roles."""

    name: str = knob(
        "smollm2-135m-instruct",
        "smollm2-135m-instruct or qwen2.5-coder-0.5b-instruct (embedded), a local folder or hub id",
    )
    dtype: Literal["auto", "float32", "bfloat16", "float16"] = knob(
        "auto", "weights' dtype; auto: bfloat16 on GPU or a CPU with native bf16, else float32"
    )
    cache_dir: str = knob(
        "", "where prepared models live; empty: $SELFPLAY_MODEL_CACHE or ~/.cache/selfplay/models"
    )
    template: Literal["auto", "chat", "plain"] = knob(
        "auto", "prompt format; auto: the chat template if the tokenizer has one, else plain"
    )


@dataclass(frozen=True)
class EngineConfig(Checked):
    """The generation backend."""

    backend: Literal["auto", "vllm", "transformers"] = knob(
        "auto",
        "generation backend: auto is vllm where it imports, else transformers (which generates "
        "with the training model itself)",
    )
    batch_size: int = knob(64, "transformers: most sequences decoded together in one batch")
    max_model_len: int = knob(4096, "longest prompt plus completion, in tokens")
    seed: int = knob(0, "seed of the engine's sampler when a request gives none")
    vllm_gpu_memory_utilization: float = knob(
        0.3,
        "vllm: share of accelerator memory (CPU: of NUMA node 0's) for the process and KV cache",
    )
    vllm_kv_cache_gib: float = knob(
        0.0,
        "vllm: KV cache in GiB, whatever else the process holds (0: what "
        "vllm_gpu_memory_utilization leaves); on CPU that share is of the first NUMA node's "
        "memory as reported at start, not all RAM, so a size keeps a recipe the same anywhere",
    )
    vllm_enforce_eager: bool = knob(True, "vllm: no graph capture (faster start, slower decode)")
    vllm_sleep_level: Literal[1, 2] = knob(
        2, "vllm on GPU: 1 offloads weights to CPU while asleep, 2 discards them (they are pushed)"
    )
    vllm_in_process: bool = knob(
        True, "vllm: run the engine core in this process, so weight pushes pass tensors directly"
    )
    vllm_cpu_threads: int = knob(
        0, "vllm on CPU: torch threads it generates with (0 = vLLM's own choice, one)"
    )

    def check(self) -> None:
        positive(self, "batch_size", "max_model_len", "vllm_gpu_memory_utilization")
        if self.vllm_kv_cache_gib < 0:
            raise ConfigError("engine.vllm_kv_cache_gib must be 0 (from the share) or positive")
        if self.vllm_cpu_threads < 0:
            raise ConfigError("engine.vllm_cpu_threads must be 0 (vLLM's choice) or positive")


@dataclass(frozen=True)
class GenerationConfig(Checked):
    """Sampling for both roles."""

    temperature: float = knob(
        1.0, "sampling temperature (1 samples the policy itself; SmolLM2-135M does better at 0.7)"
    )
    solve_temperature: float = knob(
        -1.0,
        "the solver's own sampling temperature: its answers are sampled and trained at it, "
        "the proposals at `temperature` (-1: `temperature` for both roles); the entropy and "
        "KL the update reports are then of a sharper distribution (trainer.entropy_floor); 0 "
        "is refused for a trained solver (its groups would have no advantage)",
    )
    top_p: float = knob(1.0, "nucleus sampling: keep the smallest set of tokens with this mass")
    max_new_tokens: int = knob(1024, "longest completion, in tokens")
    constrained_proposals: bool = knob(
        False,
        "keep proposals inside their layout (a regex per task type; vLLM structured output, "
        "refused by the transformers backend)",
    )
    constrained_answers: bool = knob(
        False,
        "keep solver answers in their notation, e.g. strings in quotes (a regex per task "
        "type, selfplay/solver/layout.py; vLLM structured output, refused by transformers)",
    )

    avoid_reference_ngrams: int = knob(
        0,
        "steer deduction and abduction proposals away from copying their prompt's references: "
        "a token that would complete an n-gram of this many tokens of a reference's program "
        "loses `avoid_reference_penalty` logits (selfplay/engine/ngrams.py); 0: off",
    )
    avoid_reference_penalty: float = knob(
        5.0, "logits taken from such a token (finite: a token a constraint forces stays)"
    )

    ignored: ClassVar[dict[str, str]] = {
        "samples": "every stage sets its own count (selfplay.proposal_samples, "
        "selfplay.attempts, selfplay.solver_samples)"
    }

    def check(self) -> None:
        positive(self, "max_new_tokens", "avoid_reference_penalty")
        if self.avoid_reference_ngrams == 1 or self.avoid_reference_ngrams < 0:
            raise ConfigError("generation.avoid_reference_ngrams must be 0 (off) or at least 2")
        if self.temperature < 0 or not 0 < self.top_p <= 1:
            raise ConfigError("generation: temperature must be >= 0 and 0 < top_p <= 1")
        if self.solve_temperature < 0 and self.solve_temperature != -1:
            raise ConfigError("generation.solve_temperature must be >= 0, or -1 (`temperature`)")

    def temperature_of(self, role: str) -> float:
        """The temperature `role` ("propose" or "solve") samples and is trained at."""
        if role == "solve" and self.solve_temperature != -1:
            return self.solve_temperature
        return self.temperature

    def check_trained(self, roles) -> None:
        """A trained role sampled at temperature 0 answers each prompt the same way every time:
        its groups have no spread, so no advantage and nothing to learn; refused at a run's
        start (evaluation and benchmarks sample greedily on purpose, outside a run)."""
        for role in roles:
            if self.temperature_of(role) == 0:
                which = (
                    "solve_temperature"
                    if role == "solve" and self.solve_temperature == 0
                    else "temperature"
                )
                raise ConfigError(
                    f"generation.{which}=0 with the {role} role trained (selfplay.train_roles): "
                    "greedy samples of one prompt are all alike, so their advantages are 0 "
                    "and the update learns nothing; sample that role above 0"
                )


@dataclass(frozen=True)
class MathCheckConfig(Checked):
    """The math answer checker (selfplay/mathcheck/): math-verify in worker processes."""

    workers: int = knob(1, "checker worker processes")
    timeout_s: float = knob(5.0, "seconds one answer's check may take before it counts as wrong")
    memory_mb: int = knob(1024, "address space a checker worker may add beyond its start, MiB")
    startup_timeout_s: float = knob(60.0, "seconds a checker worker may take to start")

    def check(self) -> None:
        positive(self, "workers", "timeout_s", "memory_mb", "startup_timeout_s")


@dataclass(frozen=True)
class SelfPlayConfig(Checked):
    """What one step proposes and solves."""

    task_types: tuple[TaskType, ...] = knob(
        ("deduction", "abduction", "induction"), "task types the model proposes and solves"
    )
    proposals: int = knob(8, "proposer prompts per task type per step")
    proposal_samples: int = knob(
        1, "proposals sampled per proposer prompt (more than 1 gives grpo a group)"
    )
    attempts: int = knob(
        4, "solver answers to each valid proposal, to estimate its solve rate (trained on too)"
    )
    solver_tasks: int = knob(8, "tasks per step in the solver's frontier batch from the pool")
    solver_samples: int = knob(
        4, "answers per frontier task (the group of GRPO's baseline; the azr sampler weighs by it)"
    )
    seed_identity: bool = knob(
        True, "start an empty pool with AZR's one seed task, the identity function"
    )
    seed_proposals: int = knob(
        0,
        "before the first step, proposals sampled per proposer prompt (no training) whose new, "
        "non-trivial tasks seed the pool, as AZR fills its buffers (0: off; selfplay.self_seed)",
    )
    seed_round: int = knob(
        32,
        "the seeding's samples per proposer prompt in one round: each round draws its own "
        "topics and references from the pool the rounds before filled, and a run stopped "
        "during the seeding resumes after its last finished round",
    )
    train_roles: tuple[Role, ...] = knob(
        ("propose", "solve"), "roles whose rollouts train the model"
    )

    def check(self) -> None:
        if not self.task_types:
            raise ConfigError(f"selfplay.task_types: choose from {', '.join(TASK_TYPES)}")
        positive(
            self,
            "proposals",
            "proposal_samples",
            "attempts",
            "solver_tasks",
            "solver_samples",
            "seed_round",
        )
        if self.seed_proposals < 0:
            raise ConfigError("selfplay.seed_proposals: 0 (off) or more")


#: the levels of `selfplay.console.LEVELS` ('' shows no library records on the terminal)
LogLevel = Literal["", "DEBUG", "INFO", "WARNING", "ERROR"]


#: CRUXEval's prompt formats (`selfplay.eval.cruxeval.PROMPT_FORMATS`; a test keeps them equal)
CruxevalFormat = Literal["direct", "cot", "completion", "selfplay"]

#: the benchmarks `selfplay.eval` knows (a test keeps them equal)
EvalBenchmark = Literal["cruxeval", "generated", "gsm8k", "math500", "mbpp", "humaneval"]
EVAL_BENCHMARKS: tuple[EvalBenchmark, ...] = get_args(EvalBenchmark)


@dataclass(frozen=True)
class RunConfig(Checked):
    """The run around the steps: its folder, length, checkpoints, evaluation and logging."""

    folder: str = knob("store/{run}", "run folder; {run} becomes curriculum.run")
    steps: int = knob(20, "training steps")
    seed: int = knob(0, "seed of torch, numpy and generation")
    threads: int = knob(
        0,
        "torch threads per process; 0: torch's default for one process, the machine's cores "
        "shared among the processes on it for several",
    )
    process_group_timeout_s: int = knob(
        1800,
        "several processes: how long a rank waits in a collective (for the others' share of a "
        "stage or an evaluation, rank 0's pool, a checkpoint) before the run stops with an "
        "error; 1800 is torch's default for gloo (NCCL's is 600)",
    )
    checkpoint_every: int = knob(5, "save a checkpoint every this many steps (and at the end)")
    keep_checkpoints: int = knob(2, "checkpoints kept on disk")
    eval_every: int = knob(0, "evaluate every N steps, before the first, after the last; 0: never")
    eval_benchmarks: tuple[EvalBenchmark, ...] = knob(
        ("cruxeval",), "benchmarks of the in-loop evaluation"
    )
    eval_problems: int = knob(100, "first problems of each benchmark evaluated (0 = all)")
    eval_prompt_formats: tuple[CruxevalFormat, ...] = knob(
        ("direct",),
        "CRUXEval prompt formats evaluated: the published direct one (headline figures), cot, "
        "completion (the direct prompt as a text to continue, as the benchmark's harness asks "
        "open models), or the solver's own (selfplay, as in training); each gives its own "
        "subsets",
    )
    eval_data: str = knob("", "CRUXEval JSONL; empty: cruxeval/cruxeval.jsonl in $SELFPLAY_DATA")
    tensorboard: bool = knob(True, "write TensorBoard events into the run folder")
    log_samples: bool = knob(
        True, "write every rollout to samples.jsonl, each proposal judged to proposals.jsonl"
    )
    wandb_project: str = knob("", "log to this W&B project as well (empty = no W&B)")
    log_level: LogLevel = knob(
        "",
        "the libraries' log records (vLLM, transformers, torch) from this level are shown on "
        "the terminal too; '': none (run.log in the run folder keeps them; --verbose: INFO)",
    )

    def check(self) -> None:
        positive(self, "steps", "checkpoint_every", "keep_checkpoints", "process_group_timeout_s")
        if self.threads < 0:
            raise ConfigError(f"run.threads: {self.threads}; use 0 (automatic) or a count")
        not_negative(self, "eval_every", "eval_problems")
        if not self.eval_benchmarks:
            raise ConfigError(f"run.eval_benchmarks: empty; choose from {list(EVAL_BENCHMARKS)}")
        formats = self.eval_prompt_formats
        if not formats or len(set(formats)) < len(formats):
            raise ConfigError(
                "run.eval_prompt_formats: each of direct, cot, completion, selfplay at most once"
            )


@dataclass(frozen=True)
class SeedConfig(Checked):
    """Data imported into a run's pool when it starts (again on resume: imports dedup)."""

    labeled: str | tuple[str, ...] = knob(
        (), "labeled sets (a path or a list; {data} is the data folder): origin labeled"
    )
    labeled_limit: int = knob(
        0, "records used from each labeled set: a random sample drawn with run.seed (0 = all)"
    )

    def check(self) -> None:
        if isinstance(self.labeled, str):  # `seed.labeled=PATH` on the command line
            object.__setattr__(self, "labeled", (self.labeled,) if self.labeled else ())
        if self.labeled_limit < 0:
            raise ConfigError("seed.labeled_limit must be 0 (all records) or positive")


@dataclass(frozen=True)
class Config:
    """A whole run."""

    executor: ExecutorConfig = section(ExecutorConfig, "the sandboxed executor")
    run: RunConfig = section(RunConfig, "the run: folder, length, checkpoints, evaluation")
    model: ModelConfig = section(ModelConfig, "the model that plays both roles")
    engine: EngineConfig = section(EngineConfig, "the generation backend")
    generation: GenerationConfig = section(GenerationConfig, "sampling for both roles")
    roles: RolesConfig = section(RolesConfig, "proposer and solver prompts")
    selfplay: SelfPlayConfig = section(SelfPlayConfig, "what one step proposes and solves")
    trainer: TrainerConfig = section(TrainerConfig, "the policy update")
    reward: RewardConfig = section(RewardConfig, "rewards of the proposer and the solver")
    curriculum: CurriculumConfig = section(CurriculumConfig, "the task pool and its sampler")
    mathcheck: MathCheckConfig = section(MathCheckConfig, "the math answer checker")
    seed: SeedConfig = section(SeedConfig, "data imported into the pool when a run starts")


def load(recipe: str | Path | None = None, overrides: Sequence[str] = (), cls=None):
    """Defaults, then the recipe's values, then `a.b=value` overrides (values parsed as YAML)."""
    return from_dict(cls or Config, read_data(recipe, overrides))


def describe(cls=None, prefix: str = "") -> Iterator[str]:
    """One line per field: dotted name, type, default and documentation."""
    return describe_fields(cls or Config, prefix)
