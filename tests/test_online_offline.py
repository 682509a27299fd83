"""The running loop and the simulator decide alike.

The same recorded draws are played through the live solve loop (``ProblemSolver`` with the replay engine, on
virtual time, each turn taking its recorded time) and through the simulator's model
(``solver.offline.sim.play.play`` on ``solver.offline.sim.pools.prepare``'s ballots); every registered voter and stopper
must give the same stop reasons, answers and repetition counts (finished and launched), with and without
a deadline. The recording is built by ``tests/data/eval_runs.py`` in the shape the loop writes (a python block,
its output, a boxed answer; truncated repetitions; engine errors), with a random time per turn so that no two
repetitions end at the same instant by accident.

Code runs in no time here: the sandbox double executes the recorded snippet in this process (control flow only),
so a repetition takes its turns' replay time, and that is the time the simulator is given.

Timed: the replay engine timed by an engine time model (its streams sharing one engine, ``EngineTime``) and the
recorded outputs after their recorded seconds, against the simulator's timelines on the same model
(``engine_timeline``): the same decisions, and the same seconds per problem.

A whole day: the Kaggle predictor (its supervisor, its budget) serving the problems one call at a time on that timed
replay, against the simulator's day (``simulated_day``) on the same draws: per problem the same allotment, the same
decisions and the same seconds, under a budget that cuts some of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import io
import random
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import virtual_time

from solver.config import Config, load_config
from solver.core.state import cast
from solver.core.stopping import STOPPERS, make_stopper
from solver.core.voting import VOTERS, make_voter
from solver.core.state import Rules
from solver.replay.calls import RecordedCalls
from solver.replay.replay_engine import EngineTime, ReplayEngine, TimingModel
from solver.loop.problem import ProblemSolver
from solver.offline.sim import play, play_on
from solver.offline.sim import ProblemPool, prepare
from solver.timing.model import EngineTimeModel
from solver.timing.timeline import engine_timeline
from solver.runlog import RunLog, read_log
from solver.types import Execution, Problem, ProblemResult, Repetition

DATA = Path(__file__).parent / "data"
REPS = 10
TIMING = TimingModel()  # turns take their recorded time

# Every registered stopper, at a parameter that fires on this recording.
STOPPER_SPECS = {"agree_rules": "agree_rules", "agree": "agree:3", "ztest": "ztest:0.1", "beta": "beta:0.9",
                 "esc": "esc:3", "lossless": "lossless", "margin": "margin:2", "hold": "hold:0.9",
                 "futile": "futile:2", "max_reps": "max_reps"}


def _eval_runs():
    spec = importlib.util.spec_from_file_location("eval_runs", DATA / "eval_runs.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is being built
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run directory of six problems x 10 repetitions: right, wrong and split answers, engine errors early and
    late (no ballot), a truncated repetition (code answer only); each turn a random 0.2-3 s."""
    eval_runs = _eval_runs()
    rng = random.Random(11)
    planned = eval_runs.planned_problems(REPS, seed=4)
    errors = {"demo-02": (0,), "demo-03": (1, 2), "demo-06": (0, 1, 5)}
    run_dir = tmp_path_factory.mktemp("recording") / "run"
    with RunLog.create(run_dir, eval_runs.sweep_config(1, REPS)) as log:
        for plan in planned:
            log.append_problem(plan.problem)
            answers = list(plan.answers)
            for i in errors.get(plan.problem.id, ()):
                answers[i] = None
            for i, value in enumerate(answers):
                rep = eval_runs.repetition(plan.problem.id, i, value, truncated=i in plan.truncated,
                                           seconds_per_token=0.05, rng=rng)
                turns = tuple(replace(t, duration_s=rng.uniform(0.2, 3.0)) for t in rep.turns)
                log.append(replace(rep, turns=turns))
    return run_dir


@pytest.fixture(scope="module")
def recording(recorded_run: Path) -> dict[str, tuple[Problem, list[Repetition]]]:
    """``recorded_run``'s problems and finished repetitions, by problem id."""
    records = read_log(recorded_run)
    finished = records.finished()
    return {p.id: (p, finished[p.id]) for p in records.problems}


def recorded_seconds(rep: Repetition) -> float:
    return sum(TIMING.seconds(t) for t in rep.turns)


class InProcessSandbox:
    """Runs a recorded snippet with ``exec`` in this process in no time (a control-flow double: the recording's
    snippets only assign and print)."""

    async def run(self, code: str, *, timeout_s: float | None = None) -> Execution:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(code, "<recorded>", "exec"), {})
        return Execution(code, "ok", out.getvalue(), "", 0.0)

    async def close(self) -> None:
        return None


def draw_orders(n: int) -> list[list[int]]:
    """The recorded order and two random ones (each a draw of every recorded repetition)."""
    rng = np.random.default_rng(5)
    return [list(range(n))] + [rng.permutation(n).tolist() for _ in range(2)]


def config_for(voter: str, stopper: str, workers: int) -> Config:
    return load_config("tiny", overrides={
        "engine.name": "replay", "solve.reps": REPS, "solve.workers": workers, "vote.voter": voter,
        "stop.stoppers": [stopper], "stop.confidence_warmup": 0, "sampling.max_turns": 4,
        "sampling.max_tokens": 10_000, "sampling.max_total_tokens": 100_000})


def live(config: Config, recording, orders: dict[str, list[int]], deadline_s: float | None) -> dict[str, ProblemResult]:
    """Every problem solved at once by one solver on the replay engine, on virtual time from 0."""
    engine = ReplayEngine({pid: [reps[i] for i in orders[pid]] for pid, (_, reps) in recording.items()}, TIMING)

    async def main() -> list[ProblemResult]:
        solver = ProblemSolver(config, engine, InProcessSandbox(), clock=virtual_time.clock())  # type: ignore[arg-type]
        return await asyncio.gather(*(solver.solve(problem, deadline=deadline_s)
                                      for problem, _ in recording.values()))

    return {r.problem_id: r for r in virtual_time.run(main())}


def simulated(config: Config, recording, orders: dict[str, list[int]], deadline_s: float | None):
    voter = make_voter(config.vote, config.answers)
    stopper = make_stopper(config.stop, REPS)
    pools = [ProblemPool(problem, tuple(reps)) for problem, reps in recording.values()]
    out = {}
    for prep, (problem, reps) in zip(prepare(pools, [config.vote.voter], config, None), recording.values()):
        order = orders[problem.id]
        ballots = [prep.ballots[config.vote.voter][i] for i in order]
        seconds = [recorded_seconds(reps[i]) for i in order]
        out[problem.id] = play(ballots, seconds, [1.0] * len(order), voter=voter, stopper=stopper,
                               default=config.answers.default, workers=config.solve.workers, deadline_s=deadline_s)
    return out


def test_the_registry_is_covered() -> None:
    assert set(STOPPER_SPECS) == set(STOPPERS.names())


def test_virtual_time_jumps_and_stands_still_while_a_thread_works() -> None:
    async def main() -> tuple[float, float]:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(3600.0)
        slept = loop.time()
        await asyncio.to_thread(sum, range(10**6))
        return slept, loop.time()

    assert virtual_time.run(main()) == (3600.0, 3600.0)


def test_the_replay_reproduces_the_recorded_ballots(recording) -> None:
    """The live loop's repetitions vote as recorded (else the comparison below would compare different draws)."""
    config = config_for("majority", "max_reps", 3)
    seen: list[Repetition] = []
    engine = ReplayEngine({pid: reps for pid, (_, reps) in recording.items()}, TIMING)

    async def main() -> None:
        solver = ProblemSolver(config, engine, InProcessSandbox(), clock=virtual_time.clock(),  # type: ignore[arg-type]
                               on_repetition=seen.append)
        await asyncio.gather(*(solver.solve(problem) for problem, _ in recording.values()))

    virtual_time.run(main())
    voter = make_voter(config.vote, config.answers)
    by_key = {(r.problem_id, r.index): r for r in seen}
    assert len(by_key) == sum(len(reps) for _, reps in recording.values())
    for pid, (_, reps) in recording.items():
        for rep in reps:
            replayed = by_key[(pid, rep.index)]
            assert (replayed.status, cast(voter, replayed)) == (rep.status, cast(voter, rep)), (pid, rep.index)
    statuses = {r.status for r in seen}
    assert {"done", "length", "error"} <= statuses


def rule_pairs() -> list:
    """Every stopper with every voter. The fast tier runs a diagonal that has each stopper and each voter at least
    once; the rest of the cross product (~15 s of replays) is the full suite's (marker slow)."""
    stoppers, voters = sorted(STOPPER_SPECS.values()), sorted(VOTERS.names())
    diagonal = {(stoppers[i % len(stoppers)], voters[i % len(voters)])
                for i in range(max(len(stoppers), len(voters)))}
    return [pytest.param(s, v, id=f"{s}-{v}", marks=[] if (s, v) in diagonal else [pytest.mark.slow])
            for s in stoppers for v in voters]


@pytest.mark.parametrize("stopper, voter", rule_pairs())
def test_the_live_loop_and_the_simulator_decide_alike(recording, voter: str, stopper: str) -> None:
    decided = []
    for workers in (1, 3):
        for number, order in enumerate(draw_orders(REPS)):
            orders = {pid: order for pid in recording}
            full = simulated(config_for(voter, stopper, workers), recording, orders, None)
            # A deadline that falls inside most problems' runs, away from any finish.
            deadline = 0.6 * float(np.median([o.seconds for o in full.values()])) + 1e-3 * number
            for deadline_s in (None, deadline):
                config = config_for(voter, stopper, workers)
                sim = simulated(config, recording, orders, deadline_s)
                got = live(config, recording, orders, deadline_s)
                for pid, outcome in sim.items():
                    result = got[pid]
                    where = (pid, workers, number, deadline_s)
                    assert (result.stopped_by, result.answer, result.repetitions, result.launched) == \
                        (outcome.stopped_by, outcome.answer, outcome.finished, outcome.launched), where
                    decided.append(outcome.stopped_by)
    # The comparison saw the deadline and (but for max_reps itself) the stopper fire, not only the limit.
    assert "deadline" in decided
    assert stopper == "max_reps" or any(d not in ("deadline", "max_reps") for d in decided)


# ---- time: the replay engine timed by an engine time model against the simulator's timelines ----------------

# A small engine whose every rule bites on this recording: steps slow with the batch and the context, each request
# waits and prefills what it adds, and the cache holds only a few repetitions' contexts (then a request prefills
# its whole prompt again).
TIME_MODEL = EngineTimeModel("test", ((1, 0.02), (2, 0.022), (3, 0.023)), context_s=2e-5, prefill_tokens_per_s=2000.0,
                             request_s=0.05, block_tokens=16, cache_tokens=700, cache_per_context=2.0)


def live_timed(config: Config, recording, orders: dict[str, list[int]], deadline_s: float | None):
    """Each problem solved alone on a fresh replay engine timed by ``TIME_MODEL`` (virtual time), its recorded
    outputs after their recorded seconds; per problem the result and the seconds it took."""
    out = {}

    async def main() -> None:
        loop = asyncio.get_running_loop()
        for problem, reps in recording.values():
            engine = ReplayEngine({problem.id: [reps[i] for i in orders[problem.id]]}, EngineTime(TIME_MODEL, 1.0))
            solver = ProblemSolver(config, engine, RecordedCalls.of_turns(engine.recorded_execution, 1.0),
                                   clock=virtual_time.clock())
            start = loop.time()
            result = await solver.solve(problem, deadline=None if deadline_s is None else start + deadline_s)
            out[problem.id] = (result, loop.time() - start)

    virtual_time.run(main())
    return out


def simulated_timed(config: Config, recording, orders: dict[str, list[int]], deadline_s: float | None):
    """The same draws played by the simulator on ``engine_timeline`` with the config's rules."""
    pools = [ProblemPool(problem, tuple(reps)) for problem, reps in recording.values()]
    rules, workers, reps = Rules.of(config), config.solve.workers, config.solve.reps
    out = {}
    for prep in prepare(pools, [config.vote.voter], config, None):
        idx = orders[prep.problem.id]

        def rounds(first: int, start: float, prep=prep, idx=idx):
            chosen = idx[first:] if first else idx[:reps]
            return engine_timeline([prep.plans[i] for i in chosen], workers, TIME_MODEL, start)

        ballots = prep.ballots[config.vote.voter]
        out[prep.problem.id] = play_on([ballots[i] for i in idx], rounds, rules, workers, deadline_s)
    return out


@pytest.mark.parametrize("stopper", sorted(STOPPER_SPECS.values()))
def test_the_live_loop_and_the_simulator_keep_the_same_time(recording, stopper: str) -> None:
    """Timed by the engine model, the loop and the simulator decide alike (stop reasons, answers, repetitions
    finished and launched) and take the same seconds per problem, with and without a deadline, W below and at N,
    and with a second round."""
    cases = [({"solve.workers": 3}, 0), ({"solve.workers": REPS}, 1),
             ({"solve.workers": 2, "solve.reps": 5, "solve.retry_reps": 5, "solve.retry_below": 3}, 2)]
    decided, seconds = [], []
    for overrides, number in cases:
        config = config_for("majority", stopper, 1).replace(overrides)
        order = draw_orders(REPS)[number]
        orders = {pid: order for pid in recording}
        full = simulated_timed(config, recording, orders, None)
        deadline = 0.6 * float(np.median([o.seconds for o in full.values()])) + 1e-3 * number
        for deadline_s in (None, deadline):
            sim = simulated_timed(config, recording, orders, deadline_s)
            got = live_timed(config, recording, orders, deadline_s)
            for pid, outcome in sim.items():
                result, took = got[pid]
                where = (pid, overrides, deadline_s)
                assert (result.stopped_by, result.answer, result.repetitions, result.launched) == \
                    (outcome.stopped_by, outcome.answer, outcome.finished, outcome.launched), where
                assert took == pytest.approx(outcome.seconds, rel=1e-6, abs=1e-6), where
                decided.append(outcome.stopped_by)
                seconds.append(outcome.seconds)
    assert "deadline" in decided and max(seconds) > 0


# ---- a whole day: the Kaggle predictor against the simulator's day -------------------------------------------

DAY_ORDER = ("demo-04", "demo-01", "demo-06", "demo-03", "demo-05", "demo-02")  # served shuffled, as the gateway does


def day_config(recorded_run: Path, model_file: Path, budget: dict[str, object]) -> Config:
    """The replay of ``recorded_run`` timed by the model in ``model_file``, its recorded outputs after their
    recorded seconds (``engine.replay_outputs``), under ``budget`` (dotted keys of the budget section)."""
    return load_config("tiny", overrides={
        "engine.name": "replay", "engine.replay_from": [str(recorded_run)], "engine.replay_outputs": True,
        "engine.replay_timing": "model", "engine.time_model": str(model_file), "engine.replay_time_scale": 1.0,
        "solve.reps": REPS, "solve.workers": 3, "vote.voter": "majority", "stop.stoppers": ["agree:4"],
        "stop.confidence_warmup": 0, "sampling.max_turns": 4, "sampling.max_tokens": 10_000,
        "sampling.max_total_tokens": 100_000, "budget.problems": len(DAY_ORDER), "budget.reserve_s": 0.0,
        **budget})


@pytest.mark.parametrize("budget", [
    {"budget.total_s": 33.0, "budget.min_s": 3.0, "budget.max_s": 9.0},
    {"budget.total_s": 60.0, "budget.min_s": 3.0, "budget.max_s": 6.0, "budget.banking": True},
], ids=["clamp", "banking"])
def test_the_predictors_day_and_the_simulators_day_decide_alike(recorded_run: Path, tmp_path: Path,
                                                                 budget: dict[str, object]) -> None:
    """The real ``KagglePredictor`` (its engine supervisor, its budget, its run directory) serves the recorded
    problems one call at a time, shuffled, on the replay engine timed by ``TIME_MODEL`` with the recorded outputs;
    the simulator plays its day (``simulated_run``: ``simulated_day`` on ``engine_timeline``) on the same draws
    (each problem's recorded repetitions in recorded order), the same config and the same clock start. Per
    problem: the same allotment, stop reason, answer, repetitions finished and launched, and seconds; the budget
    cuts some problems and not others.

    Time: the predictor's clock and its engine's event loop keep one virtual time (``virtual_time.LoopTime``): the
    supervisor's loop thread runs a ``VirtualTimeLoop`` (the predictor's ``loop_factory``) and the predictor's
    clock, given to its budget and its solver alike, reads that loop's time from any thread. Time moves only while
    the engine's loop waits for the replay's next token or a recorded output, so a problem takes exactly its
    modelled seconds; building the replay engine takes none, as the simulator's engine start is 0 here."""
    import polars as pl

    from solver.kaggle import KagglePredictor, PredictorOptions
    from solver.offline.sim import load_pools, simulated_run
    from solver.timing.model import dump

    model_file = tmp_path / "model.yaml"
    model_file.write_text(dump(TIME_MODEL))
    config = day_config(recorded_run, model_file, budget)
    time = virtual_time.LoopTime()
    predict = KagglePredictor(config, "aimo3", PredictorOptions(run_dir=tmp_path / "run", clock=time,
                                                                loop_factory=time.new_loop))
    pools, _ = load_pools([recorded_run])
    by_id = {pool.problem.id: pool for pool in pools}
    try:
        for pid in DAY_ORDER:
            predict(pl.Series("id", [pid]), pl.Series("problem", [by_id[pid].problem.text]))
    finally:
        predict.close()
    results = {r.problem_id: r for r in read_log(tmp_path / "run").results}

    day_pools = [by_id[pid] for pid in DAY_ORDER]
    day = simulated_run(prepare(day_pools, [predict.config.vote.voter], predict.config, None), predict.config,
                        replace(TIME_MODEL, start_s=0.0), {pid: list(range(REPS)) for pid in DAY_ORDER})
    assert [c.id for c in predict.calls] == list(DAY_ORDER)
    for call, slot in zip(predict.calls, day.problems):
        result, played = results[call.id], slot.played
        assert call.status in ("solved", "default") and call.engine_builds == 1, call
        assert call.allotted_s == pytest.approx(slot.allotted_s, rel=1e-6), call.id
        assert (result.stopped_by, result.answer, result.repetitions, result.launched) == \
            (played.stopped_by, played.answer, played.finished, played.launched), call.id
        assert call.seconds == pytest.approx(played.seconds, rel=1e-6, abs=1e-6), call.id
    stops = [slot.played.stopped_by for slot in day.problems]
    assert "deadline" in stops and set(stops) - {"deadline"}, stops
    assert len({round(slot.allotted_s or 0.0, 6) for slot in day.problems}) > 1  # unused time flowed on
