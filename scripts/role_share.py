"""How much of a run's policy updates the proposer's rollouts carry, and each task type of the
solver's, from the rollouts it wrote.

    .venv/bin/python scripts/role_share.py results/learn-long results/learn20-seed1 --steps 1 20

A run logs it per step as `update/propose_share` (`selfplay.trainer.update_stats.propose_share`: the
proposer's share of the loss's advantage weight, sum |A| x w, w a rollout's tokens under token
aggregation and 1 under sequence aggregation). This recomputes it from the rollouts a run wrote
(`samples.jsonl`, or the `samples.jsonl.gz` kept under `results/`), so that runs from before
the metric can be read too, pooled over the steps asked (one ratio of sums, not a mean of the
per-step values). Per run: the rollouts and completion tokens of each role, and the share by
token and by sequence of the advantages as written, and as trained: with the run's
`trainer.aggregation` and `trainer.propose_weight` from its `config.yaml` (the rollouts are
written before the weight is applied). Then each task type's share of the solver's advantage
weight (`update/solve_share/<type>` in runs that log it), by token and by sequence: CRUXEval's
output prediction is deduction, and by token a long induction answer outweighs many short
deduction ones. The last line is a JSON object of the same, keyed by
the folders as given.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from selfplay.files import BadLine, read_jsonl  # noqa: E402
from selfplay.trainer.update_stats import propose_share, solve_shares  # noqa: E402


def rollouts(run: Path, first: int, last: int) -> list[SimpleNamespace]:
    """The run's rollouts of steps `first`-`last`, with what the share needs. A line that is
    not JSON (the half-written last line of a run still going) is skipped, with a warning."""
    path = next((p for p in (run / "samples.jsonl", run / "samples.jsonl.gz") if p.exists()), None)
    if path is None:
        raise SystemExit(f"{run}: no samples.jsonl or samples.jsonl.gz (run.log_samples)")
    out = []
    for number, row in read_jsonl(path):
        if isinstance(row, BadLine):
            print(f"{path}:{number}: skipped: {row.error}", file=sys.stderr)
            continue
        if first <= row["step"] <= last:
            ids = range(row["tokens"])  # the share needs the count only
            out.append(SimpleNamespace(role=row["role"], task_type=row.get("type", "?"),
                                       completion_ids=ids, advantage=row["advantage"]))  # fmt: skip
    if not out:
        raise SystemExit(f"{path}: no rollouts in steps {first}-{last}")
    return out


def trained_as(run: Path) -> tuple[str, float]:
    """The run's (trainer.aggregation, trainer.propose_weight), the defaults without a
    `config.yaml` or where it predates them."""
    path = run / "config.yaml"
    trainer = (yaml.safe_load(path.read_text()) or {}).get("trainer", {}) if path.exists() else {}
    return trainer.get("aggregation", "token"), float(trainer.get("propose_weight", 1.0))


def shares(batch: list[SimpleNamespace], aggregation: str, weight: float) -> dict:
    return {
        "token": propose_share(batch, "token"),
        "sequence": propose_share(batch, "sequence"),
        "as_trained": propose_share(batch, aggregation, weight),
    }


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
        aggregation, weight = trained_as(run)
        share = shares(batch, aggregation, weight)  # None: no rollout with an advantage
        shown = {how: "none" if s is None else f"{s:.3f}" for how, s in share.items()}
        by_type = {how: solve_shares(batch, how) for how in ("token", "sequence")}
        summary[str(run)] = {
            "rollouts_tokens": counts,
            "propose_share": share,
            "solve_shares": by_type,
            "aggregation": aggregation,
            "propose_weight": weight,
        }
        print(
            f"{run}: proposals {counts['propose'][0]} ({counts['propose'][1]} tokens), "
            f"answers {counts['solve'][0]} ({counts['solve'][1]} tokens); the proposer's share "
            f"of the advantage weight: {shown['token']} by token, {shown['sequence']} by "
            f"sequence; as trained ({aggregation}, propose_weight {weight:g}): "
            f"{shown['as_trained']}"
        )
        for how, parts in by_type.items():
            listed = ", ".join(f"{t} {part:.3f}" for t, part in parts.items()) or "none"
            print(f"  the solver's advantage weight by task type, by {how}: {listed}")
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
