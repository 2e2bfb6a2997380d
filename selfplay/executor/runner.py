"""Trusted side of program runs: a pool of sandboxed worker processes and the batch protocol.

Each worker is `python -S -B -m selfplay.executor.worker` started inside bubblewrap with
every namespace unshared (user, pid, network, mount, ipc, uts, cgroup), all capabilities
dropped, an empty environment except a fixed PYTHONHASHSEED, and a file system that holds
only the interpreter, /usr and the `selfplay` package, read-only. The worker then applies
rlimits, Landlock and seccomp itself (`hardening.py`) and reports what it applied; `WorkerPool`
compares the report with `ExecutorConfig.isolation` and fails closed (`SandboxUnavailable`)
when a required layer is missing, unless `ExecutorConfig.accept_missing` names it.

Workers get distinct hash seeds (`hash_seed + index`), so validation can run a program in two
processes whose string hashing (and so set iteration order) differs.

The pool treats everything a worker sends as untrusted: frames are size-capped JSON, each
result is checked for shape, and output text is re-parsed by the caller. A worker that stalls
past its batch deadline is killed with everything in its namespaces (`--die-with-parent`
and the pid namespace) and restarted; the runs it held come back as `crash:worker`.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import marshal
import os
import re
import selectors
import shutil
import signal
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from selfplay.config import ISOLATION_LAYERS, ExecutorConfig

__all__ = ["ProgramRun", "RunResult", "WorkerPool", "SandboxUnavailable", "SandboxError"]

_HEADER = struct.Struct(">I")
_REASON = re.compile(r"[a-z_]+(:[A-Za-z0-9_.]+)?\Z")


class SandboxUnavailable(RuntimeError):
    """A required isolation layer is missing on this machine (fail closed)."""


class SandboxError(RuntimeError):
    """The executor itself failed (not the program it ran)."""


@dataclass(frozen=True)
class ProgramRun:
    """One execution of `f(<input>)` of a program."""

    program: int  # index into the batch's program list
    call: bytes  # marshalled code of `_args_(<input>)` (see `policy.compile_input`)
    expression: bool  # an expression input: evaluated under the sandbox's guards
    cpu_s: float  # CPU-time limit
    group: int | None = None  # runs of one answer: after a timeout the rest of it is skipped


@dataclass(frozen=True)
class RunResult:
    ok: bool
    output: str | None  # canonical text as the sandbox wrote it (re-parse before trusting)
    reason: str
    detail: str
    cpu_s: float


def _sandbox_argv(hash_seed: int, bwrap: str | None) -> list[str]:
    python = os.path.realpath(getattr(sys, "_base_executable", sys.executable))
    package = Path(__file__).resolve().parents[1]  # .../selfplay
    command = [python, "-S", "-B", "-m", "selfplay.executor.worker"]
    if bwrap is None:
        return command
    argv = [bwrap, "--unshare-all", "--unshare-user", "--die-with-parent", "--new-session"]
    argv += ["--cap-drop", "ALL"]
    argv += ["--disable-userns", "--clearenv", "--setenv", "PYTHONHASHSEED", str(hash_seed)]
    argv += ["--setenv", "PYTHONPATH", "/sandbox", "--setenv", "LC_ALL", "C.UTF-8"]
    argv += ["--ro-bind", "/usr", "/usr"]
    for top in ("/lib", "/lib64", "/lib32", "/bin", "/sbin"):
        if os.path.islink(top):
            argv += ["--symlink", os.readlink(top), top]
        elif os.path.isdir(top):
            argv += ["--ro-bind", top, top]
    prefix = os.path.realpath(sys.base_prefix)
    if prefix != "/usr" and not prefix.startswith("/usr/"):
        argv += ["--ro-bind", prefix, prefix]
    if not python.startswith(("/usr/", prefix + "/")):
        argv += ["--ro-bind", python, python]
    argv += ["--ro-bind", str(package), "/sandbox/selfplay"]
    argv += ["--proc", "/proc", "--dev", "/dev", "--chdir", "/", "--"]
    return argv + command


def _environment(hash_seed: int) -> dict[str, str]:
    """The environment of a worker started without bubblewrap: nothing but what it needs."""
    package_parent = str(Path(__file__).resolve().parents[2])
    return {"PYTHONHASHSEED": str(hash_seed), "PYTHONPATH": package_parent, "LC_ALL": "C.UTF-8"}


#: Bytes a worker's input pipe holds. A batch frame is about 0.8 kB a run (100-400 kB for the
#: batches of a validation); with Linux's default 64 kB a send blocked until the zygote had read
#: most of it, and the other workers waited for their batches meanwhile. Every pipe's size counts
#: towards its user's budget (`/proc/sys/fs/pipe-user-pages-soft`, 64 MB by default): 512 kB
#: leaves room for 128 workers, and where the budget is spent the pipe keeps its size.
_PIPE_BYTES = 1 << 19


def _widen_pipe(fd: int) -> None:
    with contextlib.suppress(AttributeError, OSError):  # not Linux, or a lower pipe-max-size
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, _PIPE_BYTES)


class _Worker:
    """One sandboxed zygote process and its pipes."""

    def __init__(self, index: int, config: ExecutorConfig, bwrap: str | None):
        self.index = index
        self.hash_seed = config.hash_seed + index
        self.config = config
        self.bwrap = bwrap
        self.proc: subprocess.Popen | None = None
        self.buffer = b""
        self.ready: dict = {}

    def start(self) -> None:
        argv = _sandbox_argv(self.hash_seed, self.bwrap)
        env = None if self.bwrap else _environment(self.hash_seed)
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env if env is not None else {},
            cwd="/",
            start_new_session=True,
            close_fds=True,
        )
        self.buffer = b""
        _widen_pipe(self.proc.stdin.fileno())
        settings = {
            "layers": [layer for layer in ISOLATION_LAYERS if layer in self.config.isolation],
            "extra_modules": list(self.config.extra_modules),
        }
        self.send(marshal.dumps(settings))

    def send(self, payload: bytes) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(_HEADER.pack(len(payload)) + payload)
        self.proc.stdin.flush()

    def read_some(self) -> bool:
        """Read what is available into the buffer; False on end of file."""
        chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
        self.buffer += chunk
        return bool(chunk)

    def take_frame(self, max_bytes: int) -> bytes | None:
        if len(self.buffer) < _HEADER.size:
            return None
        size = _HEADER.unpack_from(self.buffer)[0]
        if size > max_bytes:
            raise SandboxError(f"worker {self.index} sent a frame of {size} bytes")
        if len(self.buffer) < _HEADER.size + size:
            return None
        frame = self.buffer[_HEADER.size : _HEADER.size + size]
        self.buffer = self.buffer[_HEADER.size + size :]
        return frame

    def wait_frame(self, timeout: float, max_bytes: int) -> bytes | None:
        deadline = time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            sel.register(self.proc.stdout, selectors.EVENT_READ)
            while (frame := self.take_frame(max_bytes)) is None:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left) or not self.read_some():
                    return None
        return frame

    def stderr_text(self) -> str:
        try:
            return self.proc.stderr.read1(20_000).decode(errors="replace") if self.proc else ""
        except (OSError, ValueError):
            return ""

    def kill(self) -> None:
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            with contextlib.suppress(OSError):
                stream.close()
        self.proc = None


class WorkerPool:
    """Sandboxed workers that execute batches of runs; see the module docstring."""

    def __init__(self, config: ExecutorConfig):
        if config.workers and config.workers < 2:
            raise ValueError(
                "executor.workers must be at least 2 (two hash seeds validate determinism)"
            )
        self.config = config
        self.size = config.workers or max(2, os.cpu_count() or 2)
        self.bwrap = self._find_bwrap()
        self.workers = [_Worker(i, config, self.bwrap) for i in range(self.size)]
        self._pending: dict[int, tuple[float, int]] = {}  # worker: (batch deadline, runs)
        started = time.monotonic()
        for worker in self.workers:
            worker.start()
        for worker in self.workers:
            self._await_ready(worker)
        self.layers = self._check_layers(self.workers[0].ready["layers"])
        self.startup_s = time.monotonic() - started

    # -- start-up and isolation ----------------------------------------------------------------

    def _find_bwrap(self) -> str | None:
        if "namespaces" not in self.config.isolation:
            return None
        found = shutil.which(self.config.bwrap)
        if found and self._bwrap_works(found):
            return found
        if "namespaces" in self.config.accept_missing:
            return None
        why = "not installed" if not found else "cannot create namespaces here"
        raise SandboxUnavailable(
            f"isolation layer 'namespaces' is unavailable: bubblewrap ({self.config.bwrap}) is "
            f"{why}. "
            "Install it (Debian/Ubuntu: apt-get install bubblewrap) or accept weaker isolation "
            "with executor.accept_missing=[namespaces]."
        )

    @staticmethod
    def _bwrap_works(bwrap: str) -> bool:
        probe = [bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "true"]
        try:
            return subprocess.run(probe, capture_output=True, timeout=10).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return False

    def _await_ready(self, worker: _Worker) -> None:
        frame = worker.wait_frame(self.config.startup_timeout_s, 1 << 16)
        if frame is None:
            err = worker.stderr_text()
            worker.kill()
            raise SandboxError(f"sandbox worker {worker.index} did not start:\n{err}")
        worker.ready = json.loads(frame)

    def _check_layers(self, reported: dict[str, str]) -> dict[str, str]:
        layers = dict(reported)
        layers["namespaces"] = (
            "ok: bubblewrap (user, pid, net, mount, ipc, uts, cgroup)" if self.bwrap else "off"
        )
        if self.bwrap is None and "namespaces" in self.config.isolation:
            layers["namespaces"] = "unavailable: accepted by configuration"
        missing = [
            name
            for name in self.config.isolation
            if not layers.get(name, "").startswith("ok") and name not in self.config.accept_missing
        ]
        if missing:
            self.close()
            detail = "; ".join(f"{name}: {layers.get(name)}" for name in missing)
            raise SandboxUnavailable(
                f"required isolation layers are unavailable ({detail}). Accept weaker isolation "
                f"explicitly with executor.accept_missing=[{','.join(missing)}]."
            )
        return layers

    def probe(self, paths: list[str] = ()) -> dict[str, str]:
        """What a hardened child is refused when it tries to escape (see `hardening.probe`)."""
        worker = self._live(0)
        job = self._job_settings()
        job["paths"] = list(paths)
        worker.send(marshal.dumps(("probe", job)))
        frame = worker.wait_frame(30, 1 << 16)
        if frame is None:
            raise SandboxError("the probe did not answer")
        return json.loads(frame)["probe"]

    # -- batches -------------------------------------------------------------------------------

    def _job_settings(self) -> dict:
        c = self.config
        return {
            "memory_bytes": c.memory_mb << 20,
            "limits": (c.max_value_chars, c.max_value_depth, c.max_value_items, c.max_int_digits),
            "runs_per_child": c.runs_per_child,
            "start_allowance_s": 1.0,
        }

    def run(
        self, jobs: dict[int, tuple[list[bytes], list[ProgramRun]]]
    ) -> dict[int, list[RunResult]]:
        """Execute `{worker index: (marshalled programs, runs)}` concurrently."""
        assert not self._pending, "run() while submitted batches are outstanding"
        results = {index: [] for index, (_, runs) in jobs.items() if not runs}
        self.submit({index: job for index, job in jobs.items() if job[1]})
        while self._pending:
            results.update(self.collect(None))
        return results

    def submit(self, jobs: dict[int, tuple[list[bytes], list[ProgramRun]]]) -> None:
        """Send each worker its batch without waiting; the worker must be idle (`busy`)."""
        for index, (programs, runs) in jobs.items():
            assert index not in self._pending, f"worker {index} already has a batch"
            worker = self._live(index)
            job = self._job_settings()
            job["programs"] = programs
            slack = self.config.wall_slack_s
            job["runs"] = [(r.program, r.call, r.expression, r.cpu_s, slack, r.group) for r in runs]
            job["cpu_budget_s"] = sum(r.cpu_s for r in runs) * 2 + 1
            worker.send(marshal.dumps(("batch", job)))
            budget = sum(2 * r.cpu_s + self.config.wall_slack_s for r in runs)
            deadline = time.monotonic() + budget + self.config.batch_grace_s
            self._pending[index] = (deadline, len(runs))

    def _live(self, index: int) -> _Worker:
        worker = self.workers[index]
        if worker.proc is None or worker.proc.poll() is not None:
            worker.kill()
            worker.start()
            self._await_ready(worker)
        return worker

    @property
    def busy(self) -> set[int]:
        """Workers with a submitted batch whose results have not been collected."""
        return set(self._pending)

    def collect(self, timeout: float | None) -> dict[int, list[RunResult]]:
        """Results of the submitted batches that finish (or fail) within `timeout` seconds
        (None: wait for at least one); each batch's results are returned once."""
        results: dict[int, list[RunResult]] = {}
        if not self._pending:
            return results
        max_bytes = 64 << 20
        until = None if timeout is None else time.monotonic() + timeout
        with selectors.DefaultSelector() as sel:
            for index in self._pending:
                sel.register(self.workers[index].proc.stdout, selectors.EVENT_READ, index)
            while self._pending and not (results and until is None):
                now = time.monotonic()
                wait = min(deadline for deadline, _ in self._pending.values()) - now
                if until is not None:
                    wait = min(wait, until - now)
                for key, _ in sel.select(max(0.0, wait)):
                    index = key.data
                    worker, count = self.workers[index], self._pending[index][1]
                    alive = worker.read_some()
                    frame = worker.take_frame(max_bytes)
                    if frame is None and alive:
                        continue
                    sel.unregister(key.fileobj)
                    del self._pending[index]
                    if frame is not None:
                        results[index] = self._decode(index, frame, count)
                    else:
                        results[index] = self._lost(index, count, "worker exited")
                now = time.monotonic()
                for index in [i for i, (d, _) in self._pending.items() if d <= now]:
                    sel.unregister(self.workers[index].proc.stdout)
                    count = self._pending.pop(index)[1]
                    results[index] = self._lost(index, count, "batch deadline passed")
                if until is not None and now >= until:
                    break
        return results

    def _lost(self, index: int, count: int, why: str) -> list[RunResult]:
        """A worker died or stalled: its runs failed, and it is replaced on next use."""
        self.workers[index].kill()
        return [RunResult(False, None, "crash:worker", why, 0.0) for _ in range(count)]

    def _decode(self, index: int, frame: bytes, count: int) -> list[RunResult]:
        try:
            message = json.loads(frame)
        except ValueError:
            return self._lost(index, count, "unreadable reply")
        if "error" in message:
            self.workers[index].kill()
            raise SandboxError(f"sandbox worker {index} failed: {message['error']}")
        entries = message.get("results")
        if not isinstance(entries, list) or len(entries) != count:
            return self._lost(index, count, "malformed reply")
        return [_result(entry, i) for i, entry in enumerate(entries)]

    def close(self) -> None:
        for worker in self.workers:
            worker.kill()


def _result(entry: object, index: int) -> RunResult:
    """Check the shape of one untrusted result entry."""
    if not (isinstance(entry, list) and len(entry) == 6 and entry[0] == index):
        return RunResult(False, None, "crash:protocol", "malformed result", 0.0)
    _, ok, output, reason, detail, cpu = entry
    if not isinstance(reason, str) or not _REASON.match(reason):
        reason = "crash:protocol"
    if ok is not True or not isinstance(output, str):
        ok, output = False, None
    cpu = float(cpu) if isinstance(cpu, (int, float)) and cpu >= 0 else 0.0
    detail = detail[:300] if isinstance(detail, str) else ""
    return RunResult(ok, output, "ok" if ok else reason, detail, cpu)
