"""A stateful session: one isolated process that runs a repetition's calls one after another in one namespace.

Names, imports, functions and files in the private working directory survive from call to call, like the cells of
a notebook. Each call brings its own code (a memfd) and stdout, stderr and report pipes, exactly as a one-off
snippet does, so the parent reads and caps its output the same way. The template interrupts a call at its
wall-time limit with SIGINT, which this process turns into ``KeyboardInterrupt`` only while the user's code runs
(never inside this runner's bookkeeping); if the call has not finished a grace period later, the template kills
the session (init of its pid namespace: its whole tree) and the parent reports the state as lost. After every
call, each process the call started is killed and reaped, so an idle session is one sleeping process.

The cells run through one of two runners (``Settings.display``): ``repr``, this package's own (``run_snippet``: a
final bare expression printed with ``repr``, tracebacks of ``<cell N>``, the preamble's names defined), or
``ipython``, IPython's own shell showing what a kernel would (``kernel.KernelCells``). A starter cell
(``Settings.starter_code``) runs first in every session process, its output discarded; it counts as a cell.
"""

from __future__ import annotations

import json
import os
import resource
import signal
import socket
import sys
from contextlib import AbstractContextManager
from types import FrameType, TracebackType
from typing import NoReturn, Protocol

from .layers import Settings
from .snippet import MSG_BYTES, SNIPPET_NAME, Outcome, finish, open_streams, read_code, run_snippet
from .syscalls import PR_SET_CHILD_SUBREAPER, prctl


class Cells(Protocol):
    """Runs a session's cells one after another in one namespace, printing what the model is shown."""

    def run(self, code: str, repl: bool, guard: AbstractContextManager[object]) -> Outcome: ...


class PlainCells:
    """This package's own runner (``display: repr``): the calls are ``<cell 1>``, ``<cell 2>``, ... in tracebacks,
    a final bare expression is printed with ``repr``; the namespace starts as the preamble left it."""

    def __init__(self, namespace: dict[str, object]) -> None:
        self.namespace = namespace
        self.count = 0

    def run(self, code: str, repl: bool, guard: AbstractContextManager[object]) -> Outcome:
        self.count += 1
        return run_snippet(code, repl, self.namespace, f"<cell {self.count}>", guard)


def open_cells(display: str, namespace: dict[str, object]) -> Cells:
    """The session's runner for ``display``; IPython's was imported and built in the template (``kernel``)."""
    if display == "ipython":
        from .kernel import KernelCells

        return KernelCells()
    return PlainCells(namespace)


class Interruptible:
    """Entered around the user's code: a SIGINT that arrives meanwhile raises KeyboardInterrupt. One that arrives
    outside never cuts the runner's own steps short: after the code (a deadline that raced the call's end) it is
    dropped when the next call begins; before it (the limit passed while a loaded machine had not yet run the
    call's first steps) it is kept, and raised as the code is entered, so the call stops with its state as if the
    interrupt had come a moment later, instead of running on until the grace period kills the session."""

    active = False
    fired = False  # an interrupt reached the user's code during this call
    pending = False  # an interrupt arrived outside the user's code since this call began

    @staticmethod
    def begin() -> None:
        """A call begins: an interrupt left over from the last call's end is not this call's."""
        Interruptible.pending = False

    def __enter__(self) -> None:
        if Interruptible.pending:
            Interruptible.pending, Interruptible.fired = False, True
            raise KeyboardInterrupt
        Interruptible.active, Interruptible.fired = True, False

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 tb: TracebackType | None) -> None:
        Interruptible.active = False


def on_interrupt(_signum: int, _frame: FrameType | None) -> None:
    if Interruptible.active:
        Interruptible.fired = True
        raise KeyboardInterrupt
    Interruptible.pending = True


def serve_session(sock: socket.socket, request: dict[str, object], fds: list[int], namespace: dict[str, object],
                  settings: Settings, pid_namespace: bool) -> NoReturn:
    """Serve calls until the template closes the socket or kills this process. Never returns."""
    null = os.open("/dev/null", os.O_RDWR)
    for target in (0, 1, 2):
        os.dup2(null, target)  # between calls, and during the starter cell, output goes nowhere
    sys.argv = [SNIPPET_NAME]
    if not pid_namespace:
        prctl(PR_SET_CHILD_SUBREAPER, 1)  # daemons a call starts come back here, to be killed after the call
    sock.setblocking(True)
    signal.signal(signal.SIGINT, on_interrupt)
    plumbing = Plumbing.now()
    cells = open_cells(settings.display, namespace)
    if settings.starter_code:
        contained(cells, settings.starter_code, True, pid_namespace, plumbing)
    call = 0
    while True:
        call += 1
        outcome, cpu_s, report_fd = run_call(request, fds, cells, pid_namespace, null, plumbing)
        # The template hears of the end first: once the parent reads the report it may send the next call, and
        # the template must then find this one finished.
        sock.send(json.dumps({"op": "done", "id": request["id"], "cpu_s": round(cpu_s, 4)}).encode())
        # "ok 3": the outcome and the call's number in this process (1 tells the parent that no state came
        # before), then "interrupted" when the limit (or the parent's kill) interrupted it.
        note = " interrupted" if Interruptible.fired else ""
        try:
            os.write(report_fd, f"{outcome} {call}{note}\n".encode())
        except OSError:
            pass  # the parent stopped waiting for this call (its caller was cancelled)
        os.close(report_fd)
        data, fds, _flags, _addr = socket.recv_fds(sock, MSG_BYTES, 4)
        if not data or len(fds) != 4:
            os._exit(0)  # the template closed the session
        request = json.loads(data)


class Plumbing:
    """The session's signal handlers and signal mask. Restored after every call, with its timers cleared: a
    handler, alarm or blocked signal a call leaves behind would otherwise fire into (or disarm) the runner
    between calls, or the interrupt of the next call. Names survive; these process settings do not."""

    def __init__(self, handlers: dict[signal.Signals, object], mask: set[signal.Signals]) -> None:
        self.handlers = handlers
        self.mask = mask

    @classmethod
    def now(cls) -> Plumbing:
        handlers = {sig: signal.getsignal(sig) for sig in signal.valid_signals()
                    if sig not in (signal.SIGKILL, signal.SIGSTOP)}
        return cls({sig: handler for sig, handler in handlers.items() if handler is not None},
                   signal.pthread_sigmask(signal.SIG_BLOCK, []))

    def restore(self) -> None:
        for timer in (signal.ITIMER_REAL, signal.ITIMER_VIRTUAL, signal.ITIMER_PROF):
            signal.setitimer(timer, 0)
        for sig, handler in self.handlers.items():
            if signal.getsignal(sig) is not handler:
                signal.signal(sig, handler)  # type: ignore[arg-type]
        signal.pthread_sigmask(signal.SIG_SETMASK, self.mask)


def run_call(request: dict[str, object], fds: list[int], cells: Cells, pid_namespace: bool, null: int,
             plumbing: Plumbing) -> tuple[Outcome, float, int]:
    """Run one call on its own pipes; return its outcome, the CPU seconds it took (its children included) and the
    report pipe, still to be written."""
    code_fd, out_fd, err_fd, report_fd = fds
    for source, target in ((out_fd, 1), (err_fd, 2)):
        os.dup2(source, target)
        os.close(source)
    code = read_code(code_fd)
    before = _cpu_s()
    outcome = contained(cells, code, bool(request.get("repl", True)), pid_namespace, plumbing)
    for target in (1, 2):
        os.dup2(null, target)  # the call's pipes close here, so the parent sees their end
    return outcome, _cpu_s() - before, report_fd


def contained(cells: Cells, code: str, repl: bool, pid_namespace: bool, plumbing: Plumbing) -> Outcome:
    """Run one cell with its output on fds 1 and 2, then leave the process as it was between calls: its signal
    settings restored, every process the cell started killed and reaped, its output flushed."""
    Interruptible.begin()
    streams = open_streams()
    runner = os.getpid()
    try:
        outcome = cells.run(code, repl, Interruptible())
    except BaseException:  # noqa: BLE001 - e.g. an interrupt that raced the end of the call: keep serving
        outcome = "error"
    if os.getpid() != runner:
        finish(streams, outcome, -1)  # a copy the code forked: flush and exit, never back into this loop
    plumbing.restore()
    end_children(pid_namespace)
    for stream in streams:
        try:
            stream.flush()
        except (OSError, ValueError):
            pass  # the parent stopped reading (output cap): what is left is not wanted
    return outcome


def end_children(pid_namespace: bool) -> None:
    """Kill every process the call started, and their descendants, and reap them all."""
    own_group = os.getpgid(0)
    while True:
        if pid_namespace:
            try:
                os.kill(-1, signal.SIGKILL)  # from the init of a pid namespace: everything in it but itself
            except ProcessLookupError:
                pass  # nothing left to signal
        else:
            for pid in _children():
                try:
                    group = os.getpgid(pid)
                    if group != own_group:
                        os.killpg(group, signal.SIGKILL)  # a child that started its own session or group
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass  # gone meanwhile; reaped below
        try:
            os.waitpid(-1, 0)  # one at a time: orphans re-parented to us meanwhile are killed next round
        except ChildProcessError:
            return


def _children() -> list[int]:
    pids: list[int] = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as handle:
                pids += [int(pid) for pid in handle.read().split()]
        except OSError:
            continue  # the thread ended meanwhile
    return pids


def _cpu_s() -> float:
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
