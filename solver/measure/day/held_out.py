"""The simulator held to a day slice: ``solver day``'s JSON (``benchmarks/day.py``'s) played through the
simulator's own day; ``benchmarks/day_check.py`` is its command line.

    python benchmarks/day_check.py benchmarks/results/h100_day-slice.json [--time-model NAME] [--json OUT]
    python benchmarks/day_check.py FILE --add-answers EXTRACT    # once, for a file day.py wrote without answers

The slice's own plan is what the simulator plays: each attempt as the run replayed it (per request its prompt, the
tokens it decoded and the tool seconds carried with the extract; the answer it ends with, none where a limit ended
it) becomes a recorded repetition, the simulator prepares them as it prepares any run (``prepare``: the config's
limits, each attempt's ballot) and plays the problems in the run's order in one simulated day
(``simulated_run``, which is ``simulated_day`` on fixed draws): the run's config (the preset with its overrides,
K attempts at once), its budget and rules, every attempt in the order the run launched them, the engine time
model. The day's clock starts where the run's first solve started (the process's and the engine's start, as the
run's clock had them), so each problem's slot comes from the budget's formula as the run's did; later calls'
engine starts stood outside the run's day, as they stand outside the simulated one.

Per problem: measured against simulated seconds (the measured being the solve, the predictor's call less any
engine start inside it), the stop reason, attempts finished and launched, the answer, the seconds allotted, and
where the measured time went beyond the engine's steady work: the engine's holds (``solver.timing.measured.holds``:
~2 s waits for a first token with the engine decoding nothing) and the wait for the problem's first tokens (after
an engine start, its warm-up). Then the slice's total. A problem whose engine was killed
(``day.py --kill-engine-at``) is shown, not compared.

Each play is made twice: under the run's budget (the slot's deadline, as the day plays it) and **uncapped** (no
budget: nothing but the problem's own stop ends it). A model too slow for the deadline is cut at it and its
seconds then read as the deadline's, however slow it is, so the seconds are judged uncapped; the stops are judged
as the day plays them (a stop at the deadline where the run stopped on its rule is a miss) and shown uncapped too.

Fitted and checked apart (issue 45): a model names the result files it was fitted on (``fitted_on``). When the
day file is one of them, its figures on the model as shipped are **in-sample**, printed as the fit's residual and
called so. Every problem the model's day fit saw (by its id, in any of the slices that fed ``context_s``, read
from the day file's folder) is played again on the model refitted without it (``solver.timing.fit.held_out``:
leave one problem out); those held-out figures, and the plain ones of problems the fit never saw, are the check,
the estimate of the fit's error. The targets (issue 36), on the check: each problem within 10 % and the total
within 3 % (uncapped), the same stops (under the deadline); exit 0 when all are met, 1 when one is not.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from solver.errors import BadInput

PROBLEM_TARGET = 0.10  # each problem's measured seconds within this of the simulated (issue 36)
TOTAL_TARGET = 0.03  # the slice's total




# ---- the pure core -------------------------------------------------------------------------------------------


def repetition(row: dict[str, Any]) -> Any:
    """One attempt of the plan (``day_options.plan_rows``) as a recorded repetition: a turn per request (its
    prompt and decoded tokens, the carried tool seconds after a call), its answer where it ends with one (status
    ``done``), else none (``length``: a limit ended it).

    >>> rep = repetition({"problem": "p", "attempt": 3, "answered": True, "answer": "42",
    ...                   "steps": [{"tokens": 50, "call": True, "tool_s": 0.4, "prompt_tokens": 100},
    ...                             {"tokens": 20, "call": False, "tool_s": 0.0, "prompt_tokens": 180}]})
    >>> rep.index, rep.status, [a.value for a in rep.answers], [t.execution is not None for t in rep.turns]
    (3, 'done', ['42'], [True, False])
    """
    from solver.types import Answer, Execution, Repetition, Turn

    if row["answered"] and row.get("answer") is None:
        raise BadInput(f"the plan gives no answer for {row['problem']} attempt {row['attempt']}: a file written "
                       "before day.py kept them (--add-answers EXTRACT)")
    steps = row["steps"]
    turns = tuple(Turn("", int(s["prompt_tokens"]), int(s["tokens"]),
                       "length" if s.get("limit") else "stop", 0.0,
                       Execution("", "ok", "", "", float(s["tool_s"])) if s["call"] else None) for s in steps)
    answers = (Answer(str(row["answer"]), str(row["answer"]), "boxed"),) if row["answered"] else ()
    return Repetition(row["problem"], int(row["attempt"]), 0, "done" if row["answered"] else "length", turns,
                      answers, 0.0, 0.0)


def slice_config(day: dict[str, Any]) -> Any:
    """The run's config as ``day.py``'s ``day_config`` made it: the preset with the run's overrides, K attempts at
    once, the rules it names, and the slice's budget as the JSON keeps it."""
    from solver.config import load_config, parse_overrides

    ident = day["identity"]
    config = load_config(ident["preset"]).replace(parse_overrides(ident.get("overrides") or []))
    fixed: dict[str, Any] = {"solve.reps": ident["attempts"], "solve.workers": ident["attempts"],
                             **{f"budget.{k}": v for k, v in day["budget"].items()}}
    if ident["rules"] == "none":
        fixed["stop.stoppers"] = []
    return config.replace(fixed)


def first_solve_s(day: dict[str, Any]) -> float:
    """The day's clock when the run's first solve started: its first problem's start and the engine's start
    inside that call.

    >>> first_solve_s({"problems": [{"day_start_s": 24.2, "engine_s": 153.1}]})
    177.3
    """
    first = day["problems"][0]
    return round(first["day_start_s"] + first["engine_s"], 3)


@dataclass(frozen=True)
class Sim:
    """One problem as the simulator played it on one model: its seconds, the stop reason, attempts finished and
    launched, the answer."""

    seconds: float
    stop: str
    finished: int
    launched: int
    answer: str


@dataclass(frozen=True)
class CheckRow:
    """One problem, measured (``m``) and simulated (``s``: the model as given, under the slot's deadline as the day
    plays it); ``uncapped`` is the same model with no deadline (nothing but the problem's own stop ends it), and
    ``held_out`` / ``held_out_uncapped`` the model refitted without the problem, both ways (None: its fit never
    saw the problem). A deadline hides a slow model's error (the problem is cut where the deadline falls), so the
    seconds the targets are judged on are the uncapped ones."""

    id: str
    call: int
    measured_s: float
    simulated_s: float
    allotted_m: float | None
    allotted_s: float | None
    stop_m: str
    stop_s: str
    finished_m: int
    finished_s: int
    launched_m: int
    launched_s: int
    answer_m: str
    answer_s: str
    holds: int  # the engine's holds in the measured run
    hold_s: float
    first_wait_s: float  # the measured wait for the problem's first tokens (every attempt's first request)
    killed: bool = False  # the engine was killed in it: shown, not compared
    uncapped: Sim | None = None  # the model as given, no deadline
    held_out: Sim | None = None  # the model refitted without this problem, under the deadline
    held_out_uncapped: Sim | None = None  # the same, no deadline

    @property
    def measured(self) -> Sim:
        return Sim(self.measured_s, self.stop_m, self.finished_m, self.launched_m, self.answer_m)

    @property
    def simulated(self) -> Sim:
        return Sim(self.simulated_s, self.stop_s, self.finished_s, self.launched_s, self.answer_s)

    @property
    def held_out_s(self) -> float | None:
        """Seconds on the model refitted without this problem, under the deadline; None: its fit never saw it."""
        return None if self.held_out is None else self.held_out.seconds

    @property
    def uncapped_s(self) -> float:
        """Seconds on the model as given, no deadline (under it where no uncapped play was made)."""
        return (self.uncapped or self.simulated).seconds

    @property
    def gap(self) -> float:
        """Measured over the model as given, uncapped, minus 1 (in-sample where its fit saw the problem)."""
        return self.measured_s / self.uncapped_s - 1 if self.uncapped_s > 0 else 0.0

    @property
    def capped_gap(self) -> float:
        """Measured over the model as given under the deadline, minus 1."""
        return self.measured_s / self.simulated_s - 1 if self.simulated_s > 0 else 0.0

    @property
    def check_played(self) -> Sim:
        """The play that checks the model as the day plays it: held out where its fit saw the problem, under the
        deadline."""
        return self.simulated if self.held_out is None else self.held_out

    @property
    def check_uncapped(self) -> Sim:
        """The play that checks the model's seconds: held out where its fit saw the problem, no deadline (the
        model as given where no uncapped play was made)."""
        if self.held_out is not None:
            return self.held_out_uncapped or self.held_out
        return self.uncapped or self.simulated

    @property
    def check_s(self) -> float:
        """The seconds that check the model: held out where its fit saw the problem, uncapped."""
        return self.check_uncapped.seconds

    @property
    def check_gap(self) -> float:
        """Measured over the checking seconds (held out, uncapped), minus 1.

        >>> r = CheckRow("p", 1, 110.0, 100.0, None, None, "a", "a", 4, 4, 8, 8, "1", "1", 0, 0.0, 0.1,
        ...              held_out=Sim(88.0, "a", 4, 8, "1"))
        >>> round(r.gap, 3), round(r.check_gap, 3)
        (0.1, 0.25)
        >>> cut = replace(r, held_out=Sim(104.0, "deadline", 3, 8, "1"), held_out_uncapped=Sim(125.0, "a", 4, 8, "1"))
        >>> round(cut.check_capped_gap, 3), round(cut.check_gap, 3), cut.same_stop, cut.check_same_stop
        (0.058, -0.12, True, False)
        """
        return self.measured_s / self.check_s - 1 if self.check_s > 0 else 0.0

    @property
    def check_capped_gap(self) -> float:
        """Measured over the checking seconds as the day plays them (held out, under the deadline), minus 1."""
        s = self.check_played.seconds
        return self.measured_s / s - 1 if s > 0 else 0.0

    @staticmethod
    def _same(a: Sim, b: Sim) -> bool:
        return (a.stop, a.answer, a.finished, a.launched) == (b.stop, b.answer, b.finished, b.launched)

    @property
    def same_stop(self) -> bool:
        """The model as given stopped as the run did (in-sample where its fit saw the problem)."""
        return self._same(self.measured, self.simulated)

    @property
    def check_same_stop(self) -> bool:
        """The checking play (held out, under the deadline) stopped as the run did."""
        return self._same(self.measured, self.check_played)

    @property
    def check_same_stop_uncapped(self) -> bool:
        """The checking play with no deadline stopped as the run did."""
        return self._same(self.measured, self.check_uncapped)


def measured_stop(problem: dict[str, Any]) -> tuple[str, int, int, str]:
    """The run's stop reason, attempts finished (ended on their own) and launched, and answer.

    >>> measured_stop({"stopped_by": "agree:4", "statuses": {"done": 5, "cancelled": 3}, "answer": 7})
    ('agree:4', 5, 8, '7')
    """
    statuses = problem["statuses"]
    launched = sum(statuses.values())
    return problem["stopped_by"], launched - statuses.get("cancelled", 0), launched, str(problem["answer"])


def verdict(rows: list[CheckRow]) -> tuple[bool, list[str]]:
    """Whether the targets are met on the checking figures, and a line per target: the seconds held out where the
    fit saw the problem and uncapped (``CheckRow.check_gap``), the stops held out as the day plays them, under the
    deadline (``check_same_stop``; uncapped beside), then the figures under the deadline (not a target: a deadline
    cuts a slow model's seconds to its own).

    >>> r = CheckRow("p", 1, 110.0, 100.0, None, None, "agree:4", "agree:4", 4, 4, 8, 8, "1", "1", 0, 0.0, 0.1)
    >>> verdict([r])[0], verdict([r])[1][:3]
    (False, ['problems within 10 % (uncapped): 1/1 (worst +10.0 %)', 'total within 3 % (uncapped): no (+10.0 %)', \
'same stops: 1/1 under the deadline, 1/1 uncapped'])
    >>> cut = replace(r, held_out=Sim(104.0, "deadline", 3, 8, "1"), held_out_uncapped=Sim(108.0, "agree:4", 4, 8, "1"))
    >>> verdict([cut])[1]
    ['problems within 10 % (held out, uncapped): 1/1 (worst +1.9 %)', 'total within 3 % (held out, uncapped): yes \
(+1.9 %)', 'same stops (held out): 0/1 under the deadline, 1/1 uncapped', 'under the deadline (held out, as the day \
plays): total +5.8 %, worst problem +5.8 %']
    """
    compared = [r for r in rows if not r.killed]
    within = [abs(r.check_gap) <= PROBLEM_TARGET + 1e-9 for r in compared]
    worst = max(compared, key=lambda r: abs(r.check_gap))
    measured = sum(r.measured_s for r in compared)
    total = measured / sum(r.check_s for r in compared) - 1
    capped = measured / sum(r.check_played.seconds for r in compared) - 1
    worst_capped = max(compared, key=lambda r: abs(r.check_capped_gap)).check_capped_gap
    same, same_uncapped = sum(r.check_same_stop for r in compared), sum(r.check_same_stop_uncapped for r in compared)
    ok = all(within) and abs(total) <= TOTAL_TARGET and same == len(compared)
    held = any(r.held_out is not None for r in compared)
    how = "held out, uncapped" if held else "uncapped"
    n = len(compared)
    deadline = "deadline" if n == 1 else "deadlines"
    met = "yes" if abs(total) <= TOTAL_TARGET else "no"
    lines = [f"problems within {PROBLEM_TARGET:.0%} ({how}): {sum(within)}/{n} (worst {worst.check_gap:+.1%})",
             f"total within {TOTAL_TARGET:.0%} ({how}): {met} ({total:+.1%})",
             f"same stops{' (held out)' if held else ''}: {same}/{n} under the {deadline}, "
             f"{same_uncapped}/{n} uncapped"]
    if held:
        lines.append(f"under the {deadline} (held out, as the day plays): total {capped:+.1%}, worst problem "
                     f"{worst_capped:+.1%}")
    return ok, [line.replace("%", " %") for line in lines]


def residual(rows: list[CheckRow]) -> str:
    """The in-sample figures (uncapped) as one line, called the fit's residual (never a check).

    >>> r = CheckRow("p", 1, 110.0, 100.0, None, None, "a", "a", 4, 4, 8, 8, "1", "1", 0, 0.0, 0.1)
    >>> residual([r])
    "the fit's residual (in-sample, not a check), uncapped: total +10.0 %, worst problem +10.0 %"
    """
    compared = [r for r in rows if not r.killed]
    total = sum(r.measured_s for r in compared) / sum(r.uncapped_s for r in compared) - 1
    worst = max(compared, key=lambda r: abs(r.gap)).gap
    return f"the fit's residual (in-sample, not a check), uncapped: total {total:+.1%}, worst problem {worst:+.1%}" \
        .replace("%", " %")


def table(rows: list[CheckRow]) -> list[str]:
    """The check as markdown table lines, and the total: per problem the model as given under the deadline and
    uncapped, the model refitted without the problem under the deadline and uncapped (the check), and the stops
    of the run, the model as given and the held-out one under the deadline."""
    lines = ["| problem | call | measured s | simulated s | uncapped s | gap | held out s | held out uncapped s | "
             "gap (check) | allotted s (run / sim) | stop (run / sim / held out) | finished | launched | answer | "
             "holds | first tokens s |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|---|---|---|---|---:|"]

    def allot(x: float | None) -> str:
        return "-" if x is None else f"{x:.0f}"

    def pct(x: float) -> str:
        return f"{x:+.1%}".replace("%", " %")

    def three(r: CheckRow, key: str) -> str:  # the run's, the model's as given, the held-out one's
        m, s = getattr(r.measured, key), getattr(r.simulated, key)
        return f"{m} / {s}" + ("" if r.held_out is None else f" / {getattr(r.held_out, key)}")

    for r in rows:
        h = r.held_out
        out = "-" if h is None else f"{h.seconds:.1f}"
        out_free = "-" if r.held_out_uncapped is None else f"{r.held_out_uncapped.seconds:.1f}"
        check = "killed" if r.killed else pct(r.check_gap)
        lines.append(f"| {r.id} | {r.call} | {r.measured_s:.1f} | {r.simulated_s:.1f} | {r.uncapped_s:.1f} | "
                     f"{'killed' if r.killed else pct(r.gap)} | {out} | {out_free} | {check} | "
                     f"{allot(r.allotted_m)} / {allot(r.allotted_s)} | "
                     f"{three(r, 'stop')} | {three(r, 'finished')} | {three(r, 'launched')} | {three(r, 'answer')} | "
                     f"{r.holds} ({r.hold_s:.1f} s) | "
                     f"{r.first_wait_s:.1f} |")
    compared = [r for r in rows if not r.killed]
    measured = sum(r.measured_s for r in compared)
    simulated, uncapped = sum(r.simulated_s for r in compared), sum(r.uncapped_s for r in compared)
    capped, checked = sum(r.check_played.seconds for r in compared), sum(r.check_s for r in compared)
    lines.append(f"| total | | {measured:.1f} | {simulated:.1f} | {uncapped:.1f} | {pct(measured / uncapped - 1)} | "
                 f"{capped:.1f} | {checked:.1f} | {pct(measured / checked - 1)} | | | | | | "
                 f"{sum(r.holds for r in compared)} ({sum(r.hold_s for r in compared):.1f} s) | |")
    return lines


# ---- the simulator's day ---------------------------------------------------------------------------------------


def compare(day: dict[str, Any], model: Any, fitted: list[dict[str, Any]] = ()) -> list[CheckRow]:
    """Every problem of ``day`` (a ``day.py`` JSON) measured against the simulator's day of the same plan, under
    the deadlines and uncapped; each one the model's day fit saw (``fitted``: its day slices, ``fitted_days``) also
    on the model refitted without it (``held_out``, ``held_out_uncapped``)."""
    from solver.timing.fit import held_out

    rows = played(day, model)
    seen = {p["id"] for d in fitted for p in d.get("problems", [])}
    out = []
    for row in rows:
        if row.id in seen and not row.killed:
            fold = next(r for r in played(day, held_out(model, list(fitted), row.id)) if r.id == row.id)
            row = replace(row, held_out=fold.simulated, held_out_uncapped=fold.uncapped)
        out.append(row)
    return out


def fitted_days(model: Any, folder: Path) -> list[dict[str, Any]]:
    """The day slices the model's decode and requests were fitted on (the files ``fitted_on`` names for
    ``context_s`` that are day slices), read from ``folder``; a one-line ``BadInput`` for one not there."""
    out = []
    for name in model.fed_by("context_s"):
        path = folder / name
        if not path.is_file():
            raise BadInput(f"{model.name} was fitted on {name}, not in {folder}: its problems cannot be held out")
        data = json.loads(path.read_text())
        if data.get("problems") and data.get("plan"):
            data["_file"] = name
            out.append(data)
    return out


def uncapped(config: Any) -> Any:
    """``config`` with no budget: no total, so no slot deadline, and no cutoff; nothing but each problem's own
    stop ends it (the simulator's only cap on a recorded plan is the deadline: the plan's tokens are the run's).

    >>> from solver.config import Config
    >>> uncapped(Config().replace({"budget.total_s": 600.0, "budget.cutoff_s": 550.0})).budget.total_s is None
    True
    """
    return config.replace({"budget.total_s": None, "budget.cutoff_s": None})


def played(day: dict[str, Any], model: Any) -> list[CheckRow]:
    """Every problem of ``day`` measured against the simulator's day of the same plan on ``model``: under the
    run's budget (``simulated_s`` and the stop) and with none (``uncapped``)."""
    from solver.offline.sim import ProblemPool, prepare, simulated_run
    from solver.timing.measured import holds
    from solver.types import Problem

    problems = day["problems"]
    if not problems:
        raise BadInput("the day file holds no finished problem")
    config = slice_config(day)
    rows_of: dict[str, list[dict[str, Any]]] = {}
    for row in day["plan"]:
        rows_of.setdefault(row["problem"], []).append(row)
    pools = [ProblemPool(Problem(p["id"], ""), tuple(repetition(r) for r in rows_of[p["id"]])) for p in problems]
    prepared = prepare(pools, [config.vote.voter], config, None)
    for prep, pool in zip(prepared, pools):  # the simulator's limits must keep what the run played
        played = tuple(tuple(s["tokens"] for s in r["steps"]) for r in rows_of[pool.problem.id])
        if tuple(plan.tokens for plan in prep.plans) != played:
            raise BadInput(f"{pool.problem.id}: the config's limits cut the plan otherwise than the run did")
    draws = {p["id"]: list(range(len(rows_of[p["id"]]))) for p in problems}  # the run launched them in order
    timed = replace(model, start_s=first_solve_s(day))
    simulated = simulated_run(prepared, config, timed, draws)
    free = simulated_run(prepared, uncapped(config), timed, draws)
    killed = (day.get("fault") or {}).get("problem")
    out = []
    for p, slot, open_slot in zip(problems, simulated.problems, free.problems):
        stop, finished, launched, answer = measured_stop(p)
        s, u = slot.played, open_slot.played
        windows = holds(p["timeline"])
        first_tokens = [r["first_token"] for r in p["timeline"] if r["turn"] == 0 and r["first_token"] is not None]
        out.append(CheckRow(p["id"], p["call"], p["seconds"], round(s.seconds, 3), p["allotted_s"], slot.allotted_s,
                            stop, s.stopped_by, finished, s.finished, launched, s.launched, answer, s.answer,
                            len(windows), round(sum(b - a for a, b in windows), 3),
                            round(max(first_tokens, default=0.0), 3), p["id"] == killed,
                            uncapped=Sim(round(u.seconds, 3), u.stopped_by, u.finished, u.launched, u.answer)))
    return out


# ---- answers for an older file -------------------------------------------------------------------------------


def add_answers(path: Path, extract: Path) -> int:
    """Write into ``path``'s plan each attempt's answer, taken from the extract it was run from (its sha256
    checked against the run's identity; the plan made again from it must equal the stored one but for the
    answers). The attempts given an answer."""
    import hashlib

    from solver.files import atomic_write
    from solver.measure.day.options import day_options, load_plan, plan_rows

    data = json.loads(path.read_text())
    ident = data["identity"]
    digest = hashlib.sha256(extract.read_bytes()).hexdigest()[:16]
    if digest != ident["attempts_sha256"]:
        raise BadInput(f"{extract} is not the extract {path.name} was run from (sha256 {digest}, the run's "
                       f"{ident['attempts_sha256']})")
    # the flags of the run, as ``solver day --estimate`` would take them
    options = day_options(
        attempts_file=extract, problems=len(ident["problems"]), problem_ids=",".join(ident["problems"]),
        attempts=ident["attempts"], attempt_tokens=ident["attempt_tokens"], rules=ident["rules"],
        tool_time=ident["tool_time"], json=None, resume=False, until=None, hard_stop=None, safety=1.1,
        max_problems=None, kill_engine_at=None, log_engine=False, label=None, table=None, estimate=True,
        time_model=None, run_dir=None, gpu=ident["gpu"], preset=ident["preset"], model=None,
        overrides=list(ident["overrides"]), dry=None)
    again = plan_rows(load_plan(options)[0])
    stored = data["plan"]
    if [{k: v for k, v in r.items() if k != "answer"} for r in again] != \
            [{k: v for k, v in r.items() if k != "answer"} for r in stored]:
        raise BadInput(f"the plan made again from {extract} differs from {path.name}'s")
    for row, made in zip(stored, again):
        row["answer"] = made["answer"]
    atomic_write(path, json.dumps(data, indent=1))
    return len(stored)


def row_data(row: CheckRow) -> dict[str, Any]:
    """A row as the check's JSON keeps it: its fields, and the figures the table and the verdict read, by name."""
    return {**asdict(row), "uncapped_s": row.uncapped_s, "held_out_s": row.held_out_s,
            "held_out_uncapped_s": None if row.held_out_uncapped is None else row.held_out_uncapped.seconds,
            "gap": row.gap, "capped_gap": row.capped_gap, "check_s": row.check_s, "check_gap": row.check_gap,
            "check_capped_gap": row.check_capped_gap, "same_stop": row.same_stop,
            "check_same_stop": row.check_same_stop, "check_same_stop_uncapped": row.check_same_stop_uncapped}


def check_day(path: Path, time_model: str | None = None, json_out: Path | None = None) -> int:
    """The day file at ``path`` played on the time model (``time_model``, default the preset's), its table and
    verdict printed (and written to ``json_out``); 0 when every target is met, 1 when one is not. A file the check
    cannot use raises (``BadInput``, ``ConfigError``, or the reader's ``OSError``/``ValueError``/``KeyError``)
    before anything is printed."""
    from solver.timing.model import load_time_model

    day = json.loads(path.read_text())
    model = load_time_model(time_model or slice_config(day).engine.time_model or "h100-gptoss")
    rows = compare(day, model, fitted_days(model, path.parent))
    ok, lines = verdict(rows)
    fed = model.fed(path.name)
    print(f"{path.name} on time model {model.name}, the simulator's day from {first_solve_s(day):.1f} s:")
    if fed:
        print(f"IN-SAMPLE: {path.name} fed {model.name}'s {', '.join(fed)}; 'gap' is the fit's residual, not "
              "a check; 'gap (check)' plays each problem on the model refitted without it (leave one problem out), "
              "uncapped")
    elif not model.fitted_on:
        print(f"{model.name} names no run it was fitted on (fitted_on): in-sample cannot be told from a check")
    print("\n".join(table(rows)))
    if fed:
        print(residual(rows))
    print(("check: " if fed or any(r.held_out_s is not None for r in rows) else "") + "; ".join(lines))
    if json_out is not None:
        json_out.write_text(json.dumps({"day": path.name, "time_model": model.name, "in_sample": list(fed),
                                        "ok": ok, "verdict": lines, "residual": residual(rows) if fed else None,
                                        "rows": [row_data(r) for r in rows]}, indent=1))
    return 0 if ok else 1
