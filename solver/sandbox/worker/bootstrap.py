"""Start-up of the template process: pool namespaces, the isolation probe, the warm preamble, then serving."""

from __future__ import annotations

import gc
import json
import os
import platform
import signal
import socket
import sys
from contextlib import nullcontext
from dataclasses import asdict

from .layers import (PER_NAMESPACE_PID_MAX_KERNEL, SECCOMP_ARCH, Features, Settings, isolate, pool_cgroups,
                     remove_cgroups)
from .syscalls import (CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWPID, CLONE_NEWUSER, PR_SET_CHILD_SUBREAPER,
                       PR_SET_PDEATHSIG, landlock_abi, kernel_version, prctl, setns,
                       unshare)
from .session import open_cells
from .snippet import open_streams
from .template import Template

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


def prepare_sessions(settings: Settings, namespace: dict[str, object]) -> str | None:
    """Build IPython's shell when sessions display as a kernel (before any fork, so every session has it), and
    run the starter cell once in a throwaway process; a one-line error when either fails, else None."""
    if settings.display == "ipython":
        try:
            from .kernel import prepare
            prepare()
        except Exception as exc:  # noqa: BLE001 - reported to the parent as a one-line error
            return f"the sandbox could not start IPython: {type(exc).__name__}: {exc}".splitlines()[0]
    if not settings.starter_code:
        return None
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        status = 70
        try:
            os.close(read_end)
            for target in (1, 2):
                os.dup2(write_end, target)
            streams = open_streams()
            outcome = open_cells(settings.display, namespace).run(settings.starter_code, True, nullcontext())
            for stream in streams:
                stream.flush()
            status = 0 if outcome == "ok" else 1
        finally:
            os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as handle:
        output = handle.read().decode("utf-8", errors="replace")
    _pid, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) == 0:
        return None
    lines = [line for line in output.splitlines() if line.strip()]
    return f"the sandbox starter cell failed: {lines[-1].strip() if lines else 'no output'}"


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
    failure = prepare_sessions(settings, namespace)
    if failure is not None:
        control.send(json.dumps({"op": "fatal", "error": failure}).encode())
        return 2
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
