"""The command line shared by the scripts that pair evaluation folders with a baseline
(`stock_split.py`, `complexity_split.py`): the baseline's folder, the folders paired with it,
`--json`, and `--pool STORE RUN` (repeatable) for the tasks a run put into its pool; and the
row of numbers each of them gives for a set of paired items."""

from __future__ import annotations

import argparse
from pathlib import Path


def parser(doc: str, pool_help: str) -> argparse.ArgumentParser:
    """The arguments of a pairing script whose module docstring is `doc`."""
    parsed = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    parsed.add_argument("base", type=Path, help="the baseline's `selfplay eval --out` folder")
    parsed.add_argument("others", type=Path, nargs="*", help="folders paired with it")
    parsed.add_argument("--json", action="store_true", help="one JSON object instead of a table")
    parsed.add_argument(
        "--pool", nargs=2, action="append", default=[], metavar=("STORE", "RUN"), help=pool_help
    )
    return parsed


def paired_row(base: dict, other: dict, keys: list) -> dict:
    """Items `keys` of two folders' records paired: how many, right before and after, gained,
    lost and McNemar's exact two-sided p."""
    from selfplay.eval.paired import mcnemar_exact

    before = [bool(base[k]["correct"]) for k in keys]
    after = [bool(other[k]["correct"]) for k in keys]
    gained, lost, p = mcnemar_exact(before, after)
    return {
        "items": len(keys),
        "before": sum(before),
        "after": sum(after),
        "gained": gained,
        "lost": lost,
        "p": p,
    }
