"""Does the trainer make the model better? Controlled RL on a fixed task family, proposer off.

    python benchmarks/learning_bench.py --quick                       # SmolLM2-135M, 8 minutes
    python benchmarks/learning_bench.py --quick --level standard --lr 1.5e-4 \
        model.name=qwen2.5-coder-0.5b-instruct trainer.lora.rank=16 trainer.lora.alpha=32 \
        trainer.mixed_precision=bf16 trainer.gradient_checkpointing=true \
        engine.vllm_gpu_memory_utilization=0.4  # 12 minutes

The solver is trained on the train split of a generated deduction family
(`selfplay.datasets.generated`: predict the output of a short templated program) and a
held-out split, which shares no program text with the train split, is answered greedily
before and after training, in the same run. Everything between is the loop's own code: the
tasks sit in a real pool whose sampler picks each step's frontier batch, and the solve, verify,
reward, update and sync stages of a self-play step run as `selfplay run` runs them (the
proposer's stages are skipped; the train roles are the solver's only).

The family's level (`--level`): `easy` (one operation, default) or `standard` (two or three).
A family is wanted on which the model's greedy held-out base accuracy is between 0.1
and 0.6. The solver is asked without thinking and its reply is prefilled with the answer's
opening (`roles.think=false roles.prefill=true`, the bench's defaults): SmolLM2-135M, asked
plainly, restates the program instead of answering and about half its answers cannot be read
(0.006-0.01 accuracy on either level); begun with `<answer>` and the output fence, it writes a
value, and answers 0.085 of the easy level's held-out items (200). That is just below the band,
and the easy level is the one where its errors are ones RL can fix: it copies the input, leaves
strings without quotes, echoes the layout's `<value>`. Qwen2.5-Coder-0.5B answers 0.135 of
the standard level's held-out items (prefilled; 0.075 of 80 without), inside the band, every
answer readable: the standard level is the coder's family.

What it measured with `--quick` and with the coder model (the second command), with dates and
commits: docs/results.md, "The trainer's acceptance test".

Prints one JSON line per phase (base, each step, trained) and a last summary line with `model`,
`family`, `heldout_n`, `base_accuracy`, `trained_accuracy`, `delta`, `p_value` (exact McNemar
test on the paired held-out items, two-sided), `steps`, `trained_answers` and `wall_s`, plus
the parse rates and the train-split accuracy before and after. Target for --quick: delta >=
0.10 and p_value < 0.01.
"""

from __future__ import annotations

import argparse
import functools
import json
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Sizes of --quick, for well under 30 minutes on 2 CPU cores (vLLM backend, SmolLM2, prefilled
# replies): a step of 8 x 8 answers of up to 32 tokens takes 5-25 s, the two greedy passes over
# 300 items about 2 minutes each; 24 steps, about 8 minutes in all.
QUICK = {
    "steps": 24,
    "tasks": 8,
    "samples": 8,
    "heldout": 200,
    "train_probe": 100,
    "max_new_tokens": 32,
}
FULL = {
    "steps": 40,
    "tasks": 32,
    "samples": 8,
    "heldout": 400,
    "train_probe": 200,
    "max_new_tokens": 64,
}


@dataclass(frozen=True)
class Scored:
    correct: list[bool]
    parsed: float  # share of answers that could be read

    @property
    def accuracy(self) -> float:
        return sum(self.correct) / max(1, len(self.correct))


def family(level: str) -> str:
    return "generated-deduction" if level == "standard" else f"generated-{level}-deduction"


def greedy_score(run, tasks) -> Scored:
    """Greedy pass@1 of `tasks` with the solver's own prompt, judged by the run's judge."""
    from selfplay.engine import SamplingParams
    from selfplay.eval.harness import evaluate
    from selfplay.solver import parse_answer, reply, solver_prompt, solver_stop

    cfg = run.config
    params = SamplingParams(
        n=1,
        temperature=0.0,
        max_tokens=cfg.generation.max_new_tokens,
        stop=solver_stop(cfg.roles),
    )
    _, rows = evaluate(
        list(tasks),
        lambda t: solver_prompt(t, cfg.roles),
        run.judge,
        engine=run.engine,
        params=params,
        read=lambda t, c: _read(
            parse_answer(reply(solver_prompt(t, cfg.roles), c.text), t.type, c.cut)
        ),
        task=lambda t: t,
        name="heldout",
        row=lambda s: {"correct": s.verdict.ok, "read": s.answer is not None},
    )
    return Scored([r["correct"] for r in rows], sum(r["read"] for r in rows) / max(1, len(rows)))


def _read(parsed):
    """The answer's text, or the parse failure saying why there is none."""
    from selfplay.types import Answer

    return parsed.text if isinstance(parsed, Answer) else parsed


def train_step(run, step: int) -> dict:
    """The solver's half of a self-play step: frontier batch, answers, judging, rewards,
    advantages, one policy update, weights to the engine."""
    from selfplay import stages

    run.version = f"step{step - 1}"
    start = time.perf_counter()
    batch, _ = stages.sample(run, step)
    attempted = stages.solve(run, (), batch, step)
    generated = time.perf_counter()
    judged = stages.verify(run, attempted, step)
    rollouts = stages.reward(run, (), stages.solve_rates((), judged), judged, step)
    update = stages.update(run, rollouts, step)
    stages.sync(run)
    correct = [j.outcome == "correct" for j in judged]
    return {
        "phase": "step",
        "step": step,
        "answers": len(judged),
        "train_reward": round(sum(correct) / max(1, len(correct)), 4),
        "train_parsed": round(
            sum(j.outcome != "malformed" for j in judged) / max(1, len(judged)), 4
        ),
        "nonzero_advantage_share": round(
            sum(r.advantage != 0 for r in rollouts) / max(1, len(rollouts)), 4
        ),
        "generated_tokens": sum(len(a.completion_ids) for a in attempted),
        "trained_tokens": int(update.get("tokens", 0)),
        "loss": round(update.get("loss", 0.0), 5),
        "grad_norm": round(update.get("grad_norm", 0.0), 4),
        "generate_s": round(generated - start, 2),
        "step_s": round(time.perf_counter() - start, 2),
    }


def config_for(args, folder: str):
    from selfplay.config import load
    from selfplay.engine.vllm_backend import vllm_available

    backend = args.backend or ("vllm" if vllm_available() else "transformers")
    overrides = [
        f"run.folder={folder}",
        "run.tensorboard=false",
        f"run.seed={args.seed}",
        f"engine.backend={backend}",
        "selfplay.seed_identity=false",
        "selfplay.train_roles=[solve]",
        "selfplay.task_types=[deduction]",
        f"selfplay.solver_tasks={args.tasks}",
        f"selfplay.solver_samples={args.samples}",
        f"generation.temperature={args.temperature}",
        "generation.solve_temperature=-1",  # --temperature is the solver's too
        f"generation.top_p={args.top_p}",
        f"generation.max_new_tokens={args.max_new_tokens}",
        f"trainer.lr={args.lr}",
        f"trainer.micro_batch={args.micro_batch}",
        # the prompting under which SmolLM2 answers at all (see the module doc)
        "roles.think=false",
        "roles.prefill=true",
        *args.overrides,
    ]
    return load(args.recipe, overrides)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="the 30-minute CPU sizes")
    parser.add_argument("--steps", type=int)
    parser.add_argument("--tasks", type=int, help="frontier tasks per step")
    parser.add_argument("--samples", type=int, help="answers per task (a GRPO group)")
    parser.add_argument("--heldout", type=int, help="held-out items")
    parser.add_argument("--train-probe", type=int, help="train-split items scored greedily")
    parser.add_argument("--train-pool", type=int, default=2000, help="train-split tasks")
    parser.add_argument("--level", choices=["easy", "standard"], default="easy")
    parser.add_argument("--lr", type=float, default=3e-5)
    parser.add_argument("--temperature", type=float, default=1.0)
    parser.add_argument("--top-p", type=float, default=1.0)
    parser.add_argument("--max-new-tokens", type=int)
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--backend", choices=["vllm", "transformers"])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--recipe", help="a base recipe (default: the built-in defaults)")
    parser.add_argument("overrides", nargs="*", help="config overrides key=value")
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL
    for key, value in sizes.items():
        if getattr(args, key) is None:
            setattr(args, key, value)

    from selfplay.curriculum import Provenance
    from selfplay.datasets.generated import generated_tasks
    from selfplay.eval.paired import mcnemar_exact
    from selfplay.runs import close_run, open_run

    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        run, _ = open_run(config_for(args, f"{tmp}/run"))
        try:
            make = functools.partial(
                generated_tasks, run.executor, seed=args.seed, level=args.level
            )
            heldout, train = make(args.heldout, "heldout"), make(args.train_pool, "train")
            shared = {t.program for t in heldout} & {t.program for t in train}
            assert not shared, f"the splits share {len(shared)} programs"
            run.store.add_tasks(train, Provenance("seed", 0, "", family(args.level)))
            probe = train[: args.train_probe]
            base, base_train = greedy_score(run, heldout), greedy_score(run, probe)
            print(json.dumps(_phase("base", base, base_train)), flush=True)
            answers = 0
            for step in range(1, args.steps + 1):
                record = train_step(run, step)
                answers += record["answers"]
                print(json.dumps(record), flush=True)
            trained, trained_train = greedy_score(run, heldout), greedy_score(run, probe)
            print(json.dumps(_phase("trained", trained, trained_train)), flush=True)
        finally:
            close_run(run)
    gained, lost, p_value = mcnemar_exact(base.correct, trained.correct)
    summary = {
        "phase": "summary",
        "model": run.config.model.name,
        "family": family(args.level),
        "heldout_n": len(heldout),
        "base_accuracy": round(base.accuracy, 4),
        "trained_accuracy": round(trained.accuracy, 4),
        "delta": round(trained.accuracy - base.accuracy, 4),
        "p_value": float(f"{p_value:.3g}"),
        "gained": gained,
        "lost": lost,
        "base_parsed": round(base.parsed, 4),
        "trained_parsed": round(trained.parsed, 4),
        "train_base_accuracy": round(base_train.accuracy, 4),
        "train_trained_accuracy": round(trained_train.accuracy, 4),
        "steps": args.steps,
        "trained_answers": answers,
        "backend": run.config.engine.backend,
        "wall_s": round(time.perf_counter() - began, 1),
        "target": {"delta": 0.10, "p_value": 0.01},
    }
    print(json.dumps(summary), flush=True)


def _phase(name: str, heldout: Scored, train: Scored) -> dict:
    return {
        "phase": name,
        "heldout_accuracy": round(heldout.accuracy, 4),
        "heldout_parsed": round(heldout.parsed, 4),
        "train_accuracy": round(train.accuracy, 4),
    }


if __name__ == "__main__":
    main()
