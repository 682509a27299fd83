"""What the model is shown for a code run: the plain style's rules, and the jupyter style read back from every tool
message of the real gpt-oss attempts (the recording harness's own text) to the same text."""

from __future__ import annotations

import collections

import pytest

from solver.config import ConfigError, load_config
from solver.dialects.output import OutputStyle, describe_execution, execution_from_shown
from solver.types import Execution


@pytest.fixture(scope="module")
def harness_style() -> OutputStyle:
    return OutputStyle.from_config(load_config("h100-gptoss").prompt)


def test_the_gptoss_preset_shows_outputs_as_the_aimo3_harness_did(harness_style):
    assert harness_style.style == "jupyter" and harness_style.max_chars == 12_000
    assert harness_style.empty.startswith("[WARN] No output available.")
    long = "x" * 12_001
    shown = describe_execution(Execution("print(...)", "ok", long, "", 0.1), harness_style)
    assert shown == "x" * 5000 + "(truncated)" + "x" * 5000


def test_every_recorded_tool_output_reads_back_to_the_same_text(real_attempts, harness_style):
    outputs = [(r.tool_output, a.problem_id) for a in real_attempts for r in a.requests if r.tool_output is not None]
    statuses: collections.Counter[str] = collections.Counter()
    for shown, pid in outputs:
        execution = execution_from_shown("code", shown, harness_style)
        assert describe_execution(execution, harness_style) == shown, (pid, shown[:200])
        statuses[execution.status] += 1
    # 85 interrupted at the harness's 120 s limit, 235 tracebacks and syntax errors, the rest ran.
    assert statuses["timeout"] == 85 and statuses["error"] == 235 and sum(statuses.values()) == 10_123


def test_plain_style_keeps_its_rules():
    assert describe_execution(Execution("x", "ok", "42\n\n", "", 0.0)) == "42"
    error = Execution("x", "error", "partial\n", "Traceback\n a\n b\n c\nValueError: no\n", 0.0)
    assert describe_execution(error) == "partial\n a\n b\n c\nValueError: no"
    lost = Execution("x", "timeout", "", "", 6.0, state_lost=True)
    assert describe_execution(lost).splitlines() == ["TimeoutError: the code ran too long",
                                                     OutputStyle().restarted]


def test_a_jupyter_session_restart_is_said_after_the_output():
    style = OutputStyle("jupyter", 100, empty="(none)", timeout="[TIMEOUT]", restarted="[restarted]")
    lost = Execution("f()", "timeout", "1\n", "KeyboardInterrupt\n", 6.0, state_lost=True)
    assert describe_execution(lost, style) == "1\nKeyboardInterrupt\n[TIMEOUT]\n[restarted]"


def test_output_keep_beyond_half_the_limit_is_one_line():
    with pytest.raises(ConfigError, match="prompt.output_keep"):
        load_config("tiny", overrides={"prompt.output_chars": 100, "prompt.output_keep": 60})
