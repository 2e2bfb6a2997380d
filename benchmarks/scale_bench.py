"""How a self-play step scales over processes: the demo step with 1 and 2 CPU processes.

    python benchmarks/scale_bench.py                          # embedded SmolLM2, cpu_demo recipe
    python benchmarks/scale_bench.py --model tiny --steps 1   # a tiny random model: a quick check
    python benchmarks/scale_bench.py --world-sizes 1 2 4 key=value ...

Each world size runs the same steps in a fresh run folder, launched by torchrun with one torch
thread per process (`run.threads=1`), so that N processes use N cores. It prints one JSON line
per world size and a last line with

  world_sizes     the world sizes run
  samples_per_s   per world size: judged answers plus validated proposals (those the executor
                  ran) per second of step
  scaling         samples_per_s of the largest world size over that of 1 process
  step_speedup    the same for seconds per step
  params_equal    whether every rank held identical weights after every step
  pool_duplicates tasks the pool holds more than once (by type, program, inputs, outputs),
                  summed over the runs
  same_samples    whether every world size made the same pool (see below)

Samples are counted comparably: a run with N processes cuts generation into N shares, each
sampled with its own seed, and the 1-process run here cuts its generation into the same shares
(`--baseline-shares`, by default the largest world size), so that every world size draws the
same samples, validates the same proposals and judges the same answers: the work is the same
and `scaling` is the speedup on it. With `--baseline-shares 1` the one process samples as a
plain run does; its samples (and how many proposals turn out valid, which sets how many
answers are judged) then differ from the others' by chance.

The generation backend is transformers (`engine.backend=transformers`, overridable): vLLM's CPU
engine binds its threads to cores itself. Target on a 2-core machine: scaling >= 1.6,
params_equal true, pool_duplicates 0.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="embedded", help="embedded, tiny, or a model folder")
    parser.add_argument("--recipe", default=str(ROOT / "recipes" / "cpu_demo.yaml"))
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--world-sizes", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--baseline-shares", type=int, default=0, help="0: the largest world")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)  # a rank's output folder
    parser.add_argument("--shares", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("overrides", nargs="*", help="config overrides, key=value")
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    if 1 not in args.world_sizes or min(args.world_sizes) < 1:
        parser.error("--world-sizes must include 1 (the baseline) and be positive")
    with tempfile.TemporaryDirectory(prefix="scale-bench-") as tmp:
        model = model_folder(args.model, Path(tmp))
        results = {}
        for world in sorted(args.world_sizes):
            shares = (args.baseline_shares or max(args.world_sizes)) if world == 1 else 0
            results[world] = launch(args, model, world, shares, Path(tmp) / f"world{world}")
            print(json.dumps({"world_size": world, **results[world]}), flush=True)
    print(json.dumps(summary(results)), flush=True)


def model_folder(name: str, tmp: Path) -> str:
    if name != "tiny":
        return name if name != "embedded" else "smollm2-135m-instruct"
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig

    from selfplay.engine.model import embedded_gguf

    sys.path.insert(0, str(ROOT))
    from tests.conftest import TINY  # the tests' tiny model: SmolLM2's vocabulary, 2 layers

    gguf = embedded_gguf()
    tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        **TINY,
    )
    torch.manual_seed(0)
    folder = tmp / "tiny"
    AutoModelForCausalLM.from_config(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return str(folder)


def torchrun(script: Path, world: int, port: int, arguments: list[str], out: Path) -> list[dict]:
    """`script --worker ...` with `world` CPU ranks under torchrun, one torch thread each; the
    report each rank wrote to `out/rank<r>.json`. Exits with the ranks' output if it failed."""
    command = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", str(world),
        "--master_port", str(port), str(script.resolve()), *arguments,
    ]  # fmt: skip
    env = dict(os.environ, OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        sys.exit(f"the {world}-process run failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    return [json.loads((out / f"rank{r}.json").read_text()) for r in range(world)]


def launch(args, model: str, world: int, shares: int, folder: Path) -> dict:
    """One run of `args.steps` steps with `world` processes; its measurements."""
    out = folder / "out"
    overrides = [
        f"model.name={model}",
        f"run.folder={folder / 'run'}",
        "run.threads=1",
        "run.tensorboard=false",
        "engine.backend=transformers",
        "generation.constrained_proposals=false",  # vLLM's structured output only
        "generation.constrained_answers=false",
        *args.overrides,
    ]
    arguments = ["--worker", str(out), "--recipe", args.recipe, "--steps", str(args.steps)]
    arguments += ["--shares", str(shares), *overrides]
    ranks = torchrun(Path(__file__), world, 29500 + world, arguments, out)
    main = ranks[0]
    seconds = sum(main["step_s"])
    return {
        "shares": shares or world,
        "step_s": [round(s, 2) for s in main["step_s"]],
        "samples": main["samples"],
        "samples_per_s": round(main["samples"] / seconds, 3),
        "judged_answers": main["judged"],
        "validated_proposals": main["validated"],
        "valid_proposals": main["valid"],
        "params_equal": all(r["params"] == main["params"] for r in ranks),
        "pool_duplicates": main["pool_duplicates"],
        "pool": main["pool"],
    }


def summary(results: dict) -> dict:
    one, top = results[1], results[max(results)]
    return {
        "world_sizes": sorted(results),
        "samples_per_s": {str(w): r["samples_per_s"] for w, r in sorted(results.items())},
        "scaling": round(top["samples_per_s"] / one["samples_per_s"], 3),
        "step_speedup": round(sum(one["step_s"]) / sum(top["step_s"]), 3),
        "params_equal": all(r["params_equal"] for r in results.values()),
        "pool_duplicates": sum(r["pool_duplicates"] for r in results.values()),
        "same_samples": len({r["pool"] for r in results.values()}) == 1,
    }


# ---------------------------------------------------------------------------------------------
# one rank of a run


def worker(args) -> None:
    from selfplay import stages
    from selfplay.config import load
    from selfplay.distributed import Ranks
    from selfplay.loop import run_step
    from selfplay.runs import close_run, open_run

    state, start = open_run(load(args.recipe, args.overrides))
    if args.shares and state.ranks.world_size == 1:
        state.ranks = Ranks(shares=args.shares)
    counts = {"judged": 0, "validated": 0, "valid": 0}
    verify, validate = stages.verify, stages.validate

    def counting_verify(*a, **k):
        judged = verify(*a, **k)
        counts["judged"] += len(judged)
        return judged

    def counting_validate(*a, **k):
        validated = validate(*a, **k)
        counts["validated"] += sum(bool(v.verdicts) for v in validated)
        counts["valid"] += sum(v.task is not None for v in validated)
        return validated

    stages.verify, stages.validate = counting_verify, counting_validate
    step_s, params = [], []
    for step in range(start, start + args.steps):
        began = time.perf_counter()
        run_step(state, step)
        step_s.append(time.perf_counter() - began)
        params.append(_digest(state.accelerator.unwrap_model(state.model)))
    record = {"step_s": step_s, "params": params, **counts}
    record["samples"] = counts["judged"] + counts["validated"]
    if state.ranks.is_main:
        record.update(_pool(state.store.local))
    args.worker.mkdir(parents=True, exist_ok=True)
    (args.worker / f"rank{state.ranks.rank}.json").write_text(json.dumps(record))
    close_run(state)


def _digest(model) -> str:
    """A hash of the model's parameters, bit for bit."""
    import torch

    h = hashlib.sha256()
    for name, tensor in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(tensor.detach().cpu().contiguous().view(-1).view(torch.uint8).numpy())
    return h.hexdigest()


def _pool(store) -> dict:
    """Duplicates in the pool, and a digest of its contents."""
    tasks = store.get(store.index["id"].tolist())
    keys = sorted(
        json.dumps([t.task.type, t.task.program, list(t.task.inputs), list(t.task.outputs)])
        for t in tasks
    )
    digest = hashlib.sha256("\n".join(keys).encode()).hexdigest()
    return {"pool_duplicates": len(keys) - len(set(keys)), "pool": digest}


if __name__ == "__main__":
    main()
