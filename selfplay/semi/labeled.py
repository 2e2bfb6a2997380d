"""Labeled sets imported when a run starts, and the selection log.

`seed.labeled` names labeled sets (CRUXEval, MBPP, AZR seeds or the generic JSONL; see
`datasets/seeds.py`) or math problems (GSM8K, MATH-500: `math` tasks whose output is the
gold answer, checked by the math checker); `{data}` in a path is the external data
folder (`selfplay.files`). They are checked before the model loads (a missing file,
or a file of math problems when `selfplay.task_types` has no `math`, stops the run at once)
and imported with origin `labeled` each time the run starts: the pool deduplicates by content
hash, so a resumed run adds nothing twice, and a task it holds as seed or proposed becomes
labeled.
Each import's summary is appended to `imports.jsonl` in the run folder.

With `curriculum.selection=trapo`, `selection.jsonl` in the run folder gets one line per
unlabeled task whose admission was decided or changed at a step: task id, admitted or not,
why (`similar`, `dissimilar`, `flat`, `beyond_top`, `few_points`, `no_reference`, ...), its
similarity to the labeled trajectory and how many steps it rests on (see
`semi/selection.py`). A restarted run logs every current decision once again.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from selfplay.files import data_root, keep_steps


def labeled_paths(config) -> list[Path]:
    """The labeled sets of `seed.labeled`, resolved and checked; raises before any work."""
    from selfplay.config import ConfigError
    from selfplay.datasets.seeds import MATH_FORMATS, guess_format

    paths = [Path(p.replace("{data}", str(data_root()))) for p in config.seed.labeled]
    for path in paths:
        if not path.is_file():
            raise ConfigError(f"seed.labeled: no file {path}")
        fmt = guess_format(path)
        if fmt in MATH_FORMATS and "math" not in config.selfplay.task_types:
            raise ConfigError(
                f"seed.labeled: {path.name} holds math problems ({fmt}), which become tasks of "
                "type 'math'; add math to selfplay.task_types (now "
                f"{list(config.selfplay.task_types)}) to use them"
            )
    return paths


def import_labeled(
    store,
    executor,
    paths: list[Path],
    folder: Path,
    types=None,
    checker=None,
    limit=0,
    seed=0,
    decontaminate=(),
    benchmarks=None,
) -> list:
    """Import each labeled set into the pool (only tasks of `types`, if given; math problems
    are checked by `checker`, a `MathChecker`; with `limit`, a sample of that many records of
    each set drawn with `seed`); returns the `ImportReport`s. A task whose program is one of
    the benchmarks `decontaminate` (`benchmarks` holds their programs, where loaded) is
    rejected, except against the benchmark whose own file the set is
    (`contamination.import_check`)."""
    from selfplay.datasets.contamination import import_check
    from selfplay.datasets.importer import import_file

    reports = []
    with open(folder / "imports.jsonl", "a", encoding="utf-8") as log:
        for path in paths:
            checked, own = import_check(path, decontaminate, benchmarks)
            if own:
                print(
                    f"seed.labeled: {path.name} is {own} itself: its tasks are not checked "
                    f"against {own}, and {own} scores of this run measure tasks it trained on",
                    file=sys.stderr,
                )
            report = import_file(
                store,
                path,
                executor,
                labeled=True,
                types=types,
                checker=checker,
                limit=limit,
                sample_seed=seed,
                benchmarks=checked,
            )
            entry = {
                "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
                "path": str(path),
                "decontaminated": sorted(set(checked.programs.values())),
                "benchmark_itself": own,
            }
            log.write(json.dumps({**entry, **report.summary()}) + "\n")
            reports.append(report)
    return reports


class SelectionLog:
    """Appends the admission decisions that are new or changed since the last step logged."""

    def __init__(self, path: Path, resume_step: int | None = None) -> None:
        """A run resumed after `resume_step` drops the lines of the steps it runs again and
        goes on from the decisions the kept lines hold."""
        self.path = path
        self.last: dict[int, tuple[bool, str]] = {}
        if resume_step is not None:
            keep_steps(path, resume_step)
        if path.exists():
            for line in path.read_text().splitlines():
                try:
                    record = json.loads(line)
                    self.last[record["task_id"]] = (record["admitted"], record["reason"])
                except (ValueError, KeyError, TypeError):
                    continue  # a half-written line of a killed run

    def write(self, selection) -> int:
        """Log a step's `Selection`; returns how many lines were written."""
        lines = []
        for record in selection.records():
            state = (record["admitted"], record["reason"])
            if self.last.get(record["task_id"]) != state:
                self.last[record["task_id"]] = state
                lines.append(json.dumps(record))
        if lines:
            with open(self.path, "a", encoding="utf-8") as out:
                out.write("\n".join(lines) + "\n")
        return len(lines)
