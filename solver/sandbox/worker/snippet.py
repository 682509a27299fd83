"""Running code in a forked, isolated process: one snippet (then exit), with the REPL's last-expression rule."""

from __future__ import annotations

import ast
import io
import json
import linecache
import os
import resource
import signal
import socket
import sys
import traceback
from typing import Literal

from .layers import Features, Settings, isolate

Outcome = Literal["ok", "error", "memory"]

SNIPPET_NAME = "<snippet>"
MSG_BYTES = 65536  # the largest control message; code travels in a memfd, so headers stay small


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

