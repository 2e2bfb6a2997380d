"""Operating-system confinement of a sandbox worker: rlimits, Landlock and seccomp.

Sandbox side, standard library only (ctypes for the two system interfaces). A worker calls
`harden_worker` once after its imports, and every batch child it forks calls `harden_child`
before running model code. Each layer reports a status string; a layer that cannot be applied
raises `LayerUnavailable`, and the trusted side decides (from configuration) whether to fail
or to accept the weaker isolation. Namespaces are set up from outside (see `runner.py`).

Worker (zygote) after `harden_worker`:
  * Landlock: no file-system access at all (no read, write, execute or directory listing;
    already-open descriptors still work) and, where the kernel supports it, no TCP bind or
    connect and no signals or abstract sockets beyond its own domain;
  * seccomp: sockets, exec, ptrace, mount, namespaces, keyrings, BPF, perf, io_uring, module
    loading, clock changes and reboot fail with EPERM;
  * rlimits: no core files, no file writes (RLIMIT_FSIZE 0), few descriptors;
  * no new privileges, not dumpable.

Batch child after `harden_child` (inherits all of the above, then adds):
  * seccomp: fork, clone, vfork, kill, setrlimit, prctl and seccomp fail with EPERM;
  * rlimits: address space (memory), total CPU seconds.
"""

from __future__ import annotations

import ctypes
import errno
import os
import resource
import socket

__all__ = [
    "LayerUnavailable",
    "harden_worker",
    "harden_child",
    "probe",
]

PR_SET_NO_NEW_PRIVS = 38
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
SECCOMP_MODE_FILTER = 2


class LayerUnavailable(RuntimeError):
    """An isolation layer could not be applied; `layer` names it."""

    def __init__(self, layer: str, why: str):
        super().__init__(f"{layer}: {why}")
        self.layer = layer


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.argtypes = [
    ctypes.c_int,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
    ctypes.c_ulong,
]


def _prctl(option: int, arg: int) -> None:
    if _libc.prctl(option, arg, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"prctl({option}): {os.strerror(err)}")


# ---------------------------------------------------------------------------------------------
# rlimits


def _set_limit(kind: int, value: int) -> None:
    soft, hard = resource.getrlimit(kind)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, value))


def _apply_worker_rlimits(max_open_files: int) -> str:
    _set_limit(resource.RLIMIT_CORE, 0)
    _set_limit(resource.RLIMIT_FSIZE, 0)
    _set_limit(resource.RLIMIT_NOFILE, max_open_files)
    _set_limit(resource.RLIMIT_MEMLOCK, 0)
    _set_limit(resource.RLIMIT_MSGQUEUE, 0)
    return f"core=0 fsize=0 nofile={max_open_files}"


def address_space_in_use() -> int:
    """Virtual memory of this process in bytes (read before Landlock closes /proc)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


# ---------------------------------------------------------------------------------------------
# Landlock (https://docs.kernel.org/userspace-api/landlock.html)

_SYS_LANDLOCK_CREATE_RULESET = 444  # same number on x86_64 and aarch64
_SYS_LANDLOCK_RESTRICT_SELF = 446
_LANDLOCK_CREATE_RULESET_VERSION = 1


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


def _landlock_fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1  # ABI 1: execute, write, read, readdir, remove, make_* ...
    if abi >= 2:
        rights |= 1 << 13  # refer
    if abi >= 3:
        rights |= 1 << 14  # truncate
    if abi >= 5:
        rights |= 1 << 15  # ioctl on devices
    return rights


def _apply_landlock() -> str:
    abi = _libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, None, 0, _LANDLOCK_CREATE_RULESET_VERSION)
    if abi < 1:
        why = os.strerror(ctypes.get_errno())
        raise LayerUnavailable("landlock", f"the kernel does not offer Landlock ({why})")
    attr = _RulesetAttr(_landlock_fs_rights(abi), 0, 0)
    size = 8
    if abi >= 4:
        attr.handled_access_net = 0b11  # bind and connect TCP
        size = 16
    if abi >= 6:
        attr.scoped = 0b11  # abstract unix sockets and signals outside the domain
        size = 24
    fd = _libc.syscall(_SYS_LANDLOCK_CREATE_RULESET, ctypes.byref(attr), size, 0)
    if fd < 0:
        raise LayerUnavailable("landlock", f"create_ruleset: {os.strerror(ctypes.get_errno())}")
    try:
        _prctl(PR_SET_NO_NEW_PRIVS, 1)
        if _libc.syscall(_SYS_LANDLOCK_RESTRICT_SELF, fd, 0) != 0:
            why = os.strerror(ctypes.get_errno())
            raise LayerUnavailable("landlock", f"restrict_self: {why}")
    finally:
        os.close(fd)
    return f"abi {abi}: no file access" + (", no TCP" if abi >= 4 else "")


# ---------------------------------------------------------------------------------------------
# seccomp, through libseccomp (it resolves syscall names for the running architecture and
# rejects foreign-architecture and x32 calls)

_SCMP_ACT_ALLOW = 0x7FFF0000
_SCMP_ACT_ERRNO_EPERM = 0x00050000 | errno.EPERM

WORKER_DENIED_SYSCALLS = """socket socketpair connect bind listen accept accept4 execve
    execveat ptrace process_vm_readv process_vm_writev mount umount2 pivot_root chroot unshare
    setns keyctl add_key request_key bpf perf_event_open userfaultfd io_uring_setup
    io_uring_enter io_uring_register open_by_handle_at name_to_handle_at init_module
    finit_module delete_module kexec_load kexec_file_load reboot swapon swapoff settimeofday
    clock_settime clock_adjtime adjtimex acct quotactl sethostname setdomainname iopl ioperm
    personality fanotify_init kcmp pidfd_getfd mount_setattr move_mount open_tree fsopen
    fsconfig fsmount fspick""".split()

CHILD_DENIED_SYSCALLS = """fork vfork clone clone3 kill tkill tgkill rt_sigqueueinfo
    rt_tgsigqueueinfo pidfd_send_signal setrlimit prlimit64 prctl seccomp
    landlock_create_ruleset landlock_add_rule landlock_restrict_self""".split()


class SeccompFilter:
    """A deny-list filter built once (before Landlock closes the file system), loaded later."""

    def __init__(self, denied: list[str]):
        try:  # the loader's default directories; find_library would need /etc and a compiler
            lib = ctypes.CDLL("libseccomp.so.2")
        except OSError as err:
            raise LayerUnavailable("seccomp", f"libseccomp not found ({err})") from None
        lib.seccomp_init.restype = ctypes.c_void_p
        lib.seccomp_init.argtypes = [ctypes.c_uint32]
        lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
        lib.seccomp_rule_add.argtypes = [
            ctypes.c_void_p,
            ctypes.c_uint32,
            ctypes.c_int,
            ctypes.c_uint,
        ]
        lib.seccomp_load.argtypes = [ctypes.c_void_p]
        lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
        lib.seccomp_release.argtypes = [ctypes.c_void_p]
        self._lib = lib
        self._ctx = lib.seccomp_init(_SCMP_ACT_ALLOW)
        if not self._ctx:
            raise LayerUnavailable("seccomp", "seccomp_init failed")
        self.rules = 0
        for name in denied:
            number = lib.seccomp_syscall_resolve_name(name.encode())
            if number < 0:  # not a syscall on this architecture (fork on aarch64, ...)
                continue
            if lib.seccomp_rule_add(self._ctx, _SCMP_ACT_ERRNO_EPERM, number, 0) != 0:
                raise LayerUnavailable("seccomp", f"cannot add a rule for {name}")
            self.rules += 1

    def load(self) -> str:
        if self._ctx is None:
            raise LayerUnavailable("seccomp", "the filter was exported as BPF and released")
        rc = self._lib.seccomp_load(self._ctx)
        if rc != 0:
            raise LayerUnavailable("seccomp", f"seccomp_load failed: {os.strerror(-rc)}")
        return f"{self.rules} syscalls denied"

    def program(self) -> BpfProgram:
        """The filter as libseccomp generates it, to install later without libseccomp; this
        filter's libseccomp context is released. Exported through a pipe (the worker's rlimits
        allow no file writes), which holds 64 kB, more than the kernel's longest program (32
        kB): non-blocking, so that a longer one fails the export instead of hanging it."""
        read_fd, write_fd = os.pipe2(os.O_NONBLOCK)
        try:
            rc = self._lib.seccomp_export_bpf(self._ctx, write_fd)
            os.close(write_fd)
            write_fd = -1
            if rc != 0:
                raise LayerUnavailable("seccomp", f"seccomp_export_bpf failed: {os.strerror(-rc)}")
            chunks = []
            while chunk := os.read(read_fd, 1 << 16):
                chunks.append(chunk)
        finally:
            os.close(read_fd)
            if write_fd >= 0:
                os.close(write_fd)
            self._lib.seccomp_release(self._ctx)
            self._ctx = None
        return BpfProgram(b"".join(chunks), self.rules)


_BPF_MAXINSNS = 4096  # the kernel's limit on one classic BPF program


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class BpfProgram:
    """A generated seccomp filter (classic BPF, 8 bytes an instruction), installed with one
    prctl: every forked child loads the same filter, and `seccomp_load` would generate it anew
    each time (~0.3 ms of a child's ~2 ms start)."""

    def __init__(self, code: bytes, rules: int):
        if not code or len(code) % 8 or len(code) // 8 > _BPF_MAXINSNS:
            raise LayerUnavailable("seccomp", f"libseccomp exported {len(code)} bytes of BPF")
        self.rules = rules
        self._code = ctypes.create_string_buffer(code, len(code))
        self._fprog = _SockFprog(len(code) // 8, ctypes.addressof(self._code))

    def load(self) -> str:
        # the worker set PR_SET_NO_NEW_PRIVS, which the kernel requires of an unprivileged filter
        if _libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(self._fprog), 0, 0):
            err = ctypes.get_errno()
            raise LayerUnavailable("seccomp", f"prctl(PR_SET_SECCOMP): {os.strerror(err)}")
        return f"{self.rules} syscalls denied"


_CHILD_FILTER: BpfProgram | None = None


def harden_worker(layers: list[str], max_open_files: int = 64) -> dict[str, str]:
    """Apply the requested worker layers; returns {layer: status}.

    A status starts with "ok" or "unavailable"; a layer that was not requested is "off". The
    trusted side compares this report with its configuration.
    """
    global _CHILD_FILTER
    status = {name: "off" for name in ("rlimits", "landlock", "seccomp")}
    if "rlimits" in layers:
        status["rlimits"] = "ok: " + _apply_worker_rlimits(max_open_files)
    _prctl(PR_SET_NO_NEW_PRIVS, 1)
    _prctl(PR_SET_DUMPABLE, 0)
    worker_filter = None
    if "seccomp" in layers:
        try:  # build both filters while libseccomp can still be loaded from disk
            worker_filter = SeccompFilter(WORKER_DENIED_SYSCALLS)
            _CHILD_FILTER = SeccompFilter(CHILD_DENIED_SYSCALLS).program()
        except LayerUnavailable as err:  # neither then: the layer is missing, not half there
            worker_filter = _CHILD_FILTER = None
            status["seccomp"] = f"unavailable: {err}"
    if "landlock" in layers:
        try:
            status["landlock"] = "ok: " + _apply_landlock()
        except LayerUnavailable as err:
            status["landlock"] = f"unavailable: {err}"
    if worker_filter is not None:
        try:
            status["seccomp"] = "ok: " + worker_filter.load()
        except LayerUnavailable as err:
            status["seccomp"] = f"unavailable: {err}"
            _CHILD_FILTER = None
    return status


def harden_child(address_space_bytes: int, cpu_seconds: int) -> None:
    """Called in each forked batch child before any model code runs; raises on failure."""
    if address_space_bytes > 0:
        _set_limit(resource.RLIMIT_AS, address_space_bytes)
    # soft < hard: the soft limit arrives as SIGXCPU (reported as a timeout); at soft == hard the
    # kernel would send SIGKILL, indistinguishable from the out-of-memory killer.
    soft = max(1, int(cpu_seconds) + 1)
    resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 2))
    if _CHILD_FILTER is not None:
        _CHILD_FILTER.load()


def probe(paths: list[str]) -> dict[str, str]:
    """Try what the layers forbid, from trusted code inside a hardened child.

    Returns {attempt: outcome}; an outcome of "allowed" means a layer is missing. `paths` are
    files of the trusted side to try to read (a secret, the home folder). Used by `selfplay
    validate --examples` and by the tests to show that the operating system, not only the
    policy, stops each attempt.
    """

    def attempt(fn) -> str:
        try:
            fn()
        except OSError as err:
            return errno.errorcode.get(err.errno, str(err.errno))
        return "allowed"

    def fork_and_reap() -> None:
        pid = os.fork()
        if pid == 0:
            os._exit(0)
        os.waitpid(pid, 0)

    return {
        "read_file": attempt(lambda: open("/usr/lib/os-release", "rb").close()),
        "write_file": attempt(lambda: open(__file__, "ab").close()),  # appends nothing
        "list_dir": attempt(lambda: os.listdir("/")),
        "socket": attempt(lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close()),
        "exec": attempt(lambda: os.execv("/usr/bin/true", ["true"])),
        "fork": attempt(fork_and_reap),
        "kill_parent": attempt(lambda: os.kill(os.getppid(), 0)),
        **{f"read {path}": attempt(lambda p=path: open(p, "rb").close()) for path in paths},
        "environment": " ".join(sorted(os.environ)) or "empty",
    }
