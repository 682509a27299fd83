"""Running code in a forked, isolated process, with the REPL's last-expression rule: one snippet, then exit."""

from __future__ import annotations

import ast
import io
import linecache
import os
import resource
import sys
import traceback
from contextlib import AbstractContextManager, nullcontext
from typing import Literal

Outcome = Literal["ok", "error", "memory"]

SNIPPET_NAME = "<snippet>"
MSG_BYTES = 65536  # the largest control message; code travels in a memfd, so headers stay small
HERE = os.path.dirname(os.path.abspath(__file__))


def open_streams() -> tuple[io.TextIOWrapper, io.TextIOWrapper]:
    """Text streams over fds 1 and 2 (the call's pipes), installed as sys.stdout/stderr and their originals."""
    streams = (io.TextIOWrapper(io.FileIO(1, "w", closefd=False), encoding="utf-8", errors="backslashreplace"),
               io.TextIOWrapper(io.FileIO(2, "w", closefd=False), encoding="utf-8", errors="backslashreplace",
                                line_buffering=True))
    sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__ = streams  # the originals go to the template log
    return streams


def read_code(code_fd: int) -> str:
    with os.fdopen(code_fd, "rb") as handle:
        return handle.read().decode("utf-8", errors="replace")


def run_once(request: dict[str, object], fds: list[int], namespace: dict[str, object]) -> None:
    """Run one snippet in this (isolated, forked) process and exit; the process's end ends the snippet's tree."""
    code_fd, out_fd, err_fd, report_fd = fds
    null = os.open("/dev/null", os.O_RDONLY)
    for source, target in ((null, 0), (out_fd, 1), (err_fd, 2)):
        os.dup2(source, target)
        os.close(source)
    cpu_s = int(float(request["timeout_s"])) + 2  # type: ignore[arg-type] # a backstop: wall time is enforced first
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_s, cpu_s))
    code = read_code(code_fd)
    streams = open_streams()
    sys.argv = [SNIPPET_NAME]
    runner = os.getpid()
    outcome = run_snippet(code, bool(request.get("repl", True)), namespace)
    finish(streams, outcome, report_fd if os.getpid() == runner else -1)  # forked copies do not report


def run_snippet(code: str, repl: bool, namespace: dict[str, object], name: str = SNIPPET_NAME,
                guard: AbstractContextManager[object] | None = None) -> Outcome:
    """Execute ``code`` as a program; with ``repl`` print the repr of a final bare expression (unless None).

    ``name`` is the file name tracebacks show. ``guard`` is entered around the user's code alone (running it and
    showing its value), not around this runner's bookkeeping: a session's interrupt is honoured only inside it.

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
        tree = ast.parse(code, name)
        linecache.cache[name] = (len(code), None, code.splitlines(True), name)
        last = tree.body.pop() if repl and tree.body and isinstance(tree.body[-1], ast.Expr) else None
        body = compile(tree, name, "exec")
        shown = compile(ast.Expression(last.value), name, "eval") if last is not None else None
        with guard if guard is not None else nullcontext():
            exec(body, namespace)  # noqa: S102 - running it is the point
            if shown is not None:
                value = eval(shown, namespace)  # noqa: S307
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
    """The traceback without this runner's own frames (as ``python file.py`` would show it): the first is the
    runner's call into the code, a last one a session's interrupt handler raising KeyboardInterrupt."""
    tb = exc.__traceback__.tb_next if exc.__traceback__ is not None else None
    last, entry = None, tb
    while entry is not None and entry.tb_next is not None:
        last, entry = entry, entry.tb_next
    if last is not None and entry is not None and os.path.dirname(entry.tb_frame.f_code.co_filename) == HERE:
        last.tb_next = None
    try:
        traceback.print_exception(type(exc), exc, tb if not isinstance(exc, SyntaxError) else None)
    except (MemoryError, RecursionError, OSError, ValueError):
        try:
            os.write(2, f"{type(exc).__name__}\n".encode())
        except OSError:
            pass  # the parent stopped reading (output cap, or its caller gave up): nobody is there to tell


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

