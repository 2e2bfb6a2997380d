"""CPU time per validation, per process, from the processes' own clocks (not wall time).

    python benchmarks/executor_cpu.py --data ../shared/data/cruxeval/cruxeval.jsonl
    python benchmarks/executor_cpu.py --data ... --compare OLD_CHECKOUT NEW_CHECKOUT --rounds 6

Validates the CRUXEval programs that validate, `--passes` times, each pass with a comment of
its own on every program (nothing compiled is reused), after one warm pass, and prints one JSON
line: microseconds of CPU per validation in the caller (this process, all its threads), the
compile helpers, the sandbox zygotes and their children (`/proc/<pid>/stat`, clock ticks:
about 3 us resolution over 3,000 validations), with an output digest. On a machine shared
with other jobs CPU times vary from run to run: `--compare` runs the checkouts' packages in
subprocesses, alternating, and prints each part's median.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import time

_TICK = os.sysconf("SC_CLK_TCK")
PARTS = ("caller", "helpers", "zygotes", "children", "total")


def _processes() -> dict[int, tuple[int, float, float]]:
    """pid: (parent, own CPU seconds, CPU seconds of its reaped children)."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as fh:
                fields = fh.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        utime, stime, cutime, cstime = (int(x) / _TICK for x in fields[11:15])
        table[int(name)] = (int(fields[1]), utime + stime, cutime + cstime)
    return table


def _tree(roots: list[int]) -> tuple[float, float]:
    """(the roots' own, everything below them) CPU seconds: a descendant counts below whether
    it is still alive (its own time) or was reaped (its parent's children's time), so that a
    child that ends inside the measured window moves nothing between the two."""
    table = _processes()
    below: dict[int, list[int]] = {}
    for pid, (parent, _, _) in table.items():
        below.setdefault(parent, []).append(pid)
    own = under = 0.0
    stack = [(pid, True) for pid in roots]
    while stack:
        pid, root = stack.pop()
        if pid in table:
            if root:
                own += table[pid][1]
            else:
                under += table[pid][1]
            under += table[pid][2]
        stack.extend((child, False) for child in below.get(pid, []))
    return own, under


def measure(data: str, passes: int, overrides: list[str]) -> dict:
    import selfplay
    from selfplay.config import load
    from selfplay.executor import Executor
    from selfplay.files import records

    config = load(None, [f"executor.{o}" for o in overrides]).executor
    rows = records(data)
    with Executor(config) as executor:
        verdicts = executor.validate([(r["code"], r["input"]) for r in rows])
        tasks = [r for r, v in zip(rows, verdicts) if v.ok]
        executor.validate([(f"{t['code']}\n# warm {i}\n", t["input"]) for i, t in enumerate(tasks)])
        workers = [w.proc.pid for w in executor.pool.workers]
        helpers = [h.proc.pid for h in executor.compilers._helpers] if executor.compilers else []
        caller0, helpers0, sandbox0 = time.process_time(), _tree(helpers), _tree(workers)
        digest = hashlib.sha256()
        for p in range(passes):
            cases = [
                (f"{t['code']}\n# pass {p} task {i}\n", t["input"]) for i, t in enumerate(tasks)
            ]
            for v in executor.validate(cases):
                assert v.ok, "a CRUXEval task stopped validating"
                digest.update(v.output.encode() + b"\0")
        caller1, helpers1, sandbox1 = time.process_time(), _tree(helpers), _tree(workers)
    n = len(tasks) * passes

    def us(seconds: float) -> float:
        return round(seconds / n * 1e6, 1)

    row = {
        "validations": n,
        "caller": us(caller1 - caller0),
        "helpers": us(sum(helpers1) - sum(helpers0)),
        "zygotes": us(sandbox1[0] - sandbox0[0]),
        "children": us(sandbox1[1] - sandbox0[1]),
    }
    row["total"] = round(sum(row[part] for part in PARTS[:-1]), 1)
    row["outputs_sha256"] = digest.hexdigest()[:16]
    row["package"] = os.path.dirname(selfplay.__file__)
    return row


def compare(roots: list[str], rounds: int, argv: list[str]) -> None:
    rows: dict[str, list[dict]] = {root: [] for root in roots}
    for r in range(rounds):
        for root in roots if r % 2 == 0 else roots[::-1]:
            env = {
                "PYTHONPATH": os.path.abspath(root),
                "PYTHONHASHSEED": "0",
                "PATH": "/usr/bin:/bin",
            }
            out = subprocess.run([sys.executable, __file__, *argv], env=env, capture_output=True,
                                 text=True, check=True)  # fmt: skip
            row = json.loads(out.stdout.splitlines()[-1])
            rows[root].append(row)
            print(json.dumps({"root": root, **row}), flush=True)
    for root, runs in rows.items():
        medians = {part: statistics.median(run[part] for run in runs) for part in PARTS}
        digests = sorted({run["outputs_sha256"] for run in runs})
        print(json.dumps({"root": root, "median_us": medians, "outputs_sha256": digests}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--data", required=True, help="CRUXEval JSONL file")
    parser.add_argument("--passes", type=int, default=4)
    parser.add_argument("--compare", nargs="+", metavar="CHECKOUT", help="repository roots")
    parser.add_argument("--rounds", type=int, default=6, help="runs of each checkout")
    parser.add_argument("overrides", nargs="*", metavar="key=value", help="executor overrides")
    args = parser.parse_args()
    if args.compare:
        data = os.path.abspath(args.data)
        compare(args.compare, args.rounds, ["--data", data, "--passes", str(args.passes),
                                            *args.overrides])  # fmt: skip
    else:
        print(json.dumps(measure(args.data, args.passes, args.overrides)))


if __name__ == "__main__":
    main()
