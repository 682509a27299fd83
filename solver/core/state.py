"""One problem's decisions as a state machine: which repetitions vote, the ballots, when to stop, the answer.

The running loop (``solver.loop.problem``), the simulator and the tuner (``solver.offline.sim.play.play``), the
sweep's offline replay, the cluster's actors and the report all decide through :class:`ProblemState`, so a rule
is written once and an offline replay of recorded repetitions decides exactly as the loop that recorded them.

Events in, decisions out; no clock and no I/O of its own (the caller says what happened and when):

- ``launch()``: a repetition starts (allowed while the problem has not stopped and has repetitions left);
- ``finish(ballot)``: a launched repetition finished; its ballot (see :func:`cast`) enters the vote and the
  stopper is asked. A finish after the stop changes nothing: it is reported, not counted;
- ``expire()``: the problem's deadline passed; ``exhaust()``: nothing is running and nothing may launch.

Which repetitions count (the one rule, shared with :attr:`~solver.types.Repetition.finished` and
:attr:`~solver.types.Repetition.votes`):

- every repetition that *finished* enters the state, whatever its status: a ``done`` or ``length`` one with the
  ballot its voter gives, an ``error`` or ``filtered`` one with no ballot (``None``). It took one of the
  problem's repetitions and is not launched again, so the stoppers that count what is left (``max_reps``,
  ``lossless``, ``hold``, ``agree_rules``' finished count and answer cap) see exactly what a full run has left,
  and the rules that read failures (``margin``: a vote for something else; ``futile``: no answer; ``esc``: a
  broken window) read them. The simulator, the tuner and the sweep always counted them so, and the tuned
  settings were chosen on that rule;
- a ``cancelled`` repetition never finished: it does not enter (the stop or deadline that cut it is already the
  decision).

Repetitions that finish at the same instant are events in launch order, and the repetitions launched to take
their places start after all of them are in (the loop wakes once for them; the simulator plays ties the same
way); once one of them stops the problem, the others are late.

Decisions are cheap: stoppers look at vote counts and agreement, never at answer values or weights
(``solver.core.stopping``), so two states whose ballots have the same *pattern* (each answer renamed to its
first-seen rank, no answer as -1) decide alike. :class:`StopTable` remembers each decision in a tree of
patterns; a state walks it one finish at a time, so a decision costs one dict lookup once its pattern was met.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from solver.config import AnswerConfig, Config, StopConfig, VoteConfig
from solver.core.stopping import make_stopper, stop_reason, top_counts
from solver.core.voting import decide, make_voter
from solver.types import Ballot, Repetition, Stopper, StopReason, Voter, VoteState


def cast(voter: Voter, repetition: Repetition) -> Ballot | None:
    """The ballot a finished repetition brings to the vote: its voter's when it may vote (``done`` or
    ``length``), else none (``error``, ``filtered``: it finished, without an answer that counts).

    >>> from solver.types import Answer
    >>> v = make_voter(VoteConfig(), AnswerConfig())
    >>> rep = Repetition("p", 0, 0, "done", (), (Answer("7", "7", "boxed"),), 0.0, 1.0)
    >>> cast(v, rep), cast(v, Repetition("p", 1, 0, "filtered", (), rep.answers, 0.0, 1.0))
    (Ballot(answer='7', weight=1.0), None)
    """
    return voter.ballot(repetition) if repetition.votes else None


class _Node:
    """One vote pattern: the stopper's decision on it (once asked) and the patterns one finish further."""

    __slots__ = ("asked", "reason", "after")

    def __init__(self) -> None:
        self.asked = False
        self.reason: StopReason | None = None
        self.after: dict[int, _Node] = {}


class StopTable:
    """One stopper's decisions, remembered per vote pattern and repetition limit (the simulator meets the same
    patterns millions of times; some policies cost tens of microseconds). Called with a ``VoteState`` it is the
    stopper's ``stop_reason``.

    >>> from solver.core.stopping import make_stopper
    >>> table = StopTable(make_stopper(StopConfig(("agree:2",)), 4))
    >>> table(VoteState((Ballot("5"), None, Ballot("5")), 4)), table(VoteState((Ballot("5"), Ballot("3")), 4))
    ('agree:2', None)
    """

    def __init__(self, stopper: Stopper) -> None:
        self.stopper = stopper
        self._roots: dict[int, _Node] = {}

    def root(self, max_repetitions: int) -> _Node:
        node = self._roots.get(max_repetitions)
        if node is None:
            node = self._roots[max_repetitions] = _Node()
        return node

    def decide(self, node: _Node, state: VoteState) -> StopReason | None:
        """The decision at ``node``, which must be ``state``'s pattern."""
        if not node.asked:
            node.reason = stop_reason(self.stopper, state)
            node.asked = True
        return node.reason

    def __call__(self, state: VoteState) -> StopReason | None:
        node, ranks = self.root(state.max_repetitions), {}
        for ballot in state.ballots:
            node = _step(node, ballot, ranks)
        return self.decide(node, state)


def _step(node: _Node, ballot: Ballot | None, ranks: dict[str, int]) -> _Node:
    rank = -1 if ballot is None else ranks.setdefault(ballot.answer, len(ranks))
    child = node.after.get(rank)
    if child is None:
        child = node.after[rank] = _Node()
    return child


@dataclass(frozen=True)
class Rules:
    """What decides a problem: the voter, the stopper (as a :class:`StopTable`, shared by every problem played
    with these rules), the default answer, the repetitions allowed, and a second round: ``retry_reps`` more
    repetitions when the first ``max_repetitions`` have all finished and no answer has ``retry_below`` votes
    (0: no second round)."""

    voter: Voter
    stops: StopTable
    default: str
    max_repetitions: int
    retry_reps: int = 0
    retry_below: int = 2

    @classmethod
    def build(cls, vote: VoteConfig, answers: AnswerConfig, stop: StopConfig, max_repetitions: int,
              retry_reps: int = 0, retry_below: int = 2) -> Rules:
        """The rules a config names (a ``ConfigError`` for an unknown voter or stopper); the stopper knows the
        repetitions of both rounds, the state the first round's."""
        return cls(make_voter(vote, answers), StopTable(make_stopper(stop, max_repetitions + retry_reps)),
                   answers.default, max_repetitions, retry_reps, retry_below)

    @classmethod
    def of(cls, config: Config) -> Rules:
        """The rules of a whole config (``solve.reps``, ``solve.retry_reps`` and ``solve.retry_below``)."""
        s = config.solve
        return cls.build(config.vote, config.answers, config.stop, s.reps, s.retry_reps, s.retry_below)

    def with_limit(self, max_repetitions: int) -> Rules:
        """The same rules for another number of repetitions (a draw shorter than the limit)."""
        return replace(self, max_repetitions=max_repetitions)


class ProblemState:
    """One problem's vote and decision so far (see the module's description of events and rules).

    >>> from solver.config import StopConfig
    >>> rules = Rules.build(VoteConfig(), AnswerConfig(), StopConfig(("margin:2",)), 6)
    >>> s = ProblemState(rules)
    >>> [s.launch() for _ in range(3)]
    [0, 1, 2]
    >>> s.finish(Ballot("7")), s.finish(None), s.stopped_by  # a failure is a vote for something else
    (True, True, None)
    >>> s.finish(Ballot("7")), s.stopped_by, s.answer()
    (True, None, '7')
    >>> s.launch(), s.finish(Ballot("7")), s.stopped_by, s.counts(), s.finished, s.launched
    (3, True, 'margin:2', {'7': 3.0}, 4, 4)
    >>> s.finish(Ballot("1"))  # late: the problem has stopped
    False
    """

    __slots__ = ("rules", "ballots", "launched", "stopped_by", "retried", "_ranks", "_node")

    def __init__(self, rules: Rules) -> None:
        self.rules = rules
        self.ballots: list[Ballot | None] = []  # one per finished repetition that counted, in finish order
        self.launched = 0
        self.stopped_by: StopReason | None = None
        self.retried = False  # the second round was granted
        self._ranks: dict[str, int] = {}
        self._node = rules.stops.root(rules.max_repetitions)

    @property
    def finished(self) -> int:
        return len(self.ballots)

    @property
    def running(self) -> int:
        """Launched repetitions that have not finished (the caller cancels them at a stop)."""
        return self.launched - len(self.ballots)

    def may_launch(self) -> bool:
        return self.stopped_by is None and self.launched < self.rules.max_repetitions

    def launch(self) -> int:
        """A repetition starts; returns its launch number (0, 1, ...)."""
        if not self.may_launch():
            raise ValueError("no repetition may launch: the problem has stopped or used all its repetitions")
        self.launched += 1
        return self.launched - 1

    def finish(self, ballot: Ballot | None) -> bool:
        """A launched repetition finished with ``ballot``: True when it counted, False when the problem had
        stopped already (a late finish). The decision is then ``stopped_by``."""
        if self.stopped_by is not None:
            return False
        if len(self.ballots) >= self.launched:
            raise ValueError("a repetition finished that was never launched")
        self.ballots.append(ballot)
        node = self._node = _step(self._node, ballot, self._ranks)
        if not node.asked:  # the first time any state met this pattern: ask the stopper itself
            self.rules.stops.decide(node, VoteState(tuple(self.ballots), self.rules.max_repetitions))
        self.stopped_by = node.reason
        if self.stopped_by == "max_reps" and self._retry_due():
            self._second_round()
        return True

    def _retry_due(self) -> bool:
        """The round used every repetition (the limit stopped it, nothing else) and no answer has the votes the
        second round asks for."""
        rules = self.rules
        return (rules.retry_reps > 0 and not self.retried
                and top_counts(VoteState(tuple(self.ballots), rules.max_repetitions))[0] < rules.retry_below)

    def _second_round(self) -> None:
        """The limit grows by ``retry_reps`` and the problem goes on; its vote pattern is walked again from the
        larger limit's root (the stoppers that count what is left see the new limit)."""
        self.retried = True
        self.stopped_by = None
        self.rules = self.rules.with_limit(self.rules.max_repetitions + self.rules.retry_reps)
        node, ranks = self.rules.stops.root(self.rules.max_repetitions), {}
        for ballot in self.ballots:
            node = _step(node, ballot, ranks)
        self._node = node

    def expire(self) -> StopReason:
        """The deadline passed: the problem stops now unless it has already."""
        if self.stopped_by is None:
            self.stopped_by = "deadline"
        return self.stopped_by

    def exhaust(self) -> StopReason:
        """Nothing runs and nothing may launch: every repetition has been used."""
        if self.stopped_by is None:
            self.stopped_by = "max_reps"
        return self.stopped_by

    def counts(self) -> dict[str, float]:
        """Answer -> total weight, in first-seen order."""
        return VoteState(tuple(self.ballots), self.rules.max_repetitions).counts

    def leader(self) -> str | None:
        """The answer the vote would give now; None before any ballot."""
        return self.rules.voter.winner(self.ballots)

    def answer(self) -> str:
        """The voted answer, or the default when nothing voted."""
        return decide(self.rules.voter, self.ballots, self.rules.default)
