"""The sandbox pool: runs generated Python snippets in isolated processes forked from one warm template.

This is the parent side (its channel to the template: ``solver.sandbox.channel``). It starts the
``solver/sandbox/worker`` package as a fresh interpreter (never a fork of the solver), which imports the preamble
once and forks one isolated process per snippet. The parent hands each snippet its code (a memfd) and the write
ends of three pipes (stdout, stderr, report) and reads the pipes on the event loop, capping output while it
streams. The template enforces wall time and reports each snippet's end. ``run`` answers by the time limit (plus a
quarter second) even when the kernel needs longer to tear a large process tree down; the snippet's worker slot
stays taken until the template has reaped it, so at most ``workers`` snippets (or their remains) occupy the
machine, and the rest wait here.

``session()`` gives a repetition its own stateful interpreter (``PoolSession``): a spare process like any
snippet's, with the same isolation, that keeps its names from one call to the next. A call takes a worker slot only
while it runs; at its limit it is interrupted (KeyboardInterrupt) and keeps its state if it recovers within
``interrupt_grace_s``, else the session is killed and the result says ``state_lost``. What the isolation holds, and
where it does not, is written down in docs/sandbox.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time

from solver.config import SandboxConfig
from solver.config import Registry
from solver.sandbox.channel import (Capture, Exit, Flight, Isolation, SandboxError, TemplateProcess, classify,
                                    kill_group)
from solver.types import Execution, Sandbox

__all__ = ["SANDBOXES", "Isolation", "PoolSession", "ProcessPoolSandbox", "SandboxError",
           "create_sandbox", "default_workers"]

RETURN_SLACK_S = 0.25  # run() answers at most this long after the time limit, whatever the teardown takes
HUNG_AFTER_S = 30.0  # a template that has not reported a snippet's end this long after run() answered is hung
EOF_GRACE_S = 0.25  # after a snippet's tree is gone its pipes are at EOF; this only covers the loop's lag
REPORT_BYTES = 64
SANDBOX_NOTE = "\n[sandbox] "
MAX_SESSIONS = 64  # live sessions per pool by default: an idle one is a sleeping process with ~6 MB of its own
END_WAIT_S = 5.0  # close() waits this long for the kernel to tear a session's tree down (a fork bomb's takes seconds)


def default_workers(busy: int | None = None) -> int:
    """Usable cores minus one (the engine and the event loop need one), at most ``busy``, at least 1.

    ``busy`` is how many repetitions the engine can keep generating at once (``solver.config.repetitions_busy``:
    its batch, or the fixed workers); each runs one snippet at a time, so more workers than that would only hold
    processes (``spares`` forks one per worker ahead) for snippets that cannot come.
    """
    cores = max(1, len(os.sched_getaffinity(0)) - 1)
    return cores if busy is None else max(1, min(cores, busy))


class ProcessPoolSandbox:
    """Runs snippets in processes forked from a warm template; at most ``workers`` at once.

    ``disk_mb`` caps each file a snippet writes (and its private tmpfs); ``spares`` is how many snippet
    processes wait forked ahead (default: one per worker); ``namespaces=False`` skips every namespace (the
    layers that remain are listed in docs/sandbox.md), for hosts where they misbehave. ``max_sessions`` caps
    the live stateful sessions (``session()`` waits for a free place beyond it), so that a run cannot exhaust
    memory with them; ``interrupt_grace_s`` (default ``config.interrupt_grace_s``) is how long an interrupted session
    call may take to stop before the session is killed. ``busy`` bounds the default worker count (``default_workers``) when ``config.workers``
    is 0.
    """

    def __init__(self, config: SandboxConfig, *, disk_mb: int = 64, spares: int | None = None,
                 namespaces: bool = True, max_sessions: int = MAX_SESSIONS,
                 interrupt_grace_s: float | None = None, busy: int | None = None) -> None:
        grace_s = config.interrupt_grace_s if interrupt_grace_s is None else interrupt_grace_s
        if max_sessions < 1 or grace_s < 0:
            raise ValueError("max_sessions must be >= 1 and interrupt_grace_s >= 0")
        self.config = config
        self.max_sessions = max_sessions
        self.interrupt_grace_s = grace_s
        self._live = asyncio.Semaphore(max_sessions)
        self._next_sid = 0
        self.workers = config.workers or default_workers(busy)
        self.disk_mb = disk_mb
        self.spares = spares if spares is not None else self.workers
        self.namespaces = namespaces
        self._slots = asyncio.Semaphore(self.workers)
        self._template: TemplateProcess | None = None
        self._start_lock = asyncio.Lock()
        self._closed = False
        self._next_id = 0
        self._watchers: set[asyncio.Task[None]] = set()
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def dispatched(self) -> int:
        """Snippets handed to a template so far (queued ones that were cancelled never count)."""
        return self._next_id

    @property
    def isolation(self) -> Isolation | None:
        """The layers in force, once started."""
        return self._template.isolation if self._template is not None else None

    async def start(self) -> None:
        """Start the warm template (idempotent; ``run`` calls it too). Raises SandboxError when it cannot."""
        self._bind_loop()
        async with self._start_lock:
            if self._closed:
                raise SandboxError("the sandbox is closed")
            if self._template is not None and self._template.alive:
                return
            if self._template is not None:
                await self._template.stop("the sandbox template exited")
            self._template = await TemplateProcess.launch(self.config, self.workers, self.spares, self.disk_mb,
                                                    self.namespaces, self.max_sessions, self.interrupt_grace_s)

    async def run(self, code: str, *, timeout_s: float | None = None) -> Execution:
        """Run one snippet; every failure of the snippet (or of the pool) is a status, never an exception.

        Cancelling the awaiting task kills the snippet's whole tree, or keeps a queued snippet from running;
        the CancelledError propagates as usual.
        """
        return await self._execute(code, timeout_s, None)

    async def session(self) -> PoolSession:
        """A new stateful session, held by one repetition until it calls ``close``. Waits while ``max_sessions``
        are live. On a closed pool the session is closed too (its calls answer ``cancelled``)."""
        self._bind_loop()
        live = self._live
        self._next_sid += 1
        if self._closed:
            return PoolSession(self, self._next_sid, None, closed=True)
        await live.acquire()
        return PoolSession(self, self._next_sid, live)

    async def _execute(self, code: str, timeout_s: float | None, session: PoolSession | None) -> Execution:
        limit = self.config.timeout_s if timeout_s is None else max(0.001, timeout_s)
        begun = time.monotonic()
        self._bind_loop()
        await self._slots.acquire()  # cancelled while queued: the snippet never runs
        try:
            if self._closed:
                self._slots.release()
                return Execution(code, "cancelled", "", "the sandbox is closed", time.monotonic() - begun)
            await self.start()  # starts the template on first use, or replaces one that died
        except SandboxError as exc:
            self._slots.release()
            return Execution(code, "error", "", str(exc), time.monotonic() - begun)
        except BaseException:
            self._slots.release()
            raise
        assert self._template is not None  # start() succeeded
        return await self._run_in(self._template, code, limit, session)

    async def _run_in(self, template: TemplateProcess, code: str, timeout_s: float,
                      session: PoolSession | None = None) -> Execution:
        self._next_id += 1
        flight = Flight(self._next_id, self._slots.release)
        begun = time.monotonic()
        captures: list[Capture] = []
        sid = session.sid if session is not None else None
        try:
            out_r, err_r, report_r = self._dispatch(template, flight, code, timeout_s, sid)
        except SandboxError as exc:
            flight.finish(Exit(None, note=str(exc)))
            return Execution(code, "error", "", str(exc), time.monotonic() - begun,
                             state_lost=session is not None and session.lose_state())
        overflow = lambda: template.kill(flight)  # noqa: E731 - output over the cap: stop the snippet now
        try:
            out = Capture(out_r, self.config.output_bytes, flight.changed, overflow)
            err = Capture(err_r, self.config.output_bytes, flight.changed, overflow)
            report = Capture(report_r, REPORT_BYTES, flight.changed, lambda: None)
            captures = [out, err, report]
            late = False
            # A session call may run on for the grace period after its interrupt.
            answer_by = timeout_s + RETURN_SLACK_S + (self.interrupt_grace_s if session is not None else 0.0)
            try:
                # asyncio.timeout, not wait_for: on 3.11 wait_for can swallow a cancel that lands just as the
                # snippet finishes, and the cancelled repetition would then run on.
                async with asyncio.timeout(answer_by):
                    await self._settle(flight, out, err, report)
            except TimeoutError:
                # Past the limit and not yet reaped (a big tree takes the kernel seconds to tear down): answer
                # now; the slot stays taken until the template reports the end.
                late = True
                template.kill(flight)
                if session is not None:
                    # Answered as lost, so make it lost: the template's grace period counts from the call's later
                    # arrival there, and the call could still end inside it, keeping names the model was told
                    # are gone.
                    with contextlib.suppress(SandboxError):
                        template.send({"op": "end", "sid": session.sid})
                self._watch_teardown(template, flight)
            exit_ = flight.exit
            # "ok", or for a session call "ok 3" (the call's number in its process; 1: a new, empty process),
            # "error 3 interrupted" when the template interrupted it at its limit (or on a kill: truncated or
            # cancelled then, which take precedence).
            words = report.text().split("\n", 1)[0].split()
            outcome = words[0] if words else None
            interrupted = "interrupted" in words[2:]
            status = classify(cancelled=flight.cancelled,
                              timed_out=late or interrupted or (exit_ is not None and exit_.timed_out),
                              truncated=out.overflow or err.overflow, outcome=outcome,
                              wait_status=exit_.status if exit_ is not None else None)
            stderr = err.text()
            if exit_ is not None and exit_.note and outcome is None:
                stderr += SANDBOX_NOTE + exit_.note
            state_lost = False
            if session is not None:
                # Answered late: the session was ended above (the template kills it, if not yet dead).
                state_lost = session.settle_state(reported=outcome is not None and not late,
                                                  fresh=words[1:2] == ["1"])
            return Execution(code, status, out.text(), stderr, time.monotonic() - begun, state_lost=state_lost)
        except asyncio.CancelledError:
            template.kill(flight)  # a session call is interrupted, and keeps its state if it recovers
            if session is not None:
                session.unfinished = flight
            raise
        finally:
            for capture in captures:
                capture.close()

    def _bind_loop(self) -> None:
        """A pool serves one event loop. Used from another (a second ``asyncio.run``), it drops the template
        of the old loop, killing its processes, and starts afresh on this one."""
        loop = asyncio.get_running_loop()
        if self._loop is loop:
            return
        old, self._template, self._loop = self._template, None, loop
        self._slots = asyncio.Semaphore(self.workers)
        self._live = asyncio.Semaphore(self.max_sessions)
        self._start_lock = asyncio.Lock()
        self._watchers = set()
        if old is not None:
            kill_group(old.process.pid)  # its snippets die with it (parent-death signal, pid namespace)
            old.sock.close()
            shutil.rmtree(old.base_dir, ignore_errors=True)  # a log file and an empty mount point

    def _watch_teardown(self, template: TemplateProcess, flight: Flight) -> None:
        """Stop the template if it never reports this snippet's end (then its whole tree dies with it)."""

        async def watch() -> None:
            try:
                await asyncio.wait_for(flight.ended.wait(), HUNG_AFTER_S)
            except asyncio.TimeoutError:
                await template.stop("the sandbox template did not end a snippet and was stopped", grace_s=0.0)

        task = asyncio.get_running_loop().create_task(watch())
        self._watchers.add(task)
        task.add_done_callback(self._watchers.discard)

    def _dispatch(self, template: TemplateProcess, flight: Flight, code: str, timeout_s: float,
                  sid: int | None) -> tuple[int, int, int]:
        """Hand the code and the pipes' write ends to the template; return the read ends."""
        code_fd = os.memfd_create("snippet", os.MFD_CLOEXEC)
        pipes = [os.pipe2(os.O_CLOEXEC) for _ in range(3)]
        try:
            data = code.encode("utf-8", errors="surrogatepass")
            view = memoryview(data)
            while view:
                view = view[os.write(code_fd, view):]
            os.lseek(code_fd, 0, os.SEEK_SET)
            template.flights[flight.id] = flight
            message: dict[str, object] = {"op": "run", "id": flight.id, "timeout_s": timeout_s,
                                          "repl": self.config.repl}
            if sid is not None:
                message["session"] = sid
            template.send(message, [code_fd, *(w for _r, w in pipes)])
        except BaseException:
            template.flights.pop(flight.id, None)
            for r, _w in pipes:
                os.close(r)
            raise
        finally:
            os.close(code_fd)
            for _r, w in pipes:
                os.close(w)
        return pipes[0][0], pipes[1][0], pipes[2][0]

    @staticmethod
    async def _settle(flight: Flight, out: Capture, err: Capture, report: Capture) -> None:
        """Until the snippet reported its outcome and closed its output, or the template saw it end."""
        while True:
            if report.data.endswith(b"\n") and out.eof and err.eof:
                return
            if flight.exit is not None:
                break
            await flight.changed.wait()
            flight.changed.clear()
        # Ended without a report (killed, os._exit, segfault): its pipes are closed; read what is left.
        deadline = time.monotonic() + EOF_GRACE_S
        while not (out.eof and err.eof and report.eof) and time.monotonic() < deadline:
            flight.changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(flight.changed.wait(), deadline - time.monotonic())

    async def close(self) -> None:
        """Kill every process the pool started and remove its files; idempotent."""
        self._closed = True
        self._bind_loop()
        async with self._start_lock:  # a start in progress finishes first, so its template is stopped too
            template, self._template = self._template, None
        if template is not None:
            for flight in template.flights.values():
                flight.cancelled = True
            await template.stop("the sandbox was closed")
        for task in list(self._watchers):
            task.cancel()

    def pids(self) -> set[int]:
        """Pids of live processes this pool started (the template and all its descendants)."""
        return self._template.pids() if self._template is not None else set()

    async def _end_session(self, sid: int) -> None:
        """Kill a session's process tree and wait (bounded) until the template has reaped it."""
        template = self._template
        if template is None or not template.alive or self._loop is not asyncio.get_running_loop():
            return  # no template: nothing of the session is alive
        ended = template.ended.setdefault(sid, asyncio.Event())
        try:
            template.send({"op": "end", "sid": sid})
        except SandboxError:
            return  # the template is gone, and its sessions with it
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(END_WAIT_S):
                await ended.wait()


class PoolSession:
    """One repetition's stateful interpreter in a ``ProcessPoolSandbox`` (the ``PythonSession`` protocol).

    Calls run one at a time, each in the same isolated process, so names survive between them; the process is
    started by the first call (from a spare forked ahead) and killed, with everything it started, by ``close``.
    Failures are statuses; ``Execution.state_lost`` says that earlier names are gone: set on the call during
    which the session was killed or died, or on the first call after it died between calls (then that call ran
    in a new, empty process).
    """

    def __init__(self, pool: ProcessPoolSandbox, sid: int, live: asyncio.Semaphore | None, *,
                 closed: bool = False) -> None:
        self.sid = sid
        self._pool = pool
        self._live = live  # the pool's cap on live sessions, released by close
        self._lock = asyncio.Lock()
        self._closed = closed
        self._started = False  # a call was handed to the template: there may be a process to kill
        self.unfinished: Flight | None = None  # a call whose caller was cancelled; it may still be stopping
        self._state = False  # the current process ran a call, and its loss has not been reported

    @property
    def closed(self) -> bool:
        return self._closed

    async def run(self, code: str, *, timeout_s: float | None = None) -> Execution:
        """Run one call in this session; like ``ProcessPoolSandbox.run``, but names persist."""
        async with self._lock:
            if self._closed:
                return Execution(code, "cancelled", "", "the session is closed", 0.0)
            if self.unfinished is not None:
                # Wait for the interrupted call to stop (or for the template to kill it after the grace period):
                # handed over before that, this call would find the process busy and start afresh.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._pool.interrupt_grace_s + RETURN_SLACK_S):
                        await self.unfinished.ended.wait()
                self.unfinished = None
            self._started = True
            return await self._pool._execute(code, timeout_s, self)

    async def close(self) -> None:
        """Kill the session's process tree and give its place back; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._started:
                await self._pool._end_session(self.sid)
        finally:
            if self._live is not None:
                self._live.release()
                self._live = None

    def settle_state(self, *, reported: bool, fresh: bool) -> bool:
        """Account for one finished call; True when the model must be told that earlier names are gone.

        ``reported``: the session process reported the call's end (no report: it died or was killed, or the
        call was answered at the limit, which kills it); ``fresh``: the call was the first of its process.

        >>> session = PoolSession(None, 1, None)  # type: ignore[arg-type]
        >>> [session.settle_state(reported=True, fresh=True), session.settle_state(reported=True, fresh=False)]
        [False, False]
        >>> session.settle_state(reported=False, fresh=False)  # killed during this call
        True
        >>> session.settle_state(reported=True, fresh=True)  # the next call, in a new process: already told
        False
        >>> session.settle_state(reported=True, fresh=True)  # died between calls, unseen: tell now
        True
        """
        if not reported:
            self._state = False
            return True
        lost = fresh and self._state
        self._state = True
        return lost

    def lose_state(self) -> bool:
        """The call could not be handed over (the template is gone, and the session's process with it)."""
        lost, self._state = self._state, False
        return lost


SANDBOXES: Registry[Sandbox] = Registry("sandbox")


@SANDBOXES.register("pool")
def _pool(config: SandboxConfig, busy: int | None = None) -> Sandbox:
    return ProcessPoolSandbox(config, disk_mb=config.disk_mb, namespaces=config.namespaces, busy=busy)


def create_sandbox(config: SandboxConfig, *, busy: int | None = None) -> Sandbox:
    """The sandbox named by ``config.name``; ``busy`` bounds its default worker count (``default_workers``)."""
    return SANDBOXES.create(config.name, config, busy=busy)
