"""Stateful sessions of the sandbox pool: state across calls, interrupts, kills, slots, the session cap, cleanup."""

from __future__ import annotations

import asyncio
import os
import signal
import time

import psutil
import pytest

from solver.config import SandboxConfig
from solver.sandbox.pool import ProcessPoolSandbox, PoolSession
from solver.types import Execution

CONFIG = SandboxConfig(workers=2, timeout_s=1.0, memory_mb=512, output_bytes=1000)
GRACE_S = 0.5
SLACK_S = 0.35  # the pool answers within 0.25 s of its limit; a loaded machine adds scheduling delay
HOST_PID = "import os\nint(os.readlink('/proc/self'))"  # /proc is the host's: the session's pid there
# SANDBOX_NAMESPACES=0 runs these against the fallback layers (no namespaces), as on hosts that lack them.
NAMESPACES = os.environ.get("SANDBOX_NAMESPACES", "1") != "0"


@pytest.fixture(scope="module")
def pool_options() -> dict:
    """The shared ``pool`` (tests/conftest.py) with this module's limits and interrupt grace."""
    return {"config": CONFIG, "interrupt_grace_s": GRACE_S, "namespaces": NAMESPACES}


def resting(pool: ProcessPoolSandbox) -> int:
    """Processes of an idle pool without sessions: the template (and its supervisor) plus the spares."""
    isolation = pool.isolation
    assert isolation is not None
    return pool.spares + (2 if isolation.pid_namespace else 1)


def settle(pool: ProcessPoolSandbox, expected: int, within_s: float = 5.0) -> int:
    """Wait until the pool's tree has ``expected`` processes (spares are forked again after use); return its size."""
    deadline = time.monotonic() + within_s
    while len(pool.pids()) != expected and time.monotonic() < deadline:
        time.sleep(0.02)
    return len(pool.pids())


def calls(loop: asyncio.AbstractEventLoop, session: PoolSession, *codes: str, **kwargs: float) -> list[Execution]:
    return [loop.run_until_complete(session.run(code, **kwargs)) for code in codes]


def opened(loop: asyncio.AbstractEventLoop, pool: ProcessPoolSandbox) -> PoolSession:
    return loop.run_until_complete(pool.session())


def test_names_imports_and_functions_survive_between_calls(loop, pool) -> None:
    session = opened(loop, pool)
    try:
        results = calls(loop, session, "import fractions\nx = 40\ndef f(n):\n    return n + 2",
                        "y = f(x)\nprint('y is', y)", "fractions.Fraction(y, 4)", "x = x + 1\nx")
    finally:
        loop.run_until_complete(session.close())
    assert [(r.status, r.stdout, r.stderr, r.state_lost) for r in results] == [
        ("ok", "", "", False), ("ok", "y is 42\n", "", False), ("ok", "Fraction(21, 2)\n", "", False),
        ("ok", "41\n", "", False)]


def test_sessions_are_never_shared(loop, pool) -> None:
    first, second = opened(loop, pool), opened(loop, pool)
    try:
        calls(loop, first, "secret = 7\nopen('note.txt', 'w').write('mine')")
        seen = calls(loop, second, "import os\nprint('secret' in globals(), os.path.exists('note.txt'))")[0]
        kept = calls(loop, first, "print(secret, open('note.txt').read())")[0]
        fresh = loop.run_until_complete(pool.run("print('secret' in globals())"))
    finally:
        loop.run_until_complete(first.close())
        loop.run_until_complete(second.close())
    assert seen.stdout == "False False\n"
    assert kept.stdout == "7 mine\n"  # names and working-directory files are the session's own
    assert fresh.stdout == "False\n"  # one-off snippets do not see sessions either


def test_tracebacks_name_each_call_as_a_cell(loop, pool) -> None:
    session = opened(loop, pool)
    try:
        results = calls(loop, session, "def g(n):\n    return 1 / n", "g(0)")
    finally:
        loop.run_until_complete(session.close())
    error = results[1]
    assert error.status == "error" and not error.state_lost
    assert 'File "<cell 2>", line 1, in <module>' in error.stderr
    assert 'File "<cell 1>", line 2, in g' in error.stderr and "return 1 / n" in error.stderr
    assert "worker" not in error.stderr  # the runner's own frames are not shown


def test_an_interrupted_busy_loop_keeps_the_state(loop, pool) -> None:
    session = opened(loop, pool)
    try:
        calls(loop, session, "total = 0")
        began = time.monotonic()
        stopped = calls(loop, session, "while True:\n    total += 1")[0]
        wall = time.monotonic() - began
        after = calls(loop, session, "print(total > 0)")[0]
    finally:
        loop.run_until_complete(session.close())
    assert stopped.status == "timeout" and not stopped.state_lost
    assert stopped.stderr.rstrip().endswith("KeyboardInterrupt") and "<cell 2>" in stopped.stderr
    assert "session.py" not in stopped.stderr  # the interrupt handler's frame is not shown
    assert CONFIG.timeout_s <= wall < CONFIG.timeout_s + SLACK_S
    assert (after.status, after.stdout, after.state_lost) == ("ok", "True\n", False)


def test_a_call_that_ignores_the_interrupt_is_killed_and_the_state_lost(loop, pool) -> None:
    session = opened(loop, pool)
    try:
        calls(loop, session, "kept = 1")
        began = time.monotonic()
        stuck = calls(loop, session, "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n"
                                     "    pass")[0]
        wall = time.monotonic() - began
        after = calls(loop, session, "print('kept' in globals())", "y = 2", "y")
    finally:
        loop.run_until_complete(session.close())
    assert (stuck.status, stuck.state_lost) == ("timeout", True)
    assert CONFIG.timeout_s + GRACE_S <= wall < CONFIG.timeout_s + GRACE_S + SLACK_S
    # The next call runs in a new, empty process; the loss was reported once, on the call that caused it.
    assert [(r.status, r.stdout, r.state_lost) for r in after] == [("ok", "False\n", False), ("ok", "", False),
                                                                   ("ok", "2\n", False)]


def test_a_loop_inside_c_code_is_killed_after_the_grace_period(loop, pool) -> None:
    session = opened(loop, pool)
    try:
        result = calls(loop, session, "import itertools\nany(itertools.repeat(0))")[0]  # no signal checks in C
        again = calls(loop, session, "1 + 1")[0]
    finally:
        loop.run_until_complete(session.close())
    assert (result.status, result.state_lost) == ("timeout", True)
    assert (again.status, again.stdout, again.state_lost) == ("ok", "2\n", False)


def test_a_session_that_dies_during_a_call_reports_its_state_lost(loop, pool) -> None:
    session = opened(loop, pool)
    try:
        results = calls(loop, session, "a = 1", "import os\nos._exit(3)", "print('a' in globals())")
    finally:
        loop.run_until_complete(session.close())
    assert [(r.status, r.state_lost) for r in results] == [("ok", False), ("error", True), ("ok", False)]
    assert results[2].stdout == "False\n"


def test_a_session_killed_between_calls_says_so_on_the_next_call(loop, pool) -> None:
    session = opened(loop, pool)
    try:
        pid = int(calls(loop, session, "b = 2\n" + HOST_PID)[0].stdout)
        os.kill(pid, signal.SIGKILL)
        try:
            psutil.Process(pid).wait(5)
        except psutil.NoSuchProcess:
            pass  # already reaped: a check before it would race the reaping
        results = calls(loop, session, "print('b' in globals())", "c = 3", "c")
    finally:
        loop.run_until_complete(session.close())
    assert [(r.status, r.stdout, r.state_lost) for r in results] == [
        ("ok", "False\n", True), ("ok", "", False), ("ok", "3\n", False)]


def test_an_interrupt_between_calls_is_not_the_next_call_s(loop, pool) -> None:
    """A SIGINT that reaches an idle session (a deadline that raced the last call's end) does not stop the next."""
    session = opened(loop, pool)
    try:
        pid = int(calls(loop, session, "b = 2\n" + HOST_PID)[0].stdout)
        os.kill(pid, signal.SIGINT)
        time.sleep(0.2)  # the session's handler runs while it waits for the next call
        results = calls(loop, session, "import time\ntime.sleep(0.2)\nb + 1")
    finally:
        loop.run_until_complete(session.close())
    assert [(r.status, r.stdout, r.state_lost) for r in results] == [("ok", "3\n", False)]


def test_an_interrupt_before_the_code_begins_stops_it_as_it_begins() -> None:
    """The session's interrupt rule itself, in this process: a SIGINT that came after the call began but before its
    code did (a loaded machine had not yet run the call's first steps when its limit passed) is raised as the code
    is entered, the call reported as interrupted; one left from the last call's end is dropped as a call begins."""
    from solver.sandbox.worker.session import Interruptible, on_interrupt

    ran = []
    Interruptible.begin()
    on_interrupt(signal.SIGINT, None)  # outside the code: nothing raised in the runner's own steps
    with pytest.raises(KeyboardInterrupt):
        with Interruptible():
            ran.append("code")
    assert ran == [] and Interruptible.fired and not Interruptible.active
    on_interrupt(signal.SIGINT, None)  # a deadline that raced the end of that call
    Interruptible.begin()  # the next call
    with Interruptible():
        ran.append("code")
    assert ran == ["code"] and not Interruptible.fired and not Interruptible.active


def test_output_over_the_cap_stops_the_call_and_keeps_the_state(loop, pool) -> None:
    session = opened(loop, pool)
    try:
        calls(loop, session, "n = 0")
        began = time.monotonic()
        flood = calls(loop, session, "while True:\n    n += 1\n    print('0123456789')")[0]
        wall = time.monotonic() - began
        after = calls(loop, session, "n > 0")[0]
    finally:
        loop.run_until_complete(session.close())
    assert flood.status == "truncated" and len(flood.stdout) == CONFIG.output_bytes
    assert wall < CONFIG.timeout_s  # stopped at the cap, not at the time limit
    assert (after.stdout, after.state_lost) == ("True\n", False)


def test_processes_a_call_starts_end_with_the_call(loop, pool) -> None:
    session = opened(loop, pool)
    try:
        calls(loop, session, "x = 1")
        live = settle(pool, resting(pool) + 1)
        results = calls(loop, session, "import subprocess, os\nsubprocess.Popen(['sleep', '60'])\n"
                                       "subprocess.Popen(['sleep', '60'], start_new_session=True)\n"
                                       "if os.fork() == 0:\n    os.setsid()\n    import time\n    time.sleep(60)\n"
                                       "print('started')", "x")
        after_call = settle(pool, live)
    finally:
        loop.run_until_complete(session.close())
    assert live == resting(pool) + 1  # an idle session is one process
    assert [(r.status, r.stdout) for r in results] == [("ok", "started\n"), ("ok", "1\n")]
    assert after_call == live


def test_alarms_of_a_call_do_not_fire_into_the_idle_session(loop, pool) -> None:
    session = opened(loop, pool)
    try:
        first = calls(loop, session, "import signal\ndef ring(*args):\n    raise RuntimeError('ring')\n"
                                     "signal.signal(signal.SIGALRM, ring)\nsignal.alarm(1)\nz = 5")
        time.sleep(1.5)  # idle past the alarm: raised between calls, it would end the session's loop
        second = calls(loop, session, "z")
    finally:
        loop.run_until_complete(session.close())
    assert [(r.status, r.stdout, r.state_lost) for r in first + second] == [("ok", "", False), ("ok", "5\n", False)]


def test_signal_settings_of_a_call_are_undone_after_it(loop, pool) -> None:
    session = opened(loop, pool)
    try:
        results = calls(loop, session, "import signal, subprocess\ndef boom(*args):\n    raise RuntimeError('boom')\n"
                                       "signal.signal(signal.SIGCHLD, boom)\nsignal.pthread_sigmask(signal.SIG_BLOCK, "
                                       "[signal.SIGINT])\nsubprocess.Popen(['sleep', '60'])\nq = 3",
                        "while True:\n    q += 1", "q > 3")
    finally:
        loop.run_until_complete(session.close())
    # The child killed after the first call would have run the raising handler in the runner; the blocked SIGINT
    # would have turned the second call's interrupt into a kill.
    assert [(r.status, r.state_lost) for r in results] == [("ok", False), ("timeout", False), ("ok", False)]
    assert results[2].stdout == "True\n"


def test_the_session_has_the_snippets_isolation(loop, pool) -> None:
    os.environ["SOLVER_TEST_SECRET"] = "hunter2"
    session = opened(loop, pool)
    try:
        results = calls(loop, session, "import os, socket\nprint('SOLVER_TEST_SECRET' in os.environ, os.getpid())",
                        "input()", "socket.socket()", "x = bytearray(2 * 1024**3)", "print('still here')")
    finally:
        del os.environ["SOLVER_TEST_SECRET"]
        loop.run_until_complete(session.close())
    isolation = pool.isolation
    assert isolation is not None
    assert results[0].stdout == ("False 1\n" if isolation.pid_namespace else results[0].stdout)
    assert results[0].stdout.startswith("False ")
    assert results[1].status == "error" and "EOFError" in results[1].stderr
    if isolation.seccomp:
        assert results[2].status == "error" and "PermissionError" in results[2].stderr
    assert results[3].status == "memory" and not results[3].state_lost
    assert results[4].stdout == "still here\n"


def test_cancelling_the_caller_interrupts_the_call_and_keeps_the_session(loop, pool) -> None:
    session = opened(loop, pool)

    async def scenario() -> Execution:
        await session.run("w = 9")
        task = asyncio.ensure_future(session.run("import time\ntime.sleep(60)", timeout_s=30))
        await asyncio.sleep(0.3)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await session.run("w")

    try:
        after = loop.run_until_complete(asyncio.wait_for(scenario(), 20))
    finally:
        loop.run_until_complete(session.close())
    assert (after.status, after.stdout, after.state_lost) == ("ok", "9\n", False)


def test_close_kills_the_session_and_leaves_no_process(loop, pool) -> None:
    session = opened(loop, pool)
    base = settle(pool, resting(pool))
    pid = int(calls(loop, session, "import subprocess\nkeep = 1\n" + HOST_PID)[0].stdout)
    assert psutil.pid_exists(pid) and settle(pool, base + 1) == base + 1
    loop.run_until_complete(session.close())
    loop.run_until_complete(session.close())  # idempotent
    assert not _alive(pid)  # close() returns once the template has reaped the session's tree
    assert settle(pool, base) == base
    closed = calls(loop, session, "keep")[0]
    assert (closed.status, closed.stderr) == ("cancelled", "the session is closed")


def test_close_during_a_call_ends_it(loop, pool) -> None:
    session = opened(loop, pool)

    async def scenario() -> Execution:
        task = asyncio.ensure_future(session.run("import time\ntime.sleep(60)", timeout_s=30))
        await asyncio.sleep(0.3)
        await session.close()
        return await task

    base = settle(pool, resting(pool))
    result = loop.run_until_complete(asyncio.wait_for(scenario(), 20))
    assert result.status == "killed"
    assert settle(pool, base) == base


def test_idle_sessions_hold_no_worker_slot(loop) -> None:
    sandbox = ProcessPoolSandbox(SandboxConfig(workers=1, timeout_s=5.0), namespaces=NAMESPACES)

    async def scenario() -> tuple[list[str], list[tuple[float, float]]]:
        sessions = [await sandbox.session() for _ in range(3)]
        first = [await s.run(f"mine = {i}") for i, s in enumerate(sessions)]
        code = "import time\nstart = time.time()\ntime.sleep(0.3)\nprint(mine, start, time.time())"
        results = await asyncio.gather(*(s.run(code) for s in sessions), sandbox.run("print('one-off')"))
        for s in sessions:
            await s.close()
        spans = [tuple(map(float, r.stdout.split()[1:])) for r in results[:3]]
        return [r.status for r in first + list(results)] + [r.stdout.split()[0] for r in results], spans

    try:
        statuses, spans = loop.run_until_complete(asyncio.wait_for(scenario(), 30))
    finally:
        loop.run_until_complete(sandbox.close())
    assert statuses[:7] == ["ok"] * 7
    assert statuses[7:] == ["0", "1", "2", "one-off"]
    most = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert most == 1  # one worker: the three calls ran one after another, with the one-off in between


def test_live_sessions_are_capped(loop) -> None:
    sandbox = ProcessPoolSandbox(SandboxConfig(workers=1), max_sessions=2, namespaces=NAMESPACES)

    async def scenario() -> tuple[bool, str]:
        first, second = await sandbox.session(), await sandbox.session()
        await first.run("x = 1")
        waiting = asyncio.ensure_future(sandbox.session())
        await asyncio.sleep(0.3)
        blocked = not waiting.done()
        await first.close()
        third = await asyncio.wait_for(waiting, 5)
        result = await third.run("print('third')")
        await second.close()
        await third.close()
        return blocked, result.stdout

    try:
        blocked, stdout = loop.run_until_complete(asyncio.wait_for(scenario(), 30))
    finally:
        loop.run_until_complete(sandbox.close())
    assert blocked and stdout == "third\n"
    with pytest.raises(ValueError, match="max_sessions"):
        ProcessPoolSandbox(SandboxConfig(), max_sessions=0)


def test_closing_the_pool_ends_its_sessions(loop) -> None:
    sandbox = ProcessPoolSandbox(SandboxConfig(workers=1, timeout_s=30.0), namespaces=NAMESPACES)

    async def scenario() -> tuple[Execution, Execution, Execution]:
        idle, busy = await sandbox.session(), await sandbox.session()
        await idle.run("x = 1")
        task = asyncio.ensure_future(busy.run("import time\ntime.sleep(60)"))
        await asyncio.sleep(0.3)
        await sandbox.close()
        late = await sandbox.session()
        return await task, await idle.run("x"), await late.run("1")

    busy, idle, late = loop.run_until_complete(asyncio.wait_for(scenario(), 30))
    assert busy.status == "cancelled"
    assert idle.status == "cancelled" and late.status == "cancelled"
    assert sandbox.pids() == set()


def test_a_dead_template_loses_the_sessions_state_once(loop) -> None:
    sandbox = ProcessPoolSandbox(SandboxConfig(workers=1, timeout_s=10.0), namespaces=NAMESPACES)

    async def scenario() -> list[Execution]:
        session = await sandbox.session()
        await session.run("x = 1")
        os.kill(min(sandbox.pids()), signal.SIGKILL)  # the oldest process: the template (or its supervisor)
        await asyncio.sleep(0.3)
        results = [await session.run(code) for code in ("print('x' in globals())", "y = 2", "y")]
        await session.close()
        return results

    try:
        results = loop.run_until_complete(asyncio.wait_for(scenario(), 30))
    finally:
        loop.run_until_complete(sandbox.close())
    assert [(r.status, r.stdout, r.state_lost) for r in results] == [
        ("ok", "False\n", True), ("ok", "", False), ("ok", "2\n", False)]


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
