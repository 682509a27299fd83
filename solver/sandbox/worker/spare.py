"""The spare process: forked from the template ahead of need, isolated, then waiting for its first request."""

from __future__ import annotations

import json
import os
import signal
import socket
import traceback

from .layers import Features, Settings, isolate
from .session import serve_session
from .snippet import MSG_BYTES, run_once


def spare_main(sock: socket.socket, settings: Settings, features: Features, workdir: str,
               cgroups: list[str], namespace: dict[str, object]) -> None:
    """Runs in the forked spare: isolate, wait for a request, then run one snippet and exit, or become a stateful
    session that serves calls until the template kills it. Never returns."""
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
        if request.get("session"):
            serve_session(sock, request, fds, namespace, settings, features.pid_namespace)
        sock.close()
        run_once(request, fds, namespace)
    except BaseException:  # noqa: BLE001 - a spare must never return into the template's loop
        traceback.print_exc()
    finally:
        os._exit(status)
