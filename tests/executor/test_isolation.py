"""The operating-system layers, tested as if RestrictedPython had already been defeated.

`escaped()` sends unrestricted code straight to a worker: it reaches the real `os` module
through `__subclasses__`, which the policy would refuse. What stops it then is bubblewrap,
Landlock, seccomp, rlimits and the time limits enforced from outside.
"""

from __future__ import annotations

import marshal
import os
import signal
import time

import pytest

from selfplay.config import ExecutorConfig
from selfplay.executor import Executor
from selfplay.executor.runner import ProgramRun, SandboxUnavailable
from selfplay.executor.values import parse_literal

PRELUDE = """
def module(name):
    for cls in ().__class__.__base__.__subclasses__():
        if cls.__name__ == "_wrap_close":
            return cls.__init__.__globals__["sys"].modules[name]

os = module("os")
"""


def escaped(executor, body: str, cpu: float = 0.3):
    """Run `f()` of unrestricted code in a hardened child; returns its RunResult."""
    code = marshal.dumps(compile(PRELUDE + body, "<escaped>", "exec"))
    call = marshal.dumps(compile("_args_()", "<input>", "eval"))
    return executor.pool.run({0: ([code], [ProgramRun(0, call, False, cpu)])})[0][0]


def test_every_layer_is_active(executor):
    for layer in ("namespaces", "landlock", "seccomp", "rlimits"):
        assert executor.isolation[layer].startswith("ok"), executor.isolation


def test_escape_really_reaches_os(executor):
    """The harness works: the escaped code holds the real os module."""
    result = escaped(executor, "def f():\n    return os.getpid() > 0")
    assert result.ok and result.output == "True"


def test_escaped_cannot_read_files(executor, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("token")
    for path in (str(secret), "/usr/lib/os-release", os.path.expanduser("~")):
        result = escaped(executor, f"def f():\n    return os.open({path!r}, 0)")
        assert result.reason in ("crash:PermissionError", "crash:FileNotFoundError"), path


def test_escaped_cannot_write_files(executor, tmp_path):
    target = tmp_path / "written"
    body = f"def f():\n    return os.open({str(target)!r}, os.O_WRONLY | os.O_CREAT)"
    assert escaped(executor, body).reason in ("crash:PermissionError", "crash:FileNotFoundError")
    assert not target.exists()


def test_escaped_cannot_import_new_modules(executor):
    body = "def f():\n    imp = module('builtins').__import__\n    return imp('subprocess') is not None"
    assert escaped(executor, body).reason in ("crash:PermissionError", "crash:ModuleNotFoundError")


def test_escaped_has_no_network(executor):
    body = (
        "def f():\n    s = module('socket')\n    return s.create_connection(('127.0.0.1', 22), 1)"
    )
    assert escaped(executor, body).reason == "crash:PermissionError"


def test_escaped_cannot_fork_or_start_threads(executor):
    assert escaped(executor, "def f():\n    return os.fork()").reason == "crash:PermissionError"
    body = "def f():\n    module('_thread').start_new_thread(len, ((),))"
    assert escaped(executor, body).reason == "crash:RuntimeError"


def test_escaped_cannot_exec(executor):
    body = "def f():\n    os.execv('/usr/bin/true', ['true'])"
    assert escaped(executor, body).reason == "crash:PermissionError"


def test_escaped_cannot_signal_its_parent(executor):
    body = f"def f():\n    os.kill(os.getppid(), {int(signal.SIGKILL)})"
    assert escaped(executor, body).reason == "crash:PermissionError"
    assert executor.validate([("def f(x):\n    return x", "1")])[0].ok


def test_escaped_sees_no_secrets_in_its_environment(executor):
    result = escaped(executor, "def f():\n    return sorted(os.environ)")
    assert result.ok
    names = set(parse_literal(result.output))
    assert names <= {"PYTHONHASHSEED", "PYTHONPATH", "LC_ALL", "PWD"}


def test_escaped_cannot_cancel_its_time_limits(executor):
    body = (
        "def f():\n    s = module('signal')\n    s.signal(s.SIGALRM, s.SIG_IGN)\n"
        "    s.setitimer(s.ITIMER_PROF, 0)\n    while True:\n        pass"
    )
    start = time.monotonic()
    assert escaped(executor, body, cpu=0.2).reason == "timeout"
    assert time.monotonic() - start < 5


def test_escaped_sleeping_is_killed_on_the_wall_clock(executor):
    start = time.monotonic()
    assert escaped(executor, "def f():\n    module('time').sleep(60)", cpu=0.2).reason == "timeout"
    assert time.monotonic() - start < 5


def test_escaped_exit_is_not_success(executor):
    assert escaped(executor, "def f():\n    os._exit(0)").reason == "crash:exit"


def test_escaped_cannot_talk_to_the_trusted_process(executor):
    body = (
        "def f():\n    for fd in range(64):\n        try:\n"
        "            os.write(fd, bytes([0, 0, 0, 2]) + b'{}')\n        except Exception:\n"
        "            pass\n    return 1"
    )
    assert escaped(executor, body).reason == "crash:protocol"
    assert executor.validate([("def f(x):\n    return x + 1", "1")])[0].output == "2"


def test_probe_reports_refusals(executor, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("token")
    report = executor.probe([str(secret)])
    assert report["socket"] == report["fork"] == report["exec"] == "EPERM"
    assert report["read_file"] == "EACCES" and report[f"read {secret}"] in ("EACCES", "ENOENT")
    assert report["write_file"] in ("EACCES", "EROFS")


def test_fails_closed_without_bubblewrap():
    with pytest.raises(SandboxUnavailable, match="accept_missing"):
        Executor(ExecutorConfig(bwrap="/nonexistent/bwrap"))


def test_weaker_isolation_only_when_accepted(tmp_path):
    config = ExecutorConfig(bwrap="/nonexistent/bwrap", accept_missing=("namespaces",))
    with Executor(config) as ex:
        assert ex.isolation["namespaces"].startswith("unavailable")
        assert ex.isolation["landlock"].startswith("ok")
        secret = tmp_path / "secret"
        secret.write_text("token")
        assert ex.probe([str(secret)])[f"read {secret}"] == "EACCES"
        assert ex.validate([("def f(x):\n    return x * 2", "21")])[0].output == "42"


def test_a_killed_worker_is_replaced(executor):
    os.killpg(executor.pool.workers[0].proc.pid, signal.SIGKILL)
    verdicts = executor.validate([("def f(x):\n    return x", str(i)) for i in range(4)])
    assert all(v.ok or v.reason == "crash:worker" for v in verdicts)
    assert all(v.ok for v in executor.validate([("def f(x):\n    return x", "7")] * 4))


def test_a_stalled_worker_is_killed_by_the_watchdog():
    config = ExecutorConfig(accept_missing=("namespaces",), bwrap="/nonexistent", batch_grace_s=1.0)
    with Executor(config) as ex:
        os.kill(ex.pool.workers[0].proc.pid, signal.SIGSTOP)  # the zygote itself stops answering
        start = time.monotonic()
        verdicts = ex.validate([("def f(x):\n    return x", "1")] * 2)
        assert time.monotonic() - start < 10
        assert "crash:worker" in {v.reason for v in verdicts}
        assert all(v.ok for v in ex.validate([("def f(x):\n    return x", "1")] * 4))
