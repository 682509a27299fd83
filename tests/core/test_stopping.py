"""Stopping policies on hand-written vote sequences, their combination, and the confidence functions."""

from __future__ import annotations

import random

import pytest
from scipy.stats import beta as beta_dist

from solver.config import ConfigError, StopConfig
from solver.core.stopping import (
    STOPPERS,
    agree,
    agree_rules,
    beta,
    beta_probability,
    futile,
    hold_probability,
    lead,
    lossless,
    margin,
    esc,
    make_stopper,
    max_reps,
    parse_stopper,
    stop_reason,
    top_counts,
    ztest,
)
from solver.core.confidence import confidence_threshold, group_confidences, lowest_group_confidence, token_confidence
from solver.types import Ballot, VoteState

EMPTY = VoteState((), 8)


def state(votes: str, max_repetitions: int = 16, weight: float = 1.0) -> VoteState:
    """One character per finished repetition; '.' is a repetition without an answer."""
    return VoteState(tuple(None if v == "." else Ballot(v, weight) for v in votes), max_repetitions)


def first_stop(policy, votes: str, max_repetitions: int = 16) -> int | None:
    """How many finished repetitions the policy needed on this sequence, or None."""
    for n in range(len(votes) + 1):
        if policy(state(votes[:n], max_repetitions)):
            return n
    return None


def test_registry_names() -> None:
    assert STOPPERS.names() == ["agree", "agree_rules", "beta", "esc", "futile", "hold", "lossless", "margin", "max_reps", "ztest"]


def test_no_policy_stops_on_the_empty_vote() -> None:
    for spec in ["agree_rules", "agree:1", "ztest", "beta", "esc:1", "lossless", "margin:1"]:
        assert not parse_stopper(spec)(EMPTY), spec
    assert not max_reps(EMPTY)
    assert max_reps(VoteState((), 0))


@pytest.mark.parametrize(("votes", "stop_at"), [
    ("1111", 4),              # 4 agree within the first 4
    ("1112", None),           # 3 of 4 is not enough yet
    ("11121", 5),             # 4 of the last 5
    ("1122111", 7),           # 5 agree with f <= 7, no 5-window holding 4
    ("111.2.111", 9),         # 6 agree with f <= 9, only 7 answers collected
    ("12131415", 8),          # 8 answers collected of 15 allowed (1 has 5 votes, but f = 8 > 7)
    ("1.1.1.1.1", None),      # 5 answers at f = 9: nothing fires
])
def test_agree_rules_sequences(votes: str, stop_at: int | None) -> None:
    """As published: 15 repetitions per problem, stop at 8 answers."""
    assert first_stop(agree_rules, votes, max_repetitions=15) == stop_at


@pytest.mark.parametrize(("reps", "cap"), [(15, 8), (16, 9), (32, 18), (8, 5), (4, 3)])
def test_agree_rules_answer_cap_follows_the_repetitions(reps: int, cap: int) -> None:
    """Issue 14 §3: the cap was always 8 answers, so a 16- or 32-repetition preset mostly ran 8. It is the
    published 8 of 15, scaled to the problem's repetitions: ceil(8 * reps / 15)."""
    spread = "123456789" * 4  # no early-agreement rule fires
    assert first_stop(agree_rules, spread[:reps], max_repetitions=reps) == cap
    assert first_stop(make_stopper(StopConfig(("agree_rules",)), reps), spread[:reps], max_repetitions=reps) \
        == min(cap, reps)


def test_agree_k() -> None:
    assert first_stop(lambda s: agree(s, 4), "1213141") == 7
    assert first_stop(lambda s: agree(s, 2), "123.4") is None
    assert parse_stopper("agree").name == "agree:4"


def test_ztest_needs_a_significant_gap() -> None:
    alpha = 0.05
    # exact one-sided p = P(X >= v1), X ~ Binomial(v1 + v2, 1/2): 6:1 gives 0.0625, 7:1 gives 0.035
    assert first_stop(lambda s: ztest(s, alpha), "1211111111") == 8
    assert first_stop(lambda s: ztest(s, alpha), "12112111") is None  # 6:2 gives 0.145
    assert first_stop(lambda s: ztest(s, alpha), "1212") is None
    assert first_stop(lambda s: ztest(s, 0.01), "1211111111") is None  # stricter level: 8:1 gives 0.0195


def test_ztest_does_not_stop_at_two_of_two() -> None:
    """Issue 14 §3: the normal approximation gave z = 2 > 1.645 at 2 of 2; two votes cannot mean 95 %."""
    alpha = 0.05
    assert not ztest(state("11"), alpha) and not ztest(state("111"), alpha) and not ztest(state("1111"), alpha)
    assert first_stop(lambda s: ztest(s, alpha), "11111111") == 5  # unanimous: 0.5 ** 5 = 0.031 < 0.05
    assert first_stop(lambda s: ztest(s, alpha), "1.1.1.1.1") == 9  # answerless repetitions add no evidence


def test_ztest_matches_the_z_statistic_for_large_counts() -> None:
    """Far from the boundary the exact test and the z statistic (v1 - v2) / sqrt(v1 + v2) agree."""
    from scipy.stats import norm

    for v1, v2 in [(40, 22), (40, 25), (60, 40), (55, 45), (80, 57)]:
        z = (v1 - v2) / (v1 + v2) ** 0.5
        if abs(z - norm.ppf(0.95)) > 0.3:
            assert ztest(state("1" * v1 + "2" * v2, 500), 0.05) == (z > norm.ppf(0.95)), (v1, v2)


def test_beta_matches_the_adaptive_consistency_formula() -> None:
    assert beta_probability(state("1111")) == pytest.approx(1 - 0.5**5)
    assert beta_probability(state("11112")) == pytest.approx(57 / 64)
    assert beta_probability(state("1.2113")) == pytest.approx(beta_dist.sf(0.5, 4, 2))
    assert first_stop(lambda s: beta(s, 0.95), "1211111") == 7  # 5:1 gives 0.9375, 6:1 gives 0.965
    assert first_stop(lambda s: beta(s, 0.95), "12121212") is None


def test_esc_windows_are_aligned() -> None:
    assert first_stop(lambda s: esc(s, 5), "11111") == 5
    assert first_stop(lambda s: esc(s, 5), "1111211111") == 10
    assert first_stop(lambda s: esc(s, 5), "2111113333") is None  # five 1s, but across two windows
    assert first_stop(lambda s: esc(s, 5), "1111.") is None  # a missing answer breaks its window
    assert first_stop(lambda s: esc(s, 2), "1233") == 4


def test_policies_count_votes_not_weights() -> None:
    light = state("1111", weight=0.6)
    assert agree_rules(light) and agree(light, 4) and beta(light, 0.95)
    assert top_counts(light) == (4, 0)


def test_order_free_policies_ignore_the_order_of_ballots() -> None:
    rng = random.Random(3)
    policies = [parse_stopper(s) for s in ["agree:3", "beta", "beta:0.8", "ztest", "ztest:0.2"]]
    for _ in range(150):
        votes = "".join(rng.choice("1112233.") for _ in range(rng.randint(0, 10)))
        shuffled = "".join(rng.sample(votes, len(votes)))
        for policy in policies:
            assert policy(state(votes)) == policy(state(shuffled)), (policy.name, votes, shuffled)


def test_empty_stopper_list_stops_only_at_max_repetitions() -> None:
    stopper = make_stopper(StopConfig(), max_repetitions=3)
    assert not stopper(state("11", max_repetitions=8))  # unanimous, but no policy but the limit
    assert stopper(state("1.2", max_repetitions=8))  # the factory's limit
    assert stopper(state("12", max_repetitions=2))  # the state's own smaller limit
    assert stop_reason(stopper, state("12", max_repetitions=2)) == "max_reps"


def test_any_and_all_combinations() -> None:
    any_ = make_stopper(StopConfig(stoppers=("agree:3", "esc:2")), max_repetitions=16)
    all_ = make_stopper(StopConfig(stoppers=("agree:3", "esc:2"), combine="all"), max_repetitions=16)
    assert stop_reason(any_, state("11")) == "esc:2"
    assert stop_reason(all_, state("11")) is None
    assert stop_reason(any_, state("121.1")) == "agree:3"
    assert stop_reason(all_, state("121.1")) is None
    assert stop_reason(all_, state("1211")) == "agree:3+esc:2"
    assert stop_reason(all_, state("1" + "23" * 8, max_repetitions=17)) == "max_reps"
    assert any_(state("11")) and not all_(state("11"))


@pytest.mark.parametrize(("spec", "message"), [
    ("nope", "unknown stopper 'nope'"),
    ("beta:abc", "stopper 'beta' needs a number in"),
    ("beta:1.5", "stopper 'beta' needs a number in"),
    ("esc:0", "stopper 'esc' needs a number in"),
    ("esc:2.5", "stopper 'esc' needs a whole number"),
    ("agree_rules:3", "stopper 'agree_rules' takes no parameter"),
])
def test_bad_stopper_specs_are_config_errors(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make_stopper(StopConfig(stoppers=(spec,)), max_repetitions=8)


# ---- DeepConf-style confidence ------------------------------------------------------------------------------


def test_token_confidence_is_minus_the_mean_top_logprob() -> None:
    assert token_confidence([-0.01, -4.0, -8.0]) == pytest.approx(4.003333, rel=1e-5)
    assert token_confidence([0.0]) == 0.0
    with pytest.raises(ValueError):
        token_confidence([])


def test_group_confidences_match_a_naive_sliding_mean() -> None:
    rng = random.Random(11)
    for _ in range(50):
        conf = [rng.uniform(0, 10) for _ in range(rng.randint(1, 40))]
        window = rng.randint(1, 12)
        naive = [sum(conf[i:i + window]) / window for i in range(len(conf) - window + 1)] or [sum(conf) / len(conf)]
        assert group_confidences(conf, window) == pytest.approx(naive)
        assert lowest_group_confidence(conf, window) == pytest.approx(min(naive))
    assert lowest_group_confidence([], 4) is None
    with pytest.raises(ValueError):
        group_confidences([1.0], 0)


def test_confidence_threshold_is_a_percentile_of_warmup_lows() -> None:
    lows = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert confidence_threshold(lows, 0) == 1.0
    assert confidence_threshold(lows, 100) == 5.0
    assert confidence_threshold(lows, 50) == 3.0
    assert confidence_threshold(lows, 10) == pytest.approx(1.4)
    with pytest.raises(ValueError):
        confidence_threshold([], 10)


def test_lossless_never_changes_the_full_run_majority() -> None:
    """Whatever the repetitions still to come, the answer at a lossless stop is the full run's strict majority."""
    rng = random.Random(5)
    stops = 0
    for _ in range(400):
        n = rng.randint(1, 14)
        votes = "".join(rng.choice("1112234..") for _ in range(n))
        full = state(votes, n)
        counts = sorted(full.counts.items(), key=lambda kv: -kv[1])
        for k in range(n + 1):
            prefix = state(votes[:k], n)
            if lossless(prefix):
                stops += 1
                leader = max(prefix.counts, key=prefix.counts.get)
                assert counts[0][0] == leader and (len(counts) == 1 or counts[1][1] < counts[0][1]), votes
                break
    assert stops > 100  # the property was exercised, not vacuous


@pytest.mark.parametrize(("votes", "reps", "stop_at"), [
    ("1111", 7, 4), ("1111", 8, None), ("11211111", 8, 6), ("1.1.1.1.", 8, 6), ("11111111", 16, None),
])
def test_lossless_sequences(votes: str, reps: int, stop_at: int | None) -> None:
    assert first_stop(lossless, votes, max_repetitions=reps) == stop_at


@pytest.mark.parametrize(("votes", "m", "stop_at"), [
    ("111", 3, 3), ("1211", 2, 4), ("1.11", 2, 4),  # the answerless repetition is a runner-up of one
    ("1.1", 2, None), ("..1", 1, None), ("12", 1, 1), ("2121", 2, None), ("121311", 3, 6),
])
def test_margin_counts_answerless_repetitions_as_singletons(votes: str, m: int, stop_at: int | None) -> None:
    assert first_stop(lambda s: margin(s, m), votes) == stop_at
    assert parse_stopper("margin").name == "margin:3"
    assert lead(state("..")) == 0


@pytest.mark.parametrize(("votes", "reps"), [("11112", 10), ("1.2.11", 12), ("112", 20), ("1..", 9), ("121", 6)])
def test_hold_probability_matches_a_simulated_posterior(votes: str, reps: int) -> None:
    """The closed form against drawing the shares from the Dirichlet posterior and the rest of the run from them."""
    import numpy as np

    s = state(votes, reps)
    counts = sorted(s.counts.values(), reverse=True) + [0.0, 0.0]
    v1, v2 = int(counts[0]), int(counts[1])
    rest = len(votes) - v1 - v2
    rng = np.random.default_rng(0)
    shares = rng.dirichlet([v1 + 1, v2 + 1, rest + 1], size=200_000)
    draws = np.array([rng.multinomial(reps - len(votes), p) for p in shares[:20_000]])
    simulated = float((v1 + draws[:, 0] > v2 + draws[:, 1]).mean())
    assert hold_probability(s) == pytest.approx(simulated, abs=0.015)


def test_hold_is_lossless_at_one_and_looser_below() -> None:
    rng = random.Random(9)
    for _ in range(200):
        n = rng.randint(1, 12)
        votes = "".join(rng.choice("1112.") for _ in range(rng.randint(0, n)))
        s = state(votes, n)
        assert (hold_probability(s) == 1.0) == lossless(s) or top_counts(s)[0] == 0
        assert not parse_stopper("hold:0.99")(s) or parse_stopper("hold:0.8")(s)


@pytest.mark.parametrize(("votes", "k", "stop_at"), [("....", 3, 3), ("..1...", 3, None), ("...", 4, None),
                                                    ("1", 1, None)])
def test_futile_gives_up_only_on_answerless_starts(votes: str, k: int, stop_at: int | None) -> None:
    assert first_stop(lambda s: futile(s, k), votes) == stop_at
    assert parse_stopper("futile").name == "futile:10"
