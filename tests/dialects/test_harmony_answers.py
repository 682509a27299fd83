"""Where gpt-oss puts its answer, on the real gpt-oss-120b attempts (read from ../shared at run time; skipped with
one line without it): the rows name an attempt by its source and a request by its index, and say what the harmony
dialect (with the h100-gptoss answer rules) reads there. The recording harness cut every attempt at the token that
closed its first box holding an integer (tonghuikang/aimo3 notebook.py: the text of the first ``\\boxed{`` up to the
next ``}``, any non-negative integer); ``evaluation/harmony_answers.py`` prints the figures."""

from __future__ import annotations

import pytest

from solver.config import load_config
from solver.core.answers import extract_answers
from solver.dialects import TurnOutput, make_dialect
from solver.dialects.harmony import boxed_answers
from solver.types import Problem

# (attempt source under data/raw/, request index (-1: the last), the boxed answers read there, where the
# first-answer watch fires: "cut" = where the harness cut, "box" = at the box, in a request the harness let go on to
# its <|return|> (it asked for a follow-up), None = nowhere)
ROWS = [
    # the answer boxed in the analysis channel, no final message: the harness cut there, and so does the watch
    ("aimo3-15245/pmdthx/2edim1", -1, ["15245"], "cut"),
    # boxed in the final channel
    ("aimo3-15245/pmdthx/ibt0t7", -1, ["15245"], "cut"),
    # "\boxed{}" while planning how to answer: no answer, the request went on to a tool call
    ("aimo3-21818/1683zr/ez4fne", 7, [], None),
    ("aimo3-q10-g0-g265710644/9oev1l/tvdvk6", 69, [], None),
    # the harness read "5\pmod{99991" and asked for a boxed integer; the answer rules read the whole box: 5
    ("aimo3-q10-g0-g4M/n7mybv/8jiuu4", 18, ["5"], "box"),
    # "\boxed{M=2^{14}+1=16385}": the harness read "M=2^{14", the answer rules read 16385
    ("imo-2010-sl-c2-n16/qwd0f7/xlmolp", 0, ["16385"], "box"),
    ("imo-2010-sl-c2-n16/qwd0f7/y2b059", 18, ["16385"], "box"),
    # beyond the AIMO3 range 0..99999 (h100-gptoss answers.high): the harness took them, the answer rules do not
    ("aimo3-21818/1683zr/vjweku", -1, [], None),  # 121818, a modulus not applied
    ("imo-2011-sl-c1-n7/gqzvdk/cheurl", -1, [], None),  # 135135, the reference itself is out of range
    ("imo-2011-sl-c1-n7/gqzvdk/mrm4yx", -1, [], None),
    ("imo-2011-sl-c1-n7/gqzvdk/tzqvvj", -1, [], None),
]


@pytest.fixture(scope="module")
def dialect():
    return make_dialect(load_config("h100-gptoss"), None)


@pytest.fixture(scope="module")
def by_source(real_attempts):
    return {a.source.removeprefix("github.com/tonghuikang/aimo3 data/raw/").removesuffix("/action.json"): a
            for a in real_attempts}


def fired_at(dialect, problem, ids, piece: int = 16) -> int | None:
    """Ids streamed when the watch fired, fed ``piece`` at a time as the replay engine streams; None if never."""
    dialogue = dialect.start(problem)
    for start in range(0, len(ids), piece):
        chunk = tuple(ids[start: start + piece])
        if dialogue.watch("", chunk):
            return start + len(chunk)
    return None


@pytest.mark.parametrize("source, index, answers, fires", ROWS, ids=[f"{r[0]}#{r[1]}" for r in ROWS])
def test_answers_where_gptoss_put_them(dialect, by_source, source, index, answers, fires):
    attempt = by_source[source]
    request = attempt.requests[index]
    problem = Problem(attempt.problem_id, attempt.problem)
    cut = request.end == "cut"
    reading = dialect.start(problem).read(TurnOutput("", request.generated, "stop",
                                                     stop_token=None if cut else request.generated[-1],
                                                     ended_by_loop=cut))
    rules = load_config("h100-gptoss").answers
    assert [a.value for a in extract_answers(reading.answer_text, rules)] == answers
    at = fired_at(dialect, problem, request.generated)
    if fires is None:
        assert at is None
        return
    # It fires at the piece that completes the box.
    decode = dialect.encoding.decode
    assert at is not None and [a.value for a in boxed_answers(decode(list(request.generated[:at])), rules)] == answers
    assert not boxed_answers(decode(list(request.generated[:at - 16])), rules)
    assert cut == (fires == "cut") and (at == len(request.generated) or not cut)


@pytest.mark.slow  # a whole-corpus replay: all 328 attempts streamed through the dialect (~10 s)
def test_the_watch_fires_where_the_harness_cut_on_all_but_the_rows(real_attempts, dialect):
    """Every attempt's requests streamed in pieces of 16 ids: the watch first fires at the harness's cut on 321 of
    328 attempts; the other 7 are the rows above (3 earlier, 4 never)."""
    rows = {source for source, *_ in ROWS[2:]}
    at_cut = 0
    for attempt in real_attempts:
        problem = Problem(attempt.problem_id, attempt.problem)
        first = next(((k, at) for k, r in enumerate(attempt.requests)
                      if (at := fired_at(dialect, problem, r.generated)) is not None), None)
        last = len(attempt.requests) - 1
        if first == (last, len(attempt.requests[last].generated)):
            at_cut += 1
        else:
            assert attempt.source.removeprefix("github.com/tonghuikang/aimo3 data/raw/").removesuffix(
                "/action.json") in rows, (attempt.source, first)
    assert at_cut == 321
