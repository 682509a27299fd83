"""The harmony dialect renders what the recording harness sent, token for token, on the real gpt-oss-120b attempts
(read from ../shared at run time; skipped with one line without it): every first prompt from its problem, every
tool message from the Execution its recorded text reads back to, every follow-up message."""

from __future__ import annotations

from dataclasses import replace

import pytest

from solver.config import load_config
from solver.dialects import TurnOutput, make_dialect
from solver.dialects.output import OutputStyle, execution_from_shown
from solver.types import Problem

# Follow-ups the harness sent where this dialect reads an answer: its integer test took the text up to the first
# "}" of the box (notebook.py, extract_boxed_text), ours reads the whole box (tests/dialects/test_harmony_answers.py).
HARNESS_MISSED = {("aimo3-q10-g0-g4M", 18), ("imo-2010-sl-c2-n16", 0), ("imo-2010-sl-c2-n16", 18)}


@pytest.fixture(scope="module")
def config():
    return load_config("h100-gptoss")


def turn_output(request) -> TurnOutput:
    """A recorded request as the loop hands it to the dialogue: the harness's cut (at the answer) is the loop's
    first-answer cut."""
    cut = request.end == "cut"
    return TurnOutput("", request.generated, "stop", stop_token=None if cut else request.generated[-1],
                      ended_by_loop=cut)


def test_every_first_prompt_renders_as_recorded(real_attempts, config):
    dialect = make_dialect(config, None)
    same = sum(dialect.start(Problem(a.problem_id, a.problem)).prompt().token_ids == a.prompt_ids
               for a in real_attempts)
    assert same == len(real_attempts) == 328


def test_the_library_default_tool_text_renders_another_prompt(real_attempts, config):
    default = make_dialect(config.replace({"prompt.tool_description": None}), None)
    prompt = default.start(Problem("p", real_attempts[0].problem)).prompt()
    assert prompt.token_ids != real_attempts[0].prompt_ids and "/mnt/data" in prompt.text


@pytest.mark.slow  # all 10,123 tool messages of the real attempts (~22 s)
def test_every_tool_message_and_follow_up_renders_as_recorded(real_attempts, config):
    """Each attempt driven through the dialogue as the loop drives it: the ids appended after each request are
    the recorded ones (tool messages from ``execution_from_shown``, follow-ups in the wording the recording used)."""
    style = OutputStyle.from_config(config.prompt)
    tools = follow_ups = 0
    missed = set()
    for attempt in real_attempts:
        texts = {r.follow_up for r in attempt.requests if r.follow_up is not None}
        cfg = config.replace({"prompt.follow_up": texts.pop()}) if texts else config
        dialogue = make_dialect(cfg, None).start(Problem(attempt.problem_id, attempt.problem))
        for k, request in enumerate(attempt.requests):
            before = len(dialogue.ids)
            out = turn_output(request)
            reading = dialogue.read(out)
            if request.end == "cut":
                assert not reading.goes_on
                break
            if request.follow_up is not None and not reading.goes_on:
                missed.add((attempt.problem_id, k))
                reading = replace(reading, goes_on=True)
            execution = None
            if request.tool_output is not None:
                assert reading.call is not None, (attempt.source, k)
                execution = execution_from_shown(reading.call, request.tool_output, style)
            else:
                assert reading.call is None and reading.goes_on, (attempt.source, k)
            dialogue.reply(out, reading, execution)
            assert tuple(dialogue.ids[before + len(request.generated):]) == request.appended, (attempt.source, k)
            tools += request.tool_output is not None
            follow_ups += request.follow_up is not None
        assert tuple(dialogue.ids) == attempt.prompt_of(len(attempt.requests) - 1)
    assert (tools, follow_ups) == (10_123, 39)
    assert missed == HARNESS_MISSED
