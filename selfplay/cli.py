"""The `selfplay` command. Each area registers its own subcommands:

validate, verify      the sandboxed executor          (selfplay/executor/commands.py)
pool                  the task pool: import, export, stats, rename (selfplay/datasets/commands.py)
model prepare         the model that plays both roles  (selfplay/engine/commands.py)
run                   a self-play run                  (selfplay/loop.py)
eval                  benchmarks with pass@k           (selfplay/eval/commands.py)
config                every configuration field with its documentation
"""

from __future__ import annotations

import argparse
import sys

from selfplay import config as config_module
from selfplay.console import add_verbose, verbose_overrides
from selfplay.datasets import commands as pool_commands
from selfplay.engine import commands as engine_commands
from selfplay.eval import commands as eval_commands
from selfplay.executor import commands as executor_commands


def _config_command(args: argparse.Namespace) -> int:
    for line in config_module.describe():
        print(line)
    return 0


def _run_command(args: argparse.Namespace) -> int:
    from selfplay.loop import run

    run(config_module.load(args.recipe, verbose_overrides(args)))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="selfplay", description="A language model teaches itself to reason with code tasks."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    executor_commands.register(sub)
    pool_commands.register(sub)
    engine_commands.register(sub)
    eval_commands.register(sub)
    p = sub.add_parser("run", help="a self-play run (resumes when its folder has a checkpoint)")
    p.add_argument("--recipe", help="YAML recipe, e.g. recipes/cpu_demo.yaml")
    p.add_argument("overrides", nargs="*", metavar="key=value", help="config overrides")
    add_verbose(p)
    p.set_defaults(handler=_run_command)
    p = sub.add_parser("config", help="list every configuration field")
    p.set_defaults(handler=_config_command)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    # Overrides may follow options (`selfplay eval cruxeval --model m key=value`), where
    # argparse has already closed the positional list: collect them from what is left.
    args, extra = parser.parse_known_args(argv)
    overrides = [a for a in extra if "=" in a and not a.startswith("-")]
    if len(overrides) != len(extra) or (overrides and not hasattr(args, "overrides")):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if overrides:
        args.overrides = [*(args.overrides or []), *overrides]
    from selfplay.config import ConfigError
    from selfplay.curriculum.database import StoreError
    from selfplay.executor.runner import SandboxError, SandboxUnavailable

    try:
        return args.handler(args)
    except (ConfigError, SandboxUnavailable, SandboxError, OSError, StoreError) as err:
        # a note names the log of the libraries' output, where one was kept
        print(f"selfplay {args.command}: {err}", *getattr(err, "__notes__", ()), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
