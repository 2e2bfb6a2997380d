"""Trusted compile helpers: the policy's checks and compilation of a large batch in other
processes, so that they run beside the sandbox instead of before it.

A validation's trusted side is mostly compilation: `policy.compile_program` (parse, check,
RestrictedPython rewrite, compile: ~200 us a CRUXEval program on a 2-core EPYC) and
`policy.compile_input` (~35 us). Done in the calling process alone, that serial work sets the
rate of a large validation while the sandbox workers wait for it (`benchmarks/executor_bench.py`
gives the profile). `Compilers` spreads it over helper processes and fills the executor's
caches with the results just before the caller looks them up; what the caller then does is
unchanged, so a verdict is the same with or without helpers.

Trust: a helper runs this module's code only, `python -s -P -m selfplay.executor.compiler`
(no user site, no working folder on its path), with an environment that holds nothing but
the package's path and the locale. It parses and compiles model text as
the calling process would, and never runs it; the code it sends back (`marshal` bytes) is what
the caller would have compiled itself, and goes to the sandbox as it came. A helper that
fails, dies or stalls costs time only: its chunk is compiled in the calling process.

Protocol, one frame each way per chunk (a 4-byte length, then `marshal` data):
    request  (max_program_chars, extra_modules, input mode, value limits, programs, inputs)
    reply    ([program result, ...], [input result, ...]), each ("ok", marshalled code) or
             ("ok", text, code, expression) for an input, or ("no", reason, detail)
"""

from __future__ import annotations

import contextlib
import marshal
import os
import selectors
import struct
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from queue import SimpleQueue

__all__ = ["Compilers", "Prepared"]

_HEADER = struct.Struct(">I")
_MAX_REPLY = 256 << 20
_CHUNK_TIMEOUT_S = 60.0  # a chunk of programs of at most max_program_chars compiles in far less

#: One chunk's results: {source: CompiledProgram | PolicyRejection}, {text: CompiledInput | ...}
Prepared = tuple[dict, dict]


class _Helper:
    """One helper process and its pipes."""

    def __init__(self) -> None:
        package_parent = str(Path(__file__).resolve().parents[2])
        self.proc = subprocess.Popen(
            [sys.executable, "-s", "-P", "-m", "selfplay.executor.compiler"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={"PYTHONPATH": package_parent, "LC_ALL": "C.UTF-8"},
            cwd="/",
            close_fds=True,
        )

    def ask(self, request: bytes, timeout: float) -> bytes | None:
        """Send one request and read its reply, both within `timeout` seconds; None when the
        helper died, stalled or sent more than a reply may hold."""
        out = memoryview(_HEADER.pack(len(request)) + request)
        stdin, stdout = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        os.set_blocking(stdin, False)
        deadline = time.monotonic() + timeout
        buffer = b""
        size = None
        with selectors.DefaultSelector() as sel:
            sel.register(stdin, selectors.EVENT_WRITE)
            sel.register(stdout, selectors.EVENT_READ)
            while size is None or len(buffer) < _HEADER.size + size:
                left = deadline - time.monotonic()
                ready = sel.select(left) if left > 0 else []
                if not ready:
                    return None
                for key, _ in ready:
                    if key.fd == stdin:
                        try:
                            out = out[os.write(stdin, out) :]
                        except BlockingIOError:
                            continue
                        except OSError:
                            return None
                        if not out:
                            sel.unregister(stdin)
                        continue
                    chunk = os.read(stdout, 1 << 20)
                    if not chunk:
                        return None
                    buffer += chunk
                    if size is None and len(buffer) >= _HEADER.size:
                        size = _HEADER.unpack_from(buffer)[0]
                        if size > _MAX_REPLY:
                            return None
        return buffer[_HEADER.size : _HEADER.size + size]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> None:
        """Kill the process only: a thread reading its pipes sees them end, and closes them."""
        with contextlib.suppress(OSError):
            self.proc.kill()

    def kill(self) -> None:
        with contextlib.suppress(OSError):
            self.proc.kill()
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                stream.close()


class Compilers:
    """Helper processes, started on first use; `prepare` compiles chunks of a batch ahead of
    the caller. Threads of this process only move frames (the pipes release the GIL)."""

    def __init__(self, size: int):
        self.size = size
        self._idle: SimpleQueue[_Helper | None] = SimpleQueue()
        self._threads: ThreadPoolExecutor | None = None
        self._helpers: list[_Helper] = []
        self._lock = threading.Lock()
        self.chunks = 0  # chunks the helpers compiled
        self.failures = 0  # chunks they did not (the caller compiled those)

    def prepare(
        self,
        chunks: Sequence[tuple[list[str], list[str]]],
        settings: tuple,
    ) -> list[Future]:
        """Start compiling each chunk's (programs, inputs); each future gives the chunk's
        `Prepared` results, or None where its helper failed (the caller compiles those)."""
        if self._threads is None:
            self._threads = ThreadPoolExecutor(self.size, thread_name_prefix="compiler")
            for _ in range(self.size):
                self._idle.put(None)  # a slot: its helper starts when first needed
        return [self._threads.submit(self._compile, chunk, settings) for chunk in chunks]

    def _compile(self, chunk: tuple[list[str], list[str]], settings: tuple) -> Prepared | None:
        programs, inputs = chunk
        if not programs and not inputs:
            return {}, {}
        helper = self._idle.get()
        result = None
        try:
            if helper is not None and not helper.alive():
                self._drop(helper)  # it died since its last chunk: reaped, then replaced
                helper = None
            if helper is None:
                helper = _Helper()
                with self._lock:
                    self._helpers.append(helper)
            reply = helper.ask(marshal.dumps((*settings, programs, inputs)), _CHUNK_TIMEOUT_S)
            result = None if reply is None else _decode(reply, programs, inputs)
        except Exception:  # noqa: BLE001 - whatever failed, the caller compiles the chunk
            result = None
        finally:
            if result is None and helper is not None:
                self._drop(helper)
                helper = None
            with self._lock:
                self.chunks += result is not None
                self.failures += result is None
            self._idle.put(helper)  # the slot goes back whatever happened
        return result

    def _drop(self, helper: _Helper) -> None:
        helper.kill()
        with self._lock:
            if helper in self._helpers:
                self._helpers.remove(helper)

    def close(self) -> None:
        """Stop the helpers (a chunk in flight fails at once, left to its caller) and the
        threads."""
        with self._lock:
            for helper in self._helpers:
                helper.stop()
        if self._threads is not None:
            self._threads.shutdown(wait=True, cancel_futures=True)
            self._threads = None
        with self._lock:
            for helper in self._helpers:
                helper.kill()
            self._helpers.clear()
        self._idle = SimpleQueue()


def _decode(reply: bytes, programs: list[str], inputs: list[str]) -> Prepared | None:
    """The reply's results, or None when it is not a reply to this request."""
    from types import CodeType

    from selfplay.executor.policy import CompiledInput, CompiledProgram, PolicyRejection

    program_results, input_results = marshal.loads(reply)
    if len(program_results) != len(programs) or len(input_results) != len(inputs):
        return None
    compiled: dict = {}
    for source, result in zip(programs, program_results, strict=True):
        if (
            result[0] == "ok"
            and len(result) == 3
            and _is_marshalled_code(result[1])
            and type(result[2]) is bool
        ):
            compiled[source] = CompiledProgram(source=source, marshalled=result[1], rerun=result[2])
        elif result[0] == "no" and len(result) == 3 and _texts(result[1:]):
            compiled[source] = PolicyRejection(result[1], result[2])
        else:
            return None
    calls: dict = {}
    for text, result in zip(inputs, input_results, strict=True):
        if (
            result[0] == "ok"
            and len(result) == 5
            and type(result[1]) is str
            and type(result[2]) is CodeType
            and type(result[3]) is bool
            and type(result[4]) is bool
        ):
            calls[text] = CompiledInput(*result[1:3], expression=result[3], rerun=result[4])
        elif result[0] == "no" and len(result) == 3 and _texts(result[1:]):
            calls[text] = PolicyRejection(result[1], result[2])
        else:
            return None
    return compiled, calls


def _is_marshalled_code(data) -> bool:
    """`marshal` bytes of a code object (its type byte, with or without the reference flag).
    Only the first byte is checked: the bytes go to the sandbox as they came, and loading them
    here would cost what sending them on saves. Helpers are trusted; bytes that a helper's bug
    mangled would fail the sandbox worker's load, and the batch would come back as
    `crash:worker`."""
    return type(data) is bytes and data[:1] in (b"c", b"\xe3")


def _texts(values) -> bool:
    return all(type(v) is str for v in values)


# ---------------------------------------------------------------------------------------------
# the helper process


def _answer(request: tuple) -> tuple[list, list]:
    from selfplay.executor import values
    from selfplay.executor.policy import (
        CompiledInput,
        CompiledProgram,
        compile_input,
        compile_program,
    )

    max_chars, extra, mode, limits, programs, inputs = request
    limits = values.Limits(*limits)
    program_results = []
    for source in programs:
        result = compile_program(source, max_chars, tuple(extra))
        if isinstance(result, CompiledProgram):
            program_results.append(("ok", result.marshalled, result.rerun))
        else:
            program_results.append(("no", result.reason, result.detail))
    input_results = []
    for text in inputs:
        result = compile_input(text, mode, limits)
        if isinstance(result, CompiledInput):
            input_results.append(("ok", result.text, result.code, result.expression, result.rerun))
        else:
            input_results.append(("no", result.reason, result.detail))
    return program_results, input_results


def _serve() -> None:
    source, sink = sys.stdin.buffer, sys.stdout.buffer
    while header := source.read(_HEADER.size):
        (size,) = _HEADER.unpack(header)
        request = marshal.loads(source.read(size))
        reply = marshal.dumps(_answer(request))
        sink.write(_HEADER.pack(len(reply)) + reply)
        sink.flush()


if __name__ == "__main__":
    _serve()
