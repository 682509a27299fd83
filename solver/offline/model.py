"""The solve loop's model that the simulator, the tuner, the calibration check and the sweep replay: one problem,
one ordered draw of recorded repetitions, W in flight, each finish an event of the problem's
:class:`~solver.core.state.ProblemState` (the state the running loop decides with), the deadline cutting the rest.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import dataclass

from solver.core.state import ProblemState, Rules, StopTable
from solver.core.stopping import make_stopper  # noqa: F401 - doctests
from solver.core.voting import make_voter  # noqa: F401 - doctests
from solver.types import Ballot, Stopper, Voter

Reasons = StopTable  # the name the offline code used for a stopper with its decisions remembered


@dataclass(frozen=True)
class Outcome:
    answer: str
    finished: int  # repetitions that finished (and counted)
    launched: int
    seconds: float  # wall time until the answer
    tokens: float  # generated tokens, cancelled repetitions counted pro rata of their elapsed time
    stopped_by: str


def play(ballots: Sequence[Ballot | None], seconds: Sequence[float], tokens: Sequence[float], *, voter: Voter,
         stopper: Stopper | StopTable, default: str, workers: int, deadline_s: float | None = None) -> Outcome:
    """Replay the solve loop on one ordered draw (``ballots[i]`` as :func:`solver.core.state.cast` gives it):
    launch in order, W at a time, finish by recorded time (those ending at one instant together, in launch
    order, before the slots they free are filled), each finish an event of the problem's state, everything in
    flight cancelled at a stop or the deadline.

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
    table = stopper if isinstance(stopper, StopTable) else StopTable(stopper)
    state = ProblemState(Rules(voter, table, default, len(ballots)))
    if deadline_s is not None and deadline_s <= 0:
        state.expire()
        return Outcome(default, 0, 0, 0.0, 0.0, "deadline")
    running: list[tuple[float, int, float]] = []  # a heap of (finish time, launch number, start time)
    now, used_tokens = 0.0, 0.0
    while state.stopped_by is None:
        while len(running) < workers and state.may_launch():
            i = state.launch()
            heapq.heappush(running, (now + float(seconds[i]), i, now))
        if not running:
            state.exhaust()
            break
        end = running[0][0]
        if deadline_s is not None and end > deadline_s:
            now = deadline_s
            state.expire()
            break
        now = end
        # Repetitions that end at the same instant are seen together, in launch order (the loop wakes once for
        # them), and the slots they free are filled after.
        while running and running[0][0] == now and state.stopped_by is None:
            _, i, _ = heapq.heappop(running)
            used_tokens += float(tokens[i])
            state.finish(ballots[i])
    for end, i, start in running:  # cancelled: count the tokens generated before the cancel
        span = end - start
        used_tokens += float(tokens[i]) * ((now - start) / span if span > 0 else 0.0)
    assert state.stopped_by is not None
    return Outcome(state.answer(), state.finished, state.launched, now, used_tokens, state.stopped_by)
