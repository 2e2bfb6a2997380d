"""Every evaluated checkpoint against the base evaluated on its own setup, in one table: how far
any run moved CRUXEval's non-trivial items, output and input prediction.

    .venv/bin/python scripts/checkpoints_table.py --bases results/cruxeval-direct/base \
        results/cruxeval-direct/base-bfloat16 results/cruxeval-direct/base-bfloat16-epyc \
        results/cruxeval-direct/base-float32 results/cruxeval-direct/base-float32-epyc \
        -- results/cruxeval-direct/*

Greedy answers change with the machine and the precision (`selfplay.provenance`), so each
folder is paired with the base whose recorded setup does not differ from its own: a base and a
folder that both record none (results older than the record) pair too; a folder with no such
base is listed as unpaired, not paired with another setup's base. Folders given as bases are
skipped among the others. The pairing and the test are `selfplay report --compare`'s (McNemar,
exact, two-sided, on the items the copy answer does not solve). One row per folder; `--json`
prints one JSON line per folder and a summary line last: how many folders were paired, the
range of the net change (gained - lost) per subset, and how many folders gained or lost
significantly (p < 0.01).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from selfplay.eval.report import compare  # noqa: E402
from selfplay.provenance import differences, recorded  # noqa: E402

SUBSETS = ("cruxeval_o", "cruxeval_i")
ALPHA = 0.01


def base_for(folder: Path, bases: dict[Path, dict | None]) -> Path | None:
    """The first base made on the same setup as `folder`, or None; `bases` maps each base
    folder to its recorded setup."""
    mine = recorded(folder / "samples.jsonl")
    for base, theirs in bases.items():
        if (mine is None) != (theirs is None):
            continue
        if mine is None or not differences(mine, theirs):
            return base
    return None


def row(folder: Path, base: Path) -> dict:
    """A folder's non-trivial gained, lost, net and p per subset against `base`."""
    paired = compare(base, folder)
    out = {"folder": folder.name, "base": base.name}
    for subset in SUBSETS:
        stats = (paired.get(subset) or {}).get("non_trivial")
        if stats:
            out[subset] = {
                "n": stats["n"],
                "before": stats["before"],
                "after": stats["after"],
                "gained": stats["gained"],
                "lost": stats["lost"],
                "net": stats["gained"] - stats["lost"],
                "p": stats["p_value"],
            }
    return out


def summary(rows: list[dict], unpaired: list[str]) -> dict:
    out = {"paired": len(rows), "unpaired": unpaired}
    for subset in SUBSETS:
        nets = [(r[subset]["net"], r["folder"]) for r in rows if subset in r]
        if not nets:
            continue
        significant = [r[subset] for r in rows if subset in r and r[subset]["p"] < ALPHA]
        out[subset] = {
            "folders": len(nets),
            "net_min": min(nets)[0],
            "net_max": max(nets)[0],
            "net_max_folder": max(nets)[1],
            "up_significant": sum(s["net"] > 0 for s in significant),
            "down_significant": sum(s["net"] < 0 for s in significant),
        }
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bases", type=Path, nargs="+", required=True, help="base folders")
    parser.add_argument("folders", type=Path, nargs="+", help="`selfplay eval --out` folders")
    parser.add_argument("--json", action="store_true", help="JSON lines, a summary last")
    args = parser.parse_args(argv)
    bases = {b.resolve(): recorded(b / "samples.jsonl") for b in args.bases}  # read once
    rows, unpaired = [], []
    for folder in sorted(f.resolve() for f in args.folders):
        if folder in bases or not (folder / "samples.jsonl").is_file():
            continue
        base = base_for(folder, bases)
        if base is None:
            unpaired.append(folder.name)
            continue
        rows.append(row(folder, base))
    if args.json:
        for r in rows:
            print(json.dumps(r))
    else:
        print(f"{'folder':<92} {'base':<20} {'O nt gained/lost net p':<28} I nt gained/lost net p")
        for r in rows:
            cells = [
                f"{r[s]['gained']:>3} / {r[s]['lost']:<3} {r[s]['net']:+4d} {r[s]['p']:<9.2g}"
                if s in r
                else "-"
                for s in SUBSETS
            ]
            print(f"{r['folder']:<92} {r['base']:<20} {cells[0]:<28} {cells[1]}")
    print(json.dumps(summary(rows, unpaired)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
