"""Where the time of a self-play step goes: per-stage seconds on the embedded SmolLM2 (CPU).

    python benchmarks/step_bench.py                       # the CPU demo recipe, 2 steps
    python benchmarks/step_bench.py --steps 3 --recipe recipes/cpu_demo.yaml key=value ...

Each step runs in a fresh run folder (a temp directory) exactly as `selfplay run` runs it, and
prints one JSON line: seconds per stage and the share of the step spent outside the model.
The model's share is generation (propose, solve), the policy update and the weight sync; the
overhead is what the rest of the system adds around it:

  executor  validate (proposals run in the sandbox) and the judging part of verify
  store     store (adding tasks), the pool's reference draws inside propose, recording attempts
  sampler   sample (drawing the frontier batch)

The last line is the summary: `step_s` (median over the steps), `overhead_share` (executor +
store + sampler over the step, from the summed seconds of all steps), `stage_s` (median seconds
per stage) and the overhead split. Target: overhead_share <= 0.05.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


@contextmanager
def timed(bucket: dict, key: str):
    start = time.perf_counter()
    try:
        yield
    finally:
        bucket[key] = bucket.get(key, 0.0) + time.perf_counter() - start


def instrument(run, bucket: dict) -> None:
    """Time the store and executor calls made from inside the model's stages too (the
    references drawn while proposing, the judging and recording inside verify)."""
    store, executor = run.store, run.executor

    def wrap(obj, name, key):
        inner = getattr(obj, name)

        def timed_call(*args, **kwargs):
            with timed(bucket, key):
                return inner(*args, **kwargs)

        setattr(obj, name, timed_call)

    wrap(store, "references", "store")
    wrap(store, "record_attempts", "store")
    wrap(executor, "verify_many", "executor")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--recipe", default=str(ROOT / "recipes" / "cpu_demo.yaml"))
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("overrides", nargs="*", help="config overrides key=value")
    args = parser.parse_args()

    from selfplay.config import load
    from selfplay.loop import close_run, open_run, run_step

    steps, totals = [], {}
    with tempfile.TemporaryDirectory() as tmp:
        overrides = [f"run.folder={tmp}/run", "run.tensorboard=false", *args.overrides]
        config = load(args.recipe, overrides)
        run, start = open_run(config)
        inner: dict[str, float] = {}
        instrument(run, inner)
        stage_seconds: dict[str, float] = {}
        try:
            for step in range(start, start + args.steps):
                inner.clear()
                metrics = run_step(run, step)
                stage = {
                    k.split("/", 1)[1]: v
                    for k, v in metrics.items()
                    if k.startswith("timing_s/") and k != "timing_s/step"
                }
                step_s = sum(stage.values())
                overhead = {
                    "executor": stage.get("validate", 0.0) + inner.get("executor", 0.0),
                    "store": stage.get("store", 0.0) + inner.get("store", 0.0),
                    "sampler": stage.get("sample", 0.0),
                }
                record = {
                    "phase": "step",
                    "step": step,
                    "step_s": round(step_s, 3),
                    "overhead_share": round(sum(overhead.values()) / step_s, 5),
                    "overhead_s": {k: round(v, 4) for k, v in overhead.items()},
                    "stage_s": {k: round(v, 3) for k, v in stage.items()},
                    "generated_tokens": metrics.get("generate/tokens"),
                    "update_tokens": metrics.get("update/tokens"),
                    "pool_size": metrics.get("curriculum/pool_size"),
                }
                print(json.dumps(record), flush=True)
                steps.append(record)
                for k, v in overhead.items():
                    totals[k] = totals.get(k, 0.0) + v
                for k, v in stage.items():
                    stage_seconds.setdefault(k, []).append(v)
        finally:
            close_run(run)
    total_step = sum(s["step_s"] for s in steps)
    summary = {
        "phase": "summary",
        "model": config.model.name,
        "steps": len(steps),
        "step_s": round(statistics.median(s["step_s"] for s in steps), 3),
        "overhead_share": round(sum(totals.values()) / total_step, 5),
        "overhead_s": {k: round(v / len(steps), 4) for k, v in totals.items()},
        "stage_s": {k: round(statistics.median(v), 3) for k, v in stage_seconds.items()},
        "target_overhead_share": 0.05,
    }
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()
