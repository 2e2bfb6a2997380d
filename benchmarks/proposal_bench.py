"""Proposal parse and valid rates per task type, with and without format-constrained generation.

    .venv/bin/python benchmarks/proposal_bench.py [--n 16] [--modes free constrained] [k=v ...]

The model (default: the embedded SmolLM2-135M-Instruct) writes `--n` proposals per task type
with the demo recipe's sampling (recipes/cpu_demo.yaml: temperature 0.7, top-p 0.9, 256 new
tokens) on the vLLM backend, as a zero-data run's first step asks for them: no references;
induction proposals write inputs for programs of the AZR seed file ($SELFPLAY_DATA/azr_seed)
that the executor validates. `free` samples as the loop does by default; `constrained` keeps
every proposal inside its layout's regular expression (`generation.constrained_proposals`).
A proposal is parsed as the propose stage parses it and valid when the executor accepts every
run (`task_from`). One JSON line per mode and type; the last line is the summary.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TYPES = ("deduction", "abduction", "induction")


def seed_programs(executor, count: int, rng: random.Random) -> list[str]:
    """Short programs of the AZR seed file that run on their seed input."""
    from selfplay.files import data_root

    path = data_root() / "azr_seed" / "7b_coder_seed_io.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    rows = [r for r in rows if len(r["snippet"]) < 600]
    verdicts = executor.validate([(r["snippet"], r["input"]) for r in rows])
    programs = [r["snippet"] for r, v in zip(rows, verdicts, strict=True) if v.ok]
    return [rng.choice(programs) for _ in range(count)]


def prompts(config, n: int, programs: list[str]) -> list[tuple[str, str | None, object]]:
    """(task type, program, chat) for `n` proposals of each type."""
    from selfplay.proposer import proposer_prompt

    out = []
    for kind in TYPES:
        for k in range(n):
            program = programs[k] if kind == "induction" else None
            out.append((kind, program, proposer_prompt(kind, [], config.roles, program)))
    return out


def judge(config, executor, requests, completions) -> dict[str, dict]:
    """Per task type: proposals, parsed, valid, truncated, and why the rest failed."""
    from selfplay.proposer import parse_proposal, task_from
    from selfplay.types import ParseFailure

    roles = config.roles
    counts = {kind: Counter() for kind in TYPES}
    parsed = []
    for (kind, program, _), c in zip(requests, completions, strict=True):
        result = parse_proposal(
            c.text,
            kind,
            program=program,
            min_inputs=roles.induction_visible + 1,
            max_inputs=roles.induction_inputs,
            truncated=c.cut,
        )
        counts[kind]["proposals"] += 1
        counts[kind]["truncated"] += c.cut
        counts[kind]["tokens"] += len(c.token_ids)
        if isinstance(result, ParseFailure):
            counts[kind][f"failed:{result.reason}"] += 1
            continue
        counts[kind]["parsed"] += 1
        parsed.append(result)
    verdicts = iter(executor.validate([case for p in parsed for case in p.cases]))
    for p in parsed:
        runs = [next(verdicts) for _ in p.cases]
        counts[p.type]["valid"] += task_from(p, runs, n_visible=roles.induction_visible) is not None
    return {kind: dict(c) for kind, c in counts.items()}


def run_mode(mode: str, config, engine, executor, requests, save) -> tuple[dict[str, dict], float]:
    from dataclasses import replace

    from selfplay.engine import sampling
    from selfplay.extract import ANSWER_STOP

    params = sampling(config.generation, n=1, seed=config.run.seed, stop=ANSWER_STOP)
    if mode == "constrained":
        from selfplay.proposer.layout import proposal_regex, think_limit

        think = think_limit(config.generation.max_new_tokens)
        regexes = tuple(proposal_regex(kind, config.roles, think) for kind, _, _ in requests)
        params = replace(params, regex=regexes)
    started = time.perf_counter()
    generations = engine.generate([chat for _, _, chat in requests], params)
    wall = time.perf_counter() - started
    completions = [g.completions[0] for g in generations]
    if save:
        for (kind, _, _), c in zip(requests, completions, strict=True):
            record = {"mode": mode, "type": kind, "text": c.text, "finish": c.finish_reason}
            save.write(json.dumps(record) + "\n")
    return judge(config, executor, requests, completions), wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=16, help="proposals per task type and mode")
    parser.add_argument("--modes", nargs="+", default=["free", "constrained"])
    parser.add_argument("--save", type=Path, help="write the completions to this JSONL file")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_args()

    from selfplay import config as config_module
    from selfplay.engine import make_engine
    from selfplay.engine.model import load_model
    from selfplay.executor import Executor

    started = time.perf_counter()
    recipe = ROOT / "recipes" / "cpu_demo.yaml"
    config = config_module.load(recipe, ["engine.backend=vllm", *args.overrides])
    rng = random.Random(config.run.seed)
    summary = {"model": config.model.name, "backend": config.engine.backend, "n": args.n}
    summary |= {"think": config.roles.think, "temperature": config.generation.temperature}
    save = args.save.open("w") if args.save else None
    with Executor(config.executor) as executor:
        requests = prompts(config, args.n, seed_programs(executor, args.n, rng))
        model, tokenizer, source = load_model(config.model)
        engine = make_engine(config, model, tokenizer, source)
        try:
            for mode in args.modes:
                counts, wall = run_mode(mode, config, engine, executor, requests, save)
                rates = {}
                for kind, c in counts.items():
                    line = {"mode": mode, "type": kind, **c, "generate_s": round(wall, 1)}
                    print(json.dumps(line), flush=True)
                    rates[kind] = {
                        "parse_rate": round(c.get("parsed", 0) / c["proposals"], 3),
                        "valid_rate": round(c.get("valid", 0) / c["proposals"], 3),
                    }
                summary[mode] = rates
        finally:
            engine.close()
            if save:
                save.close()
    summary["wall_s"] = round(time.perf_counter() - started, 1)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":  # vLLM starts processes; this guard keeps them from re-running main
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
