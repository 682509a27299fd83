"""Voters: which answer a repetition casts, its weight, tie rules and the default answer."""

from __future__ import annotations

import random

import pytest

from solver.config import AnswerConfig, ConfigError, VoteConfig
from solver.types import Answer, Ballot, Repetition, RepetitionStatus, Turn
from solver.core.voting import VOTERS, decide, make_voter, tally

RULES = AnswerConfig()


def rep(*answers: tuple[str, str], status: RepetitionStatus = "done", confidences: tuple[tuple[float | None, int], ...] = (),
        index: int = 0) -> Repetition:
    """A finished repetition with the given (value, source) candidates and per-turn (confidence, tokens)."""
    turns = tuple(Turn("", 10, n, "stop", 0.1, confidence=c) for c, n in confidences)
    cands = tuple(Answer(v, v, s) for v, s in answers)  # type: ignore[arg-type]
    return Repetition("p1", index, index, status, turns, cands, 0.0, 1.0)


def voter(name: str, **kw: object):
    return make_voter(VoteConfig(voter=name, **kw), RULES)  # type: ignore[arg-type]


def test_registry_lists_the_voters() -> None:
    assert VOTERS.names() == ["code_first", "confidence", "majority", "vote_share", "weighted"]
    with pytest.raises(ConfigError, match="unknown voter 'plurality'"):
        make_voter(VoteConfig(voter="plurality"), RULES)


def test_majority_prefers_last_boxed_then_phrase_then_code() -> None:
    v = voter("majority")
    assert v.ballot(rep(("1", "boxed"), ("2", "phrase"), ("3", "boxed"), ("4", "code"))) == Ballot("3")
    assert v.ballot(rep(("2", "phrase"), ("4", "code"))) == Ballot("2")
    assert v.ballot(rep(("4", "code"))) == Ballot("4")
    assert v.ballot(rep()) is None


def test_code_first_prefers_the_code_output() -> None:
    v = voter("code_first")
    assert v.ballot(rep(("1", "boxed"), ("7", "code"))) == Ballot("7")
    assert v.ballot(rep(("1", "boxed"))) == Ballot("1")


def test_weighted_voter_downweights_small_and_round_answers() -> None:
    v = voter("weighted", weights={"small": 0.6, "multiple_of_100": 0.6})
    assert v.ballot(rep(("7", "boxed"))) == Ballot("7", 0.6)
    assert v.ballot(rep(("500", "boxed"))) == Ballot("500", 0.6)
    assert v.ballot(rep(("123", "boxed"))) == Ballot("123", 1.0)
    ballots = [v.ballot(rep((a, "boxed"))) for a in ["7", "123", "7"]]  # 1.2 vs 1.0
    assert v.winner(ballots) == "7"
    ballots = [v.ballot(rep((a, "boxed"))) for a in ["7", "123", "123", "7", "7", "7"]]  # 2.4 vs 2.0
    assert v.winner(ballots) == "7"
    ballots = [v.ballot(rep((a, "boxed"))) for a in ["7", "123", "123", "7", "7"]]  # 1.8 vs 2.0
    assert v.winner(ballots) == "123"


def test_weighted_voter_rejects_unknown_rules() -> None:
    with pytest.raises(ConfigError, match="unknown vote.weights rule 'prime'"):
        voter("weighted", weights={"prime": 0.5})


def test_confidence_voter_uses_token_weighted_turn_confidence() -> None:
    v = voter("confidence")
    confident = rep(("5", "boxed"), confidences=((8.0, 100), (4.0, 100)))  # weight 6.0
    unsure = rep(("9", "boxed"), confidences=((2.0, 300),))
    assert v.ballot(confident) == Ballot("5", 6.0)
    assert v.winner([v.ballot(confident), v.ballot(unsure), v.ballot(unsure)]) == "5"  # 6.0 vs 4.0


def test_confidence_voter_weighs_unrated_repetitions_like_the_rated_ones() -> None:
    """Issue 14 §3: a repetition without confidence data weighed 1.0 while rated ones weighed ~6, so two
    unrated votes lost to one rated vote. Unrated ballots now weigh the mean of the rated ballots counted with
    them (and everything weighs the same when nothing is rated)."""
    v = voter("confidence")
    rated = v.ballot(rep(("5", "boxed"), confidences=((6.0, 100),)))
    unrated = [v.ballot(rep(("9", "boxed"), confidences=((None, 100),))), v.ballot(rep(("9", "boxed")))]
    assert v.winner([rated, *unrated]) == "9"  # two votes of mean weight 6 against one of 6
    assert v.winner([*unrated, v.ballot(rep(("4", "boxed")))]) == "9"  # nothing rated: plain majority
    low = v.ballot(rep(("3", "boxed"), confidences=((1.0, 100),)))
    high = v.ballot(rep(("7", "boxed"), confidences=((11.0, 100),)))
    # mean rated weight 6: the unrated "3" adds 6 to low's 1 (7) against high's 11
    assert v.winner([low, high, v.ballot(rep(("3", "boxed")))]) == "7"
    assert v.winner([low, high, v.ballot(rep(("3", "boxed"))), v.ballot(rep(("3", "boxed")))]) == "3"  # 13 > 11


@pytest.mark.parametrize(("tie", "expected"), [("smallest", "9"), ("largest", "10"), ("first", "10")])
def test_tie_rules_compare_numbers_numerically(tie: str, expected: str) -> None:
    ballots = [Ballot("10"), Ballot("9"), Ballot("10"), Ballot("9")]
    assert voter("majority", tie=tie).winner(ballots) == expected  # "10" < "9" as text


def test_first_tie_rule_is_first_to_reach_the_top_weight() -> None:
    # "3" is seen first but "8" reaches two votes first.
    ballots = [Ballot("3"), Ballot("8"), Ballot("8"), Ballot("3")]
    assert voter("majority", tie="first").winner(ballots) == "8"


def test_ties_between_numbers_and_expressions_prefer_numbers_for_smallest() -> None:
    ballots = [Ballot(r"\frac{1}{2}"), Ballot("0.75")]
    assert voter("majority", tie="smallest").winner(ballots) == "0.75"
    assert voter("majority", tie="largest").winner(ballots) == r"\frac{1}{2}"


def test_float_weight_ties_are_ties() -> None:
    ballots = [Ballot("1", 0.1), Ballot("1", 0.2), Ballot("2", 0.3)]  # 0.1 + 0.2 != 0.3 in floats
    assert voter("majority", tie="smallest").winner(ballots) == "1"
    assert voter("majority", tie="largest").winner(ballots) == "2"


def test_decide_falls_back_to_the_default_answer() -> None:
    v = voter("majority")
    assert decide(v, [], "0") == "0"
    assert decide(v, [None, None], "0") == "0"
    assert decide(v, [None, Ballot("12")], "0") == "12"


def test_permuting_ballots_never_changes_the_tally_or_an_order_free_winner() -> None:
    rng = random.Random(7)
    for _ in range(200):
        ballots = [None if rng.random() < 0.2 else Ballot(str(rng.randint(0, 5)), rng.choice([0.6, 1.0]))
                   for _ in range(rng.randint(0, 12))]
        shuffled = ballots[:]
        rng.shuffle(shuffled)
        before, after = tally(ballots), tally(shuffled)
        assert before.keys() == after.keys()
        assert all(abs(before[k] - after[k]) < 1e-9 for k in before)
        for tie in ("smallest", "largest"):
            assert voter("majority", tie=tie).winner(ballots) == voter("majority", tie=tie).winner(shuffled)


def test_vote_share_lets_confidence_break_ties_only() -> None:
    """One very confident wrong trace must not beat two unsure right ones (it would under the confidence voter);
    between equal vote counts the more confident tail wins."""
    v = voter("vote_share")
    confident = rep(("9", "boxed"), confidences=((30.0, 500), (60.0, 100)))  # mean 35
    unsure = rep(("5", "boxed"), confidences=((8.0, 500), (0.5, 100)))
    assert v.winner([v.ballot(confident), v.ballot(unsure), v.ballot(unsure)]) == "5"
    assert voter("confidence").winner([voter("confidence").ballot(r) for r in (confident, unsure, unsure)]) == "9"
    assert v.winner([v.ballot(unsure), v.ballot(confident)]) == "9"  # 1:1, the last turn's confidence decides
    assert v.winner([v.ballot(rep(("5", "boxed"))), v.ballot(rep(("9", "boxed")))]) == "5"  # no data: tie rule
    many = [v.ballot(rep(("5", "boxed"), confidences=((1e6, 10),))) for _ in range(999)]
    plain = [v.ballot(rep(("9", "boxed"))) for _ in range(1000)]
    assert v.winner(many + plain) == "9"  # 999 maximal bonuses stay below one vote
