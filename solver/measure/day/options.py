"""The day's options (``solver day``'s flags, typed, checked once before anything heavy starts) and what they make:
the slice's config and its plan of recorded attempts (``solver.measure.day.kaggle_day`` says what the day does).

``day_options`` is the one place the flags are checked: ``solver day`` (``solver/commands/day.py``) passes it the
parsed flags, ``day_check.add_answers`` the flags a day file was run with.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, get_args

from solver.config import Config, ConfigError, parse_overrides
from solver.errors import BadInput
from solver.measure.selection import AttemptSelection, attempt_selection, plan_selection
from solver.measure.tool_seconds import fixed_tool_times, with_tool_times
from solver.measure.workload import Replay, preset_engine

if TYPE_CHECKING:
    from solver.dryrun import DryRun

HARD_GRACE_S = 30.0  # --hard-stop's default: --until plus these seconds
DayRules = Literal["kaggle", "stop", "none"]  # what acts in the slice (solver.measure.day.kaggle_day's docstring)
DAY_RULES: tuple[DayRules, ...] = get_args(DayRules)  # solver day --rules's choices
NO_DEADLINE_DAY_S = 18000.0  # rules stop/none: the slice gets a whole 5-hour day, so no deadline bites


# ---- the pure core -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class KillAt:
    """Kill the engine ``seconds`` into ``problem`` (an id, or a 1-based position in the slice)."""

    problem: str
    seconds: float

    @classmethod
    def parse(cls, text: str) -> KillAt:
        """
        >>> KillAt.parse("2:45"), KillAt.parse("aimo3-15245:1.5")
        (KillAt(problem='2', seconds=45.0), KillAt(problem='aimo3-15245', seconds=1.5))
        >>> KillAt.parse("2")
        Traceback (most recent call last):
        ...
        solver.errors.BadInput: --kill-engine-at: PROBLEM:SECONDS (a problem id or position, seconds > 0), not '2'
        """
        head, _, tail = text.rpartition(":")
        try:
            seconds = float(tail)
        except ValueError:
            seconds = -1.0
        if not head or not seconds > 0:
            raise BadInput(f"--kill-engine-at: PROBLEM:SECONDS (a problem id or position, seconds > 0), not {text!r}")
        return cls(head, seconds)

    def resolve(self, ids: Sequence[str]) -> str:
        """The problem id it names among the slice's ``ids``.

        >>> KillAt("2", 1.0).resolve(["a", "b", "c"]), KillAt("c", 1.0).resolve(["a", "b", "c"])
        ('b', 'c')
        """
        if self.problem in ids:
            return self.problem
        if self.problem.isdigit() and 1 <= int(self.problem) <= len(ids):
            return ids[int(self.problem) - 1]
        raise BadInput(f"--kill-engine-at: {self.problem!r} is no problem of the slice (ids or positions 1..{len(ids)})")


def day_budget(budget: Any, problems: int, rules: DayRules) -> dict[str, Any]:
    """Budget overrides for a slice of ``problems``. ``kaggle``: the preset's day scaled to the slice (total, reserve
    and cutoff in proportion to ``budget.problems``; the per-problem floor and cap as they are), so each problem
    meets the clamp a problem of the full day meets. ``stop``/``none``: a whole day for the slice, no floor, no
    cap: no deadline bites.

    >>> from solver.config import BudgetConfig
    >>> b = BudgetConfig(total_s=18000, problems=50, min_s=300, max_s=900, reserve_s=300, cutoff_s=17700)
    >>> day_budget(b, 6, "kaggle")
    {'budget.problems': 6, 'budget.total_s': 2160.0, 'budget.reserve_s': 36.0, 'budget.cutoff_s': 2124.0}
    >>> day_budget(b, 6, "stop")["budget.max_s"]
    18000.0
    """
    if rules != "kaggle":
        return {"budget.problems": problems, "budget.total_s": NO_DEADLINE_DAY_S, "budget.min_s": 0.0,
                "budget.max_s": NO_DEADLINE_DAY_S, "budget.reserve_s": 0.0, "budget.cutoff_s": None}
    share = problems / budget.problems
    out: dict[str, Any] = {"budget.problems": problems}
    if budget.total_s is not None:
        out["budget.total_s"] = round(budget.total_s * share, 3)
        out["budget.reserve_s"] = round(budget.reserve_s * share, 3)
    if budget.cutoff_s is not None:
        out["budget.cutoff_s"] = round(budget.cutoff_s * share, 3)
    return out


def hard_stop_s(until: float | None, hard_stop: float | None) -> float | None:
    """``--hard-stop``'s seconds: as given, else ``--until`` plus ``HARD_GRACE_S``; never before ``--until``.

    >>> hard_stop_s(520.0, None), hard_stop_s(520.0, 600.0), hard_stop_s(None, None)
    (550.0, 600.0, None)
    >>> hard_stop_s(100.0, 50.0)
    Traceback (most recent call last):
    ...
    solver.errors.BadInput: --hard-stop must be >= --until
    """
    if hard_stop is None and until is not None:
        hard_stop = until + HARD_GRACE_S
    if until is not None and hard_stop is not None and hard_stop < until:
        raise BadInput("--hard-stop must be >= --until")
    return hard_stop


# ---- the options ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class DayOptions:
    """``solver day``'s flags checked and completed (``day_options``): everything the day reads. Seconds ``until``
    and ``hard_stop`` count from this process's start; tokens are decoded tokens."""

    selection: AttemptSelection  # the slice: the recorded attempts it plays
    rules: DayRules  # what acts (kaggle_day's docstring)
    json: Path | None  # the slice's results (None with ``estimate``)
    resume: bool  # continue ``json`` where the last call stopped
    until: float | None  # seconds: start no problem the time model says would end later
    hard_stop: float | None  # seconds: abandon the problem in flight, exit 3 (``until`` + ``HARD_GRACE_S`` by default)
    safety: float  # the estimate times this (>= 1)
    max_problems: int | None  # problems this call plays at most
    kill: KillAt | None  # kill the engine core mid-problem (--kill-engine-at)
    log_engine: bool  # vLLM's and the solver's engine log at INFO, epoch-stamped
    label: str | None  # this run's row in ``table`` (with ``table`` or not at all)
    table: Path | None  # a table JSON of labelled runs (None with ``estimate``)
    estimate: bool  # the time model's prediction only; nothing starts
    time_model: str | None  # for the estimates (None: the config's, else tiny or h100-gptoss)
    run_dir: Path | None  # the predictor's run directory (None: beside ``json``, one per call)
    gpu: bool  # the preset's own engine (else the tiny model on the tiny preset's CPU engine)
    preset: str
    overrides: tuple[str, ...]  # the --set KEY=VALUE as given (a run's identity keeps them)
    base: Config  # the preset's engine with the overrides and --model


def day_options(*, attempts_file: Path | None, problems: int, problem_ids: str, attempts: int,
                attempt_tokens: int | None, rules: DayRules, tool_time: str, json: Path | None, resume: bool,
                until: float | None, hard_stop: float | None, safety: float, max_problems: int | None,
                kill_engine_at: str | None, log_engine: bool, label: str | None, table: Path | None, estimate: bool,
                time_model: str | None, run_dir: Path | None, gpu: bool, preset: str, model: str | None,
                overrides: Sequence[str], dry: DryRun | None) -> DayOptions:
    """The flags (as ``solver day`` names them) checked and completed: the default attempts file, the hard stop,
    the kill, the preset's engine with the overrides; ``BadInput`` (one line) for one that cannot run, before
    anything heavy starts. ``dry``: the command's ``DryRun`` (a file only the GPU machine has is skipped), or None."""
    if max_problems is not None and max_problems < 1:
        raise BadInput("--max-problems must be >= 1")
    if safety < 1:
        raise BadInput("--safety must be >= 1")
    hard_stop = hard_stop_s(until, hard_stop)
    if (label is None) != (table is None):
        raise BadInput("--label and --table go together")
    kill = KillAt.parse(kill_engine_at) if kill_engine_at else None
    # A dry run skips what only the GPU machine has (its carry, its runs/ folder) and checks the rest.
    selection = attempt_selection(attempts_file=attempts_file, problems=problems, problem_ids=problem_ids,
                                  attempts=attempts, attempt_tokens=attempt_tokens, tool_time=tool_time, dry=dry)
    if estimate:
        json = table = None
    elif json is None:
        raise BadInput("--json: where the slice's results go (required but with --estimate)")
    for path in (json, table):
        if path is not None and (dry is None or dry.present(path.parent, f"{path}'s folder", BadInput)) \
                and not path.parent.is_dir():
            raise BadInput(f"no folder {path.parent} for {path}")
    if json is not None and json.exists() and not resume:
        raise BadInput(f"{json} exists: pass --resume to continue it, or remove it")
    try:
        given = parse_overrides(overrides)
        engine = preset_engine(preset, gpu)
        if model:
            given["engine.model"] = model
        base = engine.replace(given)
    except (ConfigError, ValueError) as exc:
        raise BadInput(str(exc).splitlines()[0]) from exc
    return DayOptions(selection, rules, json, resume, until, hard_stop, safety, max_problems, kill, log_engine, label,
                      table, estimate, time_model, run_dir, gpu, preset, tuple(overrides), base)


# ---- what they make --------------------------------------------------------------------------------------------


def day_config(options: DayOptions, problems: int) -> Config:
    """The preset with the user's overrides, K attempts at once, the rules ``--rules`` names, and the slice's day
    for ``problems`` problems (``day_budget``; the user's own ``budget.*`` overrides win)."""
    base = options.base
    budget = day_budget(base.budget, problems, options.rules)
    given = {k for k in parse_overrides(options.overrides) if k.startswith("budget.")}
    attempts = options.selection.attempts
    fixed: dict[str, Any] = {"solve.reps": attempts, "solve.workers": attempts,
                             "sandbox.code_mode": "stateful",
                             # the calls only sleep (recorded_calls): one worker per attempt, as beside a GPU
                             "sandbox.workers": attempts}
    if options.rules == "none":
        fixed["stop.stoppers"] = []
    return base.replace({**{k: v for k, v in budget.items() if k not in given}, **fixed})


def load_plan(options: DayOptions, measure: bool = True) -> tuple[list[list[Replay]], str]:
    """The slice's replays (the config's limits ending attempts as live) with their tool seconds; how they were
    timed. ``measure`` False (a dry run): calls to be measured keep no seconds."""
    selection = options.selection
    problems, mode = plan_selection(selection, selection.caps(at_limit="length"), options.base)
    ids = [replays[0].problem.id for replays in problems]
    if options.kill is not None and options.kill.resolve(ids) == ids[-1]:
        raise BadInput("--kill-engine-at: not the slice's last problem (the rebuild comes with the next one)")
    if mode == "measure" and measure:
        from solver.measure.tool_seconds import measure_tool_times_alone

        problems = with_tool_times(problems, measure_tool_times_alone(problems, options.base.sandbox))
    elif mode not in ("carried", "measure") and selection.tool_s is not None:
        # fixed seconds a call; a dry run's calls to measure keep none
        problems = with_tool_times(problems, fixed_tool_times(problems, selection.tool_s))
    return problems, mode


def plan_rows(problems: list[list[Replay]]) -> list[dict[str, Any]]:
    """The plan as ``real_shape.py`` writes it (``solver.timing.fit`` reads it): per attempt its requests, and the
    answer it gives where it ends with one (its ballot: ``day_check.py`` plays the slice's stops in the simulator)."""
    return [{"problem": r.problem.id, "attempt": r.index, "answered": r.answered, "answer": r.answer,
             "steps": [{"tokens": s.tokens, "call": s.call, "tool_s": round(s.tool_s, 4),
                        "prompt_tokens": s.prompt_tokens, "ending": len(s.ending), "appended": len(s.appended),
                        "recorded_tokens": s.recorded_tokens, "limit": s.limit} for s in r.steps]}
            for rs in problems for r in rs]
