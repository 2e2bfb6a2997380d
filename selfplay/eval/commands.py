"""`selfplay eval <benchmark> --model PATH_OR_RUN`: pass@1 and pass@k, per-sample JSONL, a table.
`selfplay report RUN_FOLDER`: what a run did (proposal rates, in-loop evaluations before and
after, with the paired test), as a table or JSON, and its figures; see `report.py` and
`figures.py`."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from dataclasses import replace
from pathlib import Path

from selfplay import config as config_module
from selfplay.config import EVAL_BENCHMARKS
from selfplay.console import Console, add_verbose, verbose_overrides
from selfplay.files import DataError


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("eval", help="evaluate a model or a run on a benchmark")
    p.add_argument("benchmark", choices=EVAL_BENCHMARKS)
    p.add_argument(
        "--model", required=True, help="model folder, hub id, the embedded model, or a run folder"
    )
    p.add_argument("--data", help="the benchmark's data file (default: under $SELFPLAY_DATA)")
    p.add_argument("--k", type=int, nargs="+", default=[1], help="report pass@k for these k")
    p.add_argument("--samples", type=int, default=1, help="samples per problem (n)")
    p.add_argument("--temperature", type=float, help="default: 0 for one sample, else the solver's")
    p.add_argument("--limit", type=int, default=0, help="first N problems only (0 = all)")
    p.add_argument("--out", help="folder for results (default: eval/<benchmark>-<model name>)")
    p.add_argument(
        "--prompt-format",
        choices=("direct", "cot", "completion", "selfplay"),
        help="cruxeval only: the benchmark's published prompts, direct (the default) or chain "
        "of thought, as a chat model is asked them; completion, the direct prompt as a text to "
        "continue, as the benchmark's harness asks open models; or the solver's own (selfplay, "
        "as in training)",
    )
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    add_verbose(p)
    p.set_defaults(handler=eval_command)
    p = sub.add_parser(
        "report",
        help="a run's proposal rates and its evaluations before and after, paired (McNemar) "
        "on all items and on those copying does not solve",
    )
    p.add_argument("folder", nargs="?", help="the run folder (holds metrics.jsonl and eval/)")
    p.add_argument(
        "--compare",
        nargs=2,
        metavar=("BEFORE", "AFTER"),
        help="instead: pair two `selfplay eval` results (samples.jsonl or its folder)",
    )
    p.add_argument(
        "--pooled",
        nargs="+",
        metavar="EVAL",
        help="instead: BASE AFTER [AFTER ...], one AFTER per seed, pooled over the seeds "
        "(an exchange test per problem; no figures)",
    )
    p.add_argument(
        "--across-formats",
        action="store_true",
        help="with --compare: pair a CRUXEval subset asked in one prompt format with the same "
        "subset in another (cruxeval_o_cot with cruxeval_o): one model asked two ways",
    )
    p.add_argument("--json", action="store_true", help="print the report as one JSON object")
    p.add_argument(
        "--figures",
        metavar="DIR",
        help="folder for the PNG figures (default: RUN/report, or report/ beside AFTER)",
    )
    p.add_argument("--no-figures", action="store_true", help="the table only, no figures")
    p.set_defaults(handler=report_command)


def report_command(args: argparse.Namespace) -> int:
    from selfplay.eval.report import compare, read_metrics, report
    from selfplay.eval.report_table import render

    given = [x is not None for x in (args.folder, args.compare, args.pooled)]
    if sum(given) != 1:
        print(
            "selfplay report: give a run folder, --compare BEFORE AFTER, or --pooled BASE AFTER...",
            file=sys.stderr,
        )
        return 2
    if args.across_formats and args.compare is None:
        print("selfplay report: --across-formats pairs the two of --compare", file=sys.stderr)
        return 2
    if args.pooled is not None:
        return _pooled(args)
    try:
        if args.compare is None:
            result = report(args.folder)
        else:
            result = compare(*args.compare, across_formats=args.across_formats)
    except ValueError as err:  # no item shared, or one subset in two formats across them
        print(f"selfplay report: {err}", file=sys.stderr)
        return 1
    if not args.no_figures:
        from selfplay.eval import figures  # matplotlib: loaded for this command only

        out = Path(args.figures) if args.figures else None
        try:
            if args.compare is None:
                folder = Path(args.folder)
                rows, _ = read_metrics(folder / "metrics.jsonl")
                written, notes = figures.run_figures(folder, result, rows, out or folder / "report")
            else:
                written, notes = figures.compare_figures(result, out)
        except Exception as err:  # a read-only folder, a pool it cannot open: the table stays
            written, notes = [], [f"the figures failed ({type(err).__name__}: {err})"]
        result["figures"] = [str(path) for path in written]
        result["figures_skipped"] = notes
    print(json.dumps(result, indent=2) if args.json else render(result))
    return 0


def _pooled(args: argparse.Namespace) -> int:
    from selfplay.eval.pooled import pooled, render_pooled

    if len(args.pooled) < 2:
        print("selfplay report: --pooled needs BASE and at least one AFTER", file=sys.stderr)
        return 2
    try:
        result = pooled(args.pooled[0], args.pooled[1:])
    except ValueError as err:
        print(f"selfplay report: {err}", file=sys.stderr)
        return 1
    print(json.dumps(result, indent=2) if args.json else render_pooled(result))
    return 0


def resolve_model(spec: str, overrides: list[str]):
    """(config, model source): a run folder uses its config and its latest checkpoint; a LoRA
    checkpoint's adapter is merged into its base, once (`selfplay.engine.adapters`)."""
    from selfplay.engine.adapters import is_adapter_folder, merged

    folder, config = Path(spec), None
    if (folder / "config.yaml").is_file():
        from selfplay.trainer.checkpoint import Checkpoints

        config = config_module.load(folder / "config.yaml", overrides)
        latest = Checkpoints(folder).latest()
        if latest is None:
            raise FileNotFoundError(f"run folder {folder} has no checkpoint yet")
        folder = spec = latest / "model"
    elif not folder.exists() and (spec.startswith((".", "/", "~")) or spec.count("/") > 1):
        # not a hub id (`namespace/name`) either: say so, not the hub's complaint about the id
        raise FileNotFoundError(
            f"--model {spec}: no such folder (a run folder, a checkpoint's model folder, an "
            "embedded model's name or a hub id)"
        )
    config = config or config_module.load(None, overrides)
    source = str(merged(folder, config.model)) if is_adapter_folder(folder) else str(spec)
    return config, source


def eval_command(args: argparse.Namespace) -> int:
    from selfplay.engine import SamplingParams, make_engine
    from selfplay.engine.model import dtype_name, load_model
    from selfplay.eval import generated
    from selfplay.provenance import environment

    if args.limit < 0 or args.samples < 1 or min(args.k) < 1:
        raise config_module.ConfigError("--limit must be >= 0, --samples and --k >= 1")
    if args.prompt_format is not None and args.benchmark != "cruxeval":
        raise config_module.ConfigError("--prompt-format is for cruxeval only")
    args.prompt_format = args.prompt_format or "direct"
    if args.data and args.benchmark == "generated":
        raise config_module.ConfigError("generated: its tasks are made by the program, no --data")
    if max(args.k) > args.samples:
        raise config_module.ConfigError(
            f"pass@{max(args.k)} needs at least {max(args.k)} samples per problem (--samples)"
        )
    config, source = resolve_model(args.model, verbose_overrides(args))
    config = replace(config, model=replace(config.model, name=source))
    # the code, libraries, machine and precision (greedy answers differ across the last two),
    # taken before the evaluation: the code may be committed again while it runs
    setup = environment(dtype=dtype_name(config.model.dtype))
    temperature = args.temperature
    if temperature is None:
        temperature = 0.0 if args.samples == 1 else config.generation.temperature_of("solve")
    params = SamplingParams(
        n=args.samples,
        temperature=temperature,
        top_p=config.generation.top_p,
        max_tokens=config.generation.max_new_tokens,
        seed=config.run.seed,
    )
    out = Path(args.out or f"eval/{args.benchmark}-{Path(source).name}")
    out.mkdir(parents=True, exist_ok=True)
    try:  # the libraries' output goes to eval.log beside the results (`selfplay.console`)
        with Console(out / "eval.log", config.run.log_level):
            model, tokenizer, model_source = load_model(config.model)
            engine = make_engine(config, model, tokenizer, model_source)
            try:
                problems, metrics, items = _run(args.benchmark, engine, config, args, params)
            finally:
                engine.close()
    except DataError as err:
        print(f"selfplay eval: {err}", file=sys.stderr)
        return 1
    with (out / "samples.jsonl").open("w") as f:
        for item in items:
            f.write(json.dumps(item) + "\n")
    summary = {
        "benchmark": args.benchmark,
        "model": source,
        "problems": len(problems),
        "samples": args.samples,
        "temperature": temperature,
        "prompt_format": args.prompt_format if args.benchmark == "cruxeval" else None,
        **({"set": generated.VERSION} if args.benchmark == "generated" else {}),
        **metrics,
        "environment": setup,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=2))
    _table(summary, sys.stdout)
    print(f"per-sample results: {out / 'samples.jsonl'}")
    return 0


def _run(benchmark: str, engine, config, args, params) -> tuple[list, dict, list[dict]]:
    """(problems, metrics, per-sample records) of one benchmark (`dispatch.py`); the judge's
    back end (an executor or the math checker) lives for this call. Imported here so that the
    other commands do not load the benchmarks."""
    from selfplay.eval import code_benchmarks
    from selfplay.eval.dispatch import Backends, evaluate_benchmark
    from selfplay.executor import Executor
    from selfplay.mathcheck import MathChecker

    with contextlib.ExitStack() as started:

        def start(make):
            return lambda: started.enter_context(make())

        backends = Backends(
            executor=start(lambda: Executor(config.executor)),
            math_checker=start(lambda: MathChecker(config.mathcheck)),
            code_executor=start(lambda: Executor(code_benchmarks.executor_config(config.executor))),
        )
        return evaluate_benchmark(
            benchmark,
            engine,
            backends,
            config.roles,
            params,
            data=args.data,
            limit=args.limit,
            ks=tuple(args.k),
            prompt_formats=(args.prompt_format,),
        )


def _table(summary: dict, stream) -> None:
    what = f", prompt format {summary['prompt_format']}" if summary["prompt_format"] else ""
    what += f", set {summary['set']}" if "set" in summary else ""
    stream.write(
        f"{summary['benchmark']} on {summary['problems']} problems, "
        f"{summary['samples']} sample(s) each, temperature {summary['temperature']}{what}\n"
    )
    for name, value in summary.items():
        if "/pass@" in name:
            stream.write(f"  {name:<24} {value:6.1%}\n")
