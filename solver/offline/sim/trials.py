"""Monte-Carlo trials: many whole leaderboard runs of every setting on common random draws, in parallel chunks
(joblib) that give the same result for a seed whatever the number of jobs. Which repetitions each trial plays is
``solver.offline.sim.draws``'; the grid's points and the plan ``solver.offline.sim.setting``'.

A problem's times come from a timeline (``solver.timing.timeline``): under the engine time model, one per draw and
W (computed once and shared by every stopper, voter and budget played over it, and, where W covers the draw, by
every order of the same repetitions); without one, each repetition's recorded seconds. A run's speed factor
(``--machine-speed``, a stress test off by default) multiplies every second of that run, the engine's start,
steps, requests, prefills and tool calls alike, as a uniformly slower or faster machine would: the engine time
model's seconds are all proportional to its parameters, so scaling the timeline is scaling the model.

Under a scoring rule of two runs a problem's credit follows from how many of its runs answered right. The day is
played under both seed policies (the other one for its scores only), so the report shows what the choice does to
the spread and P(>= the line). The budget allots time by position, so where a stress order puts the hard problems
moves the cuts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from solver.config import AnswerConfig
from solver.core.grading import Grader
from solver.core.state import Rules
from solver.offline.sim.draws import RunDraws, arrange, day_draws, replays
from solver.offline.sim.play import ProblemDraw, Rounds, SimulatedDay, simulated_day
from solver.offline.sim.setting import SEED_POLICIES, Plan, SeedPolicy
from solver.timing.timeline import Timeline, engine_timeline, fixed_timeline
from solver.types import Problem

TRIALS_PER_CHUNK = 50  # trials per parallel task; fixed, so results do not depend on the number of jobs


@dataclass
class ChunkResult:
    """Per setting: one row per trial (a day: the scoring rule's runs); costs are means over the day's runs."""

    scores: np.ndarray  # (settings, trials) the scoring rule's score
    first: np.ndarray  # (settings, trials) problems right in the first run alone
    finished: np.ndarray  # (settings, trials) mean finished repetitions per problem
    launched: np.ndarray
    tokens: np.ndarray  # mean tokens per problem
    seconds: np.ndarray  # mean seconds per problem
    total_seconds: np.ndarray  # a whole run, the engine's start included
    cut: np.ndarray  # problems per run the budget cut (stopped at their deadline)
    bootstrapped: np.ndarray  # problems per run that launched repetitions drawn again (more launched than recorded)
    retried: np.ndarray  # problems per run that ran a second round
    run_right: np.ndarray  # (settings, trials, runs) problems right in each run
    run_cut: np.ndarray  # (settings, trials, runs) problems cut in each run
    run_seconds: np.ndarray  # (settings, trials, runs) each run's seconds, the engine's start included
    speeds: np.ndarray  # (trials, runs) each run's speed factor (its seconds multiplied by it)
    keys: np.ndarray  # (trials,) each trial's key: its draws can be made again from it (``used_repetitions``)
    policy_scores: np.ndarray  # (settings, trials, 2) the score under each seed policy (SEED_POLICIES' order)
    credit: np.ndarray  # (settings, trials, pools) int8: runs that answered the problem right; -1: not drawn
    stops: list[Counter[str]] = field(default_factory=list)  # per setting: stop reasons over problems

    ARRAYS = ("scores", "first", "finished", "launched", "tokens", "seconds", "total_seconds", "cut",
              "bootstrapped", "retried")
    TRIAL_AXIS = {"speeds": 0, "keys": 0}  # every other array holds its trials on axis 1


class ProblemGrader:
    """Correctness of an answer per problem, remembered (``solver.core.grading.Grader``: math-verify can take
    milliseconds per call)."""

    def __init__(self, rules: AnswerConfig) -> None:
        self._grade = Grader(rules)

    def __call__(self, problem: Problem, answer: str) -> bool:
        return problem.answer is not None and self._grade(answer, problem.answer)


class Timelines:
    """First-round timelines, remembered per (problem, W, repetitions in launch order); where W covers every
    repetition they all start at once, so any order of the same repetitions shares one."""

    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self._memo: dict[tuple[int, int, tuple[int, ...]], Timeline] = {}

    def rounds(self, p: int, idx: np.ndarray, reps: int, workers: int, speed: float = 1.0) -> Rounds:
        """The timelines of one draw, every second multiplied by the run's ``speed`` factor: the first round's
        remembered, a second round's made when it comes."""
        prep, model = self.plan.prepared[p], self.plan.model

        def timeline(first: int, start: float) -> Timeline:
            chosen = idx[first:] if first else idx[:reps]
            if model is None:
                return fixed_timeline(prep.seconds[chosen] * speed, workers, prep.tokens[chosen], start)
            if first:
                if speed == 1.0:
                    return engine_timeline([prep.plans[i] for i in chosen], workers, model, start)
                return scaled(engine_timeline([prep.plans[i] for i in chosen], workers, model), speed, start)
            found = self.first(p, chosen, workers)
            return found if speed == 1.0 else scaled(found, speed, 0.0)

        return timeline

    def first(self, p: int, chosen: np.ndarray, workers: int) -> Timeline:
        assert self.plan.model is not None
        together = workers >= len(chosen)
        order = np.argsort(chosen, kind="stable") if together else np.arange(len(chosen))
        key = (p, min(workers, len(chosen)) if together else workers, tuple(chosen[order].tolist()))
        found = self._memo.get(key)
        if found is None:
            prep = self.plan.prepared[p]
            found = self._memo[key] = engine_timeline([prep.plans[i] for i in key[2]], workers, self.plan.model)
        if not together:
            return found
        back = np.empty(len(order), dtype=int)
        back[order] = np.arange(len(order))  # draw position -> position in the sorted key
        return Timeline(tuple(found.starts[j] for j in back), tuple(found.ends[j] for j in back),
                        tuple(found.tokens[j] for j in back))


def scaled(timeline: Timeline, speed: float, start: float) -> Timeline:
    """``timeline`` (made from 0) with every second multiplied by ``speed``, moved to ``start``.

    >>> scaled(Timeline((0.0, 1.0), (1.0, 3.0), (5.0, 5.0)), 1.1, 10.0)
    Timeline(starts=(10.0, 11.1), ends=(11.1, 13.3), tokens=(5.0, 5.0))
    """
    return Timeline(tuple(start + speed * s for s in timeline.starts), tuple(start + speed * e for e in timeline.ends),
                    timeline.tokens)


def recorded_accuracy(plan: Plan) -> np.ndarray:
    """Per pool, the share of its recorded repetitions whose answer is right (by the first setting's voter's
    ballots; none recorded: 0): how hard the recordings make each problem, for the stress orders."""
    grade = ProblemGrader(plan.config.answers)
    voter = plan.settings[0].voter
    out = np.zeros(len(plan.prepared))
    for p, prep in enumerate(plan.prepared):
        ballots = prep.ballots[voter]
        if ballots:
            out[p] = sum(b is not None and grade(prep.problem, b.answer) for b in ballots) / len(ballots)
    return out


def run_chunk(plan: Plan, trials: int, seed: Sequence[int]) -> ChunkResult:
    """``trials`` leaderboard days of every setting on shared draws from ``np.random.default_rng(seed)``: each day
    the scoring rule's runs, each run a simulated day (``simulated_day``) of the setting's config over the trial's
    problems; under a rule of two runs the second run is also played under the other seed policy, for its score."""
    rng = np.random.default_rng(list(seed))
    s_count, runs, pools = len(plan.settings), plan.scoring.runs, len(plan.prepared)
    shape = (s_count, trials)
    out = ChunkResult(*(np.zeros(shape) for _ in ChunkResult.ARRAYS), run_right=np.zeros((s_count, trials, runs)),
                      run_cut=np.zeros((s_count, trials, runs)), run_seconds=np.zeros((s_count, trials, runs)),
                      speeds=np.ones((trials, runs)), keys=np.zeros(trials, dtype=np.int64),
                      policy_scores=np.zeros((s_count, trials, len(SEED_POLICIES))),
                      credit=np.full((s_count, trials, pools), -1, dtype=np.int8),
                      stops=[Counter() for _ in range(s_count)])
    grade = ProblemGrader(plan.config.answers)
    configs = [s.config(plan.config, plan.problems) for s in plan.settings]
    rules: dict[tuple[str, tuple[str, ...], int, int], Rules] = {}
    for s, config in zip(plan.settings, configs):
        if s.rules_key not in rules:
            rules[s.rules_key] = Rules.of(config)
    timelines = Timelines(plan)
    start_s = plan.model.start_s if plan.model is not None else 0.0
    accuracy = recorded_accuracy(plan) if plan.order != "random" else np.zeros(pools)
    policy = plan.seed_policy
    other: SeedPolicy = "per-run" if policy == "fixed" else "fixed"
    k = plan.problems
    for t in range(trials):
        order = arrange(rng.permutation(pools)[:k], accuracy, plan.order)
        key = int(rng.integers(2**62))
        days = day_draws(plan, order, key, policy)
        alternate = day_draws(plan, order, key, other)[1] if runs == 2 else None
        out.keys[t] = key
        out.speeds[t] = [run.speed for run in days]
        for s_index, (setting, config) in enumerate(zip(plan.settings, configs)):

            def played(run: RunDraws) -> tuple[SimulatedDay, list[bool]]:
                picks = [draw.take(setting.draws)[0] for draw in run.draws]
                day = simulated_day(config, (ProblemDraw([plan.prepared[p].ballots[setting.voter][i] for i in idx],
                                                         timelines.rounds(int(p), idx, setting.reps, setting.workers,
                                                                          run.speed))
                                             for p, idx in zip(run.order, picks)),
                                    rules=rules[setting.rules_key], start_s=start_s * run.speed)
                return day, [grade(plan.prepared[p].problem, slot.played.answer)
                             for p, slot in zip(run.order, day.problems)]

            right_runs = np.zeros(pools, dtype=np.int8)
            fin, lau, tok, sec, total, cut, boot, retried = 0, 0, 0.0, 0.0, 0.0, 0, 0, 0
            first_right: list[bool] = []
            for r, run in enumerate(days):
                # A second run on the first run's draws, order and speed (the fixed seed policy) replays it exactly.
                day, rights = (day, rights) if r and replays(run, days[0]) else played(run)
                first_right = first_right or rights
                right_runs[run.order] += np.array(rights, dtype=np.int8)
                cut_here = 0
                for draw, slot in zip(run.draws, day.problems):
                    result = slot.played
                    fin += result.finished
                    lau += result.launched
                    tok += result.tokens
                    sec += result.seconds
                    cut_here += result.stopped_by == "deadline"
                    boot += result.launched > draw.available or draw.draw == "bootstrap"  # a drawn-again one ran
                    retried += result.launched > setting.reps
                    out.stops[s_index][result.stopped_by] += 1
                total += day.seconds
                cut += cut_here
                out.run_right[s_index, t, r], out.run_cut[s_index, t, r] = sum(rights), cut_here
                out.run_seconds[s_index, t, r] = day.seconds
            out.credit[s_index, t, order] = right_runs[order]
            score = float(plan.scoring.credit_of(right_runs[order]).sum())
            out.policy_scores[s_index, t, SEED_POLICIES.index(policy)] = score
            if alternate is None:
                out.policy_scores[s_index, t, SEED_POLICIES.index(other)] = score
            else:
                # The same draws in the same order at the same speed replay the first run exactly: no need to play.
                same = (other == "fixed" and np.array_equal(alternate.order, order)
                        and alternate.speed == days[0].speed)
                rights = first_right if same else played(alternate)[1]
                again = np.zeros(pools, dtype=np.int8)
                again[order] += np.array(first_right, dtype=np.int8)
                again[alternate.order] += np.array(rights, dtype=np.int8)
                out.policy_scores[s_index, t, SEED_POLICIES.index(other)] = float(
                    plan.scoring.credit_of(again[order]).sum())
            n = k * runs
            row = (score, out.run_right[s_index, t, 0], fin / n, lau / n, tok / n, sec / n, total / runs, cut / runs,
                   boot / runs, retried / runs)
            for name, value in zip(ChunkResult.ARRAYS, row):
                getattr(out, name)[s_index, t] = value
    return out


def _chunks(trials: int) -> list[int]:
    """
    >>> _chunks(120)
    [50, 50, 20]
    """
    return [min(TRIALS_PER_CHUNK, trials - start) for start in range(0, trials, TRIALS_PER_CHUNK)]


def run_trials(plan: Plan, trials: int, seed: int, jobs: int = 1) -> ChunkResult:
    """All trials, chunked and run in parallel with joblib; the same seed gives the same result for any jobs."""
    from joblib import Parallel, delayed

    chunks = [(size, (seed, number)) for number, size in enumerate(_chunks(trials))]
    if jobs == 1 or len(chunks) == 1:
        parts = [run_chunk(plan, size, chunk_seed) for size, chunk_seed in chunks]
    else:
        parts = Parallel(n_jobs=jobs)(delayed(run_chunk)(plan, size, chunk_seed) for size, chunk_seed in chunks)
    def joined(name: str) -> np.ndarray:
        return np.concatenate([getattr(p, name) for p in parts], axis=ChunkResult.TRIAL_AXIS.get(name, 1))

    return ChunkResult(*(joined(name) for name in ChunkResult.ARRAYS), run_right=joined("run_right"),
                       run_cut=joined("run_cut"), run_seconds=joined("run_seconds"), speeds=joined("speeds"),
                       keys=joined("keys"), policy_scores=joined("policy_scores"), credit=joined("credit"),
                       stops=[sum((p.stops[i] for p in parts), Counter()) for i in range(len(plan.settings))])
