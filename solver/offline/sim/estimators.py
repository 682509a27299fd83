"""What the trials estimate, exactly, on a small recording: the share of every ordered draw of k of its n recorded
repetitions (without replacement, each order equally likely: the ``subset`` draw, and ``auto`` where k <= n) on
which an event happens. The trials sample these orders; here they are all enumerated (n! / (n - k)! of them, so
small cases only), which is what the tests set against the published estimators:

- pass@k (Chen et al. 2021, "Evaluating Large Language Models Trained on Code"): 1 - C(n - c, k) / C(n, k), the
  chance that k of n samples, c of them right, hold a right one. Every k-subset appears in k! orders, so the share
  of ordered draws holding a right repetition is the same number (``solver.core.grading.pass_at_k`` computes the
  formula).
- G-Pass@k at threshold τ (Liu et al. 2024, arXiv 2412.13147):
  Σ_{j = ⌈τk⌉}^{c} C(c, j) C(n - c, k - j) / C(n, k), the chance that at least ⌈τk⌉ of the k drawn are right. With two answers (the right one and one wrong one) a
  majority of odd k is right exactly when more than k/2 are: G-Pass@k at τ = 0.5. At even k G-Pass counts the
  k/2 : k/2 tie as a pass; the vote breaks it for the answer that reached k/2 first (``vote.tie = first``), the
  right one in half the orders, so the majority is G-Pass@k(0.5) minus half the chance of the tie.
- majority@k as harnesses report it (NeMo-Skills' ``_compute_majority_at_k``): the first k samples in the order they
  were generated and stored, samples without an answer dropped, a tie among the most common answers scored as the
  mean correctness of the tied answers, nothing left scoring 0. On one recording that is one draw of k, fixed by
  the storage order: its value moves with that order, and only its expectation over the orders is a property of
  the model. That expectation is the all-orders share here: every ordered draw is equally likely, and the
  first-reached tie break favours each tied answer in as many orders as the others, which averages to the even
  split. Two differences remain by design: a draw whose k samples all lack an answer votes the default answer
  here (``answers.default``, as the running loop does), right when the reference is that default, where the
  harness scores 0; and the trials play the setting's stopper, budget and workers on the draw, where the harness
  votes all k.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from fractions import Fraction

from solver.core.state import Rules
from solver.offline.sim.play import fixed_rounds, play_on
from solver.offline.sim.pools import SimulationError
from solver.types import Ballot

ORDERS_MAX = 1_000_000  # ordered draws enumerated at most (n! / (n - k)!)


def all_orders(n: int, k: int, event: Callable[[tuple[int, ...]], bool]) -> Fraction:
    """The share of the ordered draws of ``k`` of ``n`` (indices, without replacement) on which ``event`` holds.

    >>> all_orders(3, 2, lambda draw: draw[0] < draw[1])
    Fraction(1, 2)
    """
    if not 0 < k <= n:
        raise SimulationError(f"an ordered draw of {k} of {n} recorded repetitions needs 0 < k <= n")
    total = math.perm(n, k)
    if total > ORDERS_MAX:
        raise SimulationError(f"{total} ordered draws of {k} of {n}: too many to enumerate (at most {ORDERS_MAX})")
    hits = sum(1 for draw in itertools.permutations(range(n), k) if event(draw))
    return Fraction(hits, total)


def drawn_pass(correct: Sequence[bool], k: int) -> Fraction:
    """The share of ordered draws of ``k`` that hold a right repetition (pass@k).

    >>> drawn_pass([True, False, False, False], 2)  # 1 - C(3, 2) / C(4, 2)
    Fraction(1, 2)
    """
    return all_orders(len(correct), k, lambda draw: any(correct[i] for i in draw))


def drawn_vote(ballots: Sequence[Ballot | None], right: Callable[[str], bool], k: int, rules: Rules) -> Fraction:
    """The share of ordered draws of ``k`` whose vote is right, each draw played as the trials play a problem
    (``play_on``: the draw's ballots finishing one at a time in draw order, decided by ``rules``, limited to k).

    >>> from solver.config import AnswerConfig, StopConfig, VoteConfig
    >>> rules = Rules.build(VoteConfig(), AnswerConfig(), StopConfig(), 3)
    >>> drawn_vote([Ballot("7"), Ballot("7"), Ballot("5"), Ballot("5")], lambda a: a == "7", 3, rules)
    Fraction(1, 2)
    """
    limited = rules.with_limit(k)
    timing = fixed_rounds([1.0] * k, None, 1)

    def event(draw: tuple[int, ...]) -> bool:
        return right(play_on([ballots[i] for i in draw], timing, limited, 1).answer)

    return all_orders(len(ballots), k, event)
