"""Kill/resume soak: run ``solver solve --engine replay`` in a subprocess, SIGKILL it at random moments,
``--resume`` it, and check after every kill that no finished repetition was lost or duplicated.

    python scripts/soak_resume.py --cycles 200 [--seed 0] [--time-scale 0.2] [--keep DIR]

Each run replays the recorded fixture (tests/data/replay_run) so no model is needed; when a run completes, its
final log is checked (one result per problem, results agree with the finished repetitions) and a new run
starts, until ``--cycles`` kills have been made. Prints a report; exits 1 when an invariant broke.
"""

from __future__ import annotations

import argparse
import csv
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_RUN = ROOT / "tests" / "data" / "replay_run"
LOG_NAME = "log.jsonl"


@dataclass
class SoakReport:
    kills: int = 0
    runs_completed: int = 0
    launches: int = 0
    torn_tails: int = 0  # kills that left a partial last line by themselves (cut off by the next resume)
    torn_injected: int = 0  # partial last lines appended after a kill, as a crash mid-write leaves them
    empty_logs: int = 0  # kills before the first record
    finished_seen: int = 0  # distinct finished repetitions observed over all runs
    problems: list[str] = field(default_factory=list)  # lost, duplicated or changed records, one line each
    notes: list[str] = field(default_factory=list)  # results that disagree with the log (not a loss)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    def text(self) -> str:
        lines = [
            f"kills: {self.kills}  launches: {self.launches}  runs completed: {self.runs_completed}",
            f"torn last lines: left by a kill {self.torn_tails}, injected {self.torn_injected}; "
            f"kills before the first record: {self.empty_logs}",
            f"finished repetitions observed: {self.finished_seen}",
            f"lost or duplicated: {len(self.problems)}",
            f"wall time: {self.seconds:.1f} s",
        ]
        lines += [f"  - {p}" for p in self.problems[:20]]
        lines.append(f"results disagreeing with the log's finished repetitions: {len(self.notes)}")
        lines += [f"  - {n}" for n in self.notes[:20]]
        lines.append("OK" if self.ok else "FAILED")
        return "\n".join(lines)


def _problems_csv(path: Path) -> Path:
    from solver.replay import problems_from_log

    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["id", "problem", "answer"])
        for p in problems_from_log(FIXTURE_RUN):
            writer.writerow([p.id, p.text, p.answer])
    return path


def _command(data: Path, run: Path, time_scale: float, resume: bool) -> list[str]:
    base = [sys.executable, "-m", "solver", "solve", str(data)]
    if resume:
        return base + ["--resume", str(run)]
    return base + ["--engine", "replay", "--from", str(FIXTURE_RUN), "--out", str(run), "--reps", "8",
                   "--workers", "4", "--stopper", "agree:5", "--set", f"engine.replay_time_scale={time_scale}"]


class Checker:
    """Remembers every finished repetition seen in a run's log and checks each new snapshot against them."""

    def __init__(self, report: SoakReport) -> None:
        self.report = report
        self.seen: dict[tuple[str, int], str] = {}

    def snapshot(self, run: Path, label: str) -> None:
        from solver.runlog import read_log, repetition_to_json

        log = run / LOG_NAME
        if not log.exists():
            return
        data = log.read_bytes()
        if not data:
            self.report.empty_logs += 1
        elif not data.endswith(b"\n"):
            self.report.torn_tails += 1
        try:
            records = read_log(run, allow_empty=True)
        except ValueError as exc:
            self.report.problems.append(f"{label}: unreadable log: {exc}")
            return
        counts = Counter((r.problem_id, r.index) for r in records.repetitions if r.status != "cancelled")
        for key, n in counts.items():
            if n > 1:
                self.report.problems.append(f"{label}: repetition {key} written {n} times")
        now = {(r.problem_id, r.index): repr(repetition_to_json(r)) for reps in records.finished().values()
               for r in reps}
        for key, body in self.seen.items():
            if key not in now:
                self.report.problems.append(f"{label}: finished repetition {key} lost")
            elif now[key] != body:
                self.report.problems.append(f"{label}: finished repetition {key} changed")
        for key, body in now.items():
            self.seen.setdefault(key, body)
        result_counts = Counter(r.problem_id for r in records.results)
        for pid, n in result_counts.items():
            if n > 1:
                self.report.problems.append(f"{label}: problem {pid} has {n} results")

    def final(self, run: Path, problem_ids: list[str], label: str) -> None:
        from solver.runlog import read_log

        self.snapshot(run, label)
        try:
            records = read_log(run)
        except ValueError as exc:
            self.report.problems.append(f"{label}: unreadable log: {exc}")
            return
        results = {r.problem_id: r for r in records.results}
        if sorted(results) != sorted(problem_ids):
            self.report.problems.append(f"{label}: results for {sorted(results)}, expected {sorted(problem_ids)}")
        finished = records.finished()
        for pid, result in results.items():
            if len(finished.get(pid, [])) != result.repetitions:
                self.report.notes.append(f"{label}: problem {pid} result counts {result.repetitions} "
                                            f"repetitions, log has {len(finished.get(pid, []))}")
        self.report.finished_seen += len(self.seen)


def _wait_for_progress(proc: subprocess.Popen[bytes], log: Path, size: int, limit_s: float) -> None:
    """Return once the log has grown past ``size`` bytes (the run is solving), the process ended, or time is up."""
    end = time.monotonic() + limit_s
    while time.monotonic() < end and proc.poll() is None:
        if log.exists() and log.stat().st_size > size:
            return
        time.sleep(0.01)


def _tear(log: Path, rng: random.Random) -> bool:
    """Append part of a copy of the last line, as a write cut short by a crash would leave it."""
    data = log.read_bytes()
    if not data.endswith(b"\n"):
        return False  # already torn (the resume that would cut it was killed first); a crash leaves one at most
    lines = data.splitlines(keepends=True)
    last = lines[-1]
    with log.open("ab") as f:
        f.write(last[: rng.randint(1, len(last) - 2)])
    return True


def soak(cycles: int, workdir: Path, *, seed: int = 0, time_scale: float = 0.2, tear: float = 0.2,
         finish_timeout_s: float = 300.0) -> SoakReport:
    """Make ``cycles`` SIGKILLs: a quarter at a random moment of start-up (0.1-2.5 s after launch), the rest at a
    random moment (0-1.5 s) after the run's log starts growing. After a share ``tear`` of the kills a torn last
    line is appended, as a crash in the middle of a write would leave, so resume must cut it off."""
    from solver.replay import problems_from_log

    rng = random.Random(seed)
    report = SoakReport()
    started = time.monotonic()
    data = _problems_csv(workdir / "problems.csv")
    problem_ids = [p.id for p in problems_from_log(FIXTURE_RUN)]
    run_number = 0
    run = workdir / f"run{run_number}"
    checker = Checker(report)
    while report.kills < cycles:
        log = run / LOG_NAME
        resume = log.exists()
        size = log.stat().st_size if resume else 0
        proc = subprocess.Popen(_command(data, run, time_scale, resume), cwd=ROOT, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE)
        report.launches += 1
        if rng.random() < 0.25:
            delay = rng.uniform(0.1, 2.5)
        else:
            _wait_for_progress(proc, log, size, limit_s=60.0)
            delay = rng.uniform(0.0, 1.5)
        try:
            _, err = proc.communicate(timeout=delay)
        except subprocess.TimeoutExpired:
            proc.kill()  # SIGKILL: no cleanup runs, exactly like a lost machine
            proc.communicate()
            report.kills += 1
            checker.snapshot(run, f"run{run_number} kill {report.kills}")
            if log.exists() and rng.random() < tear and _tear(log, rng):
                report.torn_injected += 1
            continue
        if proc.returncode != 0:
            report.problems.append(f"run{run_number}: exit {proc.returncode}: "
                                   f"{err.decode(errors='replace').strip().splitlines()[-1:]}")
            break
        checker.final(run, problem_ids, f"run{run_number} end")
        report.runs_completed += 1
        run_number += 1
        run = workdir / f"run{run_number}"
        checker = Checker(report)
    if (run / LOG_NAME).exists() and report.ok:
        # Finish the run the last kill interrupted, and check it whole.
        proc2 = subprocess.run(_command(data, run, time_scale, True), cwd=ROOT, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE, timeout=finish_timeout_s)
        report.launches += 1
        if proc2.returncode != 0:
            report.problems.append(f"run{run_number} final resume: exit {proc2.returncode}: "
                                   f"{proc2.stderr.decode(errors='replace').strip().splitlines()[-1:]}")
        else:
            checker.final(run, problem_ids, f"run{run_number} end")
            report.runs_completed += 1
    report.seconds = time.monotonic() - started
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cycles", type=int, default=200, help="SIGKILLs to make")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--time-scale", type=float, default=0.2, help="replay speed (1 = recorded durations)")
    parser.add_argument("--tear", type=float, default=0.2, help="share of kills followed by a torn last line")
    parser.add_argument("--keep", type=Path, default=None, help="keep the run directories here")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))  # run from a checkout without installing the package
    if args.cycles < 1:
        parser.error("--cycles must be >= 1")
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="soak-resume-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        report = soak(args.cycles, workdir, seed=args.seed, time_scale=args.time_scale, tear=args.tear)
    finally:
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    print(report.text())
    return 0 if report.ok else 1


if __name__ == "__main__":
    sys.exit(main())
