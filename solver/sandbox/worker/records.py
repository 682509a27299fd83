"""What the template supervisor tracks: spares forked ahead, one-off snippets running (jobs), stateful sessions."""

from __future__ import annotations

import math
import socket
from dataclasses import dataclass


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
class Session:
    """A spare that became a stateful session (``sid``, the parent's number): it lives until the parent ends it,
    the template kills it, or it dies."""

    sid: int
    pid: int
    sock: socket.socket
    workdir: str
    call: int | None = None  # id of the call it is running
    deadline: float = math.inf  # interrupt the call then (time.monotonic())
    kill_at: float = math.inf  # kill the session then, unless the interrupted call has ended
    timed_out: bool = False
    killed: bool = False
    ending: bool = False  # the parent ended it: tell the parent once it is reaped
