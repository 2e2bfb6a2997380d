"""Generation speed of each backend on the configured model (default: embedded SmolLM2-135M).

    .venv/bin/python benchmarks/generation_bench.py [--batches 1,8,64] [--new-tokens 128]
                                                    [--backends transformers,vllm] [key=value ...]

Both backends run in one process, on the same prompt (a proposer prompt, as in training), in
the same dtype (`model.dtype`), each after a warm-up call. Every batch generates exactly
`--new-tokens` tokens per sequence (end-of-sequence ignored), with sampling at temperature 1.
Tokens per second = generated tokens / wall time of the `generate` call, prompt processing
included. One JSON line per measurement; the last line is a summary with
`hf_tokens_per_s_b<B>` and `vllm_tokens_per_s_b<B>` for each batch size B, and the seconds one
weight sync from the training model takes (`*_load_weights_s`; zero work for transformers,
which generates with the training model itself).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time


def measure(engine, prompt, batch: int, new_tokens: int) -> dict:
    from selfplay.engine import SamplingParams

    params = SamplingParams(n=batch, max_tokens=new_tokens, ignore_eos=True, seed=batch)
    started = time.perf_counter()
    [generation] = engine.generate([prompt], params)
    elapsed = time.perf_counter() - started
    tokens = sum(len(c.token_ids) for c in generation.completions)
    return {
        "batch": batch,
        "new_tokens": tokens,
        "prompt_tokens": len(generation.prompt_token_ids),
        "seconds": round(elapsed, 3),
        "tokens_per_s": round(tokens / elapsed, 1),
    }


def run_backend(name: str, cfg, batches: list[int], new_tokens: int) -> list[dict]:
    import dataclasses

    from selfplay.engine import make_engine
    from selfplay.engine.model import load_model
    from selfplay.proposer import proposer_prompt

    cfg = dataclasses.replace(cfg, engine=dataclasses.replace(cfg.engine, backend=name))
    model, tokenizer, source = load_model(cfg.model)
    started = time.perf_counter()
    engine = make_engine(cfg, model, tokenizer, source)
    ready = time.perf_counter() - started
    prompt = proposer_prompt("deduction", [], cfg.roles)
    measure(engine, prompt, 2, 8)  # warm-up: first-call allocations and kernel selection
    rows = []
    for batch in batches:
        row = {
            "backend": name,
            "dtype": str(next(model.parameters()).dtype)[6:],
            **measure(engine, prompt, batch, new_tokens),
        }
        row["engine_start_s"] = round(ready, 1)
        print(json.dumps(row), flush=True)
        rows.append(row)
    started = time.perf_counter()
    engine.load_weights(model)  # what a training step adds: the weight sync
    sync = {"backend": name, "load_weights_s": round(time.perf_counter() - started, 3)}
    print(json.dumps(sync), flush=True)
    engine.close()
    return rows + [sync]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", default="1,8,64")
    parser.add_argument("--new-tokens", type=int, default=128)
    parser.add_argument("--backends", default="transformers,vllm")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_args()

    from selfplay import config as config_module

    cfg = config_module.load(None, args.overrides)
    batches = [int(b) for b in args.batches.split(",")]
    short = {"transformers": "hf", "vllm": "vllm"}
    summary = {
        "model": cfg.model.name,
        "machine": f"{platform.machine()}, {os.cpu_count()} CPUs",
        "new_tokens": args.new_tokens,
    }
    # transformers first: vLLM lowers torch's thread count in this process when it starts.
    for backend in args.backends.split(","):
        for row in run_backend(backend, cfg, batches, args.new_tokens):
            if "batch" in row:
                summary[f"{short[backend]}_tokens_per_s_b{row['batch']}"] = row["tokens_per_s"]
            else:
                summary[f"{short[backend]}_load_weights_s"] = row["load_weights_s"]
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":  # vLLM starts worker processes that re-import this file
    sys.exit(main())
