"""The pure model of the solve loop that the simulator and the sweep replay: one problem, one ordered draw of
recorded repetitions, W in flight, the stopper asked after each finish, the deadline cutting the rest."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from solver.core.stopping import make_stopper, stop_reason  # noqa: F401 - make_stopper: doctests
from solver.core.voting import decide, make_voter  # noqa: F401 - make_voter: doctests
from solver.types import Ballot, Stopper, Voter, VoteState


@dataclass(frozen=True)
class Outcome:
    answer: str
    finished: int  # repetitions that finished
    launched: int
    seconds: float  # wall time until the answer
    tokens: float  # generated tokens, cancelled repetitions counted pro rata of their elapsed time
    stopped_by: str


def pattern(ballots: Sequence[Ballot | None]) -> tuple[int, ...]:
    """Ballots with each answer renamed to its first-seen rank (-1 = no answer).

    >>> pattern([Ballot("7"), None, Ballot("3"), Ballot("7")])
    (0, -1, 1, 0)
    """
    ranks: dict[str, int] = {}
    return tuple(-1 if b is None else ranks.setdefault(b.answer, len(ranks)) for b in ballots)


class Reasons:
    """``stop_reason`` of one stopper, remembered per vote pattern. Stopping policies look at vote counts and
    agreement, never at answer values or weights (solver/core/stopping.py), so states with the same pattern decide
    alike; trials meet the same patterns over and over, and some policies (beta) cost tens of microseconds."""

    def __init__(self, stopper: Stopper) -> None:
        self.stopper = stopper
        self._seen: dict[tuple[tuple[int, ...], int], str | None] = {}

    def __call__(self, state: VoteState) -> str | None:
        key = (pattern(state.ballots), state.max_repetitions)
        if key not in self._seen:
            self._seen[key] = stop_reason(self.stopper, state)
        return self._seen[key]


def play(ballots: Sequence[Ballot | None], seconds: Sequence[float], tokens: Sequence[float], *, voter: Voter,
         stopper: Stopper | Reasons, default: str, workers: int, deadline_s: float | None = None) -> Outcome:
    """Replay the solve loop on one ordered draw: launch in order, W at a time, finish by recorded time (ties
    in launch order), ask the stopper after each finish, cancel everything in flight at a stop or the deadline.

    >>> from solver.config import StopConfig, VoteConfig, AnswerConfig
    >>> v = make_voter(VoteConfig(), AnswerConfig())
    >>> b = [Ballot("1"), Ballot("1"), Ballot("2"), Ballot("1")]
    >>> play(b, [1, 2, 2, 4], [10] * 4, voter=v, stopper=make_stopper(StopConfig(("agree:2",)), 4),
    ...      default="0", workers=2)
    Outcome(answer='1', finished=2, launched=3, seconds=2.0, tokens=25.0, stopped_by='agree:2')
    >>> play(b, [1, 2, 3, 4], [10] * 4, voter=v, stopper=make_stopper(StopConfig(), 4), default="0",
    ...      workers=1, deadline_s=2.5).stopped_by
    'deadline'
    """
    if workers < 1:
        raise ValueError(f"play needs at least one worker, got {workers}")
    n = len(ballots)
    if deadline_s is not None and deadline_s <= 0:
        return Outcome(default, 0, 0, 0.0, 0.0, "deadline")
    running: list[tuple[float, int, float]] = []  # (finish time, launch order, start time)
    finished: list[Ballot | None] = []
    launched, now, used_tokens = 0, 0.0, 0.0
    stopped: str | None = None
    while stopped is None:
        while len(running) < workers and launched < n:
            running.append((now + float(seconds[launched]), launched, now))
            launched += 1
        if not running:
            stopped = "max_reps"
            break
        running.sort()
        end, i, _ = running[0]
        if deadline_s is not None and end > deadline_s:
            now, stopped = deadline_s, "deadline"
            break
        running.pop(0)
        now = end
        finished.append(ballots[i])
        used_tokens += float(tokens[i])
        state = VoteState(tuple(finished), n)
        stopped = stopper(state) if isinstance(stopper, Reasons) else stop_reason(stopper, state)
    for end, i, start in running:  # cancelled: count the tokens generated before the cancel
        span = end - start
        used_tokens += float(tokens[i]) * ((now - start) / span if span > 0 else 0.0)
    return Outcome(decide(voter, finished, default), len(finished), launched, now, used_tokens, stopped)
