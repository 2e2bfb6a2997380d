"""How much of each step's policy update the proposer's rollouts carry, from a run's rollouts.

    .venv/bin/python scripts/role_share.py results/learn-long results/learn20-seed1 --steps 1 20

A run logs it as `update/propose_share` (`selfplay.trainer.update.propose_share`); this
recomputes it from the rollouts a run wrote (`samples.jsonl`, or the `samples.jsonl.gz` kept
under `results/`), so that runs from before the metric can be read too. Per run: the rollouts
and completion tokens of each role over the steps, and the proposer's share of the weight
(sum |advantage| x weight) under token aggregation (weight: the completion's tokens) and under
sequence aggregation (weight 1). The last line is a JSON object of the same.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from pathlib import Path
from types import SimpleNamespace

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from selfplay.trainer.update import propose_share  # noqa: E402


def rollouts(run: Path, first: int, last: int) -> list[SimpleNamespace]:
    """The run's rollouts of steps `first`-`last`, with what the share needs."""
    path = next((p for p in (run / "samples.jsonl", run / "samples.jsonl.gz") if p.exists()), None)
    if path is None:
        raise SystemExit(f"{run}: no samples.jsonl or samples.jsonl.gz (run.log_samples)")
    opener = gzip.open if path.suffix == ".gz" else open
    out = []
    with opener(path, "rt") as lines:
        for number, line in enumerate(lines, 1):
            try:
                row = json.loads(line)
            except json.JSONDecodeError as error:
                raise SystemExit(f"{path}:{number}: not a JSON line ({error})") from None
            if first <= row["step"] <= last:
                ids = range(row["tokens"])  # the share needs the count only
                out.append(SimpleNamespace(role=row["role"], completion_ids=ids,
                                           advantage=row["advantage"]))  # fmt: skip
    if not out:
        raise SystemExit(f"{path}: no rollouts in steps {first}-{last}")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "runs", nargs="+", type=Path, help="run folders (store/<run>, results/<run>)"
    )
    parser.add_argument("--steps", nargs=2, type=int, default=(1, 10**9), metavar=("LO", "HI"))
    args = parser.parse_args(argv)
    summary = {}
    for run in args.runs:
        batch = rollouts(run, *args.steps)
        counts = {
            role: [sum(1 for r in batch if r.role == role),
                   sum(len(r.completion_ids) for r in batch if r.role == role)]
            for role in ("propose", "solve")
        }  # fmt: skip
        # no rollout with an advantage: no share (None)
        shares = {
            how: propose_share(batch, how).get("propose_share") for how in ("token", "sequence")
        }
        shown = {how: "none" if s is None else f"{s:.3f}" for how, s in shares.items()}
        summary[run.name] = {"rollouts_tokens": counts, "propose_share": shares}
        print(
            f"{run.name}: proposals {counts['propose'][0]} ({counts['propose'][1]} tokens), "
            f"answers {counts['solve'][0]} ({counts['solve'][1]} tokens); the proposer's share "
            f"of the update: {shown['token']} by token, {shown['sequence']} by sequence"
        )
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
