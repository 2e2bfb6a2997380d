"""Sandbox worker: a zygote that runs batches of program runs in forked, hardened children.

Sandbox side, standard library only; started by `runner.py` as
`python -S -B -m selfplay.executor.worker` inside bubblewrap with a fixed PYTHONHASHSEED.

Start-up: read the settings frame, import the allowed modules (`modules.prepare`), apply the
worker's OS layers (`hardening.harden_worker`), report them in a ready frame. Then, for each
batch frame: fork a child, which applies the child layers and executes runs one after another,
each with a fresh namespace, writing one result line per run. The zygote watches the wall clock
of the current run and kills the child when it overruns; when a child dies (killed, CPU limit,
crash, memory), the zygote records why for the run in progress and forks a new child for the
rest. Children are also replaced after a memory error and after `runs_per_child` runs.
Whatever ends a run while its input is evaluated (an exception, a guard, a limit, the child's
death) is the input's, `input:<why>`; whatever ends it elsewhere, the program's.

Time limits, per run (`cpu` seconds of CPU):
  1. a SIGALRM poller raises `RunTimeout` into the program once it has used `cpu` seconds of
     CPU time (precise; the child survives and goes on with the next run). It reads the
     thread's clock: while ITIMER_PROF is armed the kernel updates the process clock only at
     scheduler ticks, and a child cannot start threads;
  2. if the program keeps running anyway (`finally: while True`), the next alarm ends the
     child with exit code `EXIT_TIMEOUT`;
  3. ITIMER_PROF kills the child at `2 * cpu + 50 ms` of CPU even inside long C calls;
  4. the zygote kills the child at `2 * cpu + wall_slack` seconds of wall-clock time;
  5. the trusted process kills the whole sandbox if a batch overruns (see `runner.py`).

Frames are a 4-byte big-endian length and a payload: `marshal` from the trusted side (trusted
data only), JSON towards it.
"""

from __future__ import annotations

import codecs
import contextlib
import gc
import json
import marshal
import os
import select
import signal
import struct
import sys
import time
from types import ModuleType

from selfplay.executor import guards, hardening, modules, values
from selfplay.executor.phase import Phase

_DEVNULL: list[int] = []
EXIT_TIMEOUT = 124
EXIT_MEMORY = 125
_HEADER = struct.Struct(">I")
#: the result of a run of an answer skipped after another of its runs timed out
_SKIPPED = (False, None, "timeout", "skipped after a timeout in the same answer", 0.0)
#: a run's timeout, in its program or in its input's own evaluation: the rest of its answer skips
_TIMEOUTS = ("timeout", "input:timeout")


# ---------------------------------------------------------------------------------------------
# frames


def read_exact(fd: int, size: int) -> bytes | None:
    chunks, left = [], size
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_frame(fd: int) -> bytes | None:
    header = read_exact(fd, _HEADER.size)
    if header is None:
        return None
    return read_exact(fd, _HEADER.unpack(header)[0])


def write_frame(fd: int, payload: bytes) -> None:
    data = _HEADER.pack(len(payload)) + payload
    while data:
        data = data[os.write(fd, data) :]


# ---------------------------------------------------------------------------------------------
# one run, inside a child


class _Alarm:
    """The SIGALRM CPU-time poller of one run (limits 1 and 2 above)."""

    def __init__(self) -> None:
        self.armed = False
        self.fired = False
        self.start = 0.0
        self.limit = 0.0

    def arm(self, cpu_limit: float) -> None:
        self.limit, self.fired = cpu_limit, False
        self.start = time.thread_time()
        self.armed = True
        signal.setitimer(signal.ITIMER_PROF, 2 * cpu_limit + 0.05)
        signal.setitimer(signal.ITIMER_REAL, cpu_limit)

    def disarm(self) -> float:
        self.armed = False
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.setitimer(signal.ITIMER_PROF, 0)
        return time.thread_time() - self.start

    def on_signal(self, signum, frame) -> None:
        if not self.armed:
            return
        used = time.thread_time() - self.start
        if used < self.limit:
            signal.setitimer(signal.ITIMER_REAL, max(self.limit - used, 0.0005))
            return
        if self.fired:
            os._exit(EXIT_TIMEOUT)
        self.fired = True
        signal.setitimer(signal.ITIMER_REAL, max(self.limit * 0.5, 0.005))
        raise guards.RunTimeout()


_ALARM = _Alarm()


_PHASE = Phase()


def _describe(err: BaseException) -> tuple[str, str]:
    """(reason, detail) for an exception that ended a run."""
    if isinstance(err, guards.RunTimeout):
        return "timeout", "CPU time limit reached"
    if isinstance(err, guards.PolicyError):
        return f"policy:{err.rule}", str(err)[:200]
    if isinstance(err, MemoryError):
        return "memory", "memory limit reached"
    if isinstance(err, values.ValueRejected):
        return err.reason, str(err)[:200]
    name = type(err).__name__
    name = "".join(c for c in name if c.isalnum() or c == "_")[:60] or "Exception"
    try:
        detail = str(err)[:200]
    except BaseException:  # a program's exception whose __str__ fails
        detail = ""
    return f"crash:{name}", detail


def _in_input(reason: str, detail: str) -> tuple[str, str]:
    """(reason, detail) of a run that ended while its input was evaluated: `input:` and what
    ended it (`NameError`, `timeout`, `memory`, `policy` with the rule in the detail, ...)."""
    kind, _, rule = reason.partition(":")
    if kind == "policy":
        return "input:policy", f"{rule}: {detail}"
    return "input:" + reason.removeprefix("crash:"), detail


def _collect_args(*args, **kwargs) -> tuple:
    return args, kwargs


_LITERAL_ENV = dict(guards.LITERAL_NAMES, _args_=_collect_args)


def _arguments(call, code, expression: bool) -> tuple:
    """(args, kwargs) of one run's input, evaluated in `_PHASE`'s input phase (the instance
    of the program whose data an expression input reads runs before it: the program's)."""
    namespace = _input_namespace(code) if expression else dict(_LITERAL_ENV)
    _PHASE.evaluating(True)
    arguments = eval(call, namespace)
    _PHASE.evaluating(False)
    return arguments


def _input_namespace(code) -> dict:
    """Where an expression input is evaluated: the sandbox's builtins and the data of a second
    instance of the program, apart from the one whose `f` is called.

    An input may read the program's data (CRUXEval's `thigh_o_two[:]`), but what it does to it
    (a global list emptied) stays in its own instance; it sees none of the program's functions,
    classes and modules (not `f`, whose mutable default it could fill, nor `getcontext` or
    `sys`, through which it could change state the two instances share). It is evaluated
    before the judged program runs, and the per-process state a run may change (the decimal
    context, the recursion limit, `random`) is reset in between (`execute`). So an input
    cannot change the program it is judged with; the price is that it cannot build an object
    of a class the program defines."""
    instance = dict(modules.run_globals(), _args_=_collect_args)
    exec(code, instance)
    namespace = dict(modules.run_globals(), _args_=_collect_args)
    for name, value in instance.items():
        if name not in namespace and not callable(value) and not isinstance(value, ModuleType):
            namespace[name] = value
    instance.clear()
    return namespace


def execute(code, call, expression: bool, cpu_limit: float, limits: values.Limits) -> list:
    """Run `f(<input>)` of one program once; returns [ok, output, reason, detail, cpu]."""
    namespace = modules.run_globals()
    namespace["_args_"] = _collect_args
    modules.reset_run_state()
    output = reason = detail = None
    _ALARM.arm(cpu_limit)
    try:
        # the input first, in its own instance; what it changed in the process is then undone
        args, kwargs = _arguments(call, code, expression)
        if expression:
            modules.reset_run_state()
        exec(code, namespace)
        entry = namespace.get("f")
        if not callable(entry):
            reason, detail = "no_f", "the program does not define a callable f"
        else:
            output = values.canonical(entry(*args, **kwargs), limits)
        namespace.clear()
    except BaseException as err:  # the program's failure is a result, not an error
        output = None
        reason, detail = _describe(err)
        namespace.clear()
    finally:
        cpu = _ALARM.disarm()
    if _ALARM.fired:  # the interrupt was raised, even if something swallowed it
        output, reason, detail = None, "timeout", "CPU time limit reached"
    if output is not None:
        return [True, output, "ok", "", cpu]
    if _PHASE.in_input():
        reason, detail = _in_input(reason, detail or "")
    return [False, None, reason, detail or "", cpu]


def _keep_only(out_fd: int) -> None:
    """Leave the child its result pipe and /dev/null on 0-2; the zygote's pipes to the trusted
    process (its stdin and stdout) must be out of reach of the code the child runs."""
    for fd in (0, 1, 2):
        os.dup2(_DEVNULL[0], fd)
    os.closerange(3, out_fd)
    os.closerange(out_fd + 1, 1 << 16)


def child_main(out_fd: int, job: dict, codes: list, calls: list, order: list[int]) -> None:
    """Body of a forked child: harden, then run `order` and write one line per run."""
    _keep_only(out_fd)
    try:
        hardening.harden_child(job["memory_bytes"], job["cpu_budget_s"])
    except BaseException as err:  # cannot confine: refuse to run anything
        os.write(out_fd, (json.dumps(["setup", repr(err)[:300]]) + "\n").encode())
        os._exit(1)
    signal.signal(signal.SIGALRM, _ALARM.on_signal)
    limits = values.Limits(*job["limits"])
    skip_group = None
    for index in order:
        prog, _, expression, cpu_limit, _, group = job["runs"][index]
        if group is not None and group == skip_group:
            line = [index, *_SKIPPED]
        else:
            _PHASE.begin(index)
            line = [index, *execute(codes[prog], calls[index], expression, cpu_limit, limits)]
            if line[3] in _TIMEOUTS:
                skip_group = group
        os.write(out_fd, (json.dumps(line) + "\n").encode())
        if line[3] in ("memory", "input:memory"):
            os._exit(0)  # start the next run in a fresh process
    os._exit(0)


# ---------------------------------------------------------------------------------------------
# the zygote


def _death_reason(status: int, killed: bool) -> tuple[str, str]:
    if killed:
        return "timeout", "wall-clock limit reached"
    if os.WIFEXITED(status):
        code = os.WEXITSTATUS(status)
        if code == EXIT_TIMEOUT:
            return "timeout", "CPU time limit reached (exception suppressed)"
        if code == EXIT_MEMORY:
            return "memory", "memory limit reached"
        return "crash:exit", f"process exited with status {code}"
    sig = os.WTERMSIG(status)
    if sig in (signal.SIGPROF, signal.SIGXCPU, signal.SIGALRM):
        return "timeout", "CPU time limit reached inside a native call"
    if sig == signal.SIGKILL:
        return "memory", "killed by the kernel (out of memory)"
    return "crash:signal", f"killed by signal {signal.Signals(sig).name}"


#: After the child's pipe turns readable the zygote waits this long before reading, so that
#: one wake-up collects the lines of several short runs instead of one (a wake-up per run
#: cost about as much CPU as a CRUXEval run). Deadlines are at least a second, so reading a
#: line this much later changes none of them noticeably.
_PACE_S = 0.0005


class _ChildReader:
    """Line reader over the child's pipe with a deadline per read."""

    def __init__(self, fd: int):
        self.fd = fd
        self.buffer = b""
        self.eof = False

    def next_line(self, deadline: float) -> bytes | None:
        while b"\n" not in self.buffer:
            if self.eof:
                return None
            timeout = deadline - time.monotonic()
            if timeout <= 0 or not select.select([self.fd], [], [], timeout)[0]:
                return None
            time.sleep(_PACE_S)
            chunk = os.read(self.fd, 1 << 16)
            if not chunk:
                self.eof = True
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line


def run_batch(job: dict) -> list:
    """Execute every run of `job`, forking children as needed; returns one entry per run."""
    codes = [marshal.loads(c) for c in job["programs"]]
    calls = [marshal.loads(run[1]) for run in job["runs"]]
    runs = job["runs"]
    results: list = [None] * len(runs)
    pending = list(range(len(runs)))
    per_child = max(1, job["runs_per_child"])
    while pending:
        order, pending = pending[:per_child], pending[per_child:]
        leftover = _run_child(job, codes, calls, order, results)
        pending = leftover + pending
    return results


def _run_child(job: dict, codes: list, calls: list, order: list[int], results: list) -> list[int]:
    """Fork one child for `order`; record its results; return the runs it did not get to."""
    read_fd, write_fd = os.pipe()
    _PHASE.renew()  # this child's page alone: nothing a child leaves behind reads a later one
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        try:
            child_main(write_fd, job, codes, calls, order)
        finally:
            os._exit(1)
    os.close(write_fd)
    reader = _ChildReader(read_fd)
    runs, position, killed, broken = job["runs"], 0, False, False
    start_allowance = job["start_allowance_s"]
    try:
        while position < len(order):
            _, _, _, cpu_limit, wall_slack, _ = runs[order[position]]
            deadline = time.monotonic() + 2 * cpu_limit + wall_slack + start_allowance
            line = reader.next_line(deadline)
            start_allowance = 0.0
            if line is None:
                break
            entry = _parse_child_line(line, order[position])
            if entry is None:
                broken = True
                break
            results[order[position]] = entry
            position += 1
    finally:
        if not reader.eof:
            os.kill(pid, signal.SIGKILL)
            killed = position < len(order) and not broken
        os.close(read_fd)
        _, status = os.waitpid(pid, 0)
    if position == len(order):
        return []
    index = order[position]
    if broken:
        reason, detail = "crash:protocol", "the sandboxed process wrote an unreadable result"
    elif not killed and os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and position > 0:
        return order[position:]  # the child retired itself (after a memory error)
    else:
        reason, detail = _death_reason(status, killed)
    timed_out = reason == "timeout"
    cpu = runs[index][3] if timed_out else 0.0
    if not broken and _PHASE.in_input(index):
        reason, detail = _in_input(reason, detail)
    results[index] = [index, False, None, reason, detail, cpu]
    rest, group = order[position + 1 :], runs[index][5]
    if timed_out and group is not None:
        for i in rest:
            if runs[i][5] == group:
                results[i] = [i, *_SKIPPED]
        rest = [i for i in rest if runs[i][5] != group]
    return rest


def _parse_child_line(line: bytes, expected_index: int) -> list | None:
    """A result line from a child (which runs model code, so it is checked, not trusted)."""
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    if isinstance(entry, list) and entry and entry[0] == "setup":
        raise RuntimeError(f"the sandbox child could not apply its limits: {entry[1:]}")
    if not (isinstance(entry, list) and len(entry) == 6 and entry[0] == expected_index):
        return None
    return entry


def probe_child(job: dict) -> dict:
    """Fork a hardened child that tries what the layers forbid; see `hardening.probe`."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _keep_only(write_fd)
        try:
            hardening.harden_child(job["memory_bytes"], 5)
            report = hardening.probe(job["paths"])
        except BaseException as err:
            report = {"probe": f"failed: {type(err).__name__}: {err}"}
        os.write(write_fd, json.dumps(report).encode())
        os._exit(0)
    os.close(write_fd)
    reader = _ChildReader(read_fd)
    deadline = time.monotonic() + 10
    while not reader.eof and time.monotonic() < deadline:
        if select.select([read_fd], [], [], 1)[0]:
            chunk = os.read(read_fd, 1 << 16)
            reader.eof = not chunk
            reader.buffer += chunk
    os.close(read_fd)
    os.waitpid(pid, 0)
    try:
        return json.loads(reader.buffer or b"{}")
    except ValueError:
        return {"probe": "the probe child died before reporting (a layer is missing)"}


def _prepare_process(extra_modules: tuple[str, ...]) -> None:
    modules.prepare(extra_modules)
    # Codecs load lazily from disk, which a hardened child cannot read: load them all now.
    import encodings
    import pkgutil

    for module in pkgutil.iter_modules(encodings.__path__):
        with contextlib.suppress(LookupError):  # helper modules (aliases, ...) are no codecs
            codecs.lookup(module.name)
    import _strptime  # noqa: F401  (datetime.strptime imports it lazily)


def main() -> None:
    in_fd, out_fd = sys.stdin.fileno(), sys.stdout.fileno()
    settings = marshal.loads(read_frame(in_fd))
    _prepare_process(tuple(settings["extra_modules"]))
    base_vm = hardening.address_space_in_use()
    _DEVNULL.append(os.open(os.devnull, os.O_RDWR))  # opened before Landlock closes the files
    layers = hardening.harden_worker(settings["layers"])
    os.dup2(_DEVNULL[0], 2)  # nothing the sandbox prints reaches the trusted side's pipes
    gc.collect()
    gc.freeze()  # forked children then leave the zygote's objects (and their pages) alone
    ready = {"ready": True, "layers": layers, "base_vm": base_vm, "pid": os.getpid()}
    write_frame(out_fd, json.dumps(ready).encode())
    while True:
        frame = read_frame(in_fd)
        if frame is None:
            return
        kind, job = marshal.loads(frame)
        job["memory_bytes"] = base_vm + job["memory_bytes"] if base_vm else 0
        try:
            if kind == "batch":
                reply = {"results": run_batch(job)}
            else:
                reply = {"probe": probe_child(job)}
        except Exception as err:  # our own failure: report it, then stop
            write_frame(out_fd, json.dumps({"error": f"{type(err).__name__}: {err}"}).encode())
            raise
        write_frame(out_fd, json.dumps(reply).encode())


if __name__ == "__main__":
    main()
