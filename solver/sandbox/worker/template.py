"""The template supervisor: keeps spare snippet processes forked ahead, hands them requests, enforces wall time,
reaps them and reports each end to the parent."""

from __future__ import annotations

import gc
import json
import os
import select
import selectors
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections import deque
from dataclasses import asdict, dataclass, field

from .layers import Features, Settings, remove_cgroups
from .snippet import MSG_BYTES, snippet_main
from .syscalls import CLONE_NEWPID, setns, unshare

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
