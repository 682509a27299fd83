"""A problem's state: which repetitions enter and vote, the events' rules, and the pattern cache deciding exactly as
the stopper itself."""

from __future__ import annotations

import random

import pytest

from solver.config import AnswerConfig, StopConfig, VoteConfig
from solver.core.state import ProblemState, Rules, StopTable, cast
from solver.core.stopping import STOPPERS, make_stopper, stop_reason
from solver.core.voting import make_voter
from solver.types import Answer, Ballot, Repetition, RepetitionStatus, VoteState

MAJORITY = make_voter(VoteConfig(), AnswerConfig())


def rep(status: RepetitionStatus, value: str | None = "4") -> Repetition:
    answers = () if value is None else (Answer(value, value, "boxed"),)
    return Repetition("p", 0, 0, status, (), answers, 0.0, 1.0)


def rules(*stoppers: str, reps: int = 8) -> Rules:
    return Rules.build(VoteConfig(), AnswerConfig(), StopConfig(stoppers), reps)


def test_every_finished_repetition_enters_and_only_done_or_length_ones_vote() -> None:
    statuses: tuple[RepetitionStatus, ...] = ("done", "length", "error", "filtered", "cancelled")
    assert [rep(s).finished for s in statuses] == [True, True, True, True, False]
    assert [cast(MAJORITY, rep(s)) for s in statuses[:4]] == [Ballot("4"), Ballot("4"), None, None]
    assert cast(MAJORITY, rep("done", None)) is None  # finished without an answer


def test_a_failure_counts_as_a_finished_repetition_for_every_rule() -> None:
    # Two agreeing answers and one filtered repetition: margin:2 needs a lead of 2 over the failure (a vote for
    # something else), and futile/max_reps count the failure as a repetition used.
    state = ProblemState(rules("margin:2", reps=4))
    for ballot in (Ballot("7"), None, Ballot("7")):
        state.launch()
        state.finish(ballot)
    assert (state.stopped_by, state.finished, state.counts()) == (None, 3, {"7": 2.0})
    state.launch()
    state.finish(None)
    assert state.stopped_by == "max_reps"
    futile = ProblemState(rules("futile:2"))
    for _ in range(2):
        futile.launch()
        futile.finish(None)
    assert (futile.stopped_by, futile.answer()) == ("futile:2", AnswerConfig().default)


def test_events_after_the_decision_change_nothing() -> None:
    state = ProblemState(rules("agree:2", reps=4))
    for _ in range(3):
        state.launch()
    assert state.finish(Ballot("5")) and state.finish(Ballot("5"))
    assert state.stopped_by == "agree:2" and not state.may_launch()
    assert state.finish(Ballot("9")) is False and state.counts() == {"5": 2.0}  # late
    assert state.expire() == "agree:2" and state.exhaust() == "agree:2"
    with pytest.raises(ValueError, match="no repetition may launch"):
        state.launch()


def test_the_deadline_and_exhaustion_decide_when_the_stopper_has_not() -> None:
    late = ProblemState(rules("agree:3"))
    late.launch()
    late.finish(Ballot("5"))
    assert (late.expire(), late.answer(), late.leader()) == ("deadline", "5", "5")
    empty = ProblemState(rules(reps=0))
    assert not empty.may_launch() and empty.exhaust() == "max_reps" and empty.answer() == AnswerConfig().default
    with pytest.raises(ValueError, match="never launched"):
        ProblemState(rules()).finish(Ballot("1"))


def _stopper_specs() -> list[str]:
    params = {"agree": "agree:3", "ztest": "ztest:0.1", "beta": "beta:0.9", "esc": "esc:3", "margin": "margin:2",
              "hold": "hold:0.9", "futile": "futile:3"}
    return [params.get(name, name) for name in STOPPERS.names()]


@pytest.mark.parametrize("spec", _stopper_specs())
def test_the_pattern_cache_decides_as_the_stopper_itself(spec: str) -> None:
    """Random vote sequences (answers drawn from a few values, some repetitions without one) walked through one
    shared table: every decision equals ``stop_reason`` on the same state, also with the answers renamed."""
    rng = random.Random(spec)
    reps = 12
    stopper = make_stopper(StopConfig((spec,)), reps)
    table = StopTable(stopper)
    shared = Rules(MAJORITY, table, "0", reps)
    for _ in range(300):
        state = ProblemState(shared)
        renamed: list[Ballot | None] = []
        while state.may_launch():
            state.launch()
            value = None if rng.random() < 0.2 else str(rng.choice("1123"))
            ballot = None if value is None else Ballot(value, rng.choice((0.5, 1.0, 7.0)))
            state.finish(ballot)
            renamed.append(None if value is None else Ballot(f"x{value}"))
            direct = stop_reason(stopper, VoteState(tuple(state.ballots), reps))
            assert state.stopped_by == direct
            assert table(VoteState(tuple(renamed), reps)) == direct


def test_a_second_round_follows_an_inconclusive_first_round_once() -> None:
    """retry_reps more repetitions when every repetition of the round finished and no answer has retry_below
    votes; the stoppers then count the larger limit; a conclusive round, or a second one, stops as before."""
    split = Rules.build(VoteConfig(), AnswerConfig(), StopConfig(("lossless",)), 3, retry_reps=2, retry_below=2)
    state = ProblemState(split)
    for ballot in (Ballot("1"), Ballot("2"), None):
        state.launch()
        state.finish(ballot)
    assert state.stopped_by is None and state.retried and state.rules.max_repetitions == 5 and state.may_launch()
    for ballot in (Ballot("2"), Ballot("3")):
        state.launch()
        state.finish(ballot)
    assert (state.stopped_by, state.answer(), state.finished, state.launched) == ("max_reps", "2", 5, 5)
    agreed = ProblemState(Rules.build(VoteConfig(), AnswerConfig(), StopConfig(), 3, retry_reps=2, retry_below=2))
    for ballot in (Ballot("1"), Ballot("1"), Ballot("2")):
        agreed.launch()
        agreed.finish(ballot)
    assert agreed.stopped_by == "max_reps" and not agreed.retried  # two agree: no second round
    off = ProblemState(rules("lossless", reps=3))
    for ballot in (Ballot("1"), Ballot("2"), None):
        off.launch()
        off.finish(ballot)
    assert off.stopped_by == "max_reps" and not off.retried


def test_a_second_round_is_the_stoppers_business_too() -> None:
    """In the second round the stoppers count its limit: lossless fires when the leader cannot be caught within
    3 + 4 repetitions."""
    state = ProblemState(Rules.build(VoteConfig(), AnswerConfig(), StopConfig(("lossless",)), 3, retry_reps=4))
    for ballot in (Ballot("1"), Ballot("2"), Ballot("3"), Ballot("1"), Ballot("1")):
        state.launch()
        state.finish(ballot)
    assert state.retried and state.stopped_by is None  # 3 against 1 with 2 of 7 left: not yet
    state.launch()
    state.finish(Ballot("1"))  # 4 against 1 with 1 left
    assert (state.stopped_by, state.finished) == ("lossless", 6)
