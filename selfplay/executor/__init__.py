"""The sandboxed executor: validates proposed code tasks and verifies answers.

Threat model
------------
Adversary. The model writes programs, inputs, predicted outputs and answers, and reinforcement
learning pushes it towards whatever earns reward, so all of it is treated as hostile: code that
tries to escape, to exhaust the machine, or to make the verifier report a wrong answer as
correct or an invalid task as valid.

Assets. (1) The trusted process and its machine: the training run, weights, the task store,
files, credentials in the environment and home folder, the network. (2) The integrity of every
verdict, which is a reward. (3) Availability: each run is bounded in CPU, memory, wall time and
output size, whatever it does.

Boundaries. The trusted process never runs model text: it parses it (`ast`) and compiles it
with RestrictedPython (`policy.py`), and reads values only through a literal parser with size
and depth caps (`values.py`); it never `eval`s, `exec`s or unpickles model text. Programs run
in sandbox workers (`runner.py`): zygote processes of trusted code, each confined by
bubblewrap (new user, pid, network, mount, ipc, uts and cgroup namespaces; no capabilities; an
empty environment; a read-only file system holding only the interpreter, /usr and this
package), then by its own Landlock ruleset (no file access at all, no TCP, no signals outside
its domain), a seccomp filter (no sockets, exec, ptrace, mount, namespaces, BPF, io_uring, ...)
and rlimits (`hardening.py`). A zygote forks children that add a second seccomp filter (no
fork, clone, kill, setrlimit, prctl), an address-space and a CPU rlimit, keep only their result
pipe, and run the programs under the policy's run-time guards (`guards.py`, `modules.py`).

Time. Each run has a CPU budget enforced inside the child (an interrupt the program cannot
catch, then process exit, then ITIMER_PROF), a wall-clock deadline enforced by the zygote, and
each batch a deadline enforced by the trusted process, which kills the whole sandbox.

Values. Results leave the sandbox only as canonical, type-exact text, which the trusted side
parses again and compares as text: an object cannot lie about its equality, `True` is not
`1`, and a value that is not a plain None/bool/int/float/str/bytes/list/tuple/dict/set/frozenset
makes the task invalid.

Residual risks. RestrictedPython plus the guards is the first line, not the last: a program
that defeats it controls its own child process. It still cannot read or write files, reach the
network, signal or trace anything, start processes, see the trusted side's pipes or outlive its
time limits (the tests in `tests/executor/test_isolation.py` run such escaped code); but it can
forge the results of the other runs in the same child, at most `ExecutorConfig.runs_per_child` of
them (set it to 1 for a fresh process per run, at about 1 ms per run). Kernel exploits through
allowed system calls and timing side channels are out of scope. When a layer is missing on a
machine the executor refuses to start (`SandboxUnavailable`) unless the configuration accepts
the weaker isolation explicitly (`ExecutorConfig.accept_missing`).

Modules, trusted side: `api` (the `Executor`), `policy` (static checks, RestrictedPython
compilation; what it gives: `compiled`; which cases rerun: `reruns`), `runner` (sandboxed worker
processes), `validate`, `verify`, `commands` (CLI).
Sandbox side (standard library only): `worker`, `guards`, `modules`, `hardening`.
Both sides: `values` (canonical text of values, literal parsing).

This package's `__init__` imports nothing, so that sandbox workers can import their modules
without the trusted side's dependencies; `from selfplay.executor import Executor` still works.
"""

__all__ = ["Executor"]


def __getattr__(name: str):
    if name == "Executor":
        from selfplay.executor.api import Executor

        return Executor
    raise AttributeError(name)
