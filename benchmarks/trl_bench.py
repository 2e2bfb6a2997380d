"""One GRPO step of selfplay against one of TRL's `GRPOTrainer`, same model, prompts and sizes.

    scripts/install.sh --bench                                 # trl (benchmark-only)
    python benchmarks/trl_bench.py                             # embedded SmolLM2-135M
    python benchmarks/trl_bench.py --model qwen2.5-coder-0.5b-instruct
    python benchmarks/trl_bench.py --engine transformers       # both on transformers generation

What is the same on both sides:
  prompts     `--tasks` fixed deduction tasks (predict a short program's output; the generated
              family of `selfplay.datasets.generated`, seeded), rendered once by selfplay's
              solver prompt and chat template (no thinking, the answer's opening prefilled);
              TRL gets the rendered text as plain-text prompts, so both condition on the same
              tokens. selfplay's pool holds exactly these tasks and its sampler draws all of
              them every step; TRL's data set is these tasks, in order.
  group       `--samples` answers per prompt (GRPO's group), advantages normalised per group
              (selfplay `trainer.advantage=grpo`; TRL `scale_rewards="group"`)
  length      every answer exactly `--answer-tokens` tokens (end of sequence and stop strings
              ignored on both sides: selfplay's engine with `ignore_eos`, TRL with
              `min_new_tokens`/`min_tokens` equal to `max_completion_length`), so that both
              train on the same token count; with `--natural-length` TRL stops at the end of
              sequence and selfplay at its stop strings as well (the answer's closing fence),
              and the token counts are reported, not equal
  reward      the same function: the answer read by selfplay's parser and judged by its
              sandboxed executor; 1 right, -0.5 wrong, -1 unreadable (selfplay's defaults)
  update      one optimizer step over all tasks x samples answers, micro-batches of
              `--micro-batch`, token-level loss (TRL `loss_type="dapo"`), PPO clip 0.2 on both
              sides, no KL term (TRL's default beta 0), torch's AdamW at `--lr` (TRL's fused
              default switched off), gradient clipping at 1.0, no gradient checkpointing (TRL's
              default switched off), float32 weights and update (`--precision bf16` for a CPU
              with native bfloat16 or a GPU)
  engine      `--engine vllm` (default where vLLM imports): selfplay's in-process vLLM engine
              and TRL's vLLM colocate mode (`use_vllm=True, vllm_mode="colocate"`), both with
              `--vllm-memory` of the machine's memory for the KV cache; `--engine
              transformers`: both generate with transformers' `generate`. If TRL fails with
              vLLM, the summary says why (`trl_vllm_error`) and the bench runs both sides on
              transformers instead (`engine` in the summary says which ran). The two vLLM
              set-ups are each system's own: selfplay's engine runs eagerly
              (`engine.vllm_enforce_eager`) and, on a GPU, sleeps through the update, while
              TRL's captures CUDA graphs and stays awake; peak RSS leaves GPU memory out.

Each side runs in a fresh process of its own (so that neither inherits the other's memory or
caches), with `--warmup` untimed steps before `--steps` timed ones; a step is everything
between two optimizer steps: generation, judging, advantages, the update, and the new weights
into the engine (TRL: from `on_step_begin` to `on_step_end`, which covers its generation in
`_prepare_inputs`). Model loading and engine start-up are not timed on either side.

Prints one JSON line per side (per-step seconds, tokens, reward) and a last summary line with
`selfplay_samples_per_s`, `trl_samples_per_s` (answers per second of step, median over the
timed steps), `ratio` (selfplay over TRL; target >= 1.5), `selfplay_peak_rss_gib`,
`trl_peak_rss_gib` (each process's peak resident memory, the in-process vLLM engine included),
the completion tokens per step of each side (`same_tokens`: equal), and the engine used.

Where the time differs, in what the two implementations do per step (read from TRL 1.16's
grpo_trainer.py): selfplay takes the old log-probabilities from the engine that sampled
(the ratio's denominator), while TRL runs a forward pass of the policy over every answer to
get them when it generates with vLLM (its importance-sampling correction) and whenever
answers are reused; selfplay runs a prompt once for all answers of its group
(`trainer.share_prompts`) where TRL runs each answer with its own copy of the prompt; selfplay
skips the forward and backward passes of answers whose advantage is 0 (exactly: they add 0 to
the loss and its gradient) where TRL runs them. Measurements: docs/results.md.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))

REWARD_SEED = 0  # which tasks of the generated family are the fixed prompts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="smollm2-135m-instruct", help="a model name or folder")
    parser.add_argument(
        "--engine", choices=["vllm", "transformers"], help="default: vllm if it imports"
    )
    parser.add_argument("--tasks", type=int, default=8, help="prompts per step")
    parser.add_argument("--samples", type=int, default=8, help="answers per prompt (the group)")
    parser.add_argument("--answer-tokens", type=int, default=64)
    parser.add_argument("--natural-length", action="store_true", help="stop at end of sequence")
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--lr", type=float, default=1e-6)
    parser.add_argument("--precision", choices=["float32", "bf16"], default="float32")
    parser.add_argument("--level", choices=["easy", "standard"], default="easy")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps first")
    parser.add_argument("--steps", type=int, default=2, help="timed steps")
    parser.add_argument("--vllm-memory", type=float, default=0.1, help="of memory, KV cache")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: all cores)")
    parser.add_argument("--side-timeout", type=int, default=1800, help="seconds per side")
    parser.add_argument("--side", choices=["selfplay", "trl"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if (args.tasks * args.samples) % args.micro_batch:
        parser.error("--micro-batch must divide --tasks x --samples (TRL's accumulation steps)")
    if args.engine is None:
        from selfplay.engine.vllm_backend import vllm_available

        args.engine = "vllm" if vllm_available() else "transformers"
    if args.side:
        record = (side_selfplay if args.side == "selfplay" else side_trl)(args)
        record["peak_rss_gib"] = round(
            resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2
        )
        print(json.dumps(record), flush=True)
        return

    began = time.perf_counter()
    ours = launch(args, "selfplay", args.engine)
    theirs = launch(args, "trl", args.engine)
    engine, vllm_error, ours_on_vllm = args.engine, None, None
    if args.engine == "vllm" and "error" in theirs:
        # TRL's colocate mode did not run here: both sides on transformers, said so; selfplay's
        # own vLLM figure is kept beside them (what each system gives on this machine)
        vllm_error, engine, ours_on_vllm = theirs["error"], "transformers", ours
        print(json.dumps({**theirs, "phase": "trl on vllm failed"}), flush=True)
        ours = launch(args, "selfplay", engine)
        theirs = launch(args, "trl", engine)
    for record in (ours_on_vllm, ours, theirs):
        if record:
            print(json.dumps(record), flush=True)
    failed = [r["side"] for r in (ours, theirs) if "error" in r]
    summary = {
        "phase": "summary",
        "model": args.model,
        "engine": engine,
        "trl_vllm_error": vllm_error,
        "failed": failed,
        "tasks": args.tasks,
        "samples": args.samples,
        "answer_tokens": None if args.natural_length else args.answer_tokens,
        "precision": args.precision,
        "selfplay_samples_per_s": ours.get("samples_per_s"),
        "trl_samples_per_s": theirs.get("samples_per_s"),
        "ratio": None
        if failed
        else round(ours["samples_per_s"] / max(theirs["samples_per_s"], 1e-9), 3),
        "selfplay_step_s": ours.get("step_s"),
        "trl_step_s": theirs.get("step_s"),
        "selfplay_completion_tokens": ours.get("completion_tokens"),
        "trl_completion_tokens": theirs.get("completion_tokens"),
        "same_tokens": not failed
        and ours["completion_tokens_per_step"] == theirs["completion_tokens_per_step"],
        # answers whose advantage is 0 add nothing to the gradient: selfplay skips their passes
        "selfplay_trained_tokens": ours.get("trained_tokens_per_step"),
        "selfplay_peak_rss_gib": ours.get("peak_rss_gib"),
        "trl_peak_rss_gib": theirs.get("peak_rss_gib"),
        "selfplay_vllm_samples_per_s": ours_on_vllm and ours_on_vllm.get("samples_per_s"),
        "wall_s": round(time.perf_counter() - began, 1),
        "target_ratio": 1.5,
    }
    print(json.dumps(summary), flush=True)


def launch(args, side: str, engine: str) -> dict:
    """Run one side in a fresh process; its JSON record (or the error that ended it)."""
    command = [sys.executable, __file__, "--side", side, "--engine", engine]
    for key in (
        "model",
        "tasks",
        "samples",
        "answer_tokens",
        "micro_batch",
        "lr",
        "precision",
        "level",
        "warmup",
        "steps",
        "vllm_memory",
        "threads",
    ):
        command += [f"--{key.replace('_', '-')}", str(getattr(args, key))]
    if args.natural_length:
        command.append("--natural-length")
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, cwd=ROOT, timeout=args.side_timeout
        )
    except subprocess.TimeoutExpired:
        return {"side": side, "engine": engine, "error": f"no result in {args.side_timeout} s"}
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode == 0 and lines:
        return json.loads(lines[-1])
    tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or [""]
    return {"side": side, "engine": engine, "error": f"exit {done.returncode}: {tail[0][:400]}"}


# ---------------------------------------------------------------------------------------------
# The fixed prompts and the reward, shared by both sides


def fixed_tasks(executor, args):
    from selfplay.datasets.generated import generated_tasks

    return generated_tasks(executor, args.tasks, "train", seed=REWARD_SEED, level=args.level)


def outcome_rewards(config) -> dict[str, float]:
    r = config.reward
    return {"correct": 1.0, "wrong": r.solver_wrong, "malformed": r.solver_malformed}


def bench_config(args, folder: str):
    """The selfplay configuration both sides take their settings from."""
    from selfplay.config import load

    return load(
        None,
        [
            f"run.folder={folder}",
            "run.tensorboard=false",
            f"run.threads={args.threads}",
            f"model.name={args.model}",
            f"model.dtype={'float32' if args.precision == 'float32' else 'bfloat16'}",
            f"engine.backend={args.engine}",
            f"engine.vllm_gpu_memory_utilization={args.vllm_memory}",
            "selfplay.seed_identity=false",
            "selfplay.train_roles=[solve]",
            "selfplay.task_types=[deduction]",
            f"selfplay.solver_tasks={args.tasks}",
            f"selfplay.solver_samples={args.samples}",
            "generation.temperature=1.0",
            "generation.top_p=1.0",
            "generation.constrained_answers=false",
            f"generation.max_new_tokens={args.answer_tokens}",
            "roles.think=false",
            "roles.prefill=true",
            "trainer.advantage=grpo",
            "trainer.aggregation=token",
            "trainer.clip_low=0.2",
            "trainer.clip_high=0.2",
            "trainer.kl_coef=0.0",
            f"trainer.lr={args.lr}",
            f"trainer.micro_batch={args.micro_batch}",
            "trainer.mini_batches=1",
            "trainer.ppo_epochs=1",
            "trainer.max_grad_norm=1.0",
            f"trainer.mixed_precision={'no' if args.precision == 'float32' else 'bf16'}",
        ],
    )


def _step_stats(
    seconds: list[float], warmup: int, tokens: list[int], correct: list[float], answers: int
) -> dict:
    """A side's record: `seconds` of every step, the timed steps' completion tokens and share of
    answers judged right."""
    step_s = statistics.median(seconds[warmup:])
    return {
        "step_s": round(step_s, 2),
        "steps_s": [round(s, 2) for s in seconds],
        "samples_per_s": round(answers / step_s, 3),
        "completion_tokens": tokens[-1] if tokens else None,
        "completion_tokens_per_step": tokens,
        "correct_share": round(statistics.mean(correct), 4) if correct else None,
    }


# ---------------------------------------------------------------------------------------------
# selfplay: the solver's half of a self-play step, as the loop runs it


def side_selfplay(args) -> dict:
    from dataclasses import replace

    from learning_bench import train_step

    from selfplay.curriculum import Provenance
    from selfplay.runs import close_run, open_run

    with tempfile.TemporaryDirectory() as tmp:
        run, _ = open_run(bench_config(args, f"{tmp}/run"))
        try:
            tasks = fixed_tasks(run.executor, args)
            run.store.add_tasks(tasks, Provenance("seed", 0, "", "trl-bench"))
            if not args.natural_length:
                generate = run.engine.generate

                def fixed_length(prompts, params):
                    return generate(prompts, replace(params, ignore_eos=True, stop=()))

                run.engine.generate = fixed_length
            records = [train_step(run, step) for step in range(1, args.warmup + args.steps + 1)]
            timed = records[args.warmup :]
        finally:
            close_run(run)
    answers = args.tasks * args.samples
    if any(r["answers"] != answers for r in records):
        raise SystemExit(
            f"selfplay answered {[r['answers'] for r in records]}, not {answers} a step"
        )
    return {
        "side": "selfplay",
        "engine": args.engine,
        "trained_tokens_per_step": [r["trained_tokens"] for r in timed],
        **_step_stats(
            [r["step_s"] for r in records],
            args.warmup,
            [r["generated_tokens"] for r in timed],
            [r["train_reward"] for r in timed],
            answers,
        ),
    }


# ---------------------------------------------------------------------------------------------
# TRL: GRPOTrainer on the same prompts, reward and sizes


def side_trl(args) -> dict:
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import GRPOTrainer

    from selfplay.engine.model import resolve
    from selfplay.engine.template import render
    from selfplay.executor import Executor
    from selfplay.judge import Judge
    from selfplay.solver import parse_answer, reply, solver_prompt
    from selfplay.types import Answer

    if args.threads:
        torch.set_num_threads(args.threads)
    answers = args.tasks * args.samples
    with tempfile.TemporaryDirectory() as tmp:
        config = bench_config(args, f"{tmp}/run")
        path = resolve(config.model)
        executor = Executor(config.executor)
        judge, table = Judge(executor), outcome_rewards(config)
        try:
            tasks = fixed_tasks(executor, args)
            chats = [solver_prompt(t, config.roles) for t in tasks]
            tokenizer = AutoTokenizer.from_pretrained(path)
            data = Dataset.from_dict(
                {"prompt": [render(tokenizer, c) for c in chats], "task": list(range(len(tasks)))}
            )
            correct: list[bool] = []

            def reward(prompts, completions, task, **_) -> list[float]:
                """selfplay's solver reward: the reply read by its parser, judged by its
                executor (one batched call, as selfplay's verify stage makes)."""
                parsed = [
                    parse_answer(reply(chats[i], text), "deduction", False)
                    for text, i in zip(completions, task, strict=True)
                ]
                readable = [
                    (tasks[i], [a.text]) for a, i in zip(parsed, task) if isinstance(a, Answer)
                ]
                verdicts = iter(judge.judge(readable))
                scores = []
                for answer in parsed:
                    ok = isinstance(answer, Answer) and next(verdicts)[0].ok
                    correct.append(ok)
                    outcome = (
                        "correct" if ok else "wrong" if isinstance(answer, Answer) else "malformed"
                    )
                    scores.append(table[outcome])
                return scores

            grpo = trl_config(args, f"{tmp}/trl")
            clock = step_clock()
            try:
                GRPOTrainer(
                    model=path,
                    reward_funcs=reward,
                    args=grpo,
                    train_dataset=data,
                    processing_class=tokenizer,
                    callbacks=[clock],
                ).train()
            except Exception as error:  # noqa: BLE001 - the summary says why TRL's vLLM failed
                if args.engine != "vllm":
                    raise
                return {
                    "side": "trl",
                    "engine": "vllm",
                    "error": f"{type(error).__name__}: {error}",
                }
        finally:
            executor.close()
    shares = [sum(correct[i : i + answers]) / answers for i in range(0, len(correct), answers)]
    return {
        "side": "trl",
        "engine": args.engine,
        **_step_stats(
            clock.seconds,
            args.warmup,
            [round(n * answers) for n in clock.mean_lengths[args.warmup :]],
            shares[args.warmup :],
            answers,
        ),
    }


def trl_config(args, folder: str):
    """TRL's settings, each matched to selfplay's (the module doc)."""
    import torch
    from trl import GRPOConfig

    length = args.answer_tokens
    fixed = "min_tokens" if args.engine == "vllm" else "min_new_tokens"
    return GRPOConfig(
        output_dir=folder,
        use_cpu=not torch.cuda.is_available(),
        bf16=args.precision == "bf16",
        fp16=False,
        model_init_kwargs={"dtype": torch.float32},
        learning_rate=args.lr,
        lr_scheduler_type="constant",
        weight_decay=0.0,
        max_grad_norm=1.0,
        optim="adamw_torch",  # selfplay's torch.optim.AdamW, not TRL's fused default
        gradient_checkpointing=False,  # TRL's default is on; selfplay's off
        per_device_train_batch_size=args.micro_batch,
        gradient_accumulation_steps=args.tasks * args.samples // args.micro_batch,
        num_generations=args.samples,
        max_completion_length=length,
        temperature=1.0,
        top_p=1.0,
        generation_kwargs=None if args.natural_length else {fixed: length},
        beta=0.0,
        epsilon=0.2,
        loss_type="dapo",
        scale_rewards="group",
        shuffle_dataset=False,
        max_steps=args.warmup + args.steps,
        logging_steps=1,
        save_strategy="no",
        report_to="none",
        disable_tqdm=True,
        seed=0,
        use_vllm=args.engine == "vllm",
        vllm_mode="colocate",
        vllm_gpu_memory_utilization=args.vllm_memory,
    )


def step_clock():
    """A trainer callback that times each optimizer step (generation included: TRL generates
    inside the step's first micro-batch) and keeps each step's mean answer length."""
    from transformers import TrainerCallback

    class StepClock(TrainerCallback):
        def __init__(self) -> None:
            self.seconds: list[float] = []
            self.mean_lengths: list[float] = []
            self._began = 0.0

        def on_step_begin(self, args, state, control, **kwargs):
            self._began = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            self.seconds.append(time.perf_counter() - self._began)

        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "completions/mean_length" in logs:
                self.mean_lengths.append(logs["completions/mean_length"])

    return StepClock()


if __name__ == "__main__":
    main()
