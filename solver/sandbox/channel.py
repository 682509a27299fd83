"""The parent's end of the sandbox template: starting the worker package as a fresh interpreter, the control
socket, one record per snippet or session call in flight, reading a call's pipes on the event loop, and the
status of a finished call. ``solver.sandbox.pool`` builds the pool and its sessions on top of it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import psutil

from solver.config import SandboxConfig
from solver.types import ExecStatus

WORKER = Path(__file__).with_name("worker") / "__init__.py"
# Load the worker package under a name of its own, by path: importing it as ``solver.sandbox.worker`` would run
# the solver's package initialisers in the template. The standard sys.path loses its first entry (the working
# directory). (-I would isolate the path too, but it also ignores PYTHONHASHSEED, which keeps set/dict printing
# order the same from run to run.)
BOOTSTRAP = ("import importlib.util, sys; del sys.path[0]; "
             "spec = importlib.util.spec_from_file_location('sandbox_worker', sys.argv[1]); "
             "package = sys.modules[spec.name] = importlib.util.module_from_spec(spec); "
             "spec.loader.exec_module(package); "
             "from sandbox_worker.bootstrap import main; sys.exit(main(sys.argv))")
MSG_BYTES = 65536
START_TIMEOUT_S = 120.0  # importing numpy + sympy and warming up takes ~1-2 s on 2 cores; allow a busy machine
DIR_PREFIX = "solver-sandbox-"  # + owner pid + "-": a pool whose owner was killed is swept by the next one


class SandboxError(RuntimeError):
    """The pool could not start (e.g. the preamble failed); the message is one line."""


@dataclass(frozen=True)
class Isolation:
    """Which isolation layers hold on this machine (found by the template at start-up)."""

    user_namespace: bool = False
    net_namespace: bool = False
    ipc_namespace: bool = False
    pid_namespace: bool = False
    mount_namespace: bool = False
    pid_max: int = 0
    oom_score_adj: bool = False
    caps_dropped: bool = False
    seccomp: bool = False
    landlock_abi: int = 0
    landlock: bool = False
    cgroup: bool = False

    @property
    def signals_contained(self) -> bool:
        """True when a snippet cannot signal processes outside its own tree (kill(-1) is harmless)."""
        return self.pid_namespace or (self.landlock and self.landlock_abi >= 6)


@dataclass(frozen=True)
class Exit:
    """How the template saw one snippet end (status is a raw wait status; None: no process or no template)."""

    status: int | None
    cpu_s: float = 0.0
    timed_out: bool = False
    note: str | None = None  # why there is no process status


def classify(*, cancelled: bool, timed_out: bool, truncated: bool, outcome: str | None,
             wait_status: int | None) -> ExecStatus:
    """One status from everything known about a finished snippet; the first rule that applies wins.

    >>> classify(cancelled=False, timed_out=False, truncated=False, outcome="ok", wait_status=0)
    'ok'
    >>> classify(cancelled=False, timed_out=True, truncated=False, outcome=None, wait_status=9)
    'timeout'
    >>> classify(cancelled=False, timed_out=False, truncated=False, outcome=None, wait_status=11)  # SIGSEGV
    'killed'
    >>> classify(cancelled=False, timed_out=False, truncated=False, outcome=None, wait_status=3 << 8)
    'error'
    """
    if cancelled:
        return "cancelled"
    if truncated:  # checked before the time limit: a snippet is stopped the moment its output overflows
        return "truncated"
    if timed_out:
        return "timeout"
    if outcome in ("ok", "error", "memory"):
        return outcome  # type: ignore[return-value]
    if wait_status is None:
        return "killed"
    if os.WIFSIGNALED(wait_status):
        return "timeout" if os.WTERMSIG(wait_status) == signal.SIGXCPU else "killed"
    return "ok" if os.waitstatus_to_exitcode(wait_status) == 0 else "error"


class Capture:
    """Reads one pipe on the event loop, keeping at most ``cap`` bytes; more than that is an overflow."""

    def __init__(self, fd: int, cap: int, changed: asyncio.Event, on_overflow: Callable[[], None]) -> None:
        self.fd = fd
        self.cap = cap
        self.data = bytearray()
        self.eof = False
        self.overflow = False
        self._changed = changed
        self._on_overflow = on_overflow
        self._loop = asyncio.get_running_loop()
        os.set_blocking(fd, False)
        self._loop.add_reader(fd, self._read)

    def _read(self) -> None:
        try:
            chunk = os.read(self.fd, 65536)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        room = self.cap - len(self.data)
        self.data += chunk[:room]
        if len(chunk) > room:
            self.overflow = True
            self._on_overflow()
        if not chunk or self.overflow:
            self.close()
        self._changed.set()

    def close(self) -> None:
        if self.fd >= 0:
            self._loop.remove_reader(self.fd)
            os.close(self.fd)
            self.fd = -1
            self.eof = True

    def text(self) -> str:
        return self.data.decode("utf-8", errors="replace")


class Flight:
    """One snippet handed to the template; it holds a worker slot until the template reports its end."""

    def __init__(self, flight_id: int, release: Callable[[], None]) -> None:
        self.id = flight_id
        self.exit: Exit | None = None
        self.cancelled = False
        self.changed = asyncio.Event()  # any news: output, report, exit
        self.ended = asyncio.Event()  # the template reaped it (or is gone)
        self._release = release

    def finish(self, exit_: Exit) -> None:
        if self.exit is None:
            self.exit = exit_
            self._release()
            self.changed.set()
            self.ended.set()


class TemplateProcess:
    """The parent's handle on one running template process."""

    def __init__(self, process: asyncio.subprocess.Process, sock: socket.socket, isolation: Isolation,
                 base_dir: str, cgroups: Sequence[str]) -> None:
        self.process = process
        self.sock = sock
        self.isolation = isolation
        self.base_dir = base_dir
        self.cgroups = tuple(cgroups)
        self.flights: dict[int, Flight] = {}
        self.ended: dict[int, asyncio.Event] = {}  # session number -> set once its process tree is reaped
        self.alive = True
        self._reader = asyncio.get_running_loop().create_task(self._read_messages())

    @classmethod
    async def launch(cls, config: SandboxConfig, workers: int, spares: int, disk_mb: int, namespaces: bool,
                     sessions: int, interrupt_grace_s: float) -> TemplateProcess:
        loop = asyncio.get_running_loop()
        await asyncio.to_thread(remove_stale_dirs)
        base_dir = tempfile.mkdtemp(prefix=f"{DIR_PREFIX}{os.getpid()}-")
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        settings = {"parent_pid": os.getpid(), "control_fd": theirs.fileno(), "base_dir": base_dir,
                    "preamble": config.preamble, "memory_mb": config.memory_mb, "disk_mb": disk_mb,
                    "spares": spares, "workers": workers, "namespaces": namespaces, "sessions": sessions,
                    "interrupt_grace_s": interrupt_grace_s, "display": config.display,
                    "starter_code": config.starter_code}
        log_path = os.path.join(base_dir, "template.log")
        process = None
        try:
            with open(log_path, "wb") as log:
                process = await asyncio.create_subprocess_exec(
                    sys.executable, "-s", "-c", BOOTSTRAP, str(WORKER), json.dumps(settings),
                    stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log, pass_fds=(theirs.fileno(),),
                    env=template_env(base_dir), cwd=base_dir, start_new_session=True)
            theirs.close()
            ours.setblocking(False)
            try:
                data = await asyncio.wait_for(loop.sock_recv(ours, MSG_BYTES), START_TIMEOUT_S)
            except asyncio.TimeoutError:
                data = json.dumps({"op": "fatal", "error": f"no answer in {START_TIMEOUT_S:.0f} s"}).encode()
            message = json.loads(data) if data else {"op": "fatal", "error": _log_tail(log_path)}
            if message.get("op") != "ready":
                raise SandboxError(f"the sandbox did not start: {message.get('error')}".splitlines()[0])
            known = {f.name for f in fields(Isolation)}
            isolation = Isolation(**{k: v for k, v in message["isolation"].items() if k in known})
            return cls(process, ours, isolation, base_dir, message.get("cgroups", []))
        except BaseException:
            theirs.close()
            ours.close()
            if process is not None:
                kill_group(process.pid)
                await process.wait()
            await asyncio.to_thread(shutil.rmtree, base_dir, True)
            raise

    def send(self, message: dict[str, object], fds: Sequence[int] = ()) -> None:
        """Non-blocking send; the control socket's buffer holds thousands of these small messages."""
        data = json.dumps(message).encode()
        try:
            if fds:
                socket.send_fds(self.sock, [data], list(fds))
            else:
                self.sock.send(data)
        except (BlockingIOError, OSError) as exc:
            raise SandboxError(f"the sandbox template is not accepting work: {exc}") from exc

    def kill(self, flight: Flight) -> None:
        if self.alive and flight.exit is None:
            with contextlib.suppress(SandboxError):  # a dead template took the snippet with it
                self.send({"op": "kill", "id": flight.id})

    async def _read_messages(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while True:
                try:
                    data = await loop.sock_recv(self.sock, MSG_BYTES)
                except OSError:
                    data = b""
                if not data:
                    break
                message = json.loads(data)
                if message.get("op") == "ended":
                    self.ended.pop(message["sid"], asyncio.Event()).set()
                flight = self.flights.pop(message.get("id"), None) if message.get("op") == "exit" else None
                if flight is not None:
                    flight.finish(Exit(message["status"], message["cpu_s"], message["timed_out"],
                                        message.get("error")))
        finally:
            self._lost("the sandbox template exited")

    def _lost(self, note: str) -> None:
        """The template is gone: its snippets died with it (parent-death signal, pid namespace)."""
        self.alive = False
        flights, self.flights = self.flights, {}
        for flight in flights.values():
            flight.finish(Exit(None, note=note))  # its sessions died with it
        ended, self.ended = self.ended, {}
        for event in ended.values():
            event.set()

    async def stop(self, note: str, grace_s: float = 5.0) -> None:
        """Ask the template to kill everything and exit; force it after ``grace_s``."""
        if self.alive:
            with contextlib.suppress(SandboxError):
                self.send({"op": "close"})
        try:
            await asyncio.wait_for(self.process.wait(), grace_s)
        except asyncio.TimeoutError:
            kill_group(self.process.pid)
            await self.process.wait()
        self._lost(note)
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._reader
        self.sock.close()
        for directory in self.cgroups:  # normally removed by the template; not when it was killed
            with contextlib.suppress(OSError):
                os.rmdir(directory)
        await asyncio.to_thread(shutil.rmtree, self.base_dir, True)

    def pids(self) -> set[int]:
        try:
            root = psutil.Process(self.process.pid)
            tree = [root, *root.children(recursive=True)]
        except psutil.NoSuchProcess:
            return set()
        alive = set()
        for proc in tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                if proc.status() != psutil.STATUS_ZOMBIE:
                    alive.add(proc.pid)
        return alive


def template_env(base_dir: str) -> dict[str, str]:
    """A fresh environment: nothing of the solver's (tokens, CUDA settings) reaches generated code. Only the import
    path is kept (``PYTHONPATH``), so the code sees the libraries the solver was installed with, wherever they are
    (an offline folder of wheels unpacked beside the interpreter's own, as on a machine without a registry)."""
    bin_dir = os.path.dirname(sys.executable)
    threads = dict.fromkeys(("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"), "1")
    path = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    return {"PATH": f"{bin_dir}:/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8",
            "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "HOME": base_dir, "TMPDIR": base_dir,
            "MPLBACKEND": "Agg", **path, **threads}


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


def remove_stale_dirs() -> None:
    """Remove working trees of pools whose owning process is gone (it was killed before closing them)."""
    root = Path(tempfile.gettempdir())
    for path in root.glob(f"{DIR_PREFIX}*-*"):
        owner = path.name[len(DIR_PREFIX):].split("-", 1)[0]
        if owner.isdigit() and not psutil.pid_exists(int(owner)):
            shutil.rmtree(path, ignore_errors=True)


def _log_tail(path: str) -> str:
    try:
        lines = Path(path).read_text(errors="replace").strip().splitlines()
    except OSError:
        lines = []
    return lines[-1] if lines else "the template process exited"
