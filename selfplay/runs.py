"""A run's state and its opening and closing: `Run` (everything a run holds, which the stages
read and use), `open_run` (accelerator, model, LoRA, engine, pool, resume) and `close_run`.

A run folder (`run.folder`, default `store/<run>/`) holds the resolved configuration
(`config.yaml`), the task pool (`pool.sqlite` unless `curriculum.store` points elsewhere),
`metrics.jsonl`, `sessions.jsonl` (each session's first step, code, machine and precision),
TensorBoard events, `eval/` results, `checkpoints/` and `run.log` (what the libraries print and
log, kept off the terminal: `selfplay.console`). Opening a run whose
folder has a checkpoint resumes from it: model, optimizer, scheduler, RNG states and step come
back, and the step after the checkpoint is run again. Labeled sets (`seed.labeled`) are
imported into the pool when a run opens (`selfplay.semi`), and an empty pool gets AZR's seed
task. The pool goes back with the model: the tasks proposed and the attempts recorded after
the checkpoint's step (by steps the interruption lost) are deleted and the difficulty
estimates replayed from the attempts that remain (`TaskStore.roll_back`), so the steps run
again draw their references and batches from the pool the lost ones drew from, with the same
seeds (`stages._seed`). A run with no checkpoint in its folder leaves the pool as it is, and
says so when the pool holds later steps.

Launched as several processes (torchrun, `accelerate launch`), each rank opens the run; rank 0
holds the pool (`selfplay.distributed.SharedStore`) and every rank resumes from the same
checkpoint.
"""

from __future__ import annotations

import copy
import os
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

import torch

from selfplay import resume, semi
from selfplay.config import Config, to_dict
from selfplay.config.fields import ConfigError
from selfplay.curriculum import Provenance
from selfplay.datasets.contamination import BenchmarkPrograms
from selfplay.distributed import Ranks, SharedStore, group_timeout
from selfplay.engine import make_engine, resolve_backend
from selfplay.engine.model import cpu_has_bf16, dtype_name, load_model, resolve
from selfplay.judge import Judge
from selfplay.mathcheck import MathChecker
from selfplay.new_work import KEYS, task_keys
from selfplay.provenance import record_session
from selfplay.trainer.checkpoint import Checkpoints
from selfplay.trainer.entropy_control import EntropyControl
from selfplay.trainer.kl_control import KLControl
from selfplay.trainer.schedule import lr_scheduler
from selfplay.trivial import stock_solves
from selfplay.types import Task

if TYPE_CHECKING:
    from collections.abc import Callable

    from accelerate import Accelerator
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

    from selfplay.curriculum import TaskStore
    from selfplay.datasets.importer import ImportReport
    from selfplay.engine.base import Engine
    from selfplay.eval.in_loop import InLoopEval
    from selfplay.executor import Executor
    from selfplay.semi import SelectionLog
    from selfplay.trainer.metrics import ProposalLog, SampleLog

__all__ = ["Run", "run_folder", "check_start", "open_run", "close_run", "IDENTITY_SEED"]


@dataclass(kw_only=True)
class Run:
    """Everything a run holds; the stages read and use it."""

    config: Config
    folder: Path
    accelerator: Accelerator
    model: PreTrainedModel  # the trained policy, wrapped by the accelerator
    tokenizer: PreTrainedTokenizerBase
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    engine: Engine
    executor: Executor
    store: SharedStore | TaskStore  # the pool; shared: rank 0 holds it (`.local`), writes it
    pad_id: int
    ranks: Ranks = field(default_factory=Ranks)  # this process among the run's
    version: str = "step0"  # the weights that generate the current step's samples
    on_stage: Callable[[str], None] | None = None  # told each stage's name as it starts
    evaluator: InLoopEval | None = None  # made at the first evaluation
    reference: Callable | None = None  # frozen initial policy of the KL term (a model)
    math_checker: MathChecker | None = None  # judges math answers (workers start on first use)
    imports: list[ImportReport] | None = None  # reports of the labeled sets imported at the start
    selection_log: SelectionLog | None = None  # when curriculum.selection is trapo
    samples: SampleLog | None = None  # every step's rollouts, when run.log_samples
    proposals: ProposalLog | None = None  # every step's proposals and their verdicts, as well
    # programs of the benchmarks a proposal may not reproduce (`curriculum.decontaminate`)
    benchmarks: BenchmarkPrograms = field(default_factory=BenchmarkPrograms)
    kl: KLControl | None = None  # the KL coefficient (fixed, or adapted: trainer.kl_target)
    entropy: EntropyControl | None = None  # the entropy bonus's (trainer.entropy_target)
    # with one adapter per role (trainer.lora.per_role): whose policy the engine's weights
    # are (None: neither's, after an update); `stages.use_role` loads a role's when needed
    engine_role: str | None = None

    @property
    def judge(self) -> Judge:
        """Judges the solver's answers: the executor, or the math checker for math tasks."""
        return Judge(self.executor, self.math_checker)


def run_folder(config: Config) -> Path:
    return Path(config.run.folder.replace("{run}", config.curriculum.run))


def _resolved(config: Config, folder: Path) -> Config:
    """The configuration with the pool placed in the run folder unless it is set elsewhere,
    and the generation backend that `engine.backend=auto` stands for here."""
    store = config.curriculum.store
    if store == type(config.curriculum)().store:
        store = str(folder / "pool.sqlite")
    asked = config.engine.backend
    engine = replace(config.engine, backend=resolve_backend(asked))
    config = replace(config, curriculum=replace(config.curriculum, store=store), engine=engine)
    return _unconstrained_on_fallback(config) if asked == "auto" else config


def _unconstrained_on_fallback(config: Config) -> Config:
    """`engine.backend=auto` without vLLM: the transformers backend cannot constrain, so a
    recipe that asks for constrained generation runs without it, and says so in one line."""
    g = config.generation
    asked = [k for k in ("constrained_proposals", "constrained_answers") if getattr(g, k)]
    if config.engine.backend != "transformers" or not asked:
        return config
    print(
        f"without vLLM, generation.{' and '.join(asked)} is off "
        "(it needs vLLM's structured output)",
        file=sys.stderr,
    )
    off = replace(g, constrained_proposals=False, constrained_answers=False)
    return replace(config, generation=off)


def _optimizer(model, t, steps: int) -> tuple:
    """AdamW over the trainable parameters, and its learning-rate schedule over a run of
    `steps` steps (`selfplay.trainer.schedule`)."""
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=t.lr, weight_decay=t.weight_decay)
    return optimizer, lr_scheduler(optimizer, t, steps)


def _training_model(config: Config, ranks: Ranks, device: str):
    """(model, tokenizer, source) in float32, with gradient checkpointing and adapters as the
    trainer asks. An embedded model's conversion or an adapter's merge is rank 0's alone; the
    other ranks find it done."""
    ranks.on_main(resolve, config.model)
    model, tokenizer, source = load_model(replace(config.model, dtype="float32"), device)
    if config.trainer.gradient_checkpointing:
        model.gradient_checkpointing_enable()
    if config.trainer.lora.enabled:
        model = _with_adapters(model, config.trainer)
    return model, tokenizer, source


def open_run(config: Config, announce: Callable | None = None) -> tuple[Run, int]:
    """Build (or resume) a run; returns it and the first step to run. Rank 0 calls
    `announce(config, folder, device, processes, precision)` with the resolved configuration
    and the update's precision before the model loads."""
    # accelerate, the store's SQLAlchemy and the executor's RestrictedPython load only when a
    # run opens: importing the loop (for `Run`, or the CLI's help) stays quick
    from accelerate import Accelerator
    from accelerate.state import AcceleratorState
    from accelerate.utils import set_seed

    from selfplay.executor import Executor

    labeled = semi.labeled_paths(config)  # a bad path stops the run before the model loads
    config.generation.check_trained(config.selfplay.train_roles)
    t = config.trainer
    # accelerate keeps one state per process and refuses another mixed precision; a process
    # that opens several runs in turn (benchmarks, tests) gives each its own settings
    AcceleratorState._reset_state()
    accelerator = Accelerator(
        # without cpu=True, accelerate sees no distribution in CPU processes under torchrun
        cpu=not (torch.cuda.is_available() or torch.backends.mps.is_available()),
        mixed_precision=_mixed_precision(t.mixed_precision),
        # the schedule counts optimizer steps; by default accelerate steps it once per process
        step_scheduler_with_optimizer=False,
        kwargs_handlers=[group_timeout(config.run.process_group_timeout_s)],
    )
    ranks = Ranks.of(accelerator, config.run.process_group_timeout_s)
    if t.lora.per_role and ranks.world_size > 1:
        # DDP reduces every trained parameter at every optimizer step; a step's micro-batches
        # on one rank may hold one role only, so the other adapter has no gradient there
        raise ValueError("trainer.lora.per_role runs in one process only for now")
    _set_threads(config.run.threads, ranks)
    folder = run_folder(config)
    config = _resolved(config, folder)
    _check_sharding(accelerator, config)
    latest = ranks.broadcast(Checkpoints(folder).latest())
    if latest is not None:  # before the model loads and the folder's config is rewritten
        ranks.on_main(resume.check_pool, config, folder)
    precision = {"no": "float32"}.get(accelerator.mixed_precision, accelerator.mixed_precision)
    if announce is not None and ranks.is_main:
        announce(config, folder, str(accelerator.device), ranks.world_size, precision)
    set_seed(config.run.seed)
    model, tokenizer, source = _training_model(config, ranks, str(accelerator.device))
    reference = _reference(model) if t.kl_coef > 0 else None
    optimizer, scheduler = _optimizer(model, t, config.run.steps)
    model, optimizer, scheduler = accelerator.prepare(model, optimizer, scheduler)
    # the first of the run in its folder, once the model has loaded: a run that fails before
    # leaves nothing there but its log, and no folder (`selfplay.console`)
    if ranks.is_main:
        folder.mkdir(parents=True, exist_ok=True)
        if latest is None:  # a resumed run's, once its checkpoint has loaded
            resume.save_config(config, folder)
    executor = Executor(config.executor)
    store = SharedStore(
        _open_pool(config, resumed=latest is not None) if ranks.is_main else None, ranks
    )
    start, saved = 1, {}
    if latest is not None:
        saved = resume.restore(accelerator, optimizer, scheduler, config, folder, latest, ranks)
        start = saved["step"] + 1
    engine = make_engine(config, accelerator.unwrap_model(model), tokenizer, source)
    if latest is not None:
        engine.load_weights(accelerator.unwrap_model(model))
    run = Run(
        config=config,
        folder=folder,
        accelerator=accelerator,
        model=model,
        tokenizer=tokenizer,
        optimizer=optimizer,
        scheduler=scheduler,
        engine=engine,
        executor=executor,
        store=store,
        pad_id=tokenizer.pad_token_id,
        reference=reference,
        math_checker=MathChecker(config.mathcheck),
        ranks=ranks,
        benchmarks=_benchmark_programs(config, ranks),
        # an adapted coefficient goes on from the checkpoint's; a fixed one is the config's
        kl=KLControl.of(t, saved),
        entropy=EntropyControl.of(t, saved),
    )
    if ranks.is_main:
        _prepare_pool(run, labeled, start)
        # each session's first step, code, machine and precision (`selfplay.provenance`); a
        # finished run run again trains nothing
        fields = dict(first_step=start, processes=ranks.world_size, update=precision)
        if start <= config.run.steps:
            record_session(folder, dtype=dtype_name(config.model.dtype), **fields)
    return run, start


def _prepare_pool(run: Run, labeled, start: int) -> None:
    """Rank 0 takes the pool back to the step before `start`, imports the labeled sets, seeds
    an empty pool and judges an older pool's abduction tasks before the first step."""
    config, store, executor, folder = run.config, run.store.local, run.executor, run.folder
    resume.roll_back(store, start - 1)
    run.imports = semi.import_labeled(
        store,
        executor,
        labeled,
        folder,
        config.selfplay.task_types,
        run.math_checker,
        limit=config.seed.labeled_limit,
        seed=config.run.seed,
        decontaminate=config.curriculum.decontaminate,
        benchmarks=run.benchmarks,
    )
    if config.curriculum.selection == "trapo":
        resumed = start - 1 if start > 1 else None  # a run with no checkpoint keeps its log
        run.selection_log = semi.SelectionLog(folder / "selection.jsonl", resumed)
    _seed_pool(run)
    _judge_older_abductions(store, executor)
    _key_older_tasks(store)


def _benchmark_programs(config: Config, ranks: Ranks) -> BenchmarkPrograms:
    """The programs proposals are checked against; a benchmark without data is said once."""
    programs = BenchmarkPrograms.load(config.curriculum.decontaminate)
    if programs.missing and ranks.is_main:
        names = ", ".join(f"{name} ({path})" for name, path in programs.missing.items())
        print(
            f"decontamination: no data for {names}; its programs are not checked", file=sys.stderr
        )
    return programs


def _with_adapters(model, trainer):
    """The model wrapped with LoRA adapters (`trainer.lora`); only they train."""
    from selfplay.trainer.lora import wrap

    model = wrap(model, trainer.lora)
    if trainer.gradient_checkpointing:
        # reentrant checkpointing (transformers 4's default) needs a layer input that requires
        # a gradient, which frozen embeddings no longer give
        model.enable_input_require_grads()
    return model


def _reference(model):
    """The initial policy, frozen, for the KL penalty: a LoRA model's base with its adapters
    disabled, else a copy of the initial weights. A resumed run gets the weights the run
    started from again (the model folder it names), not the checkpoint."""
    from selfplay.engine.weights import is_lora
    from selfplay.trainer.lora import AdapterlessReference

    if is_lora(model):
        return AdapterlessReference(model)
    reference = copy.deepcopy(model).eval()
    reference.requires_grad_(False)
    return reference


def _open_pool(config: Config, resumed: bool):
    """Rank 0's `TaskStore` of the run; a resumed run's pool holds it (`resume.check_pool`)."""
    from selfplay.curriculum import TaskStore
    from selfplay.semi.selection import select

    return TaskStore.open(
        config.curriculum.store,
        config.curriculum.run,
        config.curriculum,
        create=not resumed,
        run_config=to_dict(config),
        answers=config.selfplay.solver_samples,
        selector=select,  # the TraPO judgement, applied when curriculum.selection=trapo
    )


def _check_sharding(accelerator, config: Config) -> None:
    """FSDP shards the training model across ranks: the transformers backend, which generates
    with that model, would have every rank wait for the others' shards at every token of
    different prompts. Each rank's vLLM engine holds the whole model instead."""
    from accelerate.utils import DistributedType

    if accelerator.distributed_type != DistributedType.FSDP:
        return
    if config.engine.backend != "vllm":
        raise ValueError(
            "FSDP (from the accelerate config) needs engine.backend=vllm: the transformers "
            "backend generates with the sharded training model; use DDP, or vLLM"
        )
    if config.trainer.lora.rank > 0:
        raise ValueError(
            "LoRA (trainer.lora.rank > 0) with FSDP is not supported: merging the adapters "
            "into the weights pushed to vLLM needs whole tensors; use DDP"
        )


def _set_threads(setting: int, ranks: Ranks) -> None:
    """torch's intra-op threads in this process: `run.threads`, or with 0 the machine's cores
    shared among the run's processes on it (one each where there are more processes than
    cores), so that processes do not oversubscribe the cores. One process keeps torch's own."""
    local = int(os.environ.get("LOCAL_WORLD_SIZE", ranks.world_size))
    if setting == 0 and local == 1:
        return
    threads = setting or max(1, (os.cpu_count() or 1) // local)
    torch.set_num_threads(threads)


def _mixed_precision(setting: str) -> str:
    """auto: bf16 autocast on a GPU that has it, float32 on a CPU. On a CPU that computes
    bfloat16 natively (AVX512-BF16) bf16 made the update 1.2x faster, but the learning
    benchmark's reduced run of SmolLM2 (full fine-tuning, 8 x 8 answers a step) fell from 1 of
    16 train tasks to 0 under it where float32 rose to 3 of 16: ask for it (`bf16`) where a
    benchmark shows it learns, as for the coder model with LoRA (recipes/cpu_learn.yaml). The
    weights, gradients and optimizer state stay float32 either way."""
    on_cpu = not (torch.cuda.is_available() or torch.backends.mps.is_available())
    if setting == "bf16" and on_cpu and not cpu_has_bf16():
        raise ConfigError(
            "trainer.mixed_precision=bf16: this CPU has no native bfloat16 (no AVX512-BF16 or "
            "AMX), so every bfloat16 matmul would be emulated, far slower than float32; set "
            "trainer.mixed_precision=auto (float32 here)"
        )
    if setting != "auto":
        return setting
    if torch.cuda.is_available():
        return "bf16" if torch.cuda.is_bf16_supported() else "no"
    return "no"


# AZR's seed task (program, input): the pool's first task in zero-data mode
IDENTITY_SEED = ("def f(a):\n    return a", "'Hello World'")


def _seed_pool(run: Run) -> None:
    """Zero-data mode starts from AZR's single seed task: the identity function."""
    store = run.store.local
    if len(store) or not run.config.selfplay.seed_identity:
        return
    [verdict] = run.executor.validate([IDENTITY_SEED])
    task = Task(
        "deduction", IDENTITY_SEED[0], (verdict.input,), (verdict.output,), cpu_s=verdict.cpu_s
    )
    store.add_tasks([task], Provenance("seed", 0, "", "identity"), keys=task_keys([task]))


def _judge_older_abductions(store, executor) -> None:
    """An older pool's abduction tasks (schema < 3) were never judged for stock inputs: they
    are judged once, before the first step, as new ones are when they enter the pool
    (`new_work.guessable`), so that `curriculum.guessable_weight` weighs them too."""
    began = time.perf_counter()
    judged = store.judge_guessable(lambda tasks: stock_solves(executor, tasks))
    if judged:
        print(
            f"pool: {judged} abduction tasks of an older pool judged for stock inputs in "
            f"{time.perf_counter() - began:.1f} s",
            file=sys.stderr,
        )


def _key_older_tasks(store) -> None:
    """An older pool's tasks (schema < 4) have no `canonical` or `io` key, which
    `new_work.renamed_repeats` and `behaviour_repeats` look tasks up by: computed once, before
    the first step (a million tasks take minutes), not inside step 1's store stage."""
    began = time.perf_counter()
    keyed = max(store.fill_keys(column, key) for column, key in KEYS.items())
    if keyed:
        print(
            f"pool: {keyed} tasks of an older pool keyed in {time.perf_counter() - began:.1f} s",
            file=sys.stderr,
        )


def close_run(run: Run) -> None:
    run.engine.close()
    if run.evaluator is not None:
        run.evaluator.close()
    run.executor.close()
    if run.math_checker is not None:
        run.math_checker.close()
    run.store.close()


def check_start(config: Config) -> None:
    """Refuse, before the run's folder exists, a labeled set that is not there or a precision
    the CPU lacks (`open_run` would, but after the folder and the log are made)."""
    semi.labeled_paths(config)
    _mixed_precision(config.trainer.mixed_precision)
