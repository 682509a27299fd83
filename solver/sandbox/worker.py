"""The child side of the sandbox: a warm template process that forks one isolated process per snippet.

``solver.sandbox.pool`` starts this file as a fresh interpreter (never a fork of the solver, which may hold CUDA or
engine state). It imports the preamble once, warms sympy's lazy imports, then serves its parent over a
``SOCK_SEQPACKET`` socket. It uses the standard library only and never imports the ``solver`` package.

Process tree when the kernel allows namespaces::

    solver ── supervisor ── template (init of the pool's pid namespace)
                                ├── snippet (init of its own pid, mount namespaces) ── whatever it forks
                                └── spare snippets, forked ahead and waiting for code

Each snippet process is forked *before* its code arrives (a "spare"), so the fork and the isolation set-up
are off the latency path. A spare that receives a request gets its stdout, stderr and report pipes and the code
(a memfd) straight from the parent through the template; the parent reads the pipes itself.

Protocol (JSON, one message per datagram):
  parent -> template: {"op": "run", "id", "timeout_s", "repl"} + fds [code, stdout, stderr, report]
                      {"op": "kill", "id"}    {"op": "close"}
  template -> parent: {"op": "ready", "isolation": {...}}   {"op": "fatal", "error"}
                      {"op": "exit", "id", "status", "cpu_s", "timed_out", "error"}
  snippet -> parent (report pipe): b"ok\\n" | b"error\\n" | b"memory\\n"
"""

from __future__ import annotations

import ast
import ctypes
import errno
import gc
import io
import json
import linecache
import os
import platform
import resource
import select
import selectors
import shutil
import signal
import socket
import struct
import sys
import tempfile
import time
import traceback
from collections import deque
from dataclasses import asdict, dataclass, field
from typing import Literal

Outcome = Literal["ok", "error", "memory"]

SNIPPET_NAME = "<snippet>"
MSG_BYTES = 65536  # the largest control message; code travels in a memfd, so headers stay small

# Linux constants (uapi headers); the same values on x86_64 and aarch64.
CLONE_NEWNS, CLONE_NEWIPC, CLONE_NEWUSER = 0x00020000, 0x08000000, 0x10000000
CLONE_NEWPID, CLONE_NEWNET = 0x20000000, 0x40000000
MS_NOSUID, MS_NODEV, MS_REC, MS_PRIVATE = 2, 4, 1 << 14, 1 << 18
PR_SET_PDEATHSIG, PR_SET_SECCOMP, PR_CAPBSET_DROP = 1, 22, 24
PR_SET_CHILD_SUBREAPER, PR_SET_NO_NEW_PRIVS = 36, 38
SECCOMP_MODE_FILTER = 2
CAP_VERSION_3 = 0x20080522
SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_RESTRICT_SELF = 444, 445, 446
PER_NAMESPACE_PID_MAX_KERNEL = (6, 14)  # before 6.14 kernel.pid_max is global: never write it there
PID_MAX_MIN = 301  # the kernel refuses smaller values (RESERVED_PIDS + 1)

# Landlock access rights (include/uapi/linux/landlock.h).
LL_FS_EXECUTE, LL_FS_WRITE_FILE = 1 << 0, 1 << 1
LL_FS_WRITE_KINDS = sum(1 << bit for bit in (1, 4, 5, 6, 7, 8, 9, 10, 11, 12))  # write, remove, make *
LL_FS_REFER, LL_FS_TRUNCATE = 1 << 13, 1 << 14  # ABI 2, ABI 3
LL_NET_BIND_TCP, LL_NET_CONNECT_TCP = 1 << 0, 1 << 1  # ABI 4
LL_SCOPE_ABSTRACT_UNIX, LL_SCOPE_SIGNAL = 1 << 0, 1 << 1  # ABI 6
LL_RULE_PATH_BENEATH = 1

# seccomp: deny these syscalls with EPERM (sockets of any family; io_uring, which can open sockets behind a
# filter's back). Syscalls of a foreign ABI (i386 on x86_64) kill the process.
SECCOMP_ARCH = {"x86_64": (0xC000003E, {"socket": 41, "io_uring_setup": 425}),
                "aarch64": (0xC00000B7, {"socket": 198, "io_uring_setup": 425})}
X32_SYSCALL_BIT = 0x40000000

WARMUP = """
_x, _y = sp.symbols('x y')
sp.factor(_x**4 - 1); sp.expand((_x + _y)**5); sp.simplify(sp.sin(_x)**2 + sp.cos(_x)**2)
sp.solve([_x + _y - 3, _x - _y - 1], [_x, _y]); sp.solve(_x**2 - 2, _x); sp.nsimplify(0.5); sp.N(sp.pi, 30)
sp.isprime(97); sp.factorint(360); sp.divisors(60); sp.totient(36); sp.binomial(10, 3); sp.Rational(3, 7) + 1
sp.Matrix([[1, 2], [3, 4]]).det(); sp.summation(_x**2, (_x, 1, 10)); sp.Poly(_x**3 - _x, _x).all_roots()
sp.gcd(12, 18); sp.sqrt(8); sp.Integer(10)**20 % 7; sp.latex(_x**2); sp.simplify(sp.sqrt(2) * sp.sqrt(8))
np.arange(10).sum(); np.linalg.det(np.eye(3)); np.array([1.5, 2.5]).round()
"""
# Modules a snippet commonly imports: importing them in the template makes that import free in every snippet.
COMMON_MODULES = ("itertools", "functools", "fractions", "decimal", "collections", "random", "re", "heapq",
                  "bisect", "statistics", "cmath", "operator", "string", "json", "copy", "traceback")


@dataclass(frozen=True)
class Settings:
    """What the parent passes on the command line (JSON)."""

    parent_pid: int
    control_fd: int
    base_dir: str
    preamble: str
    memory_mb: int
    disk_mb: int
    spares: int
    workers: int = 1
    pid_max: int = PID_MAX_MIN
    processes_per_snippet: int = 64  # the pool cgroup's pids.max is this times workers (plus the spares)
    namespaces: bool = True  # False: process groups, subreaper, Landlock, seccomp and rlimits only
    open_files: int = 1024
    processes: int = 1024  # RLIMIT_NPROC: counted per user, and not enforced for root at all


@dataclass
class Features:
    """The isolation layers that work on this machine, found once at start-up by a probe process."""

    user_namespace: bool = False  # the pool runs in its own user namespace (hosts where we are not root)
    net_namespace: bool = False  # snippets share an empty network namespace (loopback down)
    ipc_namespace: bool = False  # System V IPC objects are private to the pool
    pid_namespace: bool = False  # each snippet is init of its own pid namespace (dies -> its tree dies)
    mount_namespace: bool = False  # each snippet gets a private size-capped tmpfs as its working dir
    pid_max: int = 0  # processes per snippet namespace (0 = not capped)
    oom_score_adj: bool = False  # snippets are the OOM killer's first choice
    caps_dropped: bool = False  # no capabilities, also after exec (empty bounding set)
    seccomp: bool = False  # socket() and io_uring_setup() fail with EPERM
    landlock_abi: int = 0  # 0 = unavailable
    landlock: bool = False  # writes only in the working dir; TCP (ABI>=4); signals and abstract sockets (ABI>=6)
    cgroup: bool = False  # all snippets of the pool share a cgroup capping their process count and memory


# ---- thin wrappers over syscalls that Python 3.10 does not expose ------------------------------------------

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_libc.mount.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_ulong, ctypes.c_char_p]


def _check(result: int, what: str) -> int:
    if result < 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")
    return result


def prctl(option: int, arg: int = 0, arg3: int = 0) -> int:
    return _check(_libc.prctl(option, arg, arg3, 0, 0), f"prctl({option})")


def unshare(flags: int) -> None:
    _check(_libc.unshare(flags), f"unshare({flags:#x})")


def setns(fd: int, nstype: int) -> None:
    _check(_libc.setns(fd, nstype), "setns")


def mount(source: bytes, target: bytes, fstype: bytes | None, flags: int, data: bytes | None) -> None:
    _check(_libc.mount(source, target, fstype, flags, data), f"mount {target.decode()}")


def landlock_abi() -> int:
    """The Landlock ABI version, 0 when the kernel lacks it or it is disabled."""
    result = _libc.syscall(SYS_LANDLOCK_CREATE_RULESET, None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    return max(0, int(result))


def kernel_version() -> tuple[int, int]:
    """(major, minor) of the running kernel, e.g. (6, 18)."""
    parts = platform.release().split(".")
    try:
        return int(parts[0]), int("".join(ch for ch in parts[1] if ch.isdigit()) or 0)
    except (IndexError, ValueError):
        return (0, 0)


# ---- isolation steps, each a small function; the snippet process applies them in order --------------------


def private_tmpfs(path: str, size_mb: int) -> None:
    """A new mount namespace whose only change is a size-capped tmpfs on ``path`` (gone when the snippet is)."""
    unshare(CLONE_NEWNS)
    mount(b"none", b"/", None, MS_REC | MS_PRIVATE, None)  # our mounts must not propagate to the host
    options = f"size={size_mb}m,nr_inodes=4096,mode=0700".encode()
    mount(b"sandbox", path.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, options)


def cap_pid_max(limit: int) -> None:
    """Cap process numbers in this pid namespace (per namespace only since Linux 6.14)."""
    with open("/proc/sys/kernel/pid_max", "w") as handle:
        handle.write(str(limit))


def pool_cgroups(settings: Settings) -> list[str]:
    """Create this pool's cgroups (pids, memory) below our own where the hierarchy is writable (root on
    cgroup v1, or a delegated v2 subtree); return their directories, empty when there is none."""
    name = f"solver-sandbox-{os.getpid()}"
    mib = 1024 * 1024
    pids = settings.processes_per_snippet * settings.workers + settings.spares + 4
    memory = (settings.memory_mb * settings.workers + 256) * mib
    try:
        with open("/proc/self/cgroup") as handle:
            lines = [line.rstrip("\n").split(":", 2) for line in handle]
    except OSError:
        return []
    wanted: list[tuple[str, dict[str, int]]] = []
    for _id, controllers, path in lines:
        if controllers == "" and os.path.exists("/sys/fs/cgroup/cgroup.controllers"):  # v2, unified
            wanted.append((f"/sys/fs/cgroup{path}", {"pids.max": pids, "memory.max": memory}))
        for controller, limit in (("pids", {"pids.max": pids}), ("memory", {"memory.limit_in_bytes": memory})):
            if controller in controllers.split(","):
                wanted.append((f"/sys/fs/cgroup/{controller}{path}", limit))
    made = []
    for parent, limits in wanted:
        _remove_stale_cgroups(parent)
        directory = os.path.join(parent, name)
        try:
            os.mkdir(directory)
        except OSError:
            continue  # not writable here
        written = 0
        for key, value in limits.items():
            if os.path.exists(os.path.join(directory, key)):
                try:
                    with open(os.path.join(directory, key), "w") as handle:
                        handle.write(str(value))
                    written += 1
                except OSError as exc:
                    print(f"sandbox: cannot set {key}: {exc}", file=sys.stderr)
        if written:
            made.append(directory)
        else:
            os.rmdir(directory)
    return made


def _remove_stale_cgroups(parent: str) -> None:
    """Empty cgroups left by pools whose template was killed with SIGKILL."""
    try:
        names = os.listdir(parent)
    except OSError:
        return
    for name in names:
        owner = name.removeprefix("solver-sandbox-")
        if owner != name and owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
            try:
                os.rmdir(os.path.join(parent, name))
            except OSError:
                pass  # still has processes or is not ours to remove; harmless


def join_cgroups(directories: list[str]) -> None:
    for directory in directories:
        with open(os.path.join(directory, "cgroup.procs"), "w") as handle:
            handle.write("0")


def remove_cgroups(directories: list[str]) -> None:
    """Remove the pool's cgroups once their processes are gone (the kernel refuses while any remain)."""
    for directory in directories:
        for _attempt in range(100):
            try:
                os.rmdir(directory)
                break
            except FileNotFoundError:
                break
            except OSError:
                time.sleep(0.01)


def prefer_for_oom() -> None:
    with open("/proc/self/oom_score_adj", "w") as handle:
        handle.write("1000")


def set_rlimits(settings: Settings) -> None:
    mib = 1024 * 1024
    limits = {resource.RLIMIT_AS: settings.memory_mb * mib, resource.RLIMIT_FSIZE: settings.disk_mb * mib,
              resource.RLIMIT_CORE: 0, resource.RLIMIT_NOFILE: settings.open_files,
              resource.RLIMIT_NPROC: settings.processes}
    for kind, value in limits.items():
        _soft, hard = resource.getrlimit(kind)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)  # raising a hard limit needs root
        resource.setrlimit(kind, (value, value))


def drop_capabilities() -> None:
    """Empty the bounding set (so exec as uid 0 regains nothing), then the effective/permitted/inheritable sets."""
    with open("/proc/sys/kernel/cap_last_cap") as handle:
        last = int(handle.read())
    for cap in range(last + 1):
        prctl(PR_CAPBSET_DROP, cap)
    header = struct.pack("Ii", CAP_VERSION_3, 0)
    data = bytes(24)  # two zeroed {effective, permitted, inheritable} u32 triples
    _check(_libc.capset(ctypes.c_char_p(header), ctypes.c_char_p(data)), "capset")


def install_seccomp() -> None:
    """A classic-BPF filter: foreign ABIs die, a short deny list fails with EPERM, everything else runs."""
    arch, numbers = SECCOMP_ARCH[platform.machine()]
    ld_abs, jeq, jge, ret = 0x20, 0x15, 0x35, 0x06
    allow, deny, kill = 0x7FFF0000, 0x00050000 | errno.EPERM, 0x80000000
    deny_list = sorted(numbers.values())
    program = [(ld_abs, 0, 0, 4),  # seccomp_data.arch
               (jeq, 1, 0, arch), (ret, 0, 0, kill),
               (ld_abs, 0, 0, 0)]  # seccomp_data.nr
    if platform.machine() == "x86_64":
        program.append((jge, len(deny_list) + 1, 0, X32_SYSCALL_BIT))  # x32 numbers -> deny
    for index, number in enumerate(deny_list):
        program.append((jeq, len(deny_list) - index, 0, number))
    program += [(ret, 0, 0, allow), (ret, 0, 0, deny)]
    filters = b"".join(struct.pack("HBBI", *instr) for instr in program)
    buffer = ctypes.create_string_buffer(filters)
    fprog = struct.pack("HxxxxxxP", len(program), ctypes.addressof(buffer))
    fprog_buffer = ctypes.create_string_buffer(fprog)
    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.addressof(fprog_buffer))


def restrict_with_landlock(abi: int, workdir: str) -> None:
    """Writes only beneath ``workdir`` (and to /dev/null); no TCP; no signals or abstract sockets outward."""
    handled_fs = LL_FS_WRITE_KINDS | (LL_FS_REFER if abi >= 2 else 0) | (LL_FS_TRUNCATE if abi >= 3 else 0)
    handled_net = (LL_NET_BIND_TCP | LL_NET_CONNECT_TCP) if abi >= 4 else 0
    scoped = (LL_SCOPE_ABSTRACT_UNIX | LL_SCOPE_SIGNAL) if abi >= 6 else 0
    attr = struct.pack("QQQ", handled_fs, handled_net, scoped)
    size = 8 if abi < 4 else 16 if abi < 6 else 24
    ruleset = _check(_libc.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.c_char_p(attr), ctypes.c_size_t(size),
                                   ctypes.c_uint32(0)), "landlock_create_ruleset")
    try:
        for path, access in ((workdir, handled_fs), ("/dev/null", handled_fs & (LL_FS_WRITE_FILE | LL_FS_TRUNCATE))):
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = struct.pack("=Qi", access, fd)
                _check(_libc.syscall(SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(LL_RULE_PATH_BENEATH),
                                     ctypes.c_char_p(rule), ctypes.c_uint32(0)), f"landlock_add_rule {path}")
            finally:
                os.close(fd)
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        _check(_libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)),
               "landlock_restrict_self")
    finally:
        os.close(ruleset)


def scrubbed_environment(workdir: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "PYTHONHASHSEED")}
    threads = dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")
    return {**keep, **threads, "HOME": workdir, "TMPDIR": workdir, "MPLBACKEND": "Agg"}


# ---- the snippet process -------------------------------------------------------------------------------------


def isolate(settings: Settings, features: Features, workdir: str, cgroups: list[str],
            probe: bool = False) -> Features:
    """Apply every enabled layer to the calling (fresh, forked) process; return what worked.

    With ``probe`` a failing layer is recorded as unavailable; otherwise a failure raises (the spare dies and
    the template reports it), because running a snippet with less isolation than announced is worse.
    """
    got = Features(user_namespace=features.user_namespace, net_namespace=features.net_namespace,
                   ipc_namespace=features.ipc_namespace, pid_namespace=features.pid_namespace,
                   landlock_abi=features.landlock_abi)

    def attempt(enabled: bool, step: object, *args: object) -> bool:
        if not enabled:
            return False
        try:
            step(*args)  # type: ignore[operator]
            return True
        except OSError as exc:
            if not probe:
                raise
            print(f"sandbox probe: {getattr(step, '__name__', step)} unavailable: {exc}", file=sys.stderr)
            return False

    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    os.setsid()
    got.mount_namespace = attempt(features.mount_namespace, private_tmpfs, workdir, settings.disk_mb)
    os.chdir(workdir)
    if attempt(bool(features.pid_max), cap_pid_max, features.pid_max):
        got.pid_max = features.pid_max
    got.oom_score_adj = attempt(features.oom_score_adj, prefer_for_oom)
    got.cgroup = attempt(features.cgroup, join_cgroups, cgroups)
    set_rlimits(settings)
    got.caps_dropped = attempt(features.caps_dropped, drop_capabilities)
    prctl(PR_SET_NO_NEW_PRIVS, 1)  # exec never gains privileges; Landlock and seccomp require it
    got.landlock = attempt(features.landlock, restrict_with_landlock, features.landlock_abi, workdir)
    got.seccomp = attempt(features.seccomp, install_seccomp)
    os.environ.clear()
    os.environ.update(scrubbed_environment(workdir))
    tempfile.tempdir = workdir
    return got


def snippet_main(sock: socket.socket, settings: Settings, features: Features, workdir: str,
                 cgroups: list[str], namespace: dict[str, object]) -> None:
    """Runs in the forked spare: isolate, wait for one request, run it, exit. Never returns."""
    status = 70  # EX_SOFTWARE: set-up failed before any request
    try:
        signal.set_wakeup_fd(-1)
        for sig in (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, signal.SIG_DFL)
        keep = sock.fileno()
        os.closerange(3, keep)
        os.closerange(keep + 1, 1 << 20)
        isolate(settings, features, workdir, cgroups)
        data, fds, _flags, _addr = socket.recv_fds(sock, MSG_BYTES, 4)
        if not data or len(fds) != 4:
            os._exit(0)  # the template retired this spare
        request = json.loads(data)
        code_fd, out_fd, err_fd, report_fd = fds
        null = os.open("/dev/null", os.O_RDONLY)
        for source, target in ((null, 0), (out_fd, 1), (err_fd, 2)):
            os.dup2(source, target)
            os.close(source)
        sock.close()
        cpu_s = int(request["timeout_s"]) + 2  # a backstop only: the template kills on wall time first
        resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
        with os.fdopen(code_fd, "rb") as handle:
            code = handle.read().decode("utf-8", errors="replace")
        streams = (io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace"),
                   io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                                    line_buffering=True))
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__ = streams  # the originals go to the template log
        sys.argv = [SNIPPET_NAME]
        runner = os.getpid()
        outcome = run_snippet(code, bool(request.get("repl", True)), namespace)
        finish(streams, outcome, report_fd if os.getpid() == runner else -1)  # forked copies do not report
    except BaseException:  # noqa: BLE001 - a spare must never return into the template's loop
        traceback.print_exc()
    finally:
        os._exit(status)


def run_snippet(code: str, repl: bool, namespace: dict[str, object]) -> Outcome:
    """Execute ``code`` as a program; with ``repl`` print the repr of a final bare expression (unless None).

    >>> run_snippet("x = 6\\nx * 7", True, {})
    42
    'ok'
    >>> run_snippet("print('a')\\nNone", True, {})
    a
    'ok'
    >>> run_snippet("import sys; sys.exit(3)", True, {})
    'error'
    """
    try:
        tree = ast.parse(code, SNIPPET_NAME)
        linecache.cache[SNIPPET_NAME] = (len(code), None, code.splitlines(True), SNIPPET_NAME)
        last = tree.body.pop() if repl and tree.body and isinstance(tree.body[-1], ast.Expr) else None
        exec(compile(tree, SNIPPET_NAME, "exec"), namespace)  # noqa: S102 - running it is the point
        if last is not None:
            value = eval(compile(ast.Expression(last.value), SNIPPET_NAME, "eval"), namespace)  # noqa: S307
            if value is not None:
                print(repr(value))
        return "ok"
    except SystemExit as exc:
        if exc.code is None or exc.code == 0:
            return "ok"
        if not isinstance(exc.code, int):
            print(exc.code, file=sys.stderr)
        return "error"
    except MemoryError as exc:
        _print_user_traceback(exc)
        return "memory"
    except BaseException as exc:  # noqa: BLE001 - any failure of the snippet is its result
        _print_user_traceback(exc)
        return "error"


def _print_user_traceback(exc: BaseException) -> None:
    """The traceback without this runner's own frame (as ``python file.py`` would show it)."""
    tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
    try:
        traceback.print_exception(type(exc), exc, tb if not isinstance(exc, SyntaxError) else None)
    except (MemoryError, RecursionError, OSError, ValueError):
        os.write(2, f"{type(exc).__name__}\n".encode())


def finish(streams: tuple[io.TextIOWrapper, io.TextIOWrapper], outcome: Outcome, report_fd: int) -> None:
    """Flush and close the output pipes first, then report: the parent may answer before this process is
    reaped (its exit tears down a large copied address space, ~3 ms)."""
    for stream in streams:
        try:
            stream.flush()
        except (OSError, ValueError, AttributeError):
            pass  # the parent stopped reading (output cap) or the snippet closed the stream: nothing to save
    for fd in (1, 2):
        try:
            os.close(fd)
        except OSError:
            pass  # the snippet closed it itself
    if report_fd >= 0:
        os.write(report_fd, outcome.encode() + b"\n")
    os._exit(0 if outcome == "ok" else 1)


# ---- the template process ------------------------------------------------------------------------------------


@dataclass
class Spare:
    pid: int
    sock: socket.socket
    workdir: str


@dataclass
class Job:
    id: int
    pid: int
    deadline: float  # time.monotonic()
    workdir: str
    killed: bool = False
    timed_out: bool = False


@dataclass
class Template:
    settings: Settings
    control: socket.socket
    features: Features
    namespace: dict[str, object]
    cgroups: list[str]
    pidns_fd: int = -1
    spares: deque[Spare] = field(default_factory=deque)
    jobs: dict[int, Job] = field(default_factory=dict)  # by pid
    spare_failures: int = 0
    serial: int = 0
    cleaners: set[int] = field(default_factory=set)  # pids of `rm -rf` removing old working dirs
    rm: str | None = field(default_factory=lambda: shutil.which("rm"))

    # -- spares

    def workdir(self) -> str:
        if self.features.mount_namespace:
            return os.path.join(self.settings.base_dir, "work")  # the same path, a private tmpfs in each
        self.serial += 1
        return tempfile.mkdtemp(prefix=f"run{self.serial}-", dir=self.settings.base_dir)

    def fork_spare(self) -> Spare | None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        workdir = self.workdir()
        if self.features.pid_namespace:
            unshare(CLONE_NEWPID)  # the next child is init of a new pid namespace
        try:
            pid = os.fork()
        except OSError as exc:
            print(f"sandbox: fork failed: {exc}", file=sys.stderr)
            pid = -1
        if pid == 0:
            snippet_main(theirs, self.settings, self.features, workdir, self.cgroups, self.namespace)
        if self.features.pid_namespace:
            setns(self.pidns_fd, CLONE_NEWPID)  # later children of the template stay in its namespace
        theirs.close()
        if pid < 0:
            ours.close()
            self.remove_workdir(workdir)
            return None
        return Spare(pid, ours, workdir)

    def top_up(self) -> None:
        while len(self.spares) < self.settings.spares and self.spare_failures < 5:
            spare = self.fork_spare()
            if spare is None:
                return
            self.spares.append(spare)

    def remove_workdir(self, workdir: str) -> None:
        """Remove a snippet's files (a private tmpfs vanishes by itself). A snippet may leave 100k entries:
        `rm -rf` in its own process keeps this loop (and every deadline it enforces) responsive."""
        if self.features.mount_namespace:
            return
        if self.rm is None:
            shutil.rmtree(workdir, ignore_errors=True)
            return
        try:
            self.cleaners.add(os.posix_spawn(self.rm, [self.rm, "-rf", "--", workdir], os.environ))
        except OSError as exc:
            print(f"sandbox: cannot start rm: {exc}", file=sys.stderr)
            shutil.rmtree(workdir, ignore_errors=True)

    # -- requests

    def dispatch(self, request: dict[str, object], fds: list[int]) -> None:
        job_id = int(request["id"])  # type: ignore[arg-type]
        timeout_s = float(request["timeout_s"])  # type: ignore[arg-type]
        payload = json.dumps({"timeout_s": timeout_s, "repl": request.get("repl", True)}).encode()
        try:
            for _attempt in range(2):  # a spare may have died while waiting (e.g. the OOM killer)
                spare = self.spares.popleft() if self.spares else self.fork_spare()
                if spare is None:
                    break
                try:
                    socket.send_fds(spare.sock, [payload], fds)
                except OSError:
                    self.discard(spare)
                    continue
                spare.sock.close()
                self.jobs[spare.pid] = Job(job_id, spare.pid, time.monotonic() + timeout_s, spare.workdir)
                return
            self.send({"op": "exit", "id": job_id, "status": None, "cpu_s": 0.0, "timed_out": False,
                       "error": "no process could be started for the snippet"})
        finally:
            for fd in fds:
                os.close(fd)

    def discard(self, spare: Spare) -> None:
        spare.sock.close()
        try:
            os.kill(spare.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # already gone; reaped below
        self.remove_workdir(spare.workdir)

    def kill(self, job: Job) -> None:
        if job.killed:
            return
        job.killed = True
        try:
            os.kill(job.pid, signal.SIGKILL)  # init of its namespace: the kernel kills the rest with it
            if not self.features.pid_namespace:
                os.killpg(job.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # exited on its own meanwhile; still a zombie until reaped, so the pid was not reused

    def enforce_deadlines(self) -> float | None:
        """Kill jobs past their wall time; return seconds until the next deadline."""
        now = time.monotonic()
        nearest = None
        for job in self.jobs.values():
            if job.killed:
                continue
            if now >= job.deadline:
                job.timed_out = True
                self.kill(job)
            else:
                left = job.deadline - now
                nearest = left if nearest is None else min(nearest, left)
        return nearest

    def reap(self) -> None:
        while True:
            try:
                info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
            except ChildProcessError:
                return
            if info is None:
                return
            job = self.jobs.get(info.si_pid)
            if job is not None and not self.features.pid_namespace:
                # Still a zombie, so its pid (= its process group id) cannot have been reused yet.
                try:
                    os.killpg(job.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass  # no member of its group is left
            pid, status, usage = os.wait4(info.si_pid, 0)
            if job is not None:
                del self.jobs[pid]
                self.finish_job(job, status, usage.ru_utime + usage.ru_stime)
            elif pid in self.cleaners:
                self.cleaners.discard(pid)
            elif any(spare.pid == pid for spare in self.spares):
                self.spares = deque(s for s in self.spares if s.pid != pid)
                self.spare_failures += 1
                print(f"sandbox: a spare exited before use (status {status})", file=sys.stderr)

    def finish_job(self, job: Job, status: int, cpu_s: float) -> None:
        if not self.features.pid_namespace:
            self.sweep_orphans()
        self.remove_workdir(job.workdir)
        self.send({"op": "exit", "id": job.id, "status": status, "cpu_s": round(cpu_s, 4),
                   "timed_out": job.timed_out, "error": None})

    def sweep_orphans(self) -> None:
        """Without pid namespaces, daemons that left their session were re-parented to us (child subreaper):
        kill every child that is neither a job nor a spare."""
        known = {job.pid for job in self.jobs.values()} | {spare.pid for spare in self.spares} | self.cleaners
        try:
            with open(f"/proc/self/task/{os.getpid()}/children") as handle:
                children = [int(pid) for pid in handle.read().split()]
        except OSError:
            return
        for pid in children:
            if pid in known:
                continue
            try:
                os.killpg(os.getpgid(pid), signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass  # its group is gone; the process itself is killed next
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass  # exited meanwhile; reaped by the next reap()

    # -- messages

    def send(self, message: dict[str, object]) -> None:
        data = json.dumps(message).encode()
        deadline = time.monotonic() + 30.0  # a parent that reads nothing for 30 s is gone or hung
        while True:
            try:
                self.control.send(data)
                return
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise
                select.select([], [self.control], [], 1.0)

    def handle(self, message: dict[str, object], fds: list[int]) -> bool:
        """Act on one parent message; False when the template should shut down."""
        op = message.get("op")
        if op == "run":
            self.dispatch(message, fds)
            return True
        for fd in fds:
            os.close(fd)
        if op == "kill":
            for job in self.jobs.values():
                if job.id == message.get("id"):
                    self.kill(job)
            return True
        return op != "close"

    def shutdown(self) -> None:
        for spare in list(self.spares):
            self.discard(spare)
        for job in self.jobs.values():
            self.kill(job)
        deadline = time.monotonic() + 5.0
        while (self.jobs or self.spares or self.cleaners) and time.monotonic() < deadline:
            self.reap()  # killed spares are reaped here and leave the list
            time.sleep(0.005)
        remove_cgroups(self.cgroups)

    def serve(self) -> None:
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # the wakeup fd is what wakes the loop
        self.control.setblocking(False)
        selector = selectors.DefaultSelector()
        selector.register(self.control, selectors.EVENT_READ, "control")
        selector.register(wake_r, selectors.EVENT_READ, "wake")
        gc.freeze()  # keep the template's objects out of every snippet's garbage collections (fewer copies)
        self.top_up()
        self.send({"op": "ready", "isolation": asdict(self.features), "cgroups": self.cgroups})
        running = True
        while running:
            timeout = self.enforce_deadlines()
            for key, _events in selector.select(timeout):
                if key.data == "wake":
                    _drain(wake_r)
                    continue
                while running:
                    try:
                        data, fds, _flags, _addr = socket.recv_fds(self.control, MSG_BYTES, 4)
                    except BlockingIOError:
                        break
                    if not data:
                        running = False  # the parent closed its end
                        break
                    running = self.handle(json.loads(data), fds)
            self.reap()
            if running:
                self.top_up()
        self.shutdown()


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        return


# ---- start-up ------------------------------------------------------------------------------------------------


def enter_user_namespace() -> None:
    """Become root of a new user namespace (hosts where we are not root), mapping only our own ids."""
    uid, gid = os.getuid(), os.getgid()
    unshare(CLONE_NEWUSER)
    with open("/proc/self/setgroups", "w") as handle:
        handle.write("deny")
    with open("/proc/self/uid_map", "w") as handle:
        handle.write(f"0 {uid} 1")
    with open("/proc/self/gid_map", "w") as handle:
        handle.write(f"0 {gid} 1")


def user_namespace_works() -> bool:
    """Try a user namespace in a throwaway child first: on some hosts unshare succeeds but the namespace is
    useless (no uid map, no capabilities), and the template must not be left stranded in one."""
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            enter_user_namespace()
            unshare(CLONE_NEWNET | CLONE_NEWIPC)
            unshare(CLONE_NEWPID)
            status = 0
        except OSError as exc:
            print(f"sandbox: no user namespace: {exc}", file=sys.stderr)
        finally:
            os._exit(status)
    _pid, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status) == 0


def pool_namespaces(features: Features) -> None:
    """Namespaces shared by all snippets of this pool; each is optional."""
    if os.geteuid() != 0:
        if not user_namespace_works():
            return
        enter_user_namespace()
        features.user_namespace = True
    for flag, name in ((CLONE_NEWNET, "net_namespace"), (CLONE_NEWIPC, "ipc_namespace")):
        try:
            unshare(flag)
            setattr(features, name, True)
        except OSError as exc:
            print(f"sandbox: no {name}: {exc}", file=sys.stderr)


def become_pool_init(features: Features) -> None:
    """Fork once more so the template is init of a pool pid namespace it owns (needed to switch its children's
    namespace back after each snippet). The original process only waits and mirrors the template's exit."""
    try:
        unshare(CLONE_NEWPID)
    except OSError as exc:
        print(f"sandbox: no pid namespace: {exc}", file=sys.stderr)
        return
    pid = os.fork()
    if pid == 0:
        prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        features.pid_namespace = True
        return
    os.closerange(3, 1 << 20)  # the control socket belongs to the template alone
    while True:
        try:
            _pid, status = os.waitpid(pid, 0)
        except InterruptedError:
            continue
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)


def probe(settings: Settings, wanted: Features, cgroups: list[str], pidns_fd: int) -> Features:
    """Fork a throwaway snippet process that tries every layer; return what held."""
    read_end, write_end = os.pipe()
    workdir = os.path.join(settings.base_dir, "work")
    os.makedirs(workdir, exist_ok=True)
    if wanted.pid_namespace:
        unshare(CLONE_NEWPID)
    pid = os.fork()
    if pid == 0:
        status = 70
        try:
            os.close(read_end)
            got = isolate(settings, wanted, workdir, cgroups, probe=True)
            if got.pid_namespace and os.getpid() != 1:
                got.pid_namespace = False
            os.write(write_end, json.dumps(asdict(got)).encode())
            status = 0
        finally:
            os._exit(status)
    if wanted.pid_namespace:
        setns(pidns_fd, CLONE_NEWPID)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as handle:
        report = handle.read()
    os.waitpid(pid, 0)
    if not report:
        raise RuntimeError("the isolation probe process failed (see the template log)")
    return Features(**json.loads(report))


def warm(namespace: dict[str, object]) -> None:
    """Import the preamble, common modules and sympy's lazily loaded parts once, so snippets start warm."""
    for name in COMMON_MODULES:
        __import__(name)
    if "sp" in namespace and "np" in namespace:
        try:
            exec(compile(WARMUP, "<warm-up>", "exec"), dict(namespace))  # noqa: S102
        except Exception as exc:  # noqa: BLE001 - a warm-up failure only costs speed: log it, carry on
            print(f"sandbox: warm-up failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    gc.collect()


def main(argv: list[str]) -> int:
    settings = Settings(**json.loads(argv[-1]))
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != settings.parent_pid:
        return 1  # the parent died before we could ask to die with it
    control = socket.socket(fileno=settings.control_fd)
    features = Features(landlock_abi=landlock_abi())
    cgroups = pool_cgroups(settings) if os.geteuid() == 0 else []
    if settings.namespaces:
        pool_namespaces(features)
        become_pool_init(features)  # returns in the template (or when pid namespaces are unavailable)
    if not features.pid_namespace:
        prctl(PR_SET_CHILD_SUBREAPER, 1)  # orphaned daemons come back to us instead of to the host's init
    namespace: dict[str, object] = {"__name__": "__main__", "__builtins__": __builtins__}
    try:
        exec(compile(settings.preamble, "<preamble>", "exec"), namespace)  # noqa: S102
    except BaseException as exc:  # noqa: BLE001 - reported to the parent as a one-line error
        message = f"the sandbox preamble failed: {type(exc).__name__}: {exc}".splitlines()[0]
        control.send(json.dumps({"op": "fatal", "error": message}).encode())
        return 2
    warm(namespace)
    wanted = Features(**{**asdict(features), "mount_namespace": settings.namespaces, "oom_score_adj": True,
                         "caps_dropped": True, "seccomp": platform.machine() in SECCOMP_ARCH,
                         "landlock": features.landlock_abi > 0, "cgroup": bool(cgroups),
                         "pid_max": settings.pid_max if features.pid_namespace
                         and kernel_version() >= PER_NAMESPACE_PID_MAX_KERNEL else 0})
    pidns_fd = os.open("/proc/self/ns/pid", os.O_RDONLY | os.O_CLOEXEC)
    try:
        features = probe(settings, wanted, cgroups, pidns_fd)
    except (OSError, RuntimeError) as exc:
        control.send(json.dumps({"op": "fatal", "error": f"sandbox isolation probe failed: {exc}"}).encode())
        remove_cgroups(cgroups)
        return 3
    if not features.cgroup:
        remove_cgroups(cgroups)
        cgroups = []
    Template(settings, control, features, namespace, cgroups, pidns_fd).serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
