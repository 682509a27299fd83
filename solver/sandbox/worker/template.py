"""The template supervisor: keeps spare processes forked ahead, hands them requests (one-off snippets, or calls of
stateful sessions), enforces wall time, reaps them and reports each end to the parent."""

from __future__ import annotations

import gc
import json
import math
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
from .records import Job, Session, Spare
from .snippet import MSG_BYTES
from .spare import spare_main
from .syscalls import CLONE_NEWPID, setns, unshare


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
    sessions: dict[int, Session] = field(default_factory=dict)  # by pid, until reaped
    bound: dict[int, int] = field(default_factory=dict)  # the parent's session number -> pid of its process
    selector: selectors.BaseSelector = field(default_factory=selectors.DefaultSelector)
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
            spare_main(theirs, self.settings, self.features, workdir, self.cgroups, self.namespace)
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
        try:
            if request.get("session") is not None:
                self.dispatch_call(int(request["session"]), job_id, timeout_s, request, fds)  # type: ignore[arg-type]
                return
            payload = json.dumps({"timeout_s": timeout_s, "repl": request.get("repl", True)}).encode()
            spare = self.hand_to_spare(payload, fds)
            if spare is None:
                self.refuse(job_id, "the snippet")
                return
            spare.sock.close()
            self.jobs[spare.pid] = Job(job_id, spare.pid, time.monotonic() + timeout_s, spare.workdir)
        finally:
            for fd in fds:
                os.close(fd)

    def refuse(self, job_id: int, what: str) -> None:
        """Answer a job that no process could be started for (a snippet's or a session call's alike)."""
        self.send({"op": "exit", "id": job_id, "status": None, "cpu_s": 0.0, "timed_out": False,
                   "error": f"no process could be started for {what}"})

    def hand_to_spare(self, payload: bytes, fds: list[int]) -> Spare | None:
        for _attempt in range(2):  # a spare may have died while waiting (e.g. the OOM killer)
            spare = self.spares.popleft() if self.spares else self.fork_spare()
            if spare is None:
                return None
            try:
                socket.send_fds(spare.sock, [payload], fds)
            except OSError:
                self.discard(spare)
                continue
            return spare
        return None

    def dispatch_call(self, sid: int, job_id: int, timeout_s: float, request: dict[str, object],
                      fds: list[int]) -> None:
        """One call of session ``sid``: in its live process, or in a new one (the first call, or the old process
        died or was killed; the new process numbers its calls from 1 again, which tells the parent)."""
        payload = json.dumps({"id": job_id, "timeout_s": timeout_s, "repl": request.get("repl", True),
                              "session": True}).encode()
        session = self.sessions.get(self.bound.get(sid, -1))
        if session is not None and session.call is not None:
            self.session_message(session)  # its "done" may be waiting unread
        if session is not None and (session.call is not None or session.killed):
            # The parent gave up on the previous call (it answered at the limit): that process is being killed.
            self.kill_session(session)
            session = None
        if session is not None:
            try:
                socket.send_fds(session.sock, [payload], fds)
            except OSError:  # died between calls and not reaped yet
                self.kill_session(session)
                session = None
        if session is None:
            spare = self.hand_to_spare(payload, fds)
            if spare is None:
                self.refuse(job_id, "the session")
                return
            spare.sock.setblocking(False)
            session = Session(sid, spare.pid, spare.sock, spare.workdir)
            self.sessions[spare.pid] = session
            self.bound[sid] = spare.pid
            self.selector.register(spare.sock, selectors.EVENT_READ, spare.pid)
        session.call, session.timed_out = job_id, False
        session.deadline, session.kill_at = time.monotonic() + timeout_s, math.inf

    def session_message(self, session: Session) -> None:
        """Read what a session sent: ``done`` ends its call (its state kept)."""
        while True:
            try:
                data = session.sock.recv(MSG_BYTES)
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if not data:  # it died: reap() reports that
                self.selector.unregister(session.sock)
                session.sock.close()
                return
            message = json.loads(data)
            if message.get("op") == "done" and message.get("id") == session.call and not session.killed:
                self.send({"op": "exit", "id": session.call, "status": 0, "cpu_s": message.get("cpu_s", 0.0),
                           "timed_out": session.timed_out, "error": None})
                session.call, session.deadline, session.kill_at = None, math.inf, math.inf

    def interrupt(self, session: Session) -> None:
        """KeyboardInterrupt in the session's call; killed unless the call ends within the grace period. Only the
        session's process gets it (Jupyter signals a kernel's whole process group): Python children a call forked
        share its handler, and a fork bomb's hundreds of tracebacks would flood the output; the children are
        killed when the call ends."""
        if session.kill_at < math.inf or session.killed:
            return
        session.kill_at = time.monotonic() + self.settings.interrupt_grace_s
        try:
            os.kill(session.pid, signal.SIGINT)
        except ProcessLookupError:
            pass  # died meanwhile; reaped below

    def kill_session(self, session: Session) -> None:
        """Kill the session's process (init of its pid namespace: its whole tree) and unbind its number."""
        if self.bound.get(session.sid) == session.pid:
            del self.bound[session.sid]
        if session.killed:
            return
        session.killed = True
        try:
            os.kill(session.pid, signal.SIGKILL)
            if not self.features.pid_namespace:
                os.killpg(session.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass  # exited on its own meanwhile; a zombie until reaped

    def end_session(self, sid: int) -> None:
        session = self.sessions.get(self.bound.get(sid, -1))
        if session is None:
            self.send({"op": "ended", "sid": sid})  # never started, or already dead and reaped
            return
        session.ending = True
        self.kill_session(session)

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
        """Kill jobs past their wall time, interrupt session calls past theirs and kill the sessions that did not
        recover; return seconds until the next deadline."""
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
        for session in list(self.sessions.values()):
            if session.call is None or session.killed:
                continue
            if now >= session.kill_at:
                self.kill_session(session)
                continue
            if now >= session.deadline and session.kill_at == math.inf:
                session.timed_out = True
                self.interrupt(session)
            left = (session.deadline if session.kill_at == math.inf else session.kill_at) - now
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
            session = self.sessions.get(info.si_pid)
            if (job is not None or session is not None) and not self.features.pid_namespace:
                # Still a zombie, so its pid (= its process group id) cannot have been reused yet.
                try:
                    os.killpg(info.si_pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass  # no member of its group is left
            pid, status, usage = os.wait4(info.si_pid, 0)
            if job is not None:
                del self.jobs[pid]
                self.finish_job(job, status, usage.ru_utime + usage.ru_stime)
            elif session is not None:
                del self.sessions[pid]
                self.finish_session(session, status, usage.ru_utime + usage.ru_stime)
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

    def finish_session(self, session: Session, status: int, cpu_s: float) -> None:
        """A session's process is gone: its state with it. A call it was running ends ``lost``."""
        if self.bound.get(session.sid) == session.pid:
            del self.bound[session.sid]
        if session.sock.fileno() >= 0:
            self.selector.unregister(session.sock)
            session.sock.close()
        if not self.features.pid_namespace:
            self.sweep_orphans()
        self.remove_workdir(session.workdir)
        if session.call is not None:
            self.send({"op": "exit", "id": session.call, "status": status, "cpu_s": round(cpu_s, 4),
                       "timed_out": session.timed_out, "error": None})
        if session.ending:
            self.send({"op": "ended", "sid": session.sid})

    def sweep_orphans(self) -> None:
        """Without pid namespaces, daemons that left their session were re-parented to us (child subreaper):
        kill every child that is neither a job nor a spare."""
        known = ({job.pid for job in self.jobs.values()} | {spare.pid for spare in self.spares} | self.cleaners
                 | set(self.sessions))
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
        if op == "kill":  # output over its cap, or the caller gave up
            for job in self.jobs.values():
                if job.id == message.get("id"):
                    self.kill(job)
            for session in self.sessions.values():
                if session.call is not None and session.call == message.get("id"):
                    self.interrupt(session)  # the session keeps its state if the call ends on the interrupt
            return True
        if op == "end":
            self.end_session(int(message["sid"]))  # type: ignore[arg-type]
            return True
        return op != "close"

    def shutdown(self) -> None:
        for spare in list(self.spares):
            self.discard(spare)
        for job in self.jobs.values():
            self.kill(job)
        for session in list(self.sessions.values()):
            self.kill_session(session)
        deadline = time.monotonic() + 5.0
        while (self.jobs or self.spares or self.cleaners or self.sessions) and time.monotonic() < deadline:
            self.reap()  # killed spares are reaped here and leave the list
            time.sleep(0.005)
        remove_cgroups(self.cgroups)

    def serve(self) -> None:
        wake_r, wake_w = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(wake_w)
        signal.signal(signal.SIGCHLD, lambda *_: None)  # the wakeup fd is what wakes the loop
        self.control.setblocking(False)
        selector = self.selector
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
                if isinstance(key.data, int):  # a session's pid
                    session = self.sessions.get(key.data)
                    if session is not None:
                        self.session_message(session)
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
