"""The learning benchmark's reduced version: does RL make the embedded model better at the
tasks it trains on? (`benchmarks/learning_bench.py` measures the held-out gain; this is its
acceptance test at CI size.)"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# A train split of 16 tasks, 8 of them drawn by the pool's sampler each step with 8 answers
# each, lr 1e-4; the held-out split is kept tiny since this test asserts on the train split
# only (the benchmark measures the held-out gain). About 3 minutes on 2 CPU cores; measured
# there, the sampled accuracy of steps 1-8 was 0, 0, 0, 0, 0.02, 0.14, 0.19, 0.34 (the first
# steps teach the format: every answer parsed from step 2), and the greedy accuracy on 32
# train tasks went from 0.06 to 0.19.
STEPS = 8
REDUCED = [
    "--steps", str(STEPS),
    "--tasks", "8",
    "--samples", "8",
    "--train-pool", "16",
    "--train-probe", "32",
    "--heldout", "16",
    "--max-new-tokens", "24",
    "--lr", "1e-4",
]  # fmt: skip


@pytest.mark.slow
def test_rl_raises_the_accuracy_on_the_train_split(require_vllm):
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "learning_bench.py"), *REDUCED],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    summary = lines[-1]
    steps = [line for line in lines if line["phase"] == "step"]
    assert summary["phase"] == "summary" and len(steps) == STEPS, lines
    assert summary["trained_answers"] == STEPS * 64
    # the format is learned first: every sampled answer of the last step can be read
    assert steps[-1]["train_parsed"] == 1.0, steps
    # and the train tasks are answered right more often in the last two steps than in the
    # first two (128 sampled answers each)
    reward = [step["train_reward"] for step in steps]
    assert sum(reward[-2:]) > sum(reward[:2]) + 0.1, reward
    # greedily, the trained model answers no fewer train tasks than the base model
    assert summary["train_trained_accuracy"] >= summary["train_base_accuracy"], summary
