"""The day on the engine time model: what a problem is predicted to take (the loop's own rules played on the time
model), whether it fits what is left of a device call, and ``--estimate``'s table (``solver.measure.day.kaggle_day``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from solver.config import Config, gpu_time_model
from solver.measure.day.options import DayOptions
from solver.measure.workload import Replay

CLOSE_S = 20.0  # seconds a call keeps for its end: the engine's shutdown, the log, the JSON


def need_s(predicted_s: float, build_s: float, safety: float) -> float:
    """Seconds a problem must have left before it starts: its predicted seconds and any engine start due before it,
    times the safety factor, plus the end of a call (``CLOSE_S``).

    >>> need_s(100.0, 0.0, 1.25), need_s(100.0, 131.0, 1.0)
    (145.0, 251.0)
    """
    return safety * (predicted_s + build_s) + CLOSE_S


def split_calls(seconds: Sequence[float], start_s: float, until_s: float, safety: float) -> list[list[int]]:
    """How problems of ``seconds`` each (in order) fall into calls of ``until_s``, each call starting its engine
    (``start_s``) and taking a problem only when ``need_s`` says it fits; a problem that fits no call gets a call
    of its own (it will not run: the estimate says so).

    >>> split_calls([100, 100, 300, 100], 100, 500, 1.0)
    [[0, 1], [2], [3]]
    """
    calls: list[list[int]] = []
    used = 0.0
    for i, s in enumerate(seconds):
        if calls and used + need_s(s, 0.0, safety) <= until_s:
            calls[-1].append(i)
            used += safety * s
        else:
            calls.append([i])
            used = safety * (start_s + s)
    return calls


def attempt_plans(replays: Sequence[Replay]) -> list[Any]:
    """The replays as the engine time model plays them (``solver.timing.timeline.AttemptPlan``): per request its
    prompt, decoded tokens and the seconds of the call after it."""
    from solver.timing.timeline import AttemptPlan

    return [AttemptPlan(tuple(s.prompt_tokens for s in r.steps), tuple(s.tokens for s in r.steps),
                        tuple(s.tool_s if s.call else 0.0 for s in r.steps)) for r in replays]


def predict(replays: Sequence[Replay], config: Config, model: Any, deadline_s: float | None) -> Any:
    """The problem played on the time model with the config's rules (``solver.offline.sim.play_on``, the loop's
    own ``ProblemState``): each attempt's ballot its scripted answer (none where a limit ended it), the stop or the
    deadline ending the problem. A ``Played``: seconds, stop reason, answer."""
    from solver.core.state import Rules
    from solver.offline.sim import play_on
    from solver.timing.timeline import engine_timeline
    from solver.types import Ballot

    plans = attempt_plans(replays)
    ballots = [Ballot(r.answer) if r.answered else None for r in replays]
    workers = config.solve.workers or len(replays)
    return play_on(ballots, lambda first, start: engine_timeline(plans[first:], workers, model, start),
                   Rules.of(config), workers, deadline_s)


def time_model(options: DayOptions, config: Config) -> Any:
    from solver.timing.model import load_time_model

    return load_time_model(options.time_model or config.engine.time_model or gpu_time_model(options.gpu))


def engine_start_s(model: Any, config: Config) -> float:
    """The engine's start as the day's gate counts it: from a shipped compile cache (``engine.compile_cache`` holds a
    cache's manifest) the time model's ``rebuild_s`` (an engine built again finds its compile cache warm: 61.6 s on
    the H100, against 131 s cold), else its cold ``start_s``. A cache the start then refuses starts cold, as the
    start line says; the gate's safety factor is all that covers it.

    >>> from solver.config import load_config
    >>> from solver.timing.model import EngineTimeModel
    >>> m = EngineTimeModel("m", ((1, 0.005),), start_s=131.0, rebuild_s=61.6)
    >>> engine_start_s(m, load_config("tiny")), engine_start_s(m, load_config("tiny", overrides={
    ...     "engine.compile_cache": "/nowhere"}))
    (131.0, 131.0)
    """
    from pathlib import Path

    from solver.engines.compile_cache import MANIFEST

    cache = config.engine.compile_cache
    if cache and model.rebuild_s is not None and (Path(cache) / MANIFEST).is_file():
        return float(model.rebuild_s)
    return float(model.start_s)


def estimate(options: DayOptions, problems: list[list[Replay]], config: Config, model: Any) -> int:
    """The slice on the time model as the Kaggle path plays it: the engine's start first, each problem's deadline
    from the budget, the rules acting; then how it splits into calls of ``--until``."""
    from solver.core.budget import budget_for, problem_slot
    from solver.core.clock import SimulatedClock
    from solver.kaggle import competition, competition_config

    day = competition_config(config, competition("aimo3"))
    start_s = engine_start_s(model, config)
    clock = SimulatedClock(start_s)
    budget = budget_for(day.budget, clock, 0.0)
    print(f"estimate on time model {model.name} (start {start_s:.0f} s"
          + (", from the compile cache" if start_s != model.start_s else "") + f"), rules {options.rules}, "
          f"{len(problems)} problems x {options.selection.attempts} attempts:")
    print(f"{'problem':<28}{'requests':>9}{'tokens':>9}{'tool s':>8}{'all s':>8}{'allot':>7}{'s':>8}  stopped by")
    seconds = []
    for replays in problems:
        with problem_slot(budget) as slot:  # the budget loop the predictor and the simulator run
            allot = slot.allotted_s if options.rules == "kaggle" else None
            played = predict(replays, config, model, allot)
            full = predict(replays, config.replace({"stop.stoppers": []}), model, None)
            clock.advance(played.seconds)
        seconds.append(played.seconds)
        steps = [s for r in replays for s in r.steps]
        print(f"{replays[0].problem.id:<28}{len(steps):>9}{sum(s.tokens for s in steps):>9}"
              f"{sum(s.tool_s for s in steps if s.call):>8.0f}{full.seconds:>8.0f}"
              f"{'-' if allot is None else f'{allot:.0f}':>7}{played.seconds:>8.0f}  {played.stopped_by}")
    print(f"the slice: {sum(seconds):.0f} s of problems, the day's clock at {clock.now():.0f} s")
    if options.until is not None:
        for k, call in enumerate(split_calls(seconds, start_s, options.until, options.safety), start=1):
            busy = start_s + sum(seconds[i] for i in call)
            fits = need_s(busy - start_s, start_s, options.safety) <= options.until
            print(f"call {k}: problems {', '.join(str(i + 1) for i in call)}: ~{busy:.0f} s with the engine's start"
                  + ("" if fits else f" (does not fit --until {options.until:.0f} at safety {options.safety})"))
    return 0
