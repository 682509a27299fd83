"""The simulator's estimators against published ones, on small recordings whose values are computed by hand:
pass@k against Chen et al.'s unbiased estimator, a two-answer majority against G-Pass@k at τ = 0.5 (arXiv
2412.13147), and the first-k majority harnesses report (NeMo-Skills' majority@k) against the all-orders draw; then
the trials against the exact all-orders values they sample."""

from __future__ import annotations

import itertools
import math
from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest

from solver.config import AnswerConfig, StopConfig, VoteConfig
from solver.core.state import Rules
from solver.offline.sim import simulate
from solver.offline.sim.estimators import drawn_pass, drawn_vote
from solver.core.grading import pass_at_k
from solver.types import Ballot

from offline.test_simulate import request, write_run

R, W = "5", "7"  # the right answer and the wrong one of every case below


def majority(k: int) -> Rules:
    return Rules.build(VoteConfig(), AnswerConfig(), StopConfig(), k)


def ballots(answers: list[str | None]) -> list[Ballot | None]:
    return [None if a is None else Ballot(a) for a in answers]


def chen(n: int, c: int, k: int) -> Fraction:
    """1 - C(n - c, k) / C(n, k), as Chen et al. (2021) write it."""
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def g_pass(n: int, c: int, k: int, tau: float) -> Fraction:
    """G-Pass@k at threshold τ as Liu et al. (2024) write it: Σ_{j=⌈τk⌉}^{c} C(c, j) C(n - c, k - j) / C(n, k)
    (the terms past j = k are C(n - c, negative) = 0)."""
    return sum((Fraction(math.comb(c, j) * math.comb(n - c, k - j), math.comb(n, k))
                for j in range(math.ceil(tau * k), min(c, k) + 1)), Fraction(0))


@pytest.mark.parametrize(("n", "c", "k", "by_hand"), [
    (5, 2, 2, Fraction(7, 10)),  # 1 - C(3, 2) / C(5, 2) = 1 - 3/10
    (4, 1, 3, Fraction(3, 4)),  # 1 - C(3, 3) / C(4, 3) = 1 - 1/4
    (6, 0, 3, Fraction(0)),  # nothing right: never
    (4, 2, 3, Fraction(1)),  # n - c < k: every draw holds a right one
])
def test_pass_at_k_is_chens_unbiased_estimator(n: int, c: int, k: int, by_hand: Fraction) -> None:
    assert chen(n, c, k) == by_hand
    assert drawn_pass([i < c for i in range(n)], k) == by_hand  # the share of ordered draws
    assert pass_at_k(n, c, k) == pytest.approx(float(by_hand), abs=1e-12)  # solver/core/grading.py


@pytest.mark.parametrize(("n", "c", "k", "by_hand"), [
    (5, 3, 3, Fraction(7, 10)),  # at least 2 of 3 right: (C(3,2) C(2,1) + C(3,3) C(2,0)) / C(5,3) = (6 + 1) / 10
    (5, 2, 3, Fraction(3, 10)),  # C(2,2) C(3,1) / C(5,3)
    (7, 4, 5, Fraction(4 * 3 + 1 * 3, 21)),  # at least 3 of 5: C(4,3) C(3,2) + C(4,4) C(3,1) over C(7,5)
])
def test_a_two_answer_majority_of_odd_k_is_g_pass_at_one_half(n: int, c: int, k: int, by_hand: Fraction) -> None:
    recording = ballots([R] * c + [W] * (n - c))
    assert g_pass(n, c, k, 0.5) == by_hand
    assert drawn_vote(recording, lambda a: a == R, k, majority(k)) == by_hand


def test_at_even_k_the_vote_splits_the_tie_that_g_pass_counts() -> None:
    """5 recorded, 3 right, k = 2: G-Pass@2 at τ = 0.5 counts one right of two as a pass, 9/10; the 1 : 1 tie
    (6/10 of draws) goes to whichever answer finished first, the right one in half of its orders: 9/10 - 3/10."""
    n, c, k = 5, 3, 2
    assert g_pass(n, c, k, 0.5) == Fraction(9, 10)
    tie = Fraction(math.comb(c, 1) * math.comb(n - c, 1), math.comb(n, k))
    assert tie == Fraction(6, 10)
    voted = drawn_vote(ballots([R] * c + [W] * (n - c)), lambda a: a == R, k, majority(k))
    assert voted == g_pass(n, c, k, 0.5) - tie / 2 == Fraction(3, 5)


def first_k_majority(answers: list[str | None], reference: str, k: int) -> Fraction:
    """majority@k as NeMo-Skills' metrics describe it (our reading, written here): the first k samples, those
    without an answer dropped; a tie among the most common answers scores their mean correctness; none left: 0."""
    given = [a for a in answers[:k] if a is not None]
    if not given:
        return Fraction(0)
    counts = Counter(given)
    top = max(counts.values())
    tied = [a for a, n in counts.items() if n == top]
    return Fraction(sum(a == reference for a in tied), len(tied))


def test_first_k_majority_is_one_draw_of_the_all_orders_share() -> None:
    """A recording stored as 7, 7, 5, -, 5 (5 right, one sample without an answer), k = 3: the harness reads the
    first three, 7 7 5, and scores 0. The all-orders share is 1/2 by hand: of the 10 three-subsets, {5 5 x} and
    {5 - 5} always win (3 subsets), {7 7 x} never (3), and the four ties 5 : 7 ({5 - 7} twice, {- 7 5} twice)
    win in half their orders: (3 + 4/2) / 10. Averaged over every storage order, the harness's number is the same
    1/2: its even split of a tie and the vote's first-reached break agree on average."""
    stored = [W, W, R, None, R]
    assert first_k_majority(stored, R, 3) == 0
    ours = drawn_vote(ballots(stored), lambda a: a == R, 3, majority(3))
    assert ours == Fraction(1, 2)
    orders = list(itertools.permutations(stored))
    assert sum((first_k_majority(list(o), R, 3) for o in orders), Fraction(0)) / len(orders) == ours


def test_a_draw_without_answers_votes_the_default_where_the_harness_scores_zero() -> None:
    """No sample of the two answered: the harness scores 0; the loop submits ``answers.default`` ("0"), right
    when the reference is 0."""
    assert first_k_majority([None, None], "0", 2) == 0
    assert drawn_vote([None, None], lambda a: a == "0", 2, majority(2)) == 1


def test_the_trials_sample_the_all_orders_share(tmp_path: Path) -> None:
    """Draws without replacement (``subset``) of N of each recording, every problem in every trial: each problem's
    share of right trials estimates its exact all-orders vote, within 4 standard errors."""
    spec = {"a": (R, [R, R, W, W, W]), "b": (R, [R, W, None, R, W, W]), "c": (R, [W, W, R, None, R]),
            "d": (R, [R, R, R, W])}
    run = write_run(tmp_path / "run", spec)
    trials = 2000
    report = simulate(request(run, reps=(3,), workers=(1,), trials=trials, draw="subset"))
    shares = dict(zip([p.problem.id for p in report.prepared], report.summaries[0].right_share))
    for pid, (ref, answers) in spec.items():
        exact = float(drawn_vote(ballots(answers), lambda a: a == ref, 3, majority(3)))
        se = math.sqrt(exact * (1 - exact) / trials)
        assert abs(shares[pid] - exact) <= 4 * se + 1e-12, (pid, shares[pid], exact)
    assert float(drawn_vote(ballots(spec["a"][1]), lambda a: a == R, 3, majority(3))) == pytest.approx(0.3)
    assert np.isclose(report.summaries[0].mean, sum(shares.values()))
