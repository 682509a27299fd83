"""Ordinary behaviour of the sandbox pool: statuses, output, REPL semantics, limits, queueing, cancellation."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from solver.config import ConfigError, SandboxConfig
from solver.loop.repetition import compose_program
from solver.sandbox.pool import (SANDBOXES, ProcessPoolSandbox, SandboxError, create_sandbox,
                            default_workers)

CONFIG = SandboxConfig(workers=1, timeout_s=2.0, memory_mb=512, output_bytes=1000)


@pytest.fixture(scope="module")
def pool_options() -> dict:
    """The shared ``pool`` (tests/conftest.py) with this module's limits."""
    return {"config": CONFIG}


def run(loop: asyncio.AbstractEventLoop, pool: ProcessPoolSandbox, code: str, **kwargs: float):
    return loop.run_until_complete(pool.run(code, **kwargs))


def test_printed_output_is_the_result(loop, pool) -> None:
    result = run(loop, pool, "print(6 * 7)\nprint('done')")
    assert (result.status, result.stdout, result.stderr) == ("ok", "42\ndone\n", "")
    assert result.code == "print(6 * 7)\nprint('done')"
    assert 0 < result.duration_s < 1


def test_preamble_names_are_ready(loop, pool) -> None:
    result = run(loop, pool, "x = sp.symbols('x')\nprint(sp.factor(x**2 - 1), int(np.arange(5).sum()), math.pi > 3)")
    assert result.stdout == "(x - 1)*(x + 1) 10 True\n"


def test_final_bare_expression_is_shown_like_a_repl(loop, pool) -> None:
    assert run(loop, pool, "x = 20\nx + 22").stdout == "42\n"
    assert run(loop, pool, "'text'").stdout == "'text'\n"  # repr, as a REPL shows it
    assert run(loop, pool, "print('a')").stdout == "a\n"  # print returns None: nothing more
    assert run(loop, pool, "None").stdout == ""
    assert run(loop, pool, "for i in range(2):\n    i").stdout == ""  # only a top-level final expression


def test_repl_can_be_turned_off(loop) -> None:
    sandbox = ProcessPoolSandbox(SandboxConfig(workers=1, repl=False))
    try:
        assert loop.run_until_complete(sandbox.run("1 + 1")).stdout == ""
    finally:
        loop.run_until_complete(sandbox.close())


def test_exception_is_an_error_with_the_users_traceback(loop, pool) -> None:
    result = run(loop, pool, "a = 1\nb = a / 0")
    assert result.status == "error"
    assert 'File "<snippet>", line 2, in <module>' in result.stderr
    assert result.stderr.rstrip().endswith("ZeroDivisionError: division by zero")
    assert "worker.py" not in result.stderr  # the runner's own frames are not shown


def test_syntax_error_is_an_error(loop, pool) -> None:
    result = run(loop, pool, "def f(:\n    pass")
    assert result.status == "error" and "SyntaxError" in result.stderr


def test_exit_codes(loop, pool) -> None:
    assert run(loop, pool, "import sys\nprint('x')\nsys.exit()").status == "ok"
    assert run(loop, pool, "import sys\nsys.exit(2)").status == "error"
    failed = run(loop, pool, "raise SystemExit('no solution')")
    assert failed.status == "error" and "no solution" in failed.stderr


def test_wall_time_limit(loop, pool) -> None:
    began = time.monotonic()
    result = run(loop, pool, "print('started', flush=True)\nwhile True:\n    pass", timeout_s=0.5)
    wall = time.monotonic() - began
    assert result.status == "timeout" and result.stdout == "started\n"
    assert 0.5 <= wall < 1.0


def test_default_timeout_comes_from_the_config(loop, pool) -> None:
    began = time.monotonic()
    assert run(loop, pool, "import time\ntime.sleep(10)").status == "timeout"
    assert CONFIG.timeout_s <= time.monotonic() - began < CONFIG.timeout_s + 0.5


def test_memory_limit(loop, pool) -> None:
    result = run(loop, pool, "x = bytearray(2 * 1024**3)")
    assert result.status == "memory" and "MemoryError" in result.stderr


def test_output_is_capped_while_it_streams(loop, pool) -> None:
    began = time.monotonic()
    result = run(loop, pool, "while True:\n    print('0123456789')")
    assert result.status == "truncated"
    assert len(result.stdout) == CONFIG.output_bytes and result.stdout.startswith("0123456789\n")
    assert time.monotonic() - began < 1.0  # stopped at the cap, not at the time limit


def test_output_at_the_cap_is_not_truncated(loop, pool) -> None:
    result = run(loop, pool, f"print('x' * {CONFIG.output_bytes - 1})")
    assert result.status == "ok" and len(result.stdout) == CONFIG.output_bytes


def test_the_original_streams_are_the_snippets_streams_too(loop, pool) -> None:
    result = run(loop, pool, "import sys\nn = sys.__stdout__.write('out\\n')\nn = sys.__stderr__.write('err\\n')")
    assert (result.stdout, result.stderr) == ("out\n", "err\n")


def test_text_is_decoded_and_bad_bytes_replaced(loop, pool) -> None:
    code = "print('π ≈ 3.14159')\nimport sys\nsys.stdout.flush()\nn = sys.stdout.buffer.write(b'\\xff\\n')"
    result = run(loop, pool, code)
    assert result.stdout == "π ≈ 3.14159\n\ufffd\n"


def test_each_snippet_starts_from_the_same_clean_state(loop, pool) -> None:
    dirty = "import sys\nx = 5\nnp.pi = 3\nsys.modules.pop('fractions')\nopen('scratch.txt', 'w').write('left')"
    assert run(loop, pool, dirty).status == "ok"
    clean = run(loop, pool, "import os, sys\nprint('x' in globals(), np.pi > 3.1, 'fractions' in sys.modules, "
                            "os.path.exists('scratch.txt'))")
    assert clean.stdout == "False True True False\n"


def test_working_directory_is_private_and_writable(loop, pool) -> None:
    result = run(loop, pool, "import os, tempfile\nopen('a.txt', 'w').write('hi')\n"
                             "print(open('a.txt').read(), os.listdir('.'), tempfile.gettempdir() == os.getcwd())")
    assert result.stdout == "hi ['a.txt'] True\n"


def test_environment_is_scrubbed(loop, pool) -> None:
    os.environ["SOLVER_TEST_SECRET"] = "hunter2"
    try:
        result = run(loop, pool, "import os\nprint(sorted(os.environ))")
    finally:
        del os.environ["SOLVER_TEST_SECRET"]
    assert "SOLVER_TEST_SECRET" not in result.stdout and "HOME" in result.stdout


def test_stdin_is_empty(loop, pool) -> None:
    result = run(loop, pool, "input('number? ')")
    assert result.status == "error" and "EOFError" in result.stderr


def test_set_printing_order_is_the_same_in_every_pool(loop, pool) -> None:
    code = "print({'alpha', 'beta', 'gamma', 'delta'})"
    other = ProcessPoolSandbox(CONFIG)
    try:
        assert run(loop, pool, code).stdout == run(loop, other, code).stdout
    finally:
        loop.run_until_complete(other.close())


def test_accumulate_mode_reruns_earlier_blocks_silently(loop, pool) -> None:
    earlier = ["def f(n):\n    return n * n", "print('first output')\ny = f(3)"]
    result = run(loop, pool, compose_program(earlier, "print(f(y))", "accumulate"))
    assert (result.status, result.stdout) == ("ok", "81\n")
    assert run(loop, pool, compose_program(earlier, "f(4)", "accumulate")).stdout == "16\n"  # REPL still applies


def test_at_most_workers_run_at_once_and_the_rest_queue(loop) -> None:
    sandbox = ProcessPoolSandbox(SandboxConfig(workers=2, timeout_s=5.0))

    async def batch():
        await sandbox.start()
        code = "import time\nstart = time.time()\ntime.sleep(0.4)\nprint(start, time.time())"
        return await asyncio.gather(*(sandbox.run(code) for _ in range(5)))

    try:
        results = loop.run_until_complete(batch())
    finally:
        loop.run_until_complete(sandbox.close())
    spans = [tuple(map(float, r.stdout.split())) for r in results]
    assert all(r.status == "ok" for r in results)
    most = max(sum(1 for s, e in spans if s <= t < e) for t, _ in spans)
    assert most == 2


def test_the_event_loop_keeps_running_while_snippets_run(loop, pool) -> None:
    async def scenario() -> tuple[str, int]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        task = asyncio.ensure_future(ticker())
        result = await pool.run("while True:\n    pass", timeout_s=0.5)
        task.cancel()
        return result.status, ticks

    status, ticks = loop.run_until_complete(scenario())
    assert status == "timeout" and ticks >= 25  # ~50 expected in 0.5 s


def test_cancelling_the_caller_kills_the_snippet_and_skips_the_queue(loop) -> None:
    sandbox = ProcessPoolSandbox(SandboxConfig(workers=1, timeout_s=30.0))

    async def scenario() -> tuple[int, int, float]:
        await sandbox.start()
        resting = len(sandbox.pids())
        running = asyncio.ensure_future(sandbox.run("import subprocess, time\n"
                                                    "subprocess.Popen(['sleep', '60'])\ntime.sleep(60)"))
        queued = asyncio.ensure_future(sandbox.run("print('never')"))
        while len(sandbox.pids()) < resting + 2:  # the snippet and its child are up
            await asyncio.sleep(0.01)
        began = time.monotonic()
        running.cancel()
        queued.cancel()
        for task in (running, queued):
            with pytest.raises(asyncio.CancelledError):
                await task
        while len(sandbox.pids()) > resting:
            await asyncio.sleep(0.01)
        gone_after = time.monotonic() - began
        after = await sandbox.run("print('next')")
        assert after.stdout == "next\n"
        return sandbox.dispatched, resting, gone_after

    try:
        dispatched, _resting, gone_after = loop.run_until_complete(asyncio.wait_for(scenario(), 20))
    finally:
        loop.run_until_complete(sandbox.close())
    assert dispatched == 2  # the running snippet and "next": the queued one never reached the template
    assert gone_after < 1.0


def test_close_cancels_running_and_queued_snippets(loop) -> None:
    sandbox = ProcessPoolSandbox(SandboxConfig(workers=1, timeout_s=30.0))

    async def scenario():
        await sandbox.start()
        tasks = [asyncio.ensure_future(sandbox.run("import time\ntime.sleep(60)")) for _ in range(2)]
        await asyncio.sleep(0.3)
        await sandbox.close()
        await sandbox.close()  # idempotent
        results = await asyncio.gather(*tasks)
        return results, await sandbox.run("print(1)")

    results, after = loop.run_until_complete(asyncio.wait_for(scenario(), 20))
    assert [r.status for r in results] == ["cancelled", "cancelled"]
    assert after.status == "cancelled"
    assert sandbox.pids() == set()


def test_a_dead_template_fails_its_snippets_and_is_replaced(loop) -> None:
    sandbox = ProcessPoolSandbox(SandboxConfig(workers=1, timeout_s=10.0))

    async def scenario():
        await sandbox.start()
        first = sorted(sandbox.pids())
        task = asyncio.ensure_future(sandbox.run("import time\ntime.sleep(60)"))
        await asyncio.sleep(0.3)
        os.kill(first[0], 9)  # the oldest process: the template (or its supervisor)
        lost = await task
        return lost, await sandbox.run("print('again')")

    try:
        lost, again = loop.run_until_complete(asyncio.wait_for(scenario(), 30))
    finally:
        loop.run_until_complete(sandbox.close())
    assert lost.status == "killed" and "template" in lost.stderr
    assert (again.status, again.stdout) == ("ok", "again\n")


def test_a_pool_moves_to_a_new_event_loop() -> None:
    sandbox = ProcessPoolSandbox(SandboxConfig(workers=1))
    first = asyncio.run(sandbox.run("print('one')"))
    old = sandbox.pids()
    second = asyncio.run(sandbox.run("print('two')"))
    assert (first.stdout, second.stdout) == ("one\n", "two\n")
    assert not old & sandbox.pids()  # the first loop's template was replaced
    asyncio.run(sandbox.close())
    assert sandbox.pids() == set()


def test_start_is_idempotent(loop, pool) -> None:
    before = pool.pids()
    loop.run_until_complete(pool.start())
    assert pool.pids() == before


def test_a_broken_preamble_fails_start_with_one_line(loop) -> None:
    sandbox = ProcessPoolSandbox(SandboxConfig(preamble="import no_such_module_here\n"))
    try:
        with pytest.raises(SandboxError, match="No module named 'no_such_module_here'") as info:
            loop.run_until_complete(sandbox.start())
        assert "\n" not in str(info.value)
        result = loop.run_until_complete(sandbox.run("print(1)"))
        assert result.status == "error" and "no_such_module_here" in result.stderr
    finally:
        loop.run_until_complete(sandbox.close())


def test_isolation_is_reported(pool) -> None:
    isolation = pool.isolation
    assert isolation is not None
    if os.geteuid() == 0 and isolation.pid_namespace:
        assert isolation.signals_contained


def test_registry_and_defaults() -> None:
    assert isinstance(create_sandbox(SandboxConfig()), ProcessPoolSandbox)
    assert "pool" in SANDBOXES.names()
    with pytest.raises(ConfigError, match="unknown sandbox 'nope'"):
        create_sandbox(SandboxConfig(name="nope"))
    assert default_workers() == max(1, len(os.sched_getaffinity(0)) - 1)
    assert ProcessPoolSandbox(SandboxConfig(workers=0)).workers == default_workers()


def test_the_template_imports_nothing_of_the_solver(loop, pool) -> None:
    result = run(loop, pool, "import sys\nprint(sorted(m for m in sys.modules if m.split('.')[0] == 'solver'))")
    assert (result.status, result.stdout) == ("ok", "[]\n")  # snippets are forks of the template


def test_the_template_imports_ipython_only_for_the_ipython_display(loop, pool) -> None:
    result = run(loop, pool, "import sys\nprint('IPython' in sys.modules)")
    assert (result.status, result.stdout) == ("ok", "False\n")  # this pool's sessions use the repr runner


def test_the_worker_package_imports_the_standard_library_and_itself_only() -> None:
    """And IPython in ``kernel.py``, the ``ipython`` display's runner, which only that display imports."""
    import ast
    import sys
    from pathlib import Path

    import solver.sandbox.worker as worker

    for path in sorted(Path(worker.__file__).parent.glob("*.py")):
        allowed = sys.stdlib_module_names | {"__future__"} | ({"IPython", "traitlets"} if path.name == "kernel.py"
                                                             else set())
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 0:
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            else:
                continue  # relative imports stay inside the package
            for name in names:
                assert name.split(".")[0] in allowed, (path.name, name)


@pytest.mark.parametrize("cores,busy,workers", [(16, None, 15), (16, 4, 4), (16, 64, 15), (2, 8, 1), (1, 0, 1)])
def test_default_workers_is_usable_cores_minus_one_bounded_by_the_busy_repetitions(monkeypatch, cores, busy, workers):
    # os.sched_getaffinity is replaced by a double: this machine has 2 cores, and the rule matters on many.
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(cores)))
    assert default_workers(busy) == workers


def test_sandbox_default_workers_follow_the_engine_batch_and_fixed_workers(monkeypatch):
    """sandbox.workers: 0 on 16 cores: no more snippet workers than repetitions the engine can keep generating."""
    from solver.config import load_config, repetitions_busy

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(16)))  # a double for a 16-core machine
    cases = [({"solve.workers": 4}, 4),  # 4 repetitions in flight need 4 workers at most
             ({"solve.workers": 4, "solve.parallel_problems": 3}, 12),
             ({"solve.workers": 0, "engine.args.max_num_seqs": 2, "engine.args.data_parallel_size": 3}, 6),
             ({"solve.workers": 0, "engine.args.max_num_seqs": 64}, 15),  # cores bound it
             ({"solve.workers": 4, "sandbox.workers": 9}, 9)]  # an explicit count wins
    for overrides, workers in cases:
        config = load_config("tiny", overrides=overrides)
        assert create_sandbox(config.sandbox, busy=repetitions_busy(config)).workers == workers, overrides
