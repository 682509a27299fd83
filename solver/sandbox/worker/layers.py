"""Isolation layers, each a small function; a snippet or session process applies them in order (``isolate``).

Also the settings the parent passes and the record of which layers hold on this machine.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import resource
import signal
import struct
import sys
import tempfile
import time
from dataclasses import dataclass

from .syscalls import (CAP_VERSION_3, CLONE_NEWNS, MS_NODEV, MS_NOSUID, MS_PRIVATE, MS_REC, PR_CAPBSET_DROP,
                       PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG, PR_SET_SECCOMP, SECCOMP_MODE_FILTER,
                       SYS_LANDLOCK_ADD_RULE, SYS_LANDLOCK_CREATE_RULESET, SYS_LANDLOCK_RESTRICT_SELF, check,
                       libc, mount, prctl, unshare)

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
# What an idle session may hold beyond the template's shared pages (its own copies of touched pages and its
# names), in MB: the pool cgroup's memory cap grows by this much per allowed session (an idle session after a
# sympy call holds ~6 MB of its own). Sessions that hold more push the pool toward its cap, where the kernel's
# OOM killer takes the largest process (that session's next call then says its state is lost).
SESSION_MEMORY_MB = 32


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
    sessions: int = 0  # live stateful sessions at most; each adds a process and SESSION_MEMORY_MB to the cgroup
    interrupt_grace_s: float = 0.5  # a session call interrupted at its limit is killed if not ended this long after
    display: str = "repr"  # session cells: repr (this package's runner) or ipython (IPython's shell, as a kernel)
    starter_code: str = ""  # run first in every session process, its output discarded


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
    pids = settings.processes_per_snippet * settings.workers + settings.spares + settings.sessions + 4
    memory = (settings.memory_mb * settings.workers + 256 + SESSION_MEMORY_MB * settings.sessions) * mib
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
    check(libc.capset(ctypes.c_char_p(header), ctypes.c_char_p(data)), "capset")


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
    ruleset = check(libc.syscall(SYS_LANDLOCK_CREATE_RULESET, ctypes.c_char_p(attr), ctypes.c_size_t(size),
                                   ctypes.c_uint32(0)), "landlock_create_ruleset")
    try:
        for path, access in ((workdir, handled_fs), ("/dev/null", handled_fs & (LL_FS_WRITE_FILE | LL_FS_TRUNCATE))):
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
            try:
                rule = struct.pack("=Qi", access, fd)
                check(libc.syscall(SYS_LANDLOCK_ADD_RULE, ctypes.c_int(ruleset), ctypes.c_int(LL_RULE_PATH_BENEATH),
                                     ctypes.c_char_p(rule), ctypes.c_uint32(0)), f"landlock_add_rule {path}")
            finally:
                os.close(fd)
        prctl(PR_SET_NO_NEW_PRIVS, 1)
        check(libc.syscall(SYS_LANDLOCK_RESTRICT_SELF, ctypes.c_int(ruleset), ctypes.c_uint32(0)),
               "landlock_restrict_self")
    finally:
        os.close(ruleset)


def scrubbed_environment(workdir: str) -> dict[str, str]:
    keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "PYTHONHASHSEED")}
    threads = dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")
    return {**keep, **threads, "HOME": workdir, "TMPDIR": workdir, "MPLBACKEND": "Agg"}



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
