"""Stateful sessions shown as an IPython kernel shows them (``sandbox.display: ipython``): IPython's display of the
last expression, Plain tracebacks of ``Cell In[N]`` numbered by the execution count (the starter cell is In[1]),
the starter cell, and the timeout policy (interrupt and keep the state; kill only past the grace period)."""

from __future__ import annotations

import dataclasses
import time

import pytest
from IPython.lib.pretty import pretty

from solver.config import ConfigError, SandboxConfig, load_config
from solver.dialects.output import OutputStyle, describe_execution
from solver.sandbox.pool import ProcessPoolSandbox, SandboxError

PRESET = load_config("h100-gptoss")
STYLE = OutputStyle.from_config(PRESET.prompt)
# The preset's sandbox with short limits: the harness's starter cell and display, a 1 s limit, 0.5 s of grace.
CONFIG = dataclasses.replace(PRESET.sandbox, workers=2, timeout_s=1.0, interrupt_grace_s=0.5, memory_mb=512)
SLACK_S = 0.35  # the pool answers within 0.25 s of its limit; a loaded machine adds scheduling delay


@pytest.fixture(scope="module")
def pool_options() -> dict:
    """The shared ``pool`` (tests/conftest.py); its interrupt grace comes from the config."""
    return {"config": CONFIG}


def run_calls(loop, pool, *codes: str, timeout_s: float | None = None) -> list:
    session = loop.run_until_complete(pool.session())
    try:
        return [loop.run_until_complete(session.run(code, timeout_s=timeout_s)) for code in codes]
    finally:
        loop.run_until_complete(session.close())


def test_the_gptoss_preset_runs_sessions_as_the_harness_kernels():
    sandbox = PRESET.sandbox
    assert (sandbox.code_mode, sandbox.display, sandbox.interrupt_grace_s) == ("stateful", "ipython", 2.0)
    # tonghuikang/aimo3 notebook.py, starter_code: run in each kernel before the first call
    assert sandbox.starter_code == ("\nimport random\nimport numpy as np\nimport sympy as sp\nrandom.seed(42)\n"
                                    "np.random.seed(42)\n")


def test_values_are_shown_by_ipythons_display_formatter(loop, pool):
    results = run_calls(loop, pool,
                        "from collections import defaultdict\nd = defaultdict(list)\nd[3].append(1)\nd",
                        "list(range(40))",
                        "x = 1",  # the last statement is not an expression
                        "None",
                        "x;",  # a trailing semicolon silences the value
                        "x + 1\ny = 2",
                        "print('a')\nx + 1",
                        "display(sp.Rational(1, 3))\nsp.sqrt(8)",
                        "{'k': [1, 2]}")
    assert [r.status for r in results] == ["ok"] * len(results)
    assert [r.stdout for r in results] == [
        "defaultdict(list, {3: [1]})\n", pretty(list(range(40))) + "\n", "", "", "", "", "a\n2\n", "1/3\n2*sqrt(2)\n",
        "{'k': [1, 2]}\n"]
    assert results[1].stdout.startswith("[0,\n 1,\n 2,\n")  # wrapped one item a line, as IPython wraps it
    assert describe_execution(results[2], STYLE) == STYLE.empty  # the harness's [WARN] for an empty output


def test_tracebacks_are_ipythons_plain_ones_numbered_like_a_kernels_cells(loop, pool):
    results = run_calls(loop, pool, "def g(n):\n    return 1 / n", "g(0)", "def f(:", "math.sqrt(2)")
    assert [r.status for r in results] == ["ok", "error", "error", "error"]
    # The starter cell is In[1], so the model's first call is In[2], as in the recorded tracebacks (the first call
    # of every real attempt that failed says "Cell In[2]").
    assert results[1].stderr == ("Traceback (most recent call last):\n\n  Cell In[3], line 1\n    g(0)\n\n"
                                 "  Cell In[2], line 2 in g\n    return 1 / n\n\nZeroDivisionError: division by zero\n")
    assert results[2].stderr == "  Cell In[4], line 1\n    def f(:\n          ^\nSyntaxError: invalid syntax\n"
    # A kernel's namespace: the preamble's modules are warm, its names are not defined (the recorded attempts
    # got "NameError: name 'math' is not defined" 6 times).
    assert results[3].stderr.endswith("NameError: name 'math' is not defined\n")
    shown = describe_execution(results[1], STYLE)
    assert shown == results[1].stderr and "worker" not in shown


def test_a_recursion_error_is_shown_whole_and_cut_as_the_harness_cut_it(loop, pool):
    """IPython's Plain traceback lists every frame; the preset keeps up to 1 MB, so the cut text ends in the
    exception line, as the 3 recorded RecursionError outputs do (each 10,011 characters)."""
    result = run_calls(loop, pool, "def f(n):\n    return f(n + 1)", "f(0)")[1]
    assert result.status == "error" and result.stderr.count("  Cell In[2], line 2 in f\n") > 900
    shown = describe_execution(result, STYLE)
    assert len(shown) == 10_011 and shown[5000:5011] == "(truncated)"
    assert shown.endswith("  Cell In[2], line 2 in f\n    return f(n + 1)\n\nRecursionError: maximum recursion depth "
                          "exceeded\n")


def test_the_starter_cell_ran_first_with_its_seeds(loop, pool):
    result = run_calls(loop, pool, "random.random(), float(np.random.rand())")[0]
    # What a kernel gives after random.seed(42) and np.random.seed(42).
    assert result.stdout == "(0.6394267984578837, 0.3745401188473625)\n"


def test_the_starter_cells_output_is_not_shown_and_a_failing_one_stops_the_start(loop):
    async def first_call(starter: str) -> tuple[str, str]:
        sandbox = ProcessPoolSandbox(dataclasses.replace(CONFIG, workers=1, starter_code=starter))
        try:
            session = await sandbox.session()
            result = await session.run("seeded")
            await session.close()
            return result.stdout, result.stderr
        finally:
            await sandbox.close()

    assert loop.run_until_complete(first_call("print('hidden')\nseeded = 7")) == ("7\n", "")
    with pytest.raises(SandboxError, match="starter cell failed: ModuleNotFoundError") as info:
        loop.run_until_complete(ProcessPoolSandbox(dataclasses.replace(
            CONFIG, starter_code="import no_such_module_here")).start())
    assert "\n" not in str(info.value)


def test_an_interrupted_call_shows_the_kernels_keyboard_interrupt_and_keeps_the_state(loop, pool):
    began = time.monotonic()
    results = run_calls(loop, pool, "total = 0", "while True:\n    total += 1", "total > 0")
    stopped = results[1]
    assert stopped.status == "timeout" and not stopped.state_lost
    assert CONFIG.timeout_s <= stopped.duration_s < CONFIG.timeout_s + SLACK_S
    assert stopped.stderr.startswith("Traceback (most recent call last):\n\n  Cell In[3], line ")
    assert stopped.stderr.endswith("\n\nKeyboardInterrupt\n") and "session.py" not in stopped.stderr
    assert describe_execution(stopped, STYLE).endswith("KeyboardInterrupt\n[TIMEOUT] Execution interrupted.")
    assert (results[2].status, results[2].stdout, results[2].state_lost) == ("ok", "True\n", False)
    assert time.monotonic() - began < 10


def test_code_that_returns_within_the_grace_period_keeps_the_state(loop, pool):
    """C code that does not return to the interpreter for a while after the limit (here: SIGINT blocked) takes
    the interrupt when it returns; within the grace period the state is kept."""
    late = ("import signal, time\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})\ntime.sleep(1.25)\n"
            "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})\nprint('not reached')")
    results = run_calls(loop, pool, "kept = 5", late, "kept")
    assert results[1].status == "timeout" and not results[1].state_lost
    assert "not reached" not in results[1].stdout and results[1].stderr.endswith("KeyboardInterrupt\n")
    assert (results[2].stdout, results[2].state_lost) == ("5\n", False)


def test_a_call_that_ignores_the_interrupt_is_killed_after_the_grace_and_the_session_restarts(loop, pool):
    stuck = "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass"
    results = run_calls(loop, pool, "kept = 5", stuck, "'kept' in dir()", "random.random()", "1 / 0")
    killed = results[1]
    assert killed.status == "timeout" and killed.state_lost
    grace = CONFIG.interrupt_grace_s  # from the config: the pool was given no other
    assert CONFIG.timeout_s + grace - 0.05 <= killed.duration_s < CONFIG.timeout_s + grace + SLACK_S
    assert describe_execution(killed, STYLE).endswith(STYLE.restarted)
    # A new process: the starter ran again (In[1]), earlier names are gone, cells count from In[2] again.
    assert [r.stdout for r in results[2:4]] == ["False\n", "0.6394267984578837\n"]
    assert not any(r.state_lost for r in results[2:])
    assert "Cell In[4], line 1" in results[4].stderr


@pytest.mark.parametrize("overrides, message", [
    ({"sandbox.display": "ipython"}, "sandbox.display ipython shows stateful sessions"),
    ({"sandbox.display": "kernel", "sandbox.code_mode": "stateful"}, "sandbox.display must be one of repr, ipython"),
    ({"sandbox.interrupt_grace_s": -1}, "sandbox.interrupt_grace_s must be >= 0"),
])
def test_bad_display_settings_are_one_line_errors(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_config("tiny", overrides=overrides)


def test_one_off_snippets_keep_their_runner_beside_kernel_sessions(loop, pool):
    result = loop.run_until_complete(pool.run("import math\nx = [1] * 40\nx[:3]"))
    assert (result.status, result.stdout) == ("ok", "[1, 1, 1]\n")
    assert SandboxConfig().display == "repr"
