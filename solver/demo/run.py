"""The demo's sequence and what it prints: the live part, the replayed part, the leaderboard simulation, and what
to run next. Every part goes through the code the commands use (``solve_run`` with the same ``SolverSession`` as
``solver solve``, ``tune`` and its ``write_outputs`` as ``solver tune``); this module only chooses the inputs and
words the screen.

OUT receives ``live/`` (the live run), ``recorded/`` (the corpus as a run: ``corpus.py``), ``replayed/`` (the
replayed run) and ``leaderboard/`` (``solver tune``'s report: ``report.html``, plots, ``chosen.yaml``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from solver.config import Config, load_config
from solver.demo.corpus import CORPUS, CORPUS_NAME, PREAMBLE, write_corpus_run
from solver.demo.display import DemoProgress
from solver.types import Problem, ProblemResult, Repetition

REPLAY_SETTINGS = Path(__file__).with_name("replay.yaml")
LIVE_DATA = "demo"  # the bundled set: 8 small problems with answers (evaluation/data/demo.csv)
# The leaderboard simulation's grid: every repetition, the lossless rule, Adaptive-Consistency at its published
# 0.95, a lead of 3, and the replay's rule, at three caps; 15 settings.
TUNE_STOPPERS: tuple[tuple[str, ...], ...] = ((), ("lossless",), ("beta:0.95",), ("margin:3",), ("hold:0.9",))
TUNE_CAPS = (10, 20, 30)
# Leaderboards per setting: the mean's standard error is ~0.1 points at this corpus's spread (std ~1 problem of
# 88), and the search with its calibration check takes ~25 s on 2 shared cores in one process (joblib's worker
# processes cost more to start than they save here).
TRIALS = 100
TUNE_JOBS = 1


class DemoError(ValueError):
    """Bad input for the demo (an OUT that holds files, a missing corpus); the message is one line."""


@dataclass(frozen=True)
class PartResult:
    """One solved part: its run directory, results and times."""

    run_dir: Path
    results: tuple[ProblemResult, ...]
    cap: int  # repetitions per problem at most
    start_s: float  # opening the sandbox and the engine
    solve_s: float

    @property
    def right(self) -> int:
        return sum(bool(r.correct) for r in self.results)

    @property
    def launched(self) -> int:
        return sum(r.launched for r in self.results)

    @property
    def stopped_early(self) -> int:
        return sum(r.launched < self.cap for r in self.results)

    def accuracy(self) -> str:
        """
        >>> r = ProblemResult("p", "1", {"1": 2.0}, 2, 2, "hold:0.9", 0.1, 0, True)
        >>> PartResult(Path("x"), (r, r, r), 30, 0.0, 1.0).accuracy()
        '3/3 right (100.0 %)'
        """
        n = len(self.results)
        return f"{self.right}/{n} right ({100 * self.right / n:.1f} %)" if n else "no problems"


def live_config(problems: int) -> Config:
    """``solver solve demo``'s config: the tiny preset, its budget shared among the demo's problems."""
    return load_config("tiny", overrides={"budget.problems": problems})


def replay_config(recorded: Path | None, problems: int) -> Config:
    """The replayed part's config: ``replay.yaml`` on the tiny preset, replaying ``recorded``, with the sandbox
    preamble the recorded programs need added to the preset's."""
    base = load_config("tiny", REPLAY_SETTINGS)
    return base.replace({"engine.replay_from": [str(recorded)] if recorded else [],
                         "sandbox.preamble": base.sandbox.preamble + PREAMBLE, "budget.problems": problems})


async def solve_part(config: Config, problems: Sequence[Problem], run_dir: Path,
                     progress: DemoProgress) -> PartResult:
    """Open the sandbox and engine (before the progress view, so start-up output does not tear it), then solve
    through ``solve_run`` as ``solver solve`` does."""
    from solver.loop.problem import SolverSession
    from solver.loop.run import solve_run

    t0 = time.monotonic()
    async with SolverSession(config) as session:
        start_s = time.monotonic() - t0
        assert session.engine is not None and session.sandbox is not None
        with progress:
            results = await solve_run(config, problems, run_dir, on_event=progress, engine=session.engine,
                                      sandbox=session.sandbox)
    return PartResult(run_dir, tuple(results), config.solve.reps, start_s, progress.seconds)


@contextlib.contextmanager
def stderr_into(path: Path) -> Iterator[None]:
    """File descriptor 2 goes to ``path`` while the block runs: vLLM's start-up output (its engine process
    inherits the descriptor) lands there instead of across the screen; the screen itself is stdout."""
    path.parent.mkdir(parents=True, exist_ok=True)
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(path, "ab") as log:
            os.dup2(log.fileno(), 2)
            try:
                yield
            finally:
                sys.stderr.flush()
                os.dup2(saved, 2)
    finally:
        os.close(saved)


def check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise DemoError(f"{out} is a file; choose a new --out directory")
    if out.is_dir() and any(out.iterdir()):
        raise DemoError(f"{out} already holds files; choose a new --out directory")
    if not CORPUS.is_file():
        raise DemoError(f"the replay corpus {CORPUS} is missing (the demo runs from a clone of the repository)")


def heading(console: Console, text: str) -> None:
    console.print()
    console.rule(f"[bold]{text}[/bold]", align="left")


def run_live(out: Path, console: Console) -> PartResult:
    from solver.datasets import load_problems

    problems = load_problems(LIVE_DATA)
    config = live_config(len(problems))
    heading(console, f"1/2 LIVE: the embedded SmolLM2-135M model on vLLM solves {len(problems)} small problems")
    console.print("Why: it proves the engine path (prompt, generation, python tool, sandbox, vote, log) on this "
                  "machine. A 135M placeholder model rarely gets maths right, so expect about 0 right; the "
                  "tiny preset runs every repetition (no stopping rule).", highlight=False)
    engine_log = out / "live" / "engine.log"
    console.print(f"starting vLLM on the CPU (30-60 s on 2 cores; its output goes to {engine_log})…",
                  highlight=False)
    with stderr_into(engine_log):
        part = asyncio.run(solve_part(config, problems, out / "live", DemoProgress(len(problems), console)))
    console.print(f"live: {part.accuracy()} · {part.launched} repetitions · engine start {part.start_s:.0f} s, "
                  f"solving {part.solve_s:.0f} s · run: {part.run_dir}", highlight=False)
    show_tool_call(part.run_dir, console)
    return part


def tool_call_excerpt(reps: Sequence[Repetition], lines: int = 12) -> tuple[Repetition, str] | None:
    """The first repetition that called the python tool, and the start of its text as the model saw it (its code,
    then the sandbox's output spliced in); None when no repetition called it.

    >>> from solver.types import Execution, Turn
    >>> ran = Execution("print(6*7)", "ok", "42\\n", "", 0.01)
    >>> turn = Turn("```python\\nprint(6*7)\\n", 9, 5, "stop", 0.1, ran, "```\\n```output\\n42\\n```\\n")
    >>> rep = Repetition("p", 1, 0, "done", (turn,), (), 0.0, 0.2)
    >>> print(tool_call_excerpt([rep], lines=4)[1])
    ```python
    print(6*7)
    ```
    ```output
    >>> tool_call_excerpt([]) is None
    True
    """
    for rep in reps:
        if rep.executions:
            return rep, "\n".join(rep.text.strip().splitlines()[:lines])
    return None


def show_tool_call(run_dir: Path, console: Console) -> None:
    from solver.runlog import read_log

    reps = read_log(run_dir).repetitions
    found = tool_call_excerpt(reps)
    if found is None:
        console.print(f"No repetition closed a ```python block within its token limit this time, so the sandbox "
                      f"ran nothing for these {len(reps)} repetitions.", highlight=False, markup=False)
    else:
        rep, text = found
        console.print(f"{rep.problem_id} repetition {rep.index}, as logged: the model's code, then what the "
                      f"sandbox gave back ({rep.executions[0].status}):", highlight=False)
        # A Text, so brackets the model wrote are not read as markup.
        console.print(Padding(Text(text, style="dim"), (0, 0, 0, 4), expand=False))


def run_replay(out: Path, console: Console, questions: int | None) -> PartResult:
    from solver.replay import problems_from_log
    from solver.loop.parts import prepare_run

    recorded = write_corpus_run(out / "recorded", replay_config(None, 1), problems=questions)
    config = replay_config(recorded.run_dir, recorded.problems)
    prepare_run(config)
    problems = problems_from_log(recorded.run_dir)
    stop = ",".join(config.stop.stoppers)
    heading(console, f"2/2 REPLAYED: {recorded.samples:,} recorded programs of a real maths model, "
                     f"{recorded.problems} questions")
    console.print(f"Why: recorded samples show what the solver is for (votes converging, early stopping, the "
                  f"leaderboard simulation) in seconds without a GPU. Samples: {CORPUS_NAME}. Each program runs "
                  f"in the sandbox now and votes with the option it prints; {stop} stops a question once its "
                  f"leader is safe.", highlight=False)
    part = asyncio.run(solve_part(config, problems, out / "replayed", DemoProgress(len(problems), console)))
    ceiling = part.cap * len(part.results)
    saved = ceiling - part.launched
    console.print(f"replayed: {part.accuracy()} · ran {part.launched:,} of {ceiling:,} programs: {stop} ended "
                  f"{part.stopped_early} of {len(part.results)} questions early, {saved:,} programs saved "
                  f"({ceiling / max(1, part.launched):.1f}x fewer) · {part.solve_s:.0f} s · run: {part.run_dir}",
                  highlight=False)
    return part


def run_leaderboard(out: Path, recorded: Path, replayed: PartResult, console: Console, trials: int) -> Path:
    """``solver tune`` on the recorded programs: expected accuracy and its spread over simulated leaderboards
    for a few policies, the HTML report with its plots, and the pick."""
    from solver.offline.tune import PickRule
    from solver.offline.sim import SimulationRequest
    from solver.offline.tune import tune
    from solver.offline.tune import write_outputs

    heading(console, "LEADERBOARD SIMULATION on the same recorded programs (solver tune)")
    console.print(f"{trials} simulated leaderboard runs per policy, each question's programs drawn from the "
                  f"recorded ones in a new order…", highlight=False)
    request = SimulationRequest(run_dirs=(recorded,), reps=TUNE_CAPS, stoppers=TUNE_STOPPERS, trials=trials,
                                jobs=TUNE_JOBS)
    report = tune(request, PickRule("tolerance", 0.5, "reps"))
    target = out / "leaderboard"
    write_outputs(report, target)
    k = report.choice.problems
    cap = max(TUNE_CAPS)
    table = Table(box=None, pad_edge=False, header_style="bold")
    for column in (f"policy (cap {cap})", "programs per question", "expected accuracy", "5-95 % of leaderboards"):
        table.add_column(column)
    for s in sorted((s for s in report.summaries if s.setting.reps == cap), key=lambda s: -s.launched):
        chosen = " ← tune's pick" if s is report.choice else ""
        table.add_row(("every program" if not s.setting.stoppers else s.setting.stop_label) + chosen,
                      f"{s.launched:.1f}", f"{100 * s.mean / k:.1f} %",
                      f"{100 * s.quantiles[0.05] / k:.1f}-{100 * s.quantiles[0.95] / k:.1f} %")
    console.print(table)
    c = report.choice
    console.print(f"tune's pick: {c.setting.stop_label} at cap {c.setting.reps}, {100 * c.mean / k:.1f} % expected "
                  f"at {c.launched:.1f} programs per question ({report.rule.text}; {target / 'chosen.yaml'})",
                  highlight=False)
    cal = report.simulation.calibration
    if cal is not None:
        console.print(f"calibration: simulated {cal.setting.reps}-program runs against held-out real ones, "
                      f"KS {cal.ks:.2f}, mean gap {cal.mean_gap:+.2f} questions → {cal.verdict}", highlight=False)
    console.print(f"the replay above was one such run, in the recorded order: {replayed.accuracy()} at "
                  f"{replayed.launched / max(1, len(replayed.results)):.1f} programs per question", highlight=False)
    html = target / "report.html"
    console.print(f"report (frontier, score spread, chosen.yaml): [bold]{html.resolve()}[/bold]")
    return html


NEXT_STEPS = """\
Next, with a real model on a GPU (presets: h100, h100-gptoss, qwen3, t4x2, l4x4, h100x2):
  solver solve DATA.csv --preset h100 --model PATH --out runs/NAME   # solve, log every repetition
  solver tune runs/NAME --out runs/NAME-tune                         # pick a stopping policy on your own log
  solver kaggle-local DATA.csv --preset h100 --model PATH            # rehearse the Kaggle submission"""


def run_demo(out: Path, console: Console, *, live: bool = True, questions: int | None = None,
             trials: int = TRIALS) -> int:
    """The whole demo; 0 when every part ran, 1 when the live part failed (the replayed part still runs).
    Bad input is a ``DemoError`` (or the config's and model's own one-line errors) before anything starts."""
    from solver.loop.parts import prepare_run

    check_out(out)
    if live:
        prepare_run(live_config(1))  # the embedded model is there (make demo's set-up converts it)
    started = time.monotonic()
    failed = False
    if live:
        try:
            run_live(out, console)
        except Exception as exc:  # the engine could not start or run: say so, and show the replayed part
            failed = True
            message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            console.print(f"live part failed: {type(exc).__name__}: {message} (see {out / 'live' / 'engine.log'}); "
                          "the replayed part goes on",
                          style="red", highlight=False, markup=False)
    replayed = run_replay(out, console, questions)
    run_leaderboard(out, out / "recorded", replayed, console, trials)
    console.print()
    console.print(NEXT_STEPS, highlight=False, markup=False)
    console.print(f"demo: {time.monotonic() - started:.0f} s · everything is in {out}", highlight=False)
    return 1 if failed else 0
