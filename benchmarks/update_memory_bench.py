"""Peak memory of one policy update, LoRA against full fine-tuning, with vLLM beside it or not.

    python benchmarks/update_memory_bench.py                         # lora+vllm and full
    python benchmarks/update_memory_bench.py --modes lora+vllm lora full full+vllm --rank 16
    python benchmarks/update_memory_bench.py key=value ...           # any config override

Each mode runs in a child process (so that one killed for memory does not end the benchmark)
that opens a run as `selfplay run` does (`open_run`, in a temporary run folder: the model in
float32, LoRA adapters when the mode says so, the optimizer, and vLLM in this process when the
mode has `+vllm`), takes one policy update on synthetic rollouts (`--rollouts` answers of
`--tokens` tokens after a prompt of `--prompt-tokens`, advantages +1/-1 so none is skipped)
and pushes the weights into the engine, as a step's update and sync stages do. It prints one
JSON line per mode: the process's peak resident memory (`peak_rss_gib`, vLLM included; the
sandbox workers are other processes), its resident memory after each phase, the update's
seconds and the trainable parameters. The last line is the summary: `peak_rss_gib` per mode.

On a CPU, vLLM's `engine.vllm_gpu_memory_utilization` is the fraction of the machine's RAM that
the whole process may hold when the engine starts (the training model included); the rest of
that share becomes the KV cache. The update comes on top of it.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODES = ("lora+vllm", "lora", "full", "full+vllm")


def rss_gib() -> float:
    import psutil

    return round(psutil.Process().memory_info().rss / 2**30, 2)


def peak_rss_gib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, 2)  # KiB on Linux


def synthetic_rollouts(count: int, prompt: int, tokens: int, vocab: int):
    import torch

    from selfplay.types import Rollout

    g = torch.Generator().manual_seed(0)
    out = []
    for i in range(count):
        ids = torch.randint(100, vocab - 100, (prompt + tokens,), generator=g).tolist()
        advantage = 1.0 if i % 2 else -1.0
        logprobs = (-2.0,) * tokens
        out.append(
            Rollout(
                "solve",
                "deduction",
                i,
                tuple(ids[:prompt]),
                tuple(ids[prompt:]),
                logprobs,
                advantage,
                advantage,
            )  # fmt: skip
        )
    return out


def measure(mode: str, args) -> dict:
    """One update in this process, for `mode`."""
    from selfplay import stages
    from selfplay.config import load
    from selfplay.runs import close_run, open_run

    lora, vllm = mode.startswith("lora"), mode.endswith("+vllm")
    with tempfile.TemporaryDirectory() as folder:
        config = load(
            None,
            [
                f"model.name={args.model}",
                f"run.folder={folder}",
                f"trainer.lora.rank={args.rank if lora else 0}",
                f"trainer.micro_batch={args.micro_batch}",
                f"engine.backend={'vllm' if vllm else 'transformers'}",
                f"engine.vllm_gpu_memory_utilization={args.vllm_memory}",
                *args.overrides,
            ],
        )
        phases = {"start": rss_gib()}
        run, _ = open_run(config)
        phases["opened"] = rss_gib()
        vocab = run.accelerator.unwrap_model(run.model).config.vocab_size
        rollouts = synthetic_rollouts(args.rollouts, args.prompt_tokens, args.tokens, vocab)
        begin = time.perf_counter()
        stats = stages.update(run, tuple(rollouts), 1)
        update_s = time.perf_counter() - begin
        phases["updated"] = rss_gib()
        stages.sync(run)
        phases["synced"] = rss_gib()
        trainable = sum(p.numel() for p in run.model.parameters() if p.requires_grad)
        close_run(run)
    return {
        "mode": mode,
        "peak_rss_gib": peak_rss_gib(),
        "rss_gib": phases,
        "update_s": round(update_s, 1),
        "optimizer_steps": stats.get("optimizer_steps"),
        "trainable_params": trainable,
        "lora_rank": args.rank if lora else 0,
        "vllm_memory": args.vllm_memory if vllm else None,
        "mixed_precision": config.trainer.mixed_precision,
    }


def child(mode: str, args) -> dict:
    """`measure(mode)` in a child process; a child killed for memory is a result too."""
    command = [sys.executable, __file__, "--child", mode, *_forwarded(args)]
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode == 0 and lines:
        return json.loads(lines[-1])
    return {
        "mode": mode,
        "failed": True,
        "returncode": proc.returncode,
        "stderr_tail": proc.stderr[-2000:],
    }


def _forwarded(args) -> list[str]:
    return [
        f"--model={args.model}",
        f"--rank={args.rank}",
        f"--rollouts={args.rollouts}",
        f"--tokens={args.tokens}",
        f"--prompt-tokens={args.prompt_tokens}",
        f"--micro-batch={args.micro_batch}",
        f"--vllm-memory={args.vllm_memory}",
        *args.overrides,
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--modes", nargs="+", choices=MODES, default=["lora+vllm", "full"])
    parser.add_argument("--model", default="qwen2.5-coder-0.5b-instruct")
    parser.add_argument("--rank", type=int, default=16, help="LoRA rank of the lora modes")
    parser.add_argument("--rollouts", type=int, default=16)
    parser.add_argument("--tokens", type=int, default=200, help="answer tokens per rollout")
    parser.add_argument("--prompt-tokens", type=int, default=300)
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--vllm-memory", type=float, default=0.5)
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*", help="config overrides, key=value")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child, args)), flush=True)
        return
    results = []
    for mode in args.modes:
        result = child(mode, args)
        results.append(result)
        print(json.dumps(result), flush=True)
    summary = {
        "model": args.model,
        "rollouts": args.rollouts,
        "tokens": args.tokens,
        "peak_rss_gib": {
            r["mode"]: r.get("peak_rss_gib", f"failed: exit {r.get('returncode')}") for r in results
        },
    }
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
