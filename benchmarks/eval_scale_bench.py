"""How the in-run evaluation scales over processes: the same problems with 1 and 2 CPU ranks.

    python benchmarks/eval_scale_bench.py                      # embedded SmolLM2, 100 CRUXEval
    python benchmarks/eval_scale_bench.py --problems 20        # a quicker check
    python benchmarks/eval_scale_bench.py --model tiny         # a tiny random model
    python benchmarks/eval_scale_bench.py key=value ...        # config overrides

Each world size is launched by torchrun with one torch thread per process, so that N processes
use N cores, and evaluates as a run does (`InLoopEval`, greedy pass@1, the run's engine: here
transformers, the model in float32 as a run loads it on a CPU): every rank answers and judges
its strided share of the problems (`selfplay.eval.sharded`) and rank 0 writes the records. The
time is that of the whole evaluation call, from a barrier after the ranks have loaded the model
to rank 0's records, including loading and checking the problems (each rank does that for all
of them, as a run's first evaluation does). CRUXEval is read from `$SELFPLAY_DATA` (or
`shared/data` beside the repository). Completions are cut at 256 tokens, as in
`recipes/cpu_demo.yaml` (`generation.max_new_tokens=...` to change it). It is slow on one
thread: the 1-process evaluation of 100 problems (200 answers) had not finished after 22 minutes
on a 2-core machine, so the whole benchmark takes well over half an hour there; `--problems 20`
is a quicker check.

It prints one JSON line per world size (seconds, per-rank seconds, pass@1) and a last line with

  one_rank_s    seconds of the evaluation with 1 process
  two_ranks_s   the same with 2 processes
  ratio         two_ranks_s / one_rank_s (target on a 2-core machine: <= 0.65)
  identical     whether the two evaluations' records (the per-sample JSONL a run writes) are
                equal item for item, and their scores equal
  differing     how many records differ (0 when identical)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", default="embedded", help="embedded, tiny, or a model folder")
    parser.add_argument("--benchmark", default="cruxeval", help="one of run.eval_benchmarks")
    parser.add_argument("--problems", type=int, default=100, help="first N problems")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)  # a rank's output folder
    parser.add_argument("overrides", nargs="*", help="config overrides, key=value")
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    with tempfile.TemporaryDirectory(prefix="eval-scale-bench-") as tmp:
        from benchmarks.scale_bench import model_folder

        model = model_folder(args.model, Path(tmp))
        results = {}
        for world in (1, 2):
            results[world] = launch(args, model, world, Path(tmp) / f"world{world}")
            shown = {k: v for k, v in results[world].items() if k != "records"}
            print(json.dumps({"world_size": world, **shown}), flush=True)
    print(json.dumps(summary(results[1], results[2])), flush=True)


def overrides(args, model: str) -> list[str]:
    return [
        f"model.name={model}",
        "model.dtype=float32",  # as a run loads its model on a CPU
        "engine.backend=transformers",
        "generation.max_new_tokens=256",
        f"run.eval_benchmarks=[{args.benchmark}]",
        f"run.eval_problems={args.problems}",
        *args.overrides,
    ]


def launch(args, model: str, world: int, folder: Path) -> dict:
    """One evaluation with `world` processes; its measurements and records."""
    from benchmarks.scale_bench import torchrun

    arguments = ["--worker", str(folder), *overrides(args, model)]
    ranks = torchrun(Path(__file__), world, 29600 + world, arguments, folder)
    records = (folder / "eval" / f"{args.benchmark}-step000000.jsonl").read_text().splitlines()
    return {
        "seconds": round(ranks[0]["seconds"], 2),
        "rank_seconds": [round(r["seconds"], 2) for r in ranks],
        "problems": args.problems,
        "records": records,
        "metrics": ranks[0]["metrics"],
    }


def summary(one: dict, two: dict) -> dict:
    differing = sum(a != b for a, b in zip(one["records"], two["records"], strict=False))
    differing += abs(len(one["records"]) - len(two["records"]))
    return {
        "one_rank_s": one["seconds"],
        "two_ranks_s": two["seconds"],
        "ratio": round(two["seconds"] / one["seconds"], 3),
        "identical": differing == 0 and one["metrics"] == two["metrics"],
        "differing": differing,
        "records": len(one["records"]),
    }


# ---------------------------------------------------------------------------------------------
# one rank


def worker(args) -> None:
    """One rank: load the model, then evaluate as a run does and time it."""
    from datetime import timedelta

    import torch
    import torch.distributed as dist

    from selfplay.config import load
    from selfplay.distributed import Ranks
    from selfplay.engine import make_engine
    from selfplay.engine.model import load_model
    from selfplay.eval.in_loop import InLoopEval
    from selfplay.executor import Executor

    config = load(None, args.overrides)
    world, rank = int(os.environ.get("WORLD_SIZE", "1")), int(os.environ.get("RANK", "0"))
    ranks = Ranks()
    if world > 1:
        timeout = timedelta(seconds=config.run.process_group_timeout_s)
        dist.init_process_group("gloo", timeout=timeout)
        ranks = Ranks(rank, world)
    torch.set_num_threads(1)
    model, tokenizer, source = load_model(config.model)
    engine = make_engine(config, model, tokenizer, source)
    args.worker.mkdir(parents=True, exist_ok=True)
    with Executor(config.executor) as executor:
        evaluator = InLoopEval(config, executor, None, ranks)
        ranks.barrier()
        began = time.perf_counter()
        metrics = evaluator(engine, args.worker, 0)
        seconds = time.perf_counter() - began
        evaluator.close()
    engine.close()
    record = {"seconds": seconds, "metrics": metrics}
    (args.worker / f"rank{rank}.json").write_text(json.dumps(record))
    if world > 1:
        dist.destroy_process_group()


if __name__ == "__main__":
    main()
