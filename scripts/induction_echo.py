"""How much of a run's solver update goes to induction replies that write the prompt's examples
back out after the function.

    .venv/bin/python scripts/induction_echo.py results/learn20-solveonly-props4-examples*

An induction reply "echoes" when, after its program, it calls `f` again as the prompt showed it
(`print(f(6))  # Output: 720`, `assert f(2) == 4`, `# Example usage:`). The judge reads the
program without that code (`selfplay.extract.clean_program`), so those tokens share the reply's
advantage; with `roles.bare_programs` such a reply is malformed instead.

For every run folder (its `samples.jsonl.gz`, every rollout with its reward, advantage, tokens
and text): induction replies and echoing ones per block of steps, the echoing ones with a
positive reward, and the share of the solver's positive advantage x tokens that echoing replies
carry. Prints one JSON object per run.
"""

from __future__ import annotations

import argparse
import gzip
import json
import re
from pathlib import Path

ECHO = re.compile(r"print\(f\(|assert f\(|# ?Output|# ?Example|# Test")


def summarise(folder: Path, blocks: int) -> dict:
    counts: dict[str, list[int]] = {}
    mass, echo_mass, last = {}, {}, 0
    with gzip.open(folder / "samples.jsonl.gz", "rt") as lines:
        for line in lines:
            row = json.loads(line)
            if row.get("role") != "solve":
                continue
            step = row["step"]
            last = max(last, step)
            block = f"{(step - 1) // blocks * blocks + 1}-{((step - 1) // blocks + 1) * blocks}"
            echo = row["type"] == "induction" and bool(ECHO.search(row["text"]))
            if row["type"] == "induction":
                seen = counts.setdefault(block, [0, 0, 0])
                seen[0] += 1
                seen[1] += echo
                seen[2] += echo and row["reward"] > 0
            if row["advantage"] > 0:
                weight = row["advantage"] * row["tokens"]
                mass[block] = mass.get(block, 0.0) + weight
                echo_mass[block] = echo_mass.get(block, 0.0) + weight * echo
    total = sum(mass.values())
    return {
        "run": folder.name,
        "steps": last,
        "induction_replies_echoing_rewarded": counts,
        "echo_share_of_positive_advantage_tokens": {
            b: round(echo_mass[b] / mass[b], 3) for b in mass if mass[b]
        },
        "echo_share_all_steps": round(sum(echo_mass.values()) / total, 3) if total else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path, help="run folders with samples.jsonl.gz")
    parser.add_argument("--steps", type=int, default=10, help="steps per block")
    args = parser.parse_args()
    for folder in args.runs:
        if not (folder / "samples.jsonl.gz").is_file():
            continue
        print(json.dumps(summarise(folder, args.steps)))


if __name__ == "__main__":
    main()
