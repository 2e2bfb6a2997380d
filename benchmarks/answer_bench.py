"""Solver accuracy and read rate with and without format-constrained answers.

    .venv/bin/python benchmarks/answer_bench.py [--n 200] [--level easy] [k=v ...]

The model (default: the embedded SmolLM2-135M-Instruct) answers, on the vLLM backend with the
demo's roles (no thinking, reply prefilled), `--n` held-out deduction and `--n` abduction items
of the generated family (`selfplay.datasets.generated`, level `--level`) greedily, and the
seed identity task (`f('Hello World')`, the only task of a zero-data run's first step) `--samples`
times with the demo recipe's sampling (temperature 0.7, top-p 0.9). Mode `free` generates as the
loop does by default; `constrained` keeps every answer in its notation
(`generation.constrained_answers`, `selfplay/solver/layout.py`). An answer is read as the
verify stage reads it and judged by the executor; the greedy items are paired across the two
modes (exact McNemar test). One JSON line per mode; the last line is the summary.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TYPES = ("deduction", "abduction")
MODES = ("free", "constrained")


def answer(config, engine, judge, tasks, mode: str, n: int, greedy: bool):
    """(correct, read) per answer of each task, `n` answers a task, in task order, sampled as
    the solve stage samples them (`greedy`: temperature 0)."""
    from selfplay.engine import sampling
    from selfplay.solver import parse_answer, reply, solver_prompt, solver_stop
    from selfplay.solver.layout import answer_regexes
    from selfplay.types import Answer

    greedy_sampling = {"temperature": 0.0, "solve_temperature": -1, "top_p": 1.0} if greedy else {}
    constrained = mode == "constrained"
    gen = replace(config.generation, constrained_answers=constrained, **greedy_sampling)
    config = replace(config, generation=gen)
    prompts = [solver_prompt(t, config.roles) for t in tasks]
    stop = solver_stop(config.roles)
    params = sampling(config.generation, n=n, seed=config.run.seed, stop=stop, role="solve")
    params = replace(params, regex=answer_regexes(config, [t.type for t in tasks]))
    generations = engine.generate(prompts, params)
    parsed = [
        [parse_answer(reply(p, c.text), t.type, truncated=c.cut) for c in g.completions]
        for t, p, g in zip(tasks, prompts, generations, strict=True)
    ]
    items = [(t, [a.text for a in own if isinstance(a, Answer)]) for t, own in zip(tasks, parsed)]
    verdicts = judge.judge(items)
    out = []
    for own, judged in zip(parsed, verdicts, strict=True):
        marks = iter(judged)
        out += [(next(marks).ok, True) if isinstance(a, Answer) else (False, False) for a in own]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=200, help="held-out items per task type")
    parser.add_argument("--level", choices=["easy", "standard"], default="easy")
    parser.add_argument("--samples", type=int, default=32, help="answers to the identity task")
    parser.add_argument("overrides", nargs="*", metavar="key=value")
    args = parser.parse_args()

    from selfplay import config as config_module
    from selfplay.datasets.generated import generated_tasks
    from selfplay.engine import make_engine
    from selfplay.engine.model import load_model
    from selfplay.eval.paired import mcnemar_exact
    from selfplay.executor import Executor
    from selfplay.judge import Judge
    from selfplay.runs import IDENTITY_SEED
    from selfplay.types import Task

    started = time.perf_counter()
    recipe = ROOT / "recipes" / "cpu_demo.yaml"
    overrides = ["engine.backend=vllm", "generation.max_new_tokens=64", *args.overrides]
    config = config_module.load(recipe, overrides)
    program, value = IDENTITY_SEED
    identity = Task("deduction", program, (value,), (value,))
    summary = {"model": config.model.name, "level": args.level, "n": args.n}
    greedy: dict[str, dict[str, list[bool]]] = {m: {} for m in MODES}
    with Executor(config.executor) as executor:
        judge = Judge(executor)
        held_out = {
            kind: generated_tasks(executor, args.n, "heldout", task_type=kind, level=args.level)
            for kind in TYPES
        }
        model, tokenizer, source = load_model(config.model)
        engine = make_engine(config, model, tokenizer, source)
        try:
            for mode in MODES:
                line = {"mode": mode}
                for kind in TYPES:
                    marks = answer(config, engine, judge, held_out[kind], mode, 1, greedy=True)
                    greedy[mode][kind] = [ok for ok, _ in marks]
                    line[f"{kind}_accuracy"] = round(sum(greedy[mode][kind]) / args.n, 3)
                    line[f"{kind}_read"] = round(sum(r for _, r in marks) / args.n, 3)
                marks = answer(config, engine, judge, [identity], mode, args.samples, greedy=False)
                line["identity_sampled_accuracy"] = round(
                    sum(ok for ok, _ in marks) / len(marks), 3
                )
                print(json.dumps(line), flush=True)
                summary[mode] = {k: v for k, v in line.items() if k != "mode"}
        finally:
            engine.close()
    for kind in TYPES:
        gained, lost, p = mcnemar_exact(greedy["free"][kind], greedy["constrained"][kind])
        summary[f"{kind}_gained_lost_p"] = [gained, lost, p]
    summary["wall_s"] = round(time.perf_counter() - started, 1)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":  # vLLM starts processes; this guard keeps them from re-running main
    sys.path.insert(0, str(ROOT))
    sys.exit(main())
