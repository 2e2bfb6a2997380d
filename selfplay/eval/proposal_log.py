"""A run's `proposals.jsonl` (`trainer.metrics.ProposalLog`) summed up for `selfplay report`:
the proposals by outcome, how many of each were cut at the token limit, the commonest reasons
a proposal was not valid, and the steps where the file holds fewer proposals than the metrics
count."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from selfplay.files import BadLine, read_jsonl

__all__ = ["proposal_log"]

_TOP_REASONS = 8  # the commonest reasons a logged proposal was not valid


def proposal_log(folder: Path, rows: list[dict]) -> dict:
    """From the run's `proposals.jsonl` (`trainer.metrics.ProposalLog`; {} where the run wrote
    none): the proposals by outcome, how many of each were cut at the token limit, and the
    commonest reasons a proposal was not valid."""
    path = next((p for p in (folder / "proposals.jsonl", folder / "proposals.jsonl.gz")
                 if p.is_file()), None)  # fmt: skip
    if path is None:
        return {}
    known = ("malformed", "invalid", "valid")
    outcomes, cut, reasons, steps, unreadable = Counter(), Counter(), Counter(), Counter(), 0
    for _, row in read_jsonl(path):
        if isinstance(row, BadLine) or row.get("outcome") not in known:
            unreadable += 1
            continue
        outcomes[row["outcome"]] += 1
        cut[row["outcome"]] += bool(row.get("cut"))
        steps[row.get("step")] += 1
        if row["outcome"] != "valid":
            reasons[str(row.get("reason") or "unknown")] += 1
    out = {
        "proposals": sum(outcomes.values()),
        "steps": sorted(s for s in steps if isinstance(s, int)),
        "outcomes": {k: [outcomes[k], cut[k]] for k in known},
        "not_valid_reasons": dict(reasons.most_common(_TOP_REASONS)),
        "unreadable_lines": unreadable,
    }
    # a run begun before the log existed, or one whose lines were lost, logs fewer proposals
    # than its metrics (`rows`) count
    counted = {r["step"]: r["propose/proposals"] for r in rows if "propose/proposals" in r}
    out["steps_not_logged"] = sorted(k for k, n in counted.items() if steps[k] != n)
    return out
