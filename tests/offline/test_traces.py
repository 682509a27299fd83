"""Real attempts cut into their requests: every id of every recorded completion lands in exactly one request or
appended part, in order, and the parts are what the recording says they are (tool messages, follow-ups, the cut)."""

from __future__ import annotations

import gzip
import json
import lzma
import statistics

import pytest

from solver.dialects.harmony import load_encoding
from solver.replay import TraceError, read_attempts
from solver.replay.traces import CALL, END, MESSAGE, RETURN, START


def test_harmony_special_ids_are_the_encodings_own():
    enc = load_encoding()
    named = {"<|start|>": START, "<|end|>": END, "<|message|>": MESSAGE, "<|return|>": RETURN, "<|call|>": CALL}
    assert {text: enc.encode(text, allowed_special="all") for text in named} == {t: [i] for t, i in named.items()}


def test_every_real_attempt_is_cut_into_requests_that_rebuild_its_completion(real_attempts_path, real_attempts):
    with lzma.open(real_attempts_path, "rt") as handle:
        raw = [json.loads(line) for line in handle]
    assert len(real_attempts) == len(raw) == 328
    for attempt, record in zip(real_attempts, raw):
        rebuilt = [i for r in attempt.requests for i in r.generated + r.appended]
        assert rebuilt == record["completion_ids"]
        assert attempt.prompt_ids == tuple(record["prompt_ids"])
        last = len(attempt.requests) - 1
        assert attempt.prompt_of(last) + attempt.requests[last].generated == tuple(record["prompt_ids"]
                                                                                   + record["completion_ids"])
        # Every request but the last ended on a stop token and was answered; the last was cut by the harness.
        assert [r.end for r in attempt.requests[:-1]] == [("call" if r.generated[-1] == CALL else "return")
                                                          for r in attempt.requests[:-1]]
        assert attempt.requests[-1].end == "cut" and attempt.requests[-1].appended == ()
        assert all(r.tool_output is not None or r.follow_up is not None for r in attempt.requests[:-1])


def test_real_attempts_have_the_shape_the_notes_measured(real_attempts):
    """Section 10 of the shared notes: median 31 tool calls and 39,101 generated tokens, contexts to 97,508;
    10,123 tool messages, 3 calls to no tool and 36 answerless returns answered by a follow-up."""
    calls = [sum(r.tool_output is not None for r in a.requests) for a in real_attempts]
    assert sum(calls) == 10_123 and statistics.median(calls) == 31
    assert statistics.median(a.generated_tokens for a in real_attempts) == 39_101
    assert max(a.context_tokens for a in real_attempts) == 97_508
    follow_ups = [r for a in real_attempts for r in a.requests if r.follow_up is not None]
    assert len(follow_ups) == 39 and sum(r.end == "return" for r in follow_ups) == 36
    outputs = [r.tool_output for a in real_attempts for r in a.requests if r.tool_output is not None]
    assert sum(o.endswith("\n") for o in outputs) == 9_713  # the rest are the harness's markers and tracebacks
    assert len({a.problem_id for a in real_attempts}) == 53


@pytest.mark.parametrize("content, message", [
    ('{"problem_id": "p", "problem": "x", "prompt_ids": [1], "completion_ids": "abc"}', "completion_ids must be"),
    ('{"problem_id": "p", "prompt_ids": [1], "completion_ids": [2]}', "no problem text"),
    ('{"problem_id": "p", "problem": "x", "text": "hello"}', "not a token trace"),
    ("not json", "not valid JSON"),
    ("", "no attempts"),
])
def test_a_bad_trace_file_is_one_line_naming_it(tmp_path, content, message):
    path = tmp_path / "t.jsonl.gz"
    with gzip.open(path, "wt") as handle:
        handle.write(content + "\n")
    with pytest.raises(TraceError, match=message) as info:
        read_attempts(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_a_damaged_compressed_file_is_one_line(tmp_path):
    path = tmp_path / "t.jsonl.xz"
    path.write_bytes(b"\xfd7zXZ\x00 not really xz")
    with pytest.raises(TraceError, match="cannot read") as info:
        read_attempts(path)
    assert "\n" not in str(info.value)
