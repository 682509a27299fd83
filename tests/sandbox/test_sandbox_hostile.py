"""The hostile-code suite: snippets that try to escape, exhaust or stall the sandbox pool.

Every case must end with its one expected status, within the time limit plus 0.5 s, with its output capped, and
leave no process behind. A case whose outcome raced (a fork bomb's exit against its own flood, a background flood
against the main process's exit) is written so that one outcome is certain; where a status differs by design, the
case says so: without namespaces (``SANDBOX_NAMESPACES=0``), or as a call of an IPython-display session. One pool
serves the whole table; afterwards it must answer ordinary snippets exactly like a fresh pool. Cases that would be
dangerous where a layer is missing (kill(-1) as root without a pid namespace) are skipped there, never run
unprotected.

The same table runs as calls of stateful sessions, with each display (``repr``, and ``ipython``: IPython's shell in
the session process): each case in a session holding a name, beside a bystander session holding its own. The
bystander must keep its state and its process through every case; the hostile session must keep its name exactly
when the result does not say ``state_lost`` (and must keep it after an interrupted Python loop, a memory bomb or a
flood); closing it must leave no process.
"""

from __future__ import annotations

import asyncio
import ctypes
import dataclasses
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from solver.config import SandboxConfig, load_config
from solver.sandbox.pool import PoolSession, ProcessPoolSandbox
from solver.sandbox.channel import Isolation
from solver.types import Execution, ExecStatus

# The fork bombs below must reach the process cap within the limit: about 0.6 s on 2 cores of their own, about
# twice that beside a second test worker on the other core (make test and make test-fast run two).
BESIDE_A_WORKER = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1
TIMEOUT_S = 2.0 if BESIDE_A_WORKER else 1.0
# allowed wall time beyond the limit (teardown of a fork bomb or a big heap included)
OVER_LIMIT_S = 1.0 if BESIDE_A_WORKER else 0.5
GRACE_S = 0.5  # a session call interrupted at its limit may take this long to stop before it is killed
# IPython-display sessions get the grace of the preset that ships that display: IPython's handling of an interrupt
# (its traceback) is slower than the repr runner's, and in a fresh-clone run beside a vLLM start an interruptible
# loop overran 0.5 s of it once and was killed with its state.
KERNEL_GRACE_S = load_config("h100-gptoss").sandbox.interrupt_grace_s
# The limit of a case that only stalls (a loop, a sleep, a trick against the limit; no fork, no allocation): only a
# kill from outside ends it, at any limit, so it need not wait out TIMEOUT_S (about 1.5 s saved a run of it).
STALL_S = 0.5
STALLS = ("loop", "tricks")
# The limit of a case that must end by itself (an error, a cap, a kill, a normal exit): it never waits its limit
# out when the sandbox works, so a wide one costs nothing, and a slow machine cannot turn its ending into a timeout.
# Beside a vLLM start on the other core, fork floods took over 2 s, once over 6 s, to reach the process cap (0.3 s
# alone here), and building a million nested lists took over 2 s in an IPython session (0.34 s alone here).
ENDS_S = 10 * TIMEOUT_S
CAP = 4096
CONFIG = SandboxConfig(workers=1, timeout_s=TIMEOUT_S, memory_mb=400, output_bytes=CAP, interrupt_grace_s=GRACE_S)
ROOT = Path(__file__).resolve().parents[2]
# SANDBOX_NAMESPACES=0 runs the suite against the fallback layers (no namespaces), as on hosts that lack them.
NAMESPACES = os.environ.get("SANDBOX_NAMESPACES", "1") != "0"
OUTSIDE = Path(tempfile.gettempdir()) / f"sandbox-hostile-{uuid.uuid4().hex}"  # must never appear
PR_SET_CHILD_SUBREAPER = 36

# ---- the table -----------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    """A hostile snippet and the one status it must end with: where the pool has its namespaces (as in CI), and
    where a status differs, without them (``SANDBOX_NAMESPACES=0``) or as a call of an IPython-display session."""

    category: str
    name: str
    code: str
    status: ExecStatus
    needs: str = ""  # an Isolation property the case relies on to be safe or meaningful
    without_namespaces: ExecStatus | None = None
    kernel: ExecStatus | None = None
    shows: str | None = None  # an ok case's whole stdout: proof that it ran to its end and nothing else got in

    def limit_s(self, isolation: Isolation, display: str = "repr") -> float:
        """The time limit the case runs under where it must end with ``expected(isolation, display)``: ``STALL_S``
        for a stall that must time out, ``TIMEOUT_S`` for another case that must time out, else ``ENDS_S``."""
        if self.expected(isolation, display) != "timeout":
            return ENDS_S
        return STALL_S if self.category in STALLS else TIMEOUT_S

    def expected(self, isolation: Isolation, display: str = "repr") -> ExecStatus:
        if display == "ipython" and self.kernel is not None:
            return self.kernel
        if not isolation.pid_namespace and self.without_namespaces is not None:
            return self.without_namespaces
        return self.status


def case(category: str, name: str, code: str, status: ExecStatus, *, needs: str = "",
         without_namespaces: ExecStatus | None = None, kernel: ExecStatus | None = None,
         shows: str | None = None) -> Case:
    return Case(category, name, textwrap.dedent(code).strip() + "\n", status, needs, without_namespaces, kernel,
                shows)


CASES = [
    # Forks through every door; blocklists would not stop these, the pid cap and the namespace do.
    # The first process keeps forking while every other copy dies at the cap with its traceback: together they
    # flood stderr. (When the first process died too, its exit raced the flood: error or truncated. When the copies
    # held their places instead, a session without namespaces could not reply until its time limit: the pool's
    # process cap was full.)
    case("fork", "os_fork_bomb", """
        import os
        first = os.getpid()
        while True:
            try:
                os.fork()
            except OSError:
                if os.getpid() != first:
                    raise
        """, "truncated"),
    case("fork", "os_fork_bomb_swallowing_errors", """
        import os
        while True:
            try:
                os.fork()
            except OSError:
                pass
        """, "timeout"),
    # The same bomb through posix.fork, with os.fork blocked.
    case("fork", "posix_fork_after_blocklist", """
        import os, posix
        first = os.getpid()
        os.fork = None
        while True:
            try:
                posix.fork()
            except OSError:
                if os.getpid() != first:
                    raise
        """, "truncated"),
    case("fork", "posixsubprocess_popen_flood", """
        import subprocess
        while True:
            subprocess.Popen(["sleep", "60"])
        """, "error"),
    case("fork", "posix_spawn_flood", """
        import os
        while True:
            os.posix_spawn("/bin/sleep", ["sleep", "60"], {})
        """, "error"),
    case("fork", "multiprocessing_processes", """
        import multiprocessing as mp, time
        procs = [mp.Process(target=time.sleep, args=(60,)) for _ in range(2000)]
        for p in procs:
            p.start()
        """, "error"),
    case("fork", "multiprocessing_pool", """
        import multiprocessing as mp
        with mp.Pool(4) as pool:
            print(sum(pool.map(abs, range(100))))
        """, "error"),  # its semaphores need /dev/shm, which Landlock closes
    case("fork", "thread_bomb", """
        import threading, time
        while True:
            threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
        """, "error"),  # "can't start new thread" at the process cap
    case("fork", "spinning_fork_tree", """
        import os
        for _ in range(6):
            os.fork()
        while True:
            pass
        """, "timeout"),
    # Memory: the address-space cap turns these into MemoryError (status memory) or a failed mmap.
    case("memory", "python_list", "x = [0] * 10**10", "memory"),
    case("memory", "growing_list", """
        x = []
        while True:
            x.append(" " * 10**6)
        """, "memory"),
    case("memory", "numpy_ones", "a = np.ones(10**11)", "memory"),
    case("memory", "numpy_gradual", "a = [np.ones(10**7) for _ in range(10**4)]", "memory"),
    case("memory", "bytes_repeat", "b = b'x' * 10**11", "memory"),
    case("memory", "anonymous_mmap", "import mmap\nm = mmap.mmap(-1, 10**11)", "error"),  # OSError, not MemoryError
    case("memory", "forked_children_allocate", """
        import os
        for _ in range(3):
            os.fork()
        x = bytearray(10**10)
        """, "memory"),
    # Loops the interpreter cannot interrupt: only SIGKILL from outside ends them.
    case("loop", "python_while_true", "while True:\n    pass", "timeout"),
    case("loop", "huge_integer_power", "x = 7 ** (10 ** 9)", "timeout"),
    case("loop", "regex_backtracking", "import re\nre.match(r'(a+)+$', 'a' * 64 + 'b')", "timeout"),
    case("loop", "modular_pow_in_c", "pow(3, 10**100000, 10**3000 + 1)", "timeout"),
    case("loop", "sleep", "import time\ntime.sleep(60)", "timeout"),
    case("loop", "ignores_sigterm", """
        import signal
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        while True:
            pass
        """, "timeout"),
    case("loop", "ignores_every_signal", """
        import signal
        for s in range(1, signal.NSIG):
            try:
                signal.signal(s, signal.SIG_IGN)
            except (OSError, ValueError, RuntimeError):
                pass
        signal.pthread_sigmask(signal.SIG_BLOCK, range(1, signal.NSIG))
        while True:
            pass
        """, "timeout"),
    # Recursion and stack.
    # IPython's Plain traceback of a RecursionError lists every frame (~70 KB for 1000, as a kernel sends it): past
    # this suite's 4 KB cap.
    case("recursion", "recursion_error", "def f(n):\n    return f(n + 1)\nf(0)", "error", kernel="truncated"),
    # A Python stack held 200,000 frames deep until the limit: its traceback takes seconds to print. Unbounded, the
    # stack met the memory cap near the time limit, so which came first decided the outcome (once, in an IPython
    # session: a MemoryError while formatting, the call answered with its state kept, then the process gone at the
    # next call).
    case("recursion", "deep_python_frames", """
        import sys, time
        sys.setrecursionlimit(10**8)
        def f(n):
            if n == 200_000:
                time.sleep(60)
            return f(n + 1) + 1
        f(0)
        """, "timeout"),
    case("recursion", "c_stack_overflow", """
        import sys
        sys.setrecursionlimit(10**8)
        a, b = [], []
        for _ in range(2 * 10**5):
            a, b = [a], [b]
        a == b  # list comparison recurses in C
        """, "killed"),
    case("recursion", "nested_list_repr", "a = []\nfor _ in range(10**6):\n    a = [a]\nprint(a)", "error"),
    case("recursion", "nested_parentheses", "eval('(' * 100000 + ')' * 100000)",
         "truncated"),  # the traceback quotes the 200,000-character line
    # Output floods: the cap applies while the output streams; the snippet is stopped at the cap.
    case("output", "stdout_flood", "while True:\n    print('x' * 1000)", "truncated"),
    case("output", "stderr_flood", "import sys\nwhile True:\n    sys.stderr.write('e' * 1000)", "truncated"),
    case("output", "one_huge_line", "import sys\nsys.stdout.write('y' * 10**8)", "truncated"),
    case("output", "binary_flood", "import os\nwhile True:\n    os.write(1, os.urandom(4096))", "truncated"),
    case("output", "invalid_utf8", "import sys\nsys.stdout.buffer.write(b'\\xff\\xfe\\xc3(' * 8)", "ok"),
    case("output", "subprocess_yes", "import subprocess\nsubprocess.run(['yes'])", "truncated"),
    # The child starts its flood well after the main process has ended: nothing of it may reach the output.
    # (Flooding at once raced the main process's exit: ok or truncated. The child dies as the call ends, so its
    # wait costs nothing: 2 s leaves a slow machine time to print and exit first.)
    case("output", "background_child_floods", """
        import os, time
        if os.fork() == 0:
            time.sleep(2)
            while True:
                os.write(1, b"z" * 4096)
        print("main done")
        """, "ok", shows="main done\n"),
    # Disk: writes are capped per file (RLIMIT_FSIZE) and by the private tmpfs (size and inodes).
    case("disk", "fill_one_file", """
        with open("big", "wb") as f:
            while True:
                f.write(b"0" * 2**20)
        """, "error"),
    case("disk", "many_files", "for i in range(10**6):\n    open(f'f{i}', 'w').close()", "error",
         without_namespaces="timeout"),  # no private tmpfs and its 4096 inodes: a million files take longer
    case("disk", "fill_dev_shm", "open('/dev/shm/sandbox-fill', 'wb').write(b'0' * 10**7)", "error", needs="landlock"),
    case("disk", "many_directories", "import os\nfor i in range(10**6):\n    os.mkdir(f'd{i}')", "error",
         without_namespaces="timeout"),
    # Writes outside the working directory.
    case("outside", "write_tmp", f"open({str(OUTSIDE)!r}, 'w').write('pwned')", "error", needs="landlock"),
    case("outside", "write_repo", f"open({str(ROOT / 'SANDBOX_PWNED')!r}, 'w').write('pwned')", "error",
         needs="landlock"),
    case("outside", "mkdir_tmp", f"import os\nos.mkdir({str(OUTSIDE)!r})", "error", needs="landlock"),
    case("outside", "symlink_escape", f"""
        import os
        os.symlink({str(OUTSIDE)!r}, "link")
        open("link", "w").write("pwned")
        """, "error", needs="landlock"),
    case("outside", "subprocess_shell_write", f"""
        import subprocess
        subprocess.run("echo pwned > {OUTSIDE}", shell=True, check=True)
        """, "error", needs="landlock"),
    # Children, grandchildren and daemons must not outlive the snippet.
    case("children", "background_sleep", "import subprocess\nsubprocess.Popen(['sleep', '60'])\nprint('bye')", "ok",
         shows="bye\n"),
    case("children", "double_fork_setsid_daemon", """
        import os, time
        if os.fork() == 0:
            os.setsid()
            if os.fork() == 0:
                time.sleep(60)
            os._exit(0)
        print("parent done")
        """, "ok", shows="parent done\n"),
    case("children", "new_session_popen", """
        import subprocess
        subprocess.Popen(["sleep", "60"], start_new_session=True)
        """, "ok"),
    case("children", "daemon_ignoring_signals", """
        import os, signal, time
        if os.fork() == 0:
            os.setsid()
            for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
                signal.signal(s, signal.SIG_IGN)
            time.sleep(60)
        """, "ok", shows=""),
    case("children", "grandchild_keeps_stdout", "import subprocess\nsubprocess.Popen(['sleep', '60'])", "ok"),
    # Killing the parent, the process group, everything. In its pid namespace the snippet is init: it has no parent
    # there (getppid() is 0: kill(0) is its own group) and the kernel ignores the signals it sends itself. Without
    # namespaces Landlock keeps its signals inside its own tree. (kill_minus_one and kill_every_visible_pid were
    # measured with namespaces only: they are not run unprotected on a shared machine.)
    case("kill", "kill_parent", "import os\nos.kill(os.getppid(), 9)\nprint('alive')", "ok",
         needs="signals_contained", without_namespaces="error", shows="alive\n"),
    case("kill", "kill_own_group", "import os\nos.killpg(os.getpgid(0), 9)", "error", without_namespaces="killed"),
    case("kill", "kill_minus_one", "import os\nos.kill(-1, 9)\nprint('alive')", "error", needs="signals_contained"),
    case("kill", "kill_every_visible_pid", """
        import os
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) != os.getpid():
                try:
                    os.kill(int(name), 9)
                except OSError:
                    pass
        print("alive")
        """, "ok", needs="signals_contained", shows="alive\n"),
    case("kill", "kill_self_sigkill", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)", "ok",
         without_namespaces="killed", shows=""),
    # Exits of every kind.
    case("exit", "sys_exit_zero", "import sys\nsys.exit(0)", "ok", shows=""),
    case("exit", "sys_exit_one", "import sys\nsys.exit(1)", "error"),
    case("exit", "sys_exit_message", "import sys\nsys.exit('bye')", "error"),
    case("exit", "os_exit_seven", "import os\nos._exit(7)", "error"),
    case("exit", "os_abort", "import os\nos.abort()", "killed"),
    # Stdin is /dev/null.
    case("stdin", "input", "input()", "error"),
    case("stdin", "read_all", "import sys\nprint(repr(sys.stdin.read()))", "ok", shows="''\n"),
    case("stdin", "read_fd0", "import os\nprint(os.read(0, 10))", "ok", shows="b''\n"),
    # Network.
    case("network", "connect_local_server", "import socket\nsocket.create_connection(('127.0.0.1', {port}), 1)",
         "error"),
    case("network", "udp_send", "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', "
         "('127.0.0.1', {port}))", "error"),
    case("network", "dns_lookup", "import socket\nsocket.getaddrinfo('example.com', 80)", "error"),
    case("network", "urllib", "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:{port}/', "
         "timeout=1)", "error"),
    case("network", "unix_socket_to_host", "import socket\ns = socket.socket(socket.AF_UNIX)\n"
         "s.connect('/run/sandbox-nonexistent.sock')", "error"),
    # Results too large to show.
    case("result", "huge_bare_expression", "'a' * 10**6", "truncated"),
    case("result", "huge_list_repr", "list(range(10**6))", "truncated"),
    case("result", "huge_integer_print", "print(2 ** 100000)", "error"),
    # Signal-handler and rlimit tricks.
    case("tricks", "raise_memory_limit", """
        import resource
        try:
            resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        except (ValueError, OSError):
            pass
        x = bytearray(10**10)
        """, "memory"),
    case("tricks", "raise_cpu_limit", """
        import resource
        try:
            resource.setrlimit(resource.RLIMIT_CPU, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
        except (ValueError, OSError):
            pass
        while True:
            pass
        """, "timeout"),
    case("tricks", "sigxcpu_and_alarm_handlers", """
        import signal
        signal.signal(signal.SIGXCPU, lambda *a: None)
        signal.signal(signal.SIGALRM, lambda *a: signal.alarm(1))
        signal.alarm(1)
        while True:
            pass
        """, "timeout"),
    case("tricks", "clear_parent_death_signal", """
        import ctypes
        ctypes.CDLL(None).prctl(1, 0, 0, 0, 0)
        while True:
            pass
        """, "timeout"),
    case("tricks", "rejoin_host_namespace", """
        import ctypes, os
        fd = os.open("/proc/1/ns/net", os.O_RDONLY)
        if ctypes.CDLL(None).setns(fd, 0) != 0:
            raise PermissionError("setns refused")
        """, "error"),
    case("tricks", "read_parent_environment", "print(open('/proc/{parent}/environ').read())", "error",
         needs="landlock"),
    # Segfaults.
    case("segfault", "ctypes_null_read", "import ctypes\nctypes.string_at(0)", "killed"),
    case("segfault", "ctypes_null_write", "import ctypes\nctypes.memset(0, 1, 8)", "killed"),
    # raise(SIGSEGV) is a signal, not a fault: as init of its pid namespace the snippet ignores it.
    case("segfault", "faulthandler_sigsegv", "import faulthandler\nfaulthandler._sigsegv()", "ok",
         without_namespaces="killed", shows=""),
]

# Cases after which the hostile session must still hold its names: the interrupt reaches Python code, a memory
# bomb ends in MemoryError, a flood ends at the cap, children die with the call, the session ignores signals
# sent to itself from inside its namespace.
KEEPS_STATE = {"python_while_true", "sleep", "ignores_sigterm", "raise_cpu_limit", "sigxcpu_and_alarm_handlers",
               "clear_parent_death_signal", "python_list", "growing_list", "numpy_ones", "bytes_repeat",
               "stdout_flood", "stderr_flood", "background_sleep", "double_fork_setsid_daemon", "new_session_popen",
               "daemon_ignoring_signals", "grandchild_keeps_stdout", "sys_exit_zero", "sys_exit_one", "input"}
HOST_PID = "import os\nprint(os.readlink('/proc/self'))"  # /proc is the host's: the session's pid as we see it

ORDINARY = [
    "print(sum(range(101)))",
    "x = sp.symbols('x')\nsp.factor(x**4 - 1)",
    "sp.isprime(2**61 - 1)",
    "int(np.arange(10).sum())",
    "import math\nprint(math.comb(20, 10) % 1000)",
    "sorted({'b', 'a', 'c'})",
    "1 / 0",
    "print('é ✓')",
]


# ---- fixtures ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def subreaper() -> Iterator[set[int]]:
    """Make this test process the subreaper, so anything escaping the pool's tree shows up as our child."""
    libc = ctypes.CDLL(None, use_errno=True)
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    yield before
    libc.prctl(PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)


@pytest.fixture(scope="module")
def pool_options(subreaper: set[int]) -> dict:
    """The shared ``pool`` (tests/conftest.py) with this suite's limits; requesting ``subreaper`` here makes it
    take effect before the pool starts and last until the pool has closed, so no escaped process goes unseen."""
    return {"config": CONFIG, "namespaces": NAMESPACES}


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[int, list[str]]]:
    """A TCP server on 127.0.0.1 outside the sandbox; it records every connection it accepts."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    accepted: list[str] = []
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, addr = listener.accept()
            except TimeoutError:
                continue
            accepted.append(str(addr))
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield listener.getsockname()[1], accepted
    stop.set()
    thread.join()
    listener.close()


@pytest.fixture(scope="module")
def kernel_pool(loop: asyncio.AbstractEventLoop, subreaper: set[int]) -> Iterator[ProcessPoolSandbox]:
    """A second pool, whose sessions run their calls through IPython's shell (``display: ipython``)."""
    # A kernel's namespace has no preamble names: the starter cell defines them, as the cases expect.
    config = dataclasses.replace(CONFIG, code_mode="stateful", display="ipython", starter_code=CONFIG.preamble,
                                 interrupt_grace_s=KERNEL_GRACE_S)
    sandbox = ProcessPoolSandbox(config, namespaces=NAMESPACES)
    loop.run_until_complete(sandbox.start())
    yield sandbox
    loop.run_until_complete(sandbox.close())


def _bystander(pool: ProcessPoolSandbox, loop: asyncio.AbstractEventLoop) -> Iterator[tuple[PoolSession, int]]:
    """A session that holds a name through the whole table, and the pid of its process."""
    session = loop.run_until_complete(pool.session())
    result = loop.run_until_complete(session.run("witness = 'intact'\n" + HOST_PID))
    assert result.status == "ok", result
    yield session, int(result.stdout)
    loop.run_until_complete(session.close())


@pytest.fixture(scope="module")
def bystander(pool: ProcessPoolSandbox, loop: asyncio.AbstractEventLoop) -> Iterator[tuple[PoolSession, int]]:
    yield from _bystander(pool, loop)


@pytest.fixture(scope="module")
def kernel_bystander(kernel_pool: ProcessPoolSandbox,
                     loop: asyncio.AbstractEventLoop) -> Iterator[tuple[PoolSession, int]]:
    yield from _bystander(kernel_pool, loop)


def settle(pool: ProcessPoolSandbox, baseline: int, within_s: float = 3.0) -> set[int]:
    """Wait until the pool's tree is back to its resting size; return what is left above it."""
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        if len(pool.pids()) <= baseline:
            return set()
        time.sleep(0.05)
    return pool.pids()


# ---- the suite -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("item", CASES, ids=[f"{c.category}-{c.name}" for c in CASES])
def test_hostile_snippet_ends_cleanly(item: Case, pool: ProcessPoolSandbox, loop: asyncio.AbstractEventLoop,
                                      server: tuple[int, list[str]]) -> None:
    isolation = pool.isolation
    assert isolation is not None
    if item.needs and not getattr(isolation, item.needs):
        pytest.skip(f"needs {item.needs}, which this machine does not provide")
    port, accepted = server
    code = item.code.replace("{port}", str(port)).replace("{parent}", str(os.getpid()))
    # At rest the tree is the template (and its supervisor when there is a pid namespace) plus the spares.
    baseline = pool.spares + (2 if isolation.pid_namespace else 1)
    limit_s = item.limit_s(isolation)
    began = time.monotonic()
    result: Execution = loop.run_until_complete(pool.run(code, timeout_s=limit_s))
    wall = time.monotonic() - began
    assert result.status == item.expected(isolation), (result.status, round(wall, 2), isolation,
                                                       result.stdout[-300:], result.stderr[-600:])
    if item.shows is not None and result.status == "ok":
        assert result.stdout == item.shows
    assert wall <= limit_s + OVER_LIMIT_S, wall
    assert len(result.stdout) <= CAP and len(result.stderr) <= CAP
    assert not settle(pool, baseline, within_s=15.0), "processes outlived the snippet"
    assert not OUTSIDE.exists() and not (ROOT / "SANDBOX_PWNED").exists()
    assert accepted == []


# In a session, a case that must run into its limit waits out its limit twice (repr and IPython): those are the
# full suite's (marker slow), ~36 s of the fast tier's waiting; the fast tier keeps each of them as a snippet above.
SESSION_CASES = [pytest.param(c, id=f"{c.category}-{c.name}", marks=[pytest.mark.slow] if c.status == "timeout" else [])
                 for c in CASES]


@pytest.mark.parametrize("display", ["repr", "ipython"])
@pytest.mark.parametrize("item", SESSION_CASES)
def test_hostile_call_in_a_session_leaves_other_sessions_intact(
        item: Case, display: str, loop: asyncio.AbstractEventLoop, server: tuple[int, list[str]],
        request: pytest.FixtureRequest) -> None:
    pool: ProcessPoolSandbox = request.getfixturevalue("pool" if display == "repr" else "kernel_pool")
    bystander = request.getfixturevalue("bystander" if display == "repr" else "kernel_bystander")
    isolation = pool.isolation
    assert isolation is not None
    if item.needs and not getattr(isolation, item.needs):
        pytest.skip(f"needs {item.needs}, which this machine does not provide")
    port, accepted = server
    code = item.code.replace("{port}", str(port)).replace("{parent}", str(os.getpid()))
    witness, witness_pid = bystander
    baseline = pool.spares + (2 if isolation.pid_namespace else 1) + 1  # + the bystander's process
    limit_s = item.limit_s(isolation, display)
    session = loop.run_until_complete(pool.session())
    try:
        assert loop.run_until_complete(session.run("marker = 42")).status == "ok"
        began = time.monotonic()
        result: Execution = loop.run_until_complete(session.run(code, timeout_s=limit_s))
        wall = time.monotonic() - began
        after = loop.run_until_complete(session.run("marker"))
        seen = loop.run_until_complete(witness.run("witness"))
    finally:
        loop.run_until_complete(session.close())
    assert result.status == item.expected(isolation, display), (result.status, round(wall, 2), isolation,
                                                                   result.stdout[-300:], result.stderr[-600:])
    if item.shows is not None and result.status == "ok":
        assert result.stdout == item.shows
    assert wall <= limit_s + pool.interrupt_grace_s + OVER_LIMIT_S, wall
    assert len(result.stdout) <= CAP and len(result.stderr) <= CAP
    # The state is kept exactly when the result does not say it is lost.
    kept = (after.status, after.stdout, after.state_lost) == ("ok", "42\n", False)
    assert kept != result.state_lost, (result.status, result.state_lost, after)
    if item.name in KEEPS_STATE:
        assert kept, (result.status, result.stderr[-600:])
    assert (seen.status, seen.stdout, seen.state_lost) == ("ok", "'intact'\n", False)
    assert _alive(psutil.Process(witness_pid))
    assert not settle(pool, baseline, within_s=15.0), "processes outlived the session"
    assert not OUTSIDE.exists() and not (ROOT / "SANDBOX_PWNED").exists()
    assert accepted == []


def test_pool_answers_like_a_fresh_one_after_the_suite(pool: ProcessPoolSandbox,
                                                       loop: asyncio.AbstractEventLoop) -> None:
    async def batch(sandbox: ProcessPoolSandbox) -> list[tuple[str, str, str]]:
        return [(r.status, r.stdout, r.stderr) for r in [await sandbox.run(code) for code in ORDINARY]]

    async def fresh() -> list[tuple[str, str, str]]:
        sandbox = ProcessPoolSandbox(CONFIG, namespaces=NAMESPACES)
        try:
            return await batch(sandbox)
        finally:
            await sandbox.close()

    used = loop.run_until_complete(batch(pool))
    assert used == loop.run_until_complete(fresh())
    assert [status for status, _out, _err in used] == ["ok"] * 6 + ["error", "ok"]
    assert used[0][1] == "5050\n"


def test_nothing_escaped_the_pool(pool: ProcessPoolSandbox, kernel_pool: ProcessPoolSandbox,
                                  loop: asyncio.AbstractEventLoop, subreaper: set[int]) -> None:
    """Runs last in this module: after close, neither the pools' trees nor anything re-parented to us is alive."""
    loop.run_until_complete(pool.close())
    loop.run_until_complete(kernel_pool.close())
    deadline = time.monotonic() + 3.0
    while True:
        ours = {p for p in psutil.Process().children(recursive=True)
                if p.pid not in subreaper and _alive(p)}
        if not ours or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert not ours, [(p.pid, _cmdline(p)) for p in ours]
    assert pool.pids() == set() and kernel_pool.pids() == set()


OWNER_SCRIPT = """
import asyncio, json, sys
from solver.config import SandboxConfig
from solver.sandbox.pool import ProcessPoolSandbox

async def main():
    pool = ProcessPoolSandbox(SandboxConfig(workers=1, timeout_s=60))
    await pool.start()
    task = asyncio.ensure_future(pool.run("import subprocess, time\\nsubprocess.Popen(['sleep', '60'])\\n"
                                          "time.sleep(60)"))
    for _ in range(200):
        await asyncio.sleep(0.05)
        if len(pool.pids()) >= 5:  # supervisor, template, the snippet, its sleep, a spare
            break
    print(json.dumps(sorted(pool.pids())), flush=True)
    await task

if __name__ == "__main__":
    asyncio.run(main())
"""


def test_killing_the_owner_leaves_no_sandbox_process(tmp_path: Path) -> None:
    script = tmp_path / "owner.py"
    script.write_text(OWNER_SCRIPT)
    owner = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, cwd=ROOT, text=True)
    try:
        line = owner.stdout.readline() if owner.stdout else ""
        pids = json.loads(line)
        assert len(pids) >= 4, pids
        processes = [psutil.Process(pid) for pid in pids]
    finally:
        owner.send_signal(signal.SIGKILL)
        owner.wait()
    deadline = time.monotonic() + 3.0
    while any(_alive(p) for p in processes) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not [p.pid for p in processes if _alive(p)]


def _alive(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _cmdline(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:
        return "?"
