"""`MathChecker`: is an answer mathematically equal to the gold answer? Judged in worker
processes under a time limit.

    with MathChecker(config.mathcheck) as checker:
        verdicts = checker.check_many([(gold, answer), ...])   # one Verdict per pair

The judgement itself (math-verify's LaTeX parser and sympy comparison) lives in
`selfplay.mathcheck.worker`. It can hang or exhaust memory on hostile or merely unlucky input,
so it never runs in this process: a small pool of persistent workers takes the pairs, several
in flight per worker to keep the pipes busy, and answers them in order. Each answer must come
within `timeout_s` of the worker starting on it; a worker that overruns is killed and replaced,
its pair is judged unequal with reason `timeout`, and the pairs queued behind it go to the new
worker. A worker that dies (memory) is replaced the same way (`worker_died`).

Verdict reasons: `ok`, `not_equal`, `no_answer` (empty answer, not sent), `unparsable`,
`timeout`, `worker_died`, `error:<ExceptionType>`.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import time
import weakref
from collections import deque
from collections.abc import Sequence
from pathlib import Path

from selfplay.config import MathCheckConfig
from selfplay.types import Verdict

__all__ = ["MathChecker", "MathCheckError"]

#: Bytes of pairs written ahead to one busy worker: well under a pipe's 64 KiB, so that writing
#: never blocks (and with it the time limit) while that worker hangs.
_PIPE_BYTES = 32 * 1024


class MathCheckError(RuntimeError):
    """The checker itself failed (a worker that cannot start, a broken reply)."""


class _Worker:
    """One worker process, the pairs written to it and not yet answered, and since when it has
    been working on the first of them."""

    def __init__(self, config: MathCheckConfig):
        self.process = subprocess.Popen(
            [sys.executable, "-m", "selfplay.mathcheck.worker", str(config.memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=_worker_env(),
            bufsize=0,
        )
        self.pending: deque[tuple[int, int]] = deque()  # (pair index, bytes sent)
        self.buffer = b""
        self.since = time.monotonic()
        if not self._wait_ready(config.startup_timeout_s):
            self.kill()
            raise MathCheckError("a math checker worker did not start (is math-verify installed?)")

    def fileno(self) -> int:
        return self.process.stdout.fileno()

    def can_take(self, size: int) -> bool:
        """Whether a line of `size` bytes may be written now. An idle worker takes any line;
        a busy one only while its unread lines fit in the pipe, so that a write never blocks
        behind a worker that hangs."""
        return not self.pending or sum(n for _, n in self.pending) + size <= _PIPE_BYTES

    def send(self, index: int, line: bytes) -> None:
        if not self.pending:
            self.since = time.monotonic()
        self.pending.append((index, len(line)))
        view = memoryview(line)
        try:
            while view:
                view = view[self.process.stdin.write(view) :]
        except BrokenPipeError:
            pass  # the worker died: its reader sees the end of its output and replaces it

    def read_lines(self) -> list[str] | None:
        """Complete reply lines now available; None when the worker has exited."""
        chunk = os.read(self.fileno(), 1 << 16)
        if not chunk:
            return None
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        return [line.decode() for line in lines]

    def _wait_ready(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        with selectors.DefaultSelector() as selector:
            selector.register(self, selectors.EVENT_READ)
            while (left := deadline - time.monotonic()) > 0 and selector.select(left):
                lines = self.read_lines()
                if lines is None:
                    return False
                if lines:
                    return lines == ['"ready"']
        return False

    def kill(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            stream.close()


class MathChecker:
    """A pool of math-checking worker processes; see the module docstring."""

    def __init__(self, config: MathCheckConfig | None = None):
        self.config = config or MathCheckConfig()
        self._workers: list[_Worker] = []
        self.restarts = 0  # workers replaced after a timeout or death, for metrics and tests
        self._finalizer = weakref.finalize(self, _kill_all, self._workers)

    def __enter__(self) -> MathChecker:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        _kill_all(self._workers)

    def check(self, gold: str, answer: str | None) -> Verdict:
        return self.check_many([(gold, answer)])[0]

    def check_many(self, pairs: Sequence[tuple[str, str | None]]) -> list[Verdict]:
        """One verdict per (gold, answer) pair, in order; an answer of None or blank text is
        `no_answer` without being sent."""
        verdicts: list[Verdict | None] = [None] * len(pairs)
        queue = deque()
        for i, (gold, answer) in enumerate(pairs):
            if not isinstance(gold, str) or not gold.strip():
                raise ValueError(f"pair {i}: the gold answer must be non-empty text, got {gold!r}")
            if answer is None or not str(answer).strip():
                verdicts[i] = Verdict(False, "no_answer")
            else:
                queue.append(i)
        if queue:
            self._start_workers(min(self.config.workers, len(queue)))
            self._run(pairs, queue, verdicts)
        return verdicts

    def _start_workers(self, count: int) -> None:
        for i, worker in enumerate(self._workers):
            if worker.process.poll() is not None:  # ended between batches: no pair's fault
                worker.kill()
                self._workers[i] = _Worker(self.config)
                self.restarts += 1
        while len(self._workers) < count:
            self._workers.append(_Worker(self.config))

    def _run(self, pairs, queue: deque, verdicts: list) -> None:
        lines = {i: (json.dumps([pairs[i][0], str(pairs[i][1])]) + "\n").encode() for i in queue}
        with selectors.DefaultSelector() as selector:
            for worker in self._workers:
                selector.register(worker, selectors.EVENT_READ)
            while queue or any(w.pending for w in self._workers):
                for worker in self._workers:
                    while queue and worker.can_take(len(lines[queue[0]])):
                        i = queue.popleft()
                        worker.send(i, lines[i])
                busy = [w for w in self._workers if w.pending]
                wait = min(w.since for w in busy) + self.config.timeout_s - time.monotonic()
                for key, _ in selector.select(max(0.0, wait)):
                    worker = key.fileobj
                    replies = worker.read_lines()
                    if replies is None:
                        self._replace(selector, worker, queue, verdicts, "worker_died")
                        continue
                    for reply in replies:
                        verdicts[worker.pending.popleft()[0]] = _verdict(reply)
                        worker.since = time.monotonic()
                now = time.monotonic()
                for worker in list(self._workers):
                    if worker.pending and now - worker.since > self.config.timeout_s:
                        self._replace(selector, worker, queue, verdicts, "timeout")

    def _replace(self, selector, worker: _Worker, queue: deque, verdicts: list, reason) -> None:
        """Kill `worker`; its current pair gets `reason`, the pairs behind it go back first in
        the queue; a new worker takes its place."""
        selector.unregister(worker)
        worker.kill()
        stuck = worker.pending.popleft()[0]
        limit = f"no answer within {self.config.timeout_s} s" if reason == "timeout" else ""
        verdicts[stuck] = Verdict(False, reason, detail=limit or "the worker exited")
        queue.extendleft(i for i, _ in reversed(worker.pending))
        fresh = _Worker(self.config)
        self._workers[self._workers.index(worker)] = fresh
        selector.register(fresh, selectors.EVENT_READ)
        self.restarts += 1


def _verdict(line: str) -> Verdict:
    try:
        equal, reason, detail = json.loads(line)
    except ValueError as err:
        raise MathCheckError(f"broken reply from a math checker worker: {line[:200]!r}") from err
    return Verdict(bool(equal), reason, detail=detail, score=1.0 if equal else 0.0)


def _worker_env() -> dict[str, str]:
    """This environment, with the `selfplay` package this process runs first on the path, so
    that the worker runs the same code whatever the current directory."""
    root = str(Path(__file__).resolve().parents[2])
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else "")}


def _kill_all(workers: list[_Worker]) -> None:
    while workers:
        workers.pop().kill()
