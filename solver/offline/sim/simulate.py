"""Leaderboard simulation: what score a setting (repetitions, voter, stopper, workers, time budget) gives on a
hidden set of K problems, and how much that score moves between reruns, estimated from recorded repetitions.

One trial plays a whole leaderboard run: K problems (a random subset of the recorded ones, in random order, as
the Kaggle gateway shuffles them), each solved by drawing repetitions from that problem's recording and replaying
the solve loop's decisions on them: W in flight, each taking its recorded time, votes counted as they finish,
the stopper asked after each one, the budget manager's deadline cutting the rest. Every setting is evaluated on
the same draws (common random numbers), so differences between settings are not sampling noise between them.

Time: with an engine time model (``--time-model``, by default the runs' ``engine.time_model``; the h100-gptoss
preset names one) a problem's repetitions share the engine: each decodes at the speed the model gives for the
sequences in flight and their contexts, pays a request's latency and prefill per turn and its tool calls'
recorded (or re-measured) seconds, and the engine's start is counted once against the run's total
(``solver.timing``). Without one, each repetition takes its recorded duration (or its tokens at
``--tokens-per-s`` plus its code time). Each setting's budget (``--budget``, default the runs' ``budget.total_s``)
is handed out by the budget manager on the simulated clock; a problem cut at its deadline votes what had finished,
as the running loop does. Recorded repetitions are first cut at the config's limits (``solver.offline.sim.plans``).

Draws: ``auto`` (the default) draws a problem's repetitions without replacement wherever it has N recorded and
with replacement only where it has fewer; ``subset`` always without (needs N <= recorded), ``bootstrap`` always
with. Without replacement is unbiased (a random subset of independent repetitions is a real run) but understates
the spread between reruns when N is close to the number recorded (every trial then sees nearly the same
repetitions); with replacement keeps a spread but is biased low where answers are rare
(``solver.offline.sim.draws.draw_indices``); each setting reports how many problems it bootstrapped and the bias that
cost, estimated on the problems recorded richly enough (``solver.offline.sim.bias``). Each setting draws its own N, so
its row does not depend on the grid. Deterministic for a seed whatever the number of parallel jobs.

Scoring (``--scoring``, ``solver.offline.sim.scoring``): a day is scored as a leaderboard scores it, one run
counted (``aimo3-public``, ``count``: the problems in a new random order each run) or AIMO3's private rule (two runs
over the same problems in one fixed order, a problem scoring 1 / 0.5 / 0; the second run's draws as
``sampling.seed_policy`` says, the report showing both policies; ``--order`` places the hard problems first, last or
in the middle as a stress setting), with P(score >= the line) beside the mean and the 5–95 % band. As a stress test
(``--machine-speed F``, off by default: no rule of AIMO3 varies the machine) each run's seconds are multiplied by a
factor drawn in 1 ± F, the same for every setting. Each setting is set against the best one, and ``--compare``
pairs against each other, with the interval the recordings give (``solver.offline.sim.separation``).

The calibration check splits each problem's repetitions into two disjoint halves, simulates N repetitions from
one half, and compares that score distribution with real N-repetition runs built from the other half.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from solver.config import BudgetConfig, Config, ConfigError
from solver.core.stopping import make_stopper
from solver.offline.sim.bias import bootstrap_biases
from solver.offline.sim.calibration import Calibration, calibrate
from solver.offline.sim.pools import Prepared, ProblemPool, SimulationError, load_pools, prepare
from solver.offline.sim.scoring import DEFAULT_SCORING, Scoring, line_text, scaled_line, scoring
from solver.offline.sim.separation import Difference
from solver.offline.sim.summary import Comparer, Summary, against_best, default_thresholds, summarise
from solver.offline.sim.setting import ORDERS, Draw, Order, Plan, grid
from solver.offline.sim.trials import run_trials

from solver.timing.model import EngineTimeModel, load_time_model

# Off: no rule of AIMO3 varies a run's speed. Kaggle's notice that the reported run time of the same notebook may
# vary (by up to 30 minutes over 5 hours) is about the time reported, not a rule of the competition; a factor of
# 1 ± F (--machine-speed F) is a stress test of how a setting fares on a slower or faster machine.
DEFAULT_MACHINE_SPEED = 0.0


@dataclass(frozen=True)
class SimulationRequest:
    run_dirs: tuple[Path, ...]
    reps: tuple[int, ...] = ()  # empty: the run config's solve.reps
    voters: tuple[str, ...] = ()  # empty: the run config's voter
    stoppers: tuple[tuple[str, ...], ...] = ()  # empty: the run config's stoppers
    workers: tuple[int, ...] = ()  # empty: the run config's solve.workers
    budgets: tuple[float | None, ...] = ()  # empty: the run config's budget.total_s (None: no budget)
    retries: tuple[int, ...] = ()  # second-round repetitions; empty: the run config's solve.retry_reps
    clamps: tuple[tuple[float, float] | None, ...] = (None,)  # the budget's (min_s, max_s); None: the config's
    banking: tuple[bool, ...] = ()  # time banking; empty: the run config's budget.banking
    problems: int | None = None  # K; None = budget.problems under a budget (at most the recorded), else all
    trials: int = 500
    seed: int = 0
    draw: Draw = "auto"
    tokens_per_s: float | None = None
    time_model: str | None = None  # an engine time model (name or .yaml); None: the runs' engine.time_model
    recorded_time: bool = False  # time by recorded durations (or tokens_per_s) even where a time model is named
    thresholds: tuple[int, ...] = ()  # empty: chosen from the scores
    jobs: int = 1
    calibration_reps: int | None = None  # None: the smallest reps that fits; 0 = skip the check
    overrides: tuple[tuple[str, object], ...] = ()  # dotted config keys applied to the runs' config, e.g.
    # (("budget.reserve_s", 0),) — the budget manager's floors and reserve come from the config
    scoring: str = DEFAULT_SCORING  # a name of solver.offline.sim.scoring.SCORINGS
    line: float | None = None  # P(score >= line) is reported for every setting; None: scaled_line(K)
    machine_speed: float = DEFAULT_MACHINE_SPEED  # stress test: each run's seconds × a factor in 1 ± this (0: off)
    compare: tuple[tuple[int, int], ...] = ()  # pairs of settings (1-based rows of the grid) to set against each other
    order: str = "random"  # the first run's order: random (the gateway's shuffle) or a stress order, ORDERS


@dataclass(frozen=True)
class SimulationReport:
    request: SimulationRequest
    pools: int  # recorded problems
    recorded: tuple[int, int]  # fewest and most finished repetitions per problem
    zero_time: bool  # timed by recorded durations that are all zero (imported samples): timing is meaningless
    summaries: list[Summary]
    calibration: Calibration | None
    calibration_note: str | None
    budget: BudgetConfig  # the budget section budgeted settings used (total_s and problems per setting)
    prepared: list[Prepared]  # per recorded problem, in the order of ``Summary.right_share``
    config: Config  # the runs' config with the request's overrides
    time_model: EngineTimeModel | None = None  # what timed the repetitions (None: recorded durations)
    comparisons: tuple[Difference, ...] = ()  # the request's --compare pairs, first minus second
    scoring: Scoring | None = None  # the rule the days were scored by (None: the request's, by name)
    line_given: bool = True  # the request's line was given (--line); False: scaled to K (the request holds it)

    @property
    def line_text(self) -> str:
        """Where the line came from: ``--line``, or AIMO3's scaled to the day's problems."""
        assert self.request.line is not None  # resolved by simulate_pools
        return line_text(self.request.line, self.line_given, self.summaries[0].problems if self.summaries else 0)

    @property
    def rule(self) -> Scoring:
        return self.scoring if self.scoring is not None else scoring(self.request.scoring)


def auto_workers(reps: int, config: Config) -> int:
    """What ``solve.workers = 0`` (``--workers auto``) puts in flight, as the simulator models it: the solve loop
    launches while the engine has a free batch slot, so up to ``engine.args.max_num_seqs`` (every repetition when
    the run's config does not say), never more than the repetitions.

    >>> auto_workers(32, Config().replace({"engine.args.max_num_seqs": 16})), auto_workers(8, Config())
    (16, 8)
    """
    batch = config.engine.args.get("max_num_seqs")
    return max(1, min(reps, int(batch))) if isinstance(batch, int) and batch > 0 else reps


def validate(req: SimulationRequest) -> None:
    if any(n < 1 for n in req.reps):
        raise SimulationError("--reps values must be >= 1")
    if any(w < 1 for w in req.workers):
        raise SimulationError("--workers values must be >= 1 (for auto workers: --set solve.workers=0)")
    if any(b is not None and b <= 0 for b in req.budgets):
        raise SimulationError("--budget must be > 0 seconds")
    if req.trials < 1:
        raise SimulationError("--trials must be >= 1")
    if req.problems is not None and req.problems < 1:
        raise SimulationError("--problems must be >= 1")
    if req.tokens_per_s is not None and req.tokens_per_s <= 0:
        raise SimulationError("--tokens-per-s must be > 0")
    if req.draw not in ("auto", "bootstrap", "subset"):
        raise SimulationError("--draw must be auto, bootstrap or subset")
    if any(r < 0 for r in req.retries):
        raise SimulationError("--retry values must be >= 0")
    if any(c is not None and not 0 <= c[0] <= c[1] for c in req.clamps):
        raise SimulationError("--clamp needs 0 <= MIN <= MAX seconds")
    if req.time_model is not None and (req.recorded_time or req.tokens_per_s is not None):
        raise SimulationError("--time-model times repetitions by the engine model: leave out --tokens-per-s and "
                              "--time-model none")
    scoring(req.scoring)  # an unknown name fails here
    if req.line is not None and req.line < 0:
        raise SimulationError("--line must be >= 0")
    if not 0 <= req.machine_speed < 1:
        raise SimulationError("--machine-speed must be >= 0 and below 1 (0.1: a run's seconds vary by ±10 %)")
    if req.order not in ORDERS:
        raise SimulationError(f"--order must be {', '.join(ORDERS[:-1])} or {ORDERS[-1]}, not {req.order!r}")
    if any(a < 1 or b < 1 or a == b for a, b in req.compare):
        raise SimulationError("--compare takes two different row numbers of the grid, from 1, e.g. 1,3")
    if req.time_model is not None:
        try:
            load_time_model(req.time_model)  # an unknown name fails here, before the runs are read
        except ConfigError as exc:
            raise SimulationError(str(exc)) from exc


def time_model_for(req: SimulationRequest, config: Config) -> EngineTimeModel | None:
    """The engine time model the repetitions are timed with: the request's, else the runs' ``engine.time_model``;
    None when timing by recorded durations (asked for, ``--tokens-per-s``, or no model named)."""
    if req.recorded_time or req.tokens_per_s is not None:
        return None
    name = req.time_model or config.engine.time_model
    if not name:
        return None
    try:
        return load_time_model(name)
    except ConfigError as exc:
        raise SimulationError(str(exc)) from exc


def simulate(req: SimulationRequest) -> SimulationReport:
    """Load the runs, play every setting ``req.trials`` times, and run the calibration check."""
    validate(req)
    return simulate_pools(req, *load(req))


def load(req: SimulationRequest) -> tuple[list[ProblemPool], Config]:
    """The runs' pooled repetitions and their config with the request's overrides."""
    pools, config = load_pools(req.run_dirs)
    if req.overrides:
        try:
            config = config.replace(dict(req.overrides))
        except ConfigError as exc:
            raise SimulationError(str(exc)) from exc
    return pools, config


def simulate_pools(req: SimulationRequest, pools: list[ProblemPool], config: Config) -> SimulationReport:
    """:func:`simulate` on pools already loaded."""
    validate(req)
    reps = req.reps or (config.solve.reps,)
    voters = req.voters or (config.vote.voter,)
    stoppers = req.stoppers or (config.stop.stoppers,)
    workers = req.workers or (config.solve.workers,)
    budgets = req.budgets or (config.budget.total_s,)
    retries = req.retries or (config.solve.retry_reps,)
    banking = req.banking or (config.budget.banking,)
    budgeted = any(b is not None for b in budgets)
    k = req.problems or (min(config.budget.problems, len(pools)) if budgeted else len(pools))
    if k > len(pools):
        raise SimulationError(f"--problems {k} exceeds the {len(pools)} problems recorded")
    line_given = req.line is not None
    req = replace(req, line=req.line if line_given else scaled_line(k))  # the report holds the line it used
    sizes = [len(p.repetitions) for p in pools]
    if max(sizes) == 0:
        raise SimulationError("the runs hold no finished repetitions")
    model = time_model_for(req, config)
    try:
        settings = [replace(s, workers=auto_workers(s.reps, config)) if s.workers == 0 else s
                    for s in grid(reps, voters, stoppers, workers, budgets, retries, req.clamps, banking)]
        for s in settings:  # fail early, in the parent, on unknown names
            make_stopper(replace(config.stop, stoppers=s.stoppers), s.draws)
        beyond = [f"{a},{b}" for a, b in req.compare if max(a, b) > len(settings)]
        if beyond:
            raise SimulationError(f"--compare {beyond[0]}: the grid has {len(settings)} setting"
                                  f"{'s' if len(settings) > 1 else ''}, numbered from 1 in the order the tables list "
                                  "them")
        prepared = prepare(pools, voters, config, req.tokens_per_s)
    except ConfigError as exc:
        raise SimulationError(str(exc)) from exc
    rule = scoring(req.scoring)
    order: Order = req.order  # type: ignore[assignment]  # checked by validate
    plan = Plan(prepared, settings, config, k, req.draw, model, rule, req.machine_speed, order)
    longest = max(s.draws for s in settings)
    if req.draw == "subset" and longest > min(sizes):
        raise SimulationError(f"a problem has only {min(sizes)} recorded repetitions; subset draws of "
                              f"{longest} need more (use --draw auto or bootstrap)")
    result = run_trials(plan, req.trials, req.seed, req.jobs)
    biases = bootstrap_biases(prepared, settings, config, k, seed=req.seed) if req.draw == "auto" else None
    compare = Comparer(plan, result)
    summaries = against_best(summarise(settings, result, k, req.thresholds or default_thresholds(result), biases,
                                       rule, req.line, req.machine_speed), compare)
    comparisons = tuple(compare(a - 1, b - 1) for a, b in req.compare)
    calibration, note = None, None
    if req.calibration_reps != 0:
        # Two held-out runs per half at least: at N = half the pool, the simulated side of a split is one fixed
        # run, and 20 splits compare 20 values with 20 (KS noise ~0.2, the verdict a coin toss).
        n = req.calibration_reps or next((r for r in sorted(reps) if 4 * r <= min(sizes)), min(sizes) // 4)
        base = settings[0]
        if n < 1:
            note = "skipped: fewer than 4 recorded repetitions for some problem"
        else:
            try:
                calibration = calibrate(prepared, replace(base, reps=n, budget_s=None, retry=0), config,
                                        seed=req.seed, draw=req.draw)
            except SimulationError as exc:
                note = f"skipped: {exc}"
    zero_time = model is None and all(float(p.seconds.sum()) == 0.0 for p in prepared)
    return SimulationReport(req, len(pools), (min(sizes), max(sizes)), zero_time, summaries, calibration, note,
                            config.budget, prepared, config, model, comparisons, rule, line_given)
