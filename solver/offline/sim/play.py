"""The solve loop's model that the simulator, the tuner, the calibration check and the sweep replay: one problem,
one ordered draw of recorded repetitions, W in flight, each finish an event of the problem's
:class:`~solver.core.state.ProblemState` (the state the running loop decides with), the deadline cutting the rest.

When each repetition starts and ends comes from a timeline (``solver.timing.timeline``): each taking its recorded
seconds (``fixed_timeline``), or the attempts sharing an engine under its time model (``engine_timeline``). A stop
only cancels, so a timeline made without stops holds up to any stop; a second round (``solve.retry_reps``, the
state extends its limit when a round ends inconclusive) gets a timeline of its own, from the round's end.

:func:`simulated_day` plays a whole day of problems, one after another, each under the deadline the budget gives it
(``solver.core.budget.problem_slot``, as the solve loop's runner and the Kaggle predictor take theirs): what the
trials play many times over; :func:`simulated_run` plays one day of prepared problems on given draws under an
engine's time model (the prediction the replay check, ``solver.measure.check_replay``, and the day's check
hold a run against).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from solver.config import Config
from solver.core.budget import budget_for, problem_slot
from solver.core.clock import SimulatedClock, remaining
from solver.core.state import ProblemState, Rules, StopTable
from solver.core.stopping import make_stopper  # noqa: F401 - doctests
from solver.core.voting import make_voter  # noqa: F401 - doctests
from solver.offline.sim.pools import Prepared
from solver.timing.model import EngineTimeModel
from solver.timing.timeline import Timeline, engine_timeline, fixed_timeline
from solver.types import Ballot, Stopper, Voter

Rounds = Callable[[int, float], Timeline]
"""``rounds(first, start)``: the timeline of the draw's repetitions from ``first`` on, launched from ``start``."""


@dataclass(frozen=True)
class Played:
    answer: str
    finished: int  # repetitions that finished (and counted)
    launched: int
    seconds: float  # wall time until the answer
    tokens: float  # generated tokens, cancelled repetitions counted pro rata of their elapsed time
    stopped_by: str


def play(ballots: Sequence[Ballot | None], seconds: Sequence[float], tokens: Sequence[float], *, voter: Voter,
         stopper: Stopper | StopTable, default: str, workers: int, deadline_s: float | None = None) -> Played:
    """Replay the solve loop on one ordered draw (``ballots[i]`` as :func:`solver.core.state.cast` gives it), each
    repetition taking its ``seconds[i]``: launch in order, W at a time, finish by time (those ending at one instant
    together, in launch order, before the slots they free are filled), each finish an event of the problem's
    state, everything in flight cancelled at a stop or the deadline.

    >>> from solver.config import StopConfig, VoteConfig, AnswerConfig
    >>> v = make_voter(VoteConfig(), AnswerConfig())
    >>> b = [Ballot("1"), Ballot("1"), Ballot("2"), Ballot("1")]
    >>> play(b, [1, 2, 2, 4], [10] * 4, voter=v, stopper=make_stopper(StopConfig(("agree:2",)), 4),
    ...      default="0", workers=2)
    Played(answer='1', finished=2, launched=3, seconds=2.0, tokens=25.0, stopped_by='agree:2')
    >>> play(b, [1, 2, 3, 4], [10] * 4, voter=v, stopper=make_stopper(StopConfig(), 4), default="0",
    ...      workers=1, deadline_s=2.5).stopped_by
    'deadline'
    """
    if workers < 1:
        raise ValueError(f"play needs at least one worker, got {workers}")
    table = stopper if isinstance(stopper, StopTable) else StopTable(stopper)
    return play_on(ballots, fixed_rounds(seconds, tokens, workers), Rules(voter, table, default, len(ballots)),
                   workers, deadline_s)


def fixed_rounds(seconds: Sequence[float], tokens: Sequence[float] | None, workers: int) -> Rounds:
    """Each repetition of a draw taking its own ``seconds`` (``fixed_timeline``), a round from its start."""

    def rounds(first: int, start: float) -> Timeline:
        return fixed_timeline(seconds[first:], workers, None if tokens is None else tokens[first:], start)

    return rounds


def play_on(ballots: Sequence[Ballot | None], rounds: Rounds, rules: Rules, workers: int,
            deadline_s: float | None = None) -> Played:
    """:func:`play` with the times from ``rounds`` and the problem's ``rules`` (its voter, stopper, default,
    repetition limit and second round); ``ballots`` holds at least as many as the rules may launch.

    >>> from solver.config import AnswerConfig, StopConfig, VoteConfig
    >>> rules = Rules.build(VoteConfig(), AnswerConfig(), StopConfig(), 2, retry_reps=2)
    >>> b = [Ballot("1"), Ballot("2"), Ballot("2"), Ballot("3")]
    >>> play_on(b, lambda first, start: fixed_timeline([1.0] * (4 - first), 2, None, start), rules, 2)
    Played(answer='2', finished=4, launched=4, seconds=2.0, tokens=0.0, stopped_by='max_reps')
    """
    if workers < 1:
        raise ValueError(f"play needs at least one worker, got {workers}")
    state = ProblemState(rules)
    if deadline_s is not None and deadline_s <= 0:
        state.expire()
        return Played(rules.default, 0, 0, 0.0, 0.0, "deadline")
    running: list[tuple[float, int, float, float]] = []  # a heap of (finish, launch number, start, tokens)
    now, used_tokens = 0.0, 0.0
    timeline, base = rounds(0, 0.0), 0  # the current round's timeline, of the repetitions from ``base`` on
    while state.stopped_by is None:
        while len(running) < workers and state.may_launch():
            i = state.launch()
            if i - base >= len(timeline.ends):  # a new round: its repetitions start from now
                timeline, base = rounds(i, now), i
            j = i - base
            heapq.heappush(running, (timeline.ends[j], i, timeline.starts[j], timeline.tokens[j]))
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
            _, i, _, tokens = heapq.heappop(running)
            used_tokens += tokens
            state.finish(ballots[i])
    for end, _, start, tokens in running:  # cancelled: count the tokens generated before the cancel
        span = end - start
        used_tokens += tokens * ((now - start) / span if span > 0 else 0.0)
    assert state.stopped_by is not None
    return Played(state.answer(), state.finished, state.launched, now, used_tokens, state.stopped_by)


@dataclass(frozen=True)
class ProblemDraw:
    """One problem of a simulated day: its ballots in launch order (at least as many as its rules may launch; a
    shorter draw lowers its limit) and the timelines of its repetitions."""

    ballots: Sequence[Ballot | None]
    rounds: Rounds


@dataclass(frozen=True)
class PlayedSlot:
    """One problem of a simulated day: the seconds its slot allotted (None without a budget) and how it played."""

    allotted_s: float | None
    played: Played


@dataclass(frozen=True)
class SimulatedDay:
    problems: tuple[PlayedSlot, ...]  # in the order played
    seconds: float  # the whole day on the simulated clock, the engine's start included


def simulated_day(config: Config, problems: Iterable[ProblemDraw], *, rules: Rules | None = None,
                  start_s: float = 0.0) -> SimulatedDay:
    """A day on the simulated clock: the budget ``config.budget`` sets starts at 0, the engine's start
    (``start_s``) is spent inside it, then each problem in order takes its slot (``problem_slot``), is played under
    its deadline with ``config.solve.workers`` in flight (:func:`play_on`), and the clock moves on by the seconds it
    took. ``rules`` are ``Rules.of(config)``, passed when the caller shares them (their stop table) between days.

    >>> config = Config().replace({"solve.reps": 2, "solve.workers": 2, "budget.total_s": 10.0, "budget.problems": 2,
    ...                            "budget.min_s": 1.0, "budget.max_s": 6.0, "budget.reserve_s": 0.0})
    >>> def draw(seconds):
    ...     return ProblemDraw([Ballot("1"), Ballot("1")], lambda first, start: fixed_timeline(seconds, 2, None, start))
    >>> day = simulated_day(config, [draw([3.0, 8.0]), draw([1.0, 2.0])])
    >>> [(p.allotted_s, p.played.stopped_by, p.played.seconds) for p in day.problems], day.seconds
    ([(6.0, 'deadline', 6.0), (4.0, 'max_reps', 2.0)], 8.0)
    """
    clock = SimulatedClock(0.0)
    budget = budget_for(config.budget, clock)
    clock.advance(start_s)
    rules = rules if rules is not None else Rules.of(config)
    workers = config.solve.workers
    out = []
    for problem in problems:
        limit = rules.with_limit(len(problem.ballots)) if len(problem.ballots) < rules.max_repetitions else rules
        with problem_slot(budget) as slot:
            played = play_on(problem.ballots, problem.rounds, limit, workers, remaining(clock, slot.deadline))
            clock.advance(played.seconds)
        out.append(PlayedSlot(slot.allotted_s, played))
    return SimulatedDay(tuple(out), clock.now())


def simulated_run(prepared: Sequence[Prepared], config: Config, model: EngineTimeModel,
                  draws: Mapping[str, Sequence[int]]) -> SimulatedDay:
    """The simulator's prediction: the day (``simulated_day``) of ``prepared``'s problems in order, each on its
    draw, timed by ``model`` (its start counted, as the trials count it)."""
    workers, reps = config.solve.workers, config.solve.reps

    def problem(prep: Prepared) -> ProblemDraw:
        idx = list(draws[prep.problem.id])

        def rounds(first: int, start: float) -> Timeline:
            chosen = idx[first:] if first else idx[:reps]
            return engine_timeline([prep.plans[i] for i in chosen], workers, model, start)

        ballots = prep.ballots[config.vote.voter]
        return ProblemDraw([ballots[i] for i in idx], rounds)

    return simulated_day(config, map(problem, prepared), start_s=model.start_s)
