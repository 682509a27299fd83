"""Budget arithmetic and the hard cutoff, on a fake clock (no sleeping)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from solver.core.budget import BudgetManager, problem_seconds
from doubles import FakeClock
from solver.config import BudgetConfig, ConfigError, load_config

H100 = BudgetConfig(total_s=18000, problems=50, min_s=300, max_s=900, reserve_s=300, cutoff_s=17700)


def lineage(time_left: float, problems_left: int) -> float:
    """The AIMO3 public lineage's formula, written out independently."""
    return min(900.0, max(300.0, time_left - 300.0 * (problems_left - 1)))


@pytest.mark.parametrize("time_left", [-100.0, 0.0, 299.0, 1000.0, 5000.0, 14700.0, 15000.0, 17700.0])
@pytest.mark.parametrize("problems_left", [1, 2, 10, 49, 50])
def test_problem_seconds_matches_the_aimo3_lineage_formula(time_left: float, problems_left: int) -> None:
    assert problem_seconds(time_left, problems_left, 300, 900) == lineage(time_left, problems_left)


def test_first_problem_of_a_fresh_run_gets_the_maximum() -> None:
    clock = FakeClock(1000.0)
    budget = BudgetManager(H100, clock)
    assert budget.next_deadline() == 1000.0 + 900.0
    assert not budget.past_cutoff()


def test_each_remaining_problem_keeps_its_floor_when_every_problem_uses_its_whole_budget() -> None:
    clock = FakeClock(0.0)
    budget = BudgetManager(H100, clock)
    given: list[float] = []
    for _ in range(50):
        deadline = budget.next_deadline()
        assert deadline is not None
        given.append(deadline - clock.now())
        clock.advance(deadline - clock.now())  # the problem uses all it was given
        budget.finish_problem()
    assert all(300.0 <= g <= 900.0 for g in given)
    # Greedy in order: early problems get the maximum until only the floors are left.
    assert given[0] == 900.0 and given[-1] == 300.0
    assert given == sorted(given, reverse=True)
    # Every problem got at least the floor and the whole run ended by the hard cutoff.
    assert clock.now() <= 17700.0


def test_unused_time_flows_to_later_problems() -> None:
    clock = FakeClock(0.0)
    config = BudgetConfig(total_s=4000, problems=4, min_s=300, max_s=3500, reserve_s=0)
    budget = BudgetManager(config, clock)
    assert budget.next_deadline() == 3100.0  # 4000 − 3 × 300
    clock.advance(100)  # stopped early
    budget.finish_problem()
    assert budget.next_deadline() == 100.0 + 3300.0  # 3900 − 2 × 300: more than the first problem got


def test_behind_schedule_still_gets_the_minimum_until_the_cutoff_is_near() -> None:
    clock = FakeClock(0.0)
    budget = BudgetManager(H100, clock)
    clock.advance(17000)  # 0 problems finished, 17000 s gone
    assert budget.next_deadline() == 17300.0  # the minimum of 300 s
    clock.advance(300)
    budget.finish_problem()
    assert budget.next_deadline() == 17600.0  # the minimum again
    clock.advance(250)
    budget.finish_problem()
    assert budget.next_deadline() == 17700.0  # the minimum would end at 17550 + 300: the cutoff wins


def test_past_the_cutoff_a_problem_gets_zero_seconds_and_never_a_deadline_in_the_past() -> None:
    clock = FakeClock(0.0)
    budget = BudgetManager(H100, clock)
    clock.advance(17700)
    assert budget.past_cutoff()
    allotment = budget.allot()
    assert allotment.past_cutoff and allotment.seconds == 0.0 and allotment.deadline == clock.now()
    clock.advance(1000)
    assert budget.next_deadline() == clock.now()


def test_without_a_cutoff_setting_the_reserve_marks_the_cutoff() -> None:
    clock = FakeClock(0.0)
    budget = BudgetManager(BudgetConfig(total_s=1000, problems=2, min_s=100, max_s=900, reserve_s=200), clock)
    assert budget.cutoff == 800.0
    clock.advance(799)
    assert not budget.past_cutoff()
    clock.advance(1)
    assert budget.past_cutoff()


def test_more_problems_than_expected_each_get_what_is_left() -> None:
    clock = FakeClock(0.0)
    budget = BudgetManager(BudgetConfig(total_s=1000, problems=1, min_s=10, max_s=2000, reserve_s=0), clock)
    for _ in range(3):
        budget.next_deadline()
        clock.advance(100)
        budget.finish_problem()
    assert budget.allot().problems_left == 1
    assert budget.next_deadline() == 1000.0  # everything up to the end


def test_no_total_means_no_deadline_unless_a_cutoff_is_set() -> None:
    clock = FakeClock(5.0)
    assert BudgetManager(BudgetConfig(), clock).next_deadline() is None
    assert not BudgetManager(BudgetConfig(), clock).past_cutoff()
    capped = BudgetManager(BudgetConfig(cutoff_s=60), clock)
    assert capped.next_deadline() == 65.0


def test_start_may_be_earlier_than_the_manager_so_loading_time_counts() -> None:
    clock = FakeClock(500.0)
    budget = BudgetManager(H100, clock, start=0.0)
    assert budget.elapsed() == 500.0
    assert budget.allot().time_left_s == 17700.0 - 500.0


def test_finish_problem_records_allotted_and_used_seconds() -> None:
    clock = FakeClock(0.0)
    budget = BudgetManager(H100, clock)
    budget.next_deadline()
    clock.advance(42.0)
    spend = budget.finish_problem()
    assert (spend.index, spend.allotted_s, spend.used_s) == (0, 900.0, 42.0)
    assert budget.finished == (spend,)


@pytest.mark.parametrize("preset", ["h100", "t4x2", "tiny"])
def test_presets_build_a_valid_manager(preset: str) -> None:
    # Valid: a fresh run's first problem is handed its share of the whole set before any cutoff (the budgeted
    # presets), or no deadline at all (tiny: CPU runs have no time budget).
    config = load_config(preset).budget
    clock = FakeClock(1000.0)
    budget = BudgetManager(config, clock)
    first = budget.allot()
    assert first.problems_left == config.problems and not first.past_cutoff
    if config.total_s is None:
        assert (first.deadline, first.seconds, budget.cutoff) == (None, None, None)
        return
    assert first.seconds == config.max_s  # 5 h or 9 h leave far more than max_s for the first of 50
    assert budget.cutoff is not None and first.deadline is not None
    assert 1000.0 < first.deadline < budget.cutoff <= 1000.0 + config.total_s


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"problems": 0}, "budget.problems"),
        ({"min_s": 1000, "max_s": 10}, "budget.min_s"),
        ({"reserve_s": -1}, "budget.reserve_s"),
        ({"total_s": 0}, "budget.total_s"),
    ],
)
def test_bad_budget_is_a_one_line_config_error(fields: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        BudgetManager(BudgetConfig(**fields), FakeClock())


def test_a_resumed_budget_counts_earlier_sessions_time_and_problems() -> None:
    config = BudgetConfig(total_s=3000, problems=5, min_s=100, max_s=2000, reserve_s=0, cutoff_s=2900)
    fresh = BudgetManager(config, FakeClock(0.0))
    resumed = BudgetManager(config, FakeClock(0.0), spent_s=2000, done=3)
    assert fresh.allot().problems_left == 5 and resumed.allot().problems_left == 2
    assert resumed.elapsed() == 2000.0
    assert resumed.cutoff == 900.0  # the hard cutoff is 2900 s after the run's first start, not this session's
    assert resumed.next_deadline() == 900.0  # 1000 s left − 100 for the last problem, then the cutoff
    with pytest.raises(ValueError):
        BudgetManager(config, FakeClock(0.0), spent_s=-1)


def test_banking_lifts_the_cap_by_what_earlier_problems_left() -> None:
    """Without banking every problem is capped at max_s; with it, a hard problem after easy ones may take what they
    left, and drawing on the bank spends it. The floors of later problems still hold."""
    plain, banked = (replace(H100, banking=flag) for flag in (False, True))
    for config, second in ((plain, 900.0), (banked, 900.0 + 3 * 800.0)):
        clock = FakeClock(0.0)
        budget = BudgetManager(config, clock)
        for _ in range(3):  # three easy problems of 100 s
            budget.next_deadline()
            clock.advance(100.0)
            budget.finish_problem()
        assert budget.next_deadline() - clock.now() == second
    clock = FakeClock(0.0)
    budget = BudgetManager(replace(banked, problems=3, total_s=2300, reserve_s=0, cutoff_s=None), clock)
    budget.next_deadline()
    clock.advance(100.0)
    budget.finish_problem()
    # 800 banked: the cap is 900 + 800, under the 1900 left above the last problem's 300 s floor
    assert budget.next_deadline() - clock.now() == 1700.0
    clock.advance(1700.0)
    budget.finish_problem()
    assert budget.bank == 0.0 and budget.next_deadline() - clock.now() == 500.0
