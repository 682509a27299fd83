"""Voting: which answer each repetition casts, with what weight, and which answer wins.

A voter is data plus two small functions: ``pick`` chooses a repetition's answer among its candidates and
``weigh`` gives its ballot a weight; ties among the top weight follow ``VoteConfig.tie``. Voters are chosen
by name from :data:`VOTERS`; each factory takes ``(vote: VoteConfig, answers: AnswerConfig)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Literal

from solver.config import AnswerConfig, ConfigError, VoteConfig
from solver.config import Registry
from solver.types import Answer, AnswerSource, Ballot, Repetition, Voter, VoteState

TieRule = Literal["smallest", "largest", "first"]
Pick = Callable[[Repetition], Answer | None]
Weigh = Callable[[Repetition, Answer], float]

VOTERS: Registry[Voter] = Registry("voter")


# ---- picking an answer ---------------------------------------------------------------------------------


def text_answer(repetition: Repetition) -> Answer | None:
    """The answer the text gives: the last boxed one, else the last phrase, else the last code output."""
    sources: tuple[AnswerSource, ...] = ("boxed", "phrase", "code")
    for source in sources:
        answer = repetition.answer_from(source)
        if answer is not None:
            return answer
    return None


def code_first_answer(repetition: Repetition) -> Answer | None:
    """The last code output answer when there is one, else :func:`text_answer`."""
    return repetition.answer_from("code") or text_answer(repetition)


# ---- weighing a ballot ---------------------------------------------------------------------------------


def _as_int(value: str) -> int | None:
    return int(value) if value.lstrip("-").isdigit() else None


# Answer rules the weighted voter knows; VoteConfig.weights maps some of these names to weights.
ANSWER_RULES: dict[str, Callable[[str], bool]] = {
    "small": lambda v: (n := _as_int(v)) is not None and n <= 20,
    "multiple_of_100": lambda v: (n := _as_int(v)) is not None and n % 100 == 0,
}


def rule_weight(value: str, weights: dict[str, float]) -> float:
    """The lowest weight among the rules ``value`` matches; 1.0 when none does.

    The lowest, not the product: ``0`` is both small and a multiple of 100, one reason for doubt, not two.

    >>> w = {"small": 0.6, "multiple_of_100": 0.6}
    >>> rule_weight("7", w), rule_weight("300", w), rule_weight("0", w), rule_weight("123", w)
    (0.6, 0.6, 0.6, 1.0)
    """
    return min((w for name, w in weights.items() if ANSWER_RULES[name](value)), default=1.0)


def repetition_confidence(repetition: Repetition) -> float | None:
    """Mean of ``Turn.confidence`` over turns, weighted by generated tokens; None when none was recorded.

    >>> from solver.types import Turn
    >>> t = lambda c, n: Turn("", 0, n, "stop", 0.0, confidence=c)
    >>> rep = Repetition("p", 0, 0, "done", (t(2.0, 100), t(5.0, 300), t(None, 50)), (), 0.0, 0.0)
    >>> repetition_confidence(rep)
    4.25
    """
    turns = [t for t in repetition.turns if t.confidence is not None]
    if not turns:
        return None
    tokens = sum(t.generated_tokens for t in turns)
    if tokens == 0:  # no token counts: every turn counts the same
        return sum(t.confidence for t in turns) / len(turns)  # type: ignore[misc]
    return sum(t.confidence * t.generated_tokens for t in turns) / tokens  # type: ignore[operator]


# ---- the voter -----------------------------------------------------------------------------------------


def _number(value: str) -> Decimal | None:
    try:
        number = Decimal(value)
    except InvalidOperation:
        return None
    return number if number.is_finite() else None


def _order_key(value: str) -> tuple[int, Decimal, str]:
    """Numbers compare by value and come before other answers, which compare as text."""
    number = _number(value)
    return (0, number, "") if number is not None else (1, Decimal(0), value)


def tally(ballots: Sequence[Ballot | None]) -> dict[str, float]:
    """Answer -> total weight, in first-seen order (the same as ``VoteState.counts``).

    >>> tally([Ballot("7"), None, Ballot("3", 0.5), Ballot("7")])
    {'7': 2.0, '3': 0.5}
    """
    return VoteState(tuple(ballots), 0).counts


def top_answers(ballots: Sequence[Ballot | None], tie: TieRule) -> str | None:
    """The answer with the most weight; ties broken by ``tie``; None when nothing voted.

    ``first`` picks, among the tied answers, the first whose running total reached the top weight in finish
    order; ``smallest``/``largest`` compare numerically when both answers are numbers.

    >>> b = [Ballot("10"), Ballot("9"), Ballot("9"), Ballot("10")]
    >>> top_answers(b, "first"), top_answers(b, "smallest"), top_answers(b, "largest")
    ('9', '9', '10')
    >>> top_answers([None], "first") is None
    True
    """
    totals = tally(ballots)
    if not totals:
        return None
    best = max(totals.values())
    tied = [a for a, w in totals.items() if math.isclose(w, best, rel_tol=1e-9)]
    if len(tied) == 1:
        return tied[0]
    if tie == "smallest":
        return min(tied, key=_order_key)
    if tie == "largest":
        return max(tied, key=_order_key)
    running: dict[str, float] = {}
    for b in ballots:
        if b is not None and b.answer in tied:
            running[b.answer] = running.get(b.answer, 0.0) + b.weight
            if math.isclose(running[b.answer], best, rel_tol=1e-9):
                return b.answer
    return tied[0]  # unreachable: some tied answer reaches the top weight


@dataclass(frozen=True)
class RuleVoter:
    """A voter made of a pick rule, a weight rule and a tie rule."""

    name: str
    pick: Pick
    weigh: Weigh
    tie: TieRule

    def ballot(self, repetition: Repetition) -> Ballot | None:
        answer = self.pick(repetition)
        return None if answer is None else Ballot(answer.value, self.weigh(repetition, answer))

    def winner(self, ballots: Sequence[Ballot | None]) -> str | None:
        return top_answers(ballots, self.tie)


def _one(_repetition: Repetition, _answer: Answer) -> float:
    return 1.0


@VOTERS.register("majority")
def majority(vote: VoteConfig, answers: AnswerConfig) -> Voter:
    """Plain self-consistency majority over text answers (Numina, AIMO1 first place)."""
    return RuleVoter("majority", text_answer, _one, vote.tie)


@VOTERS.register("code_first")
def code_first(vote: VoteConfig, answers: AnswerConfig) -> Voter:
    """The code output answer is preferred over the text answer when both exist (AIMO1 seed notebook)."""
    return RuleVoter("code_first", code_first_answer, _one, vote.tie)


@VOTERS.register("weighted")
def weighted(vote: VoteConfig, answers: AnswerConfig) -> Voter:
    """Text answers weighed by answer rules as data, e.g. answers <= 20 or multiples of 100 count 0.6
    (AIMO2 runner-up). Unknown rule names are a configuration error."""
    unknown = sorted(set(vote.weights) - set(ANSWER_RULES))
    if unknown:
        raise ConfigError(f"unknown vote.weights rule {unknown[0]!r} (choose from {', '.join(ANSWER_RULES)})")
    if any(w < 0 for w in vote.weights.values()):
        raise ConfigError("vote.weights must be >= 0")
    weights = dict(vote.weights)
    return RuleVoter("weighted", text_answer, lambda _r, a: rule_weight(a.value, weights), vote.tie)


@dataclass(frozen=True)
class UnratedBallot(Ballot):
    """The ballot of a repetition that recorded no confidence (no logprobs, no generated tokens, an imported
    sample). Its weight field holds 1.0 for displays; :class:`ConfidenceVoter` weighs it like the rated ballots
    it is counted with, as it has no evidence to weigh it above or below them."""


@dataclass(frozen=True)
class ConfidenceVoter:
    """Text answers weighed by the repetition's mean token confidence (DeepConf; the AIMO3 public lineage
    weighs by inverse entropy in the same spirit). An unrated repetition weighs the mean weight of the rated
    ballots in the same vote: weighing it 1.0 beside confidences of ~5-15 let one rated vote outweigh several
    unrated ones (issue 14). With nothing rated, every ballot weighs 1: plain majority."""

    name: str
    tie: TieRule

    def ballot(self, repetition: Repetition) -> Ballot | None:
        answer = text_answer(repetition)
        if answer is None:
            return None
        value = repetition_confidence(repetition)
        return UnratedBallot(answer.value) if value is None else Ballot(answer.value, value)

    def winner(self, ballots: Sequence[Ballot | None]) -> str | None:
        return top_answers(fill_unrated(ballots), self.tie)


def fill_unrated(ballots: Sequence[Ballot | None]) -> list[Ballot | None]:
    """Unrated ballots take the mean weight of the rated ones (1.0 when none is rated).

    >>> fill_unrated([Ballot("1", 4.0), UnratedBallot("2"), None, Ballot("3", 8.0)])
    [Ballot(answer='1', weight=4.0), Ballot(answer='2', weight=6.0), None, Ballot(answer='3', weight=8.0)]
    """
    rated = [b.weight for b in ballots if b is not None and not isinstance(b, UnratedBallot)]
    mean = sum(rated) / len(rated) if rated else 1.0
    return [Ballot(b.answer, mean) if isinstance(b, UnratedBallot) else b for b in ballots]


@VOTERS.register("confidence")
def confidence(vote: VoteConfig, answers: AnswerConfig) -> Voter:
    """See :class:`ConfidenceVoter`."""
    return ConfidenceVoter("confidence", vote.tie)


TAIL_BONUS = 1e-3  # one ballot's largest bonus, in votes: a thousand ballots' bonuses stay below one vote


def tail_confidence(repetition: Repetition) -> float | None:
    """The mean token confidence of the last turn that recorded one: the run log's nearest record to the last
    ~256 tokens the AIMO3 2nd-place solution measured (the log keeps per-turn means, not per-token values).

    >>> from solver.types import Turn
    >>> t = lambda c: Turn("", 0, 10, "stop", 0.0, confidence=c)
    >>> tail_confidence(Repetition("p", 0, 0, "done", (t(2.0), t(7.0), t(None)), (), 0.0, 0.0))
    7.0
    """
    return next((t.confidence for t in reversed(repetition.turns) if t.confidence is not None), None)


def share_bonus(confidence: float | None) -> float:
    """A ballot's weight: one vote plus a bonus below :data:`TAIL_BONUS` that grows with the tail confidence.

    >>> share_bonus(None), share_bonus(0.0), round(share_bonus(3.0), 6), share_bonus(1e9) < 1 + TAIL_BONUS
    (1.0, 1.0, 1.00075, True)
    """
    if confidence is None or confidence <= 0:
        return 1.0
    return 1.0 + TAIL_BONUS * confidence / (1.0 + confidence)


@VOTERS.register("vote_share")
def vote_share(vote: VoteConfig, answers: AnswerConfig) -> Voter:
    """Vote share first, tail confidence only as a tiebreak and bonus (AIMO3 2nd place): a single confident
    wrong trace hijacks a sum of 1 / entropy, so confidence may only order answers with equal votes. Ties the
    bonuses leave (no confidence recorded) follow ``vote.tie``."""
    return RuleVoter("vote_share", text_answer, lambda r, _a: share_bonus(tail_confidence(r)), vote.tie)


def make_voter(vote: VoteConfig, answers: AnswerConfig) -> Voter:
    """The voter ``vote.voter`` names; an unknown name is a ``ConfigError``."""
    return VOTERS.create(vote.voter, vote, answers)


def decide(voter: Voter, ballots: Sequence[Ballot | None], default: str) -> str:
    """The winner, or ``default`` when nothing voted.

    >>> v = make_voter(VoteConfig(), AnswerConfig())
    >>> decide(v, [Ballot("5"), None, Ballot("5")], "0"), decide(v, [None, None], "0"), decide(v, [], "0")
    ('5', '0', '0')
    """
    winner = voter.winner(ballots)
    return default if winner is None else winner

