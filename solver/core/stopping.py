"""Stopping: when a problem has enough repetitions, as pure functions of the vote so far.

Policies are chosen by name from :data:`STOPPERS`, each with an optional parameter after ``:``
(``"beta:0.95"``, ``"esc:5"``, ``"agree:4"``, ``"margin:3"``, ``"lossless"``, ``"hold:0.95"``) and combined with ``any`` or ``all``. Every policy looks at
vote *counts* (one per ballot), never at the voter's weights: the statistics behind ``beta`` and ``ztest``
are about counts, and the agreement rules were published as counts. Weights only choose the winner.
Which repetitions a policy sees, and when it is asked, is ``solver.core.state``'s business; the DeepConf
confidences the online filter uses are ``solver.core.confidence``'s.
"""

from __future__ import annotations

import functools

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from solver.config import ConfigError, StopConfig
from solver.config import Registry
from solver.types import Ballot, Stopper, StopReason, VoteState

STOPPERS: Registry[Stopper] = Registry("stopper")


# ---- what the policies look at ---------------------------------------------------------------------------


def answers(state: VoteState) -> list[str]:
    """The answers cast, in finish order (repetitions without an answer left out)."""
    return [b.answer for b in state.ballots if b is not None]


def top_counts(state: VoteState) -> tuple[int, int]:
    """Votes of the most and second most voted answers (0 when absent).

    >>> top_counts(VoteState((Ballot("1"), Ballot("2"), None, Ballot("1")), 8))
    (2, 1)
    >>> top_counts(VoteState((), 8))
    (0, 0)
    """
    counts = sorted(Counter(answers(state)).values(), reverse=True) + [0, 0]
    return counts[0], counts[1]


def _state(*votes: str | None, max_repetitions: int = 16) -> VoteState:
    """Doctest shorthand: ``_state("7", None, "7")``."""
    return VoteState(tuple(None if v is None else Ballot(v) for v in votes), max_repetitions)


# ---- policies (pure) -----------------------------------------------------------------------------------


def agree(state: VoteState, k: int) -> bool:
    """The top answer has ``k`` votes (AIMO3 public lineage: 8 attempts, stop when 4 agree).

    >>> agree(_state("3", "3", "5", "3"), 3), agree(_state("3", "3", "5", "3"), 4), agree(_state(), 1)
    (True, False, False)
    """
    return top_counts(state)[0] >= k


PUBLISHED_REPS = 15  # the AIMO2 runner-up sampled 15 repetitions per problem
PUBLISHED_ANSWER_CAP = 8  # ... and stopped at 8 answers


def answer_cap(max_repetitions: int) -> int:
    """The answer cap of :func:`agree_rules` for a problem of ``max_repetitions``: the published 8 answers of
    15 repetitions, scaled (ceil(8 n / 15)), so a 32-repetition preset does not stop at a quarter of its samples.

    >>> [answer_cap(n) for n in (4, 8, 15, 16, 32, 64)]
    [3, 5, 8, 9, 18, 35]
    """
    return -(-PUBLISHED_ANSWER_CAP * max_repetitions // PUBLISHED_REPS)


def agree_rules(state: VoteState) -> bool:
    """The AIMO2 runner-up's early stop, read as follows (f = repetitions finished, answers counted):

    - 4 agree within the first 4 finished (f <= 4);
    - 4 of the last 5 finished agree;
    - 5 agree with f <= 7; 6 agree with f <= 9;
    - or :func:`answer_cap` answers have been collected (8 of the published 15 repetitions; finished
      repetitions without an answer do not count).

    >>> agree_rules(_state("1", "1", "1", "1")), agree_rules(_state("1", "1", "1", "2"))
    (True, False)
    >>> agree_rules(_state("2", "1", "1", "9", "1", "1"))  # 4 of the last 5
    True
    >>> agree_rules(_state("1", "2", "1", "2", "1", "1", "1"))  # 5 agree, f = 7
    True
    >>> agree_rules(_state(*"12341234", max_repetitions=15)), agree_rules(_state(*"1234123", None))
    (True, False)
    >>> agree_rules(_state(*"12341234", max_repetitions=32))  # 8 of 32: the cap is 18 answers
    False
    """
    f = state.finished
    top = top_counts(state)[0]
    last5 = [b.answer for b in state.ballots[-5:] if b is not None]
    last5_top = max(Counter(last5).values(), default=0)
    return (
        (f <= 4 and top >= 4)
        or last5_top >= 4
        or (f <= 7 and top >= 5)
        or (f <= 9 and top >= 6)
        or len(answers(state)) >= answer_cap(state.max_repetitions)
    )


def ztest(state: VoteState, alpha: float) -> bool:
    """Top-1's share of the answers exceeds top-2's at level ``alpha`` (one-sided; the AIMO1 seed notebook
    author's early stop at 95 %), tested exactly: given the v1 + v2 votes the two answers got, v1 is
    Binomial(v1 + v2, 1/2) when their shares are equal, and the stop needs P(X >= v1) < alpha.

    The notebook's normal approximation, z = (p1 - p2) / sqrt(p (1 - p) 2 / n), gave z = 2 > 1.645 at 2 of 2
    agreeing (issue 14); far from such small counts the exact test agrees with z = (v1 - v2) / sqrt(v1 + v2).
    Unanimous answers need 5 at alpha = 0.05 (0.5 ** 5 = 0.031).

    >>> ztest(_state("4", "4"), 0.05), ztest(_state(*"4444"), 0.05), ztest(_state(*"44444"), 0.05)
    (False, False, True)
    >>> ztest(_state("4", "5", "4", "5"), 0.05), ztest(_state(), 0.05)
    (False, False)
    """
    v1, v2 = top_counts(state)
    return v1 > v2 and _binomial_tail(v1, v2) < alpha


@functools.lru_cache(maxsize=4096)
def _binomial_tail(v1: int, v2: int) -> float:
    """P(X >= v1) for X ~ Binomial(v1 + v2, 1/2); cached like :func:`_beta_sf`."""
    from scipy.stats import binom  # ~0.5-3 s to import; only paid when this policy runs

    return float(binom.sf(v1 - 1, v1 + v2, 0.5))


def beta(state: VoteState, p: float) -> bool:
    """Adaptive-Consistency: P(p1 > p2) under Beta(v1 + 1, v2 + 1) is at least ``p`` (EMNLP 2023).

    >>> beta(_state("1", "1", "1"), 0.95), beta(_state("1", "1", "1", "1"), 0.95)  # 1 - 0.5**5 = 0.969
    (False, True)
    >>> beta(_state(), 0.95), beta(_state("1", "2"), 0.95)
    (False, False)
    """
    return beta_probability(state) >= p


def beta_probability(state: VoteState) -> float:
    """P(p1 > p2) = ``scipy.stats.beta.sf(0.5, v1 + 1, v2 + 1)`` for the top two counts v1 >= v2.

    >>> round(beta_probability(_state("1", "1", "1", "1", "1")), 4)
    0.9844
    """
    return _beta_sf(*top_counts(state))


@functools.lru_cache(maxsize=4096)
def _beta_sf(v1: int, v2: int) -> float:
    """Cached: the simulator asks for the same few (v1, v2) pairs millions of times."""
    from scipy.stats import beta as beta_dist

    return float(beta_dist.sf(0.5, v1 + 1, v2 + 1))


def esc(state: VoteState, window: int) -> bool:
    """Early-stopping self-consistency: some window-aligned run of ``window`` finished repetitions all gave
    the same answer (ICLR 2024; windows [0, w), [w, 2w)...; a repetition without an answer breaks its window).

    >>> esc(_state("1", "1", "1"), 3), esc(_state("2", "1", "1", "1"), 3), esc(_state("1", None, "1"), 3)
    (True, False, False)
    >>> esc(_state(*"123111"), 3)
    True
    """
    ballots = state.ballots
    for start in range(0, len(ballots) - window + 1, window):
        chunk = ballots[start : start + window]
        if all(b is not None for b in chunk) and len({b.answer for b in chunk if b is not None}) == 1:
            return True
    return False


def lossless(state: VoteState) -> bool:
    """The runner-up plus every repetition not yet finished cannot reach the leader: the majority of all
    ``max_repetitions`` is already decided, so stopping cannot change the answer a full run would vote (AIMO3
    2nd place: stop when the leader can no longer be caught). Counts, as every policy here; a tie could still
    change the answer, so the leader must stay strictly ahead.

    >>> lossless(_state(*"1111", max_repetitions=7)), lossless(_state(*"1111", max_repetitions=8))
    (True, False)
    >>> lossless(_state(*"11121", max_repetitions=8))  # 4 against 1 + 3 left could tie
    False
    >>> lossless(_state(*"1.11", max_repetitions=5)), lossless(_state(max_repetitions=0))
    (True, False)
    """
    v1, v2 = top_counts(state)
    return v1 > v2 + max(0, state.max_repetitions - state.finished)


def hold_probability(state: VoteState) -> float:
    """P(the leader is still strictly ahead of the runner-up once all ``max_repetitions`` have finished), under a
    Dirichlet(1, 1, 1) prior on (leader, runner-up, anything else — other answers and no answer) updated with
    the counts so far: the remaining r draws are Dirichlet-multinomial. X + Y (the two answers' new votes) is
    BetaBinomial(r, v1 + v2 + 2, rest + 1) and, given X + Y = m, X is BetaBinomial(m, v1 + 1, v2 + 1).
    The probabilistic form of :func:`lossless` (which is the case P = 1); repetitions without an answer make the
    remaining draws weigh less, as they do in the final vote.

    >>> hold_probability(_state(*"1111", max_repetitions=7)), hold_probability(_state(max_repetitions=4))
    (1.0, 0.0)
    >>> round(hold_probability(_state(*"11112", max_repetitions=10)), 3)
    0.949
    """
    v1, v2 = top_counts(state)
    rest = state.finished - v1 - v2
    return _hold(v1, v2, rest, max(0, state.max_repetitions - state.finished))


@functools.lru_cache(maxsize=65536)
def _hold(v1: int, v2: int, rest: int, remaining: int) -> float:
    """Cached: the simulator asks for the same few count tuples over and over."""
    if v1 == 0:
        return 0.0
    if v1 > v2 + remaining:
        return 1.0
    import numpy as np
    from scipy.stats import betabinom

    total = 0.0
    m = np.arange(remaining + 1)
    p_m = betabinom.pmf(m, remaining, v1 + v2 + 2, rest + 1)
    for count, weight in zip(m.tolist(), p_m.tolist()):
        x = np.arange(count + 1)
        ahead = v1 + x > v2 + (count - x)
        total += weight * float(betabinom.pmf(x, count, v1 + 1, v2 + 1)[ahead].sum())
    return float(total)


def hold(state: VoteState, p: float) -> bool:
    """The leader holds to the end with probability at least ``p`` (:func:`hold_probability`).

    >>> hold(_state(*"11112", max_repetitions=10), 0.94), hold(_state(*"11112", max_repetitions=30), 0.94)
    (True, False)
    """
    return hold_probability(state) >= p


def futile(state: VoteState, k: int) -> bool:
    """``k`` repetitions have finished and none gave an answer: give the problem up (its default answer) rather
    than spend the rest of its repetitions on a rare one. Not lossless: a problem whose few answers are right
    loses them (``solver tune`` measures the price).

    >>> futile(_state(None, None, None), 3), futile(_state(None, "1", None), 3), futile(_state(None, None), 3)
    (True, False, False)
    """
    return state.finished >= k and all(b is None for b in state.ballots)


def lead(state: VoteState) -> int:
    """The leader's votes minus the runner-up's, where every repetition without an answer counts as an answer of
    its own (a singleton): a failure is a vote for "something else", not for nobody.

    >>> lead(_state(*"1112")), lead(_state("1", "1", None)), lead(_state("1", "1")), lead(_state(None, None))
    (2, 1, 2, 0)
    """
    v1, v2 = top_counts(state)
    if v1 == 0:
        return 0
    if any(b is None for b in state.ballots):
        v2 = max(v2, 1)
    return v1 - v2


def margin(state: VoteState, m: int) -> bool:
    """The leader is ``m`` votes ahead of the runner-up (:func:`lead`; a fixed-margin sequential test, the
    rule Adaptive-Consistency's Beta posterior approximates for two answers).

    >>> margin(_state(*"1112"), 2), margin(_state(*"1112"), 3), margin(_state("1", "1", None), 2)
    (True, False, False)
    """
    return lead(state) >= m


def max_reps(state: VoteState) -> bool:
    """Every allowed repetition has finished.

    >>> max_reps(_state("1", max_repetitions=2)), max_reps(_state("1", None, max_repetitions=2))
    (False, True)
    """
    return state.finished >= state.max_repetitions


# ---- policies as named stoppers ------------------------------------------------------------------------


@dataclass(frozen=True)
class Policy:
    """One named rule; ``name`` is what a run records as the reason it stopped (e.g. ``"beta:0.95"``)."""

    name: str
    rule: Callable[[VoteState], bool]

    def __call__(self, state: VoteState) -> bool:
        return self.rule(state)


@dataclass(frozen=True)
class Combined:
    """Members joined by ``any`` or ``all``; :meth:`fired` says which member stopped the problem."""

    name: str
    members: tuple[Stopper, ...]
    combine: Literal["any", "all"]

    def __call__(self, state: VoteState) -> bool:
        return self.fired(state) is not None

    def fired(self, state: VoteState) -> StopReason | None:
        reasons = [stop_reason(m, state) for m in self.members]
        if self.combine == "any":
            return next((r for r in reasons if r is not None), None)
        if reasons and all(r is not None for r in reasons):
            return "+".join(r for r in reasons if r is not None)
        return None


def stop_reason(stopper: Stopper, state: VoteState) -> StopReason | None:
    """The name of the policy that fires on ``state`` (the first member of an ``any``), or None.

    >>> s = make_stopper(StopConfig(stoppers=("agree:2", "beta")), max_repetitions=4)
    >>> stop_reason(s, _state("1", "2")), stop_reason(s, _state("1", "1")), stop_reason(s, _state(*"1234"))
    (None, 'agree:2', 'max_reps')
    """
    if isinstance(stopper, Combined):
        return stopper.fired(state)
    return stopper.name if stopper(state) else None


@dataclass(frozen=True)
class _Param:
    """A policy's parameter: its default and range; ``whole`` for counts (repetitions, votes)."""

    default: float
    low: float = 1
    high: float = 10_000
    whole: bool = False

    def parse(self, name: str, param: str | None) -> float:
        if param is None:
            return int(self.default) if self.whole else self.default
        try:
            value = float(param)
        except ValueError:
            value = float("nan")
        if not self.low <= value <= self.high:
            raise ConfigError(f"stopper {name!r} needs a number in [{self.low:g}, {self.high:g}], got {param!r}")
        if not self.whole:
            return value
        if value != int(value):
            raise ConfigError(f"stopper {name!r} needs a whole number, got {param!r}")
        return int(value)


def _register(name: str, rule: Callable[..., bool], param: _Param | None = None) -> None:
    """Register ``rule`` under ``name`` by the one factory rule every policy follows: a policy without a
    parameter refuses one; with one, the value is checked against its range and written into the recorded name
    (``"beta:0.95"``, ``"agree:4"``) so a run's stop reason says which setting fired."""

    def factory(spec: str | None = None) -> Stopper:
        if param is None:
            if spec is not None:
                raise ConfigError(f"stopper {name!r} takes no parameter, got {spec!r}")
            return Policy(name, rule)
        value = param.parse(name, spec)
        return Policy(f"{name}:{value:g}", lambda s: rule(s, value))

    STOPPERS.register(name)(factory)


_register("agree_rules", agree_rules)
_register("agree", agree, _Param(4, whole=True))
_register("ztest", ztest, _Param(0.05, 1e-9, 0.5))
_register("beta", beta, _Param(0.95, 0.5, 1.0))
_register("esc", esc, _Param(5, whole=True))
_register("lossless", lossless)
_register("margin", margin, _Param(3, whole=True))
_register("hold", hold, _Param(0.95, 0.5, 1.0))
_register("futile", futile, _Param(10, whole=True))
_register("max_reps", max_reps)


def parse_stopper(spec: str) -> Stopper:
    """A stopper from ``"name"`` or ``"name:param"``.

    >>> parse_stopper("beta").name, parse_stopper("esc:3").name
    ('beta:0.95', 'esc:3')
    >>> parse_stopper("beta:2")
    Traceback (most recent call last):
    ...
    solver.errors.ConfigError: stopper 'beta' needs a number in [0.5, 1], got '2'
    """
    name, _, param = spec.strip().partition(":")
    return STOPPERS.create(name, param or None)


def make_stopper(stop: StopConfig, max_repetitions: int) -> Stopper:
    """``stop.stoppers`` joined by ``stop.combine``, always also stopping once ``max_repetitions`` (or the
    state's own, smaller, limit) have finished: past that point there is nothing left to wait for.

    >>> make_stopper(StopConfig(), 8).name
    'max_reps'
    >>> make_stopper(StopConfig(stoppers=("agree_rules", "beta:0.9"), combine="all"), 8).name
    'any(max_reps, all(agree_rules, beta:0.9))'
    """
    limit = Policy("max_reps", lambda s: s.finished >= min(max_repetitions, s.max_repetitions))
    if not stop.stoppers:
        return limit
    members = tuple(parse_stopper(spec) for spec in stop.stoppers)
    inner: Stopper = members[0]
    if len(members) > 1:
        inner = Combined(f"{stop.combine}({', '.join(m.name for m in members)})", members, stop.combine)
    return Combined(f"any(max_reps, {inner.name})", (limit, inner), "any")
