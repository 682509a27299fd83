"""Jupyter parity of stateful sessions: the real gpt-oss-120b attempts' python calls run again in the sandbox, and
what the model is shown compared with what the recording harness's IPython kernel showed it.

    python benchmarks/sandbox_parity.py [--attempts N | --only PROBLEM:K ...] [--timeout S] [--jobs J]
                                        [--preset NAME] [--display repr|ipython] [--dump PATH]

The recorded gpt-oss-120b attempts (``ATTEMPTS``, beside the checkout, read at run time; not shipped) were
recorded by the AIMO3 public harness (``tonghuikang/aimo3``, ``notebook.py``): one IPython kernel per attempt, the
starter cell first, each call's output joined into one tool message. Here each attempt gets one stateful session
of a pool built from the preset's sandbox settings (``h100-gptoss``: ``display: ipython``, the harness's starter
cell and interrupt grace) with the harness's 120 s limit (``--timeout``); its calls run in order, and
``describe_execution`` with the preset's output style gives the text the model would be shown, compared with the
recorded tool message. ``--display repr`` runs the same calls through the sandbox's own runner instead, for
comparison.

Prints the share of identical texts (all calls, and outside calls that hit the time limit on either side, the
target), every difference by family with a count and one example, and how many calls take longer than the preset's
own limit and what they cost in seconds. ``--dump`` writes every call's texts as JSON lines (extracts of the
recording: keep them out of the repository). ``--attempts N`` takes N attempts spread evenly over the file; ``--only
PROBLEM:K`` the K-th attempt (0-based, in file order) at a problem. Timings depend on the machine and its load: calls
near the limit can land on either side of it.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from solver.config import SandboxConfig, load_config  # noqa: E402 - after the path set-up above
from solver.dialects import OutputStyle, describe_execution  # noqa: E402
from solver.replay import Attempt, read_attempts  # noqa: E402
from solver.sandbox.pool import ProcessPoolSandbox  # noqa: E402

SHARED = Path(os.environ.get("SOLVER_SHARED", ROOT.parent / "shared"))
ATTEMPTS = SHARED / "data" / "replay" / "gptoss120b_aimo3_dev.jsonl.xz"
HARNESS_TIMEOUT_S = 120.0  # LocalJupyterSession(timeout=120.0); its tool description says 120.0 seconds too

# Families of differences, in the order they are tried: the first that explains a difference names it.
FAMILIES = ("timeout", "after a timeout", "output cap", "memory", "object addresses", "file paths",
            "whitespace only (wrapping)", "traceback layout", "ordering (sets, dicts)", "timing", "randomness",
            "warnings", "really different")
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{6,}")
_PATH_FRAME = re.compile(r"File (?:~|/)\S*?:\d+")  # IPython's "File ~/.../formatters.py:770 in __call__"
_PATH = re.compile(r"(?:~|/)[\w./-]*/(?:site-packages|lib/python\d\.\d+)/[\w./-]*")
_TOKENS = re.compile(r"\w+|\S")
_TIMING = re.compile(r"\btime\.|perf_counter|timeit|datetime|process_time|monotonic")
_RANDOM = re.compile(r"random|shuffle|randint|default_rng|\brng\b")


@dataclass(frozen=True)
class Call:
    index: int  # 0-based, among the attempt's tool calls
    code: str
    recorded: str  # the tool message the harness sent


@dataclass(frozen=True)
class CallOutcome:
    """One call run again: what the model would be shown, and how the run ended."""

    call: Call
    shown: str
    status: str
    state_lost: bool
    duration_s: float
    family: str | None = None  # None: the same text

    @property
    def same(self) -> bool:
        return self.shown == self.call.recorded


def attempt_calls(attempt: Attempt) -> list[Call]:
    """The attempt's python calls in order: each answered request's code (the last message of its tokens, sent to
    python, as the harness read it with openai_harmony) and the tool message recorded after it."""
    from openai_harmony import HarmonyError, Role

    from solver.dialects import load_encoding

    encoding = load_encoding()
    calls = []
    for request in attempt.requests:
        if request.tool_output is None:
            continue
        try:
            messages = encoding.parse_messages_from_completion_tokens(list(request.generated), Role.ASSISTANT,
                                                                      strict=False)
        except HarmonyError:
            messages = []
        last = messages[-1] if messages else None
        if last is None or not (last.recipient or "").startswith("python") or not last.content:
            raise ValueError(f"{attempt.problem_id}: a tool message without a python call before it")
        calls.append(Call(len(calls), getattr(last.content[0], "text", ""), request.tool_output))
    return calls


def select(attempts: Sequence[Attempt], count: int | None, only: Sequence[str]) -> list[tuple[str, Attempt]]:
    """(``PROBLEM:K``, attempt) pairs: those named by ``only``, else ``count`` spread evenly over the file."""
    named: list[tuple[str, Attempt]] = []
    seen: Counter[str] = Counter()
    for attempt in attempts:
        named.append((f"{attempt.problem_id}:{seen[attempt.problem_id]}", attempt))
        seen[attempt.problem_id] += 1
    if only:
        by_name = dict(named)
        missing = [name for name in only if name not in by_name]
        if missing:
            raise SystemExit(f"sandbox_parity: no attempt {missing[0]} in {ATTEMPTS}")
        return [(name, by_name[name]) for name in only]
    count = len(named) if count is None else min(count, len(named))
    return [named[i * len(named) // count] for i in range(count)]


def family(outcome: CallOutcome, earlier: Sequence[CallOutcome], style: OutputStyle) -> str | None:
    """Which family a difference belongs to (``FAMILIES``); None when the texts are the same."""
    if outcome.same:
        return None
    ours, recorded, code = outcome.shown, outcome.call.recorded, outcome.call.code
    if outcome.status == "timeout" or outcome.state_lost or recorded.endswith(style.timeout):
        return "timeout"
    if any(o.status == "timeout" or o.state_lost or o.call.recorded.endswith(style.timeout) for o in earlier):
        return "after a timeout"
    if outcome.status == "truncated":
        return "output cap"
    if outcome.status == "memory" or "MemoryError" in ours or "MemoryError" in recorded:
        return "memory"
    if _ADDRESS.search(ours) or _ADDRESS.search(recorded):
        return "object addresses"
    if _normalised_paths(ours) == _normalised_paths(recorded):
        return "file paths"
    if "".join(ours.split()) == "".join(recorded.split()):
        return "whitespace only (wrapping)"
    if _error_line(ours) is not None and _error_line(ours) == _error_line(recorded):
        return "traceback layout"
    if sorted(_TOKENS.findall(ours)) == sorted(_TOKENS.findall(recorded)):
        return "ordering (sets, dicts)"
    if _TIMING.search(code):
        return "timing"
    if _RANDOM.search(code):
        return "randomness"
    if "Warning:" in ours and "Warning:" not in recorded:
        return "warnings"
    return "really different"


def _error_line(text: str) -> str | None:
    """The exception line that ends a traceback (``ValueError: ...``), when the text ends with one."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or not any(line.startswith(("Traceback", "  Cell In[", "  File ")) for line in lines):
        return None
    return lines[-1]


def _normalised_paths(text: str) -> str:
    """Library frames of a traceback without their location: IPython's own frames (a formatter that failed)
    name files under the interpreter's install, with line numbers of its version."""
    text = _PATH_FRAME.sub("File PATH", text)
    return _PATH.sub("PATH", text)


async def replay(pool: ProcessPoolSandbox, calls: Sequence[Call], style: OutputStyle,
                 timeout_s: float) -> list[CallOutcome]:
    """Run one attempt's calls in order in one session; each call's text as the model would be shown it."""
    session = await pool.session()
    outcomes: list[CallOutcome] = []
    try:
        for call in calls:
            execution = await session.run(call.code, timeout_s=timeout_s)
            outcome = CallOutcome(call, describe_execution(execution, style), execution.status, execution.state_lost,
                                  execution.duration_s)
            outcomes.append(dataclasses.replace(outcome, family=family(outcome, outcomes, style)))
    finally:
        await session.close()
    return outcomes


async def run(chosen: Sequence[tuple[str, list[Call]]], config: SandboxConfig, style: OutputStyle, jobs: int,
              timeout_s: float) -> dict[str, list[CallOutcome]]:
    """Every chosen attempt in a session of its own, ``jobs`` attempts at once."""
    pool = ProcessPoolSandbox(dataclasses.replace(config, workers=jobs))
    gate = asyncio.Semaphore(jobs)
    results: dict[str, list[CallOutcome]] = {}

    async def one(name: str, calls: list[Call]) -> None:
        async with gate:
            began = time.monotonic()
            results[name] = await replay(pool, calls, style, timeout_s)
            same = sum(o.same for o in results[name])
            print(f"  {name}: {same}/{len(calls)} the same, {time.monotonic() - began:.0f} s", file=sys.stderr,
                  flush=True)

    try:
        await pool.start()
        await asyncio.gather(*(one(name, calls) for name, calls in chosen))
    finally:
        await pool.close()
    return {name: results[name] for name, _calls in chosen}


@dataclass(frozen=True)
class ParitySummary:
    calls: int
    same: int
    outside: int  # calls that hit the time limit on neither side
    same_outside: int
    families: dict[str, list[CallOutcome]]

    @property
    def share(self) -> float:
        return self.same / self.calls if self.calls else 1.0

    @property
    def share_outside(self) -> float:
        return self.same_outside / self.outside if self.outside else 1.0


def summarise(results: dict[str, list[CallOutcome]]) -> ParitySummary:
    outcomes = [o for run_ in results.values() for o in run_]
    families: dict[str, list[CallOutcome]] = defaultdict(list)
    for outcome in outcomes:
        if outcome.family is not None:
            families[outcome.family].append(outcome)
    outside = [o for o in outcomes if o.family != "timeout"]
    return ParitySummary(len(outcomes), sum(o.same for o in outcomes), len(outside), sum(o.same for o in outside),
                         dict(families))


def _first_difference(ours: str, recorded: str) -> tuple[str, str]:
    ours_lines, recorded_lines = ours.splitlines(), recorded.splitlines()
    for i in range(max(len(ours_lines), len(recorded_lines))):
        a = ours_lines[i] if i < len(ours_lines) else "<end>"
        b = recorded_lines[i] if i < len(recorded_lines) else "<end>"
        if a != b:
            return a[:150], b[:150]
    return repr(ours[-60:]), repr(recorded[-60:])  # the lines agree: a difference in line ends


def report(results: dict[str, list[CallOutcome]], limit_s: float, preset_limit_s: float) -> None:
    summary = summarise(results)
    names = {id(o): name for name, run_ in results.items() for o in run_}
    print(f"attempts: {len(results)}  calls: {summary.calls}  limit: {limit_s:g} s  "
          f"load average: {os.getloadavg()[0]:.1f}")
    print(f"the same text: {summary.same}/{summary.calls} = {100 * summary.share:.1f} %")
    print(f"the same text outside calls that hit the limit: {summary.same_outside}/{summary.outside} = "
          f"{100 * summary.share_outside:.1f} %")
    print("differences by family:")
    for name in FAMILIES:
        found = summary.families.get(name, [])
        if not found:
            continue
        example = found[0]
        ours, recorded = _first_difference(example.shown, example.call.recorded)
        code = example.call.code.strip().splitlines()
        print(f"  {name}: {len(found)}")
        print(f"    e.g. {names[id(example)]} call {example.call.index}: {code[0][:100] if code else ''!r}"
              f"{' ...' if len(code) > 1 else ''}")
        print(f"      ours:     {ours}")
        print(f"      recorded: {recorded}")
    durations = sorted(o.duration_s for run_ in results.values() for o in run_)
    if not durations:
        return
    over = [d for d in durations if d > preset_limit_s]
    print(f"call time here: median {1e3 * statistics.median(durations):.0f} ms, "
          f"p90 {durations[int(0.9 * (len(durations) - 1))]:.2f} s, sum {sum(durations):.0f} s")
    for mark in sorted({preset_limit_s, 10.0, 30.0, 60.0, limit_s}):
        n = sum(d > mark for d in durations)
        print(f"  calls over {mark:g} s: {n} ({100 * n / len(durations):.1f} %), {sum(d for d in durations if d > mark):.0f} s")
    print(f"at the preset's {preset_limit_s:g} s limit: {len(over)} calls would be interrupted; they take "
          f"{sum(over):.0f} s here, {preset_limit_s * len(over):.0f} s with the limit "
          f"({sum(over) - preset_limit_s * len(over):.0f} s saved over {sum(durations):.0f} s of calls)")


def dump(results: dict[str, list[CallOutcome]], path: Path) -> None:
    with path.open("w") as handle:
        for name, run_ in results.items():
            for o in run_:
                handle.write(json.dumps({"attempt": name, "call": o.call.index, "family": o.family,
                                         "status": o.status, "state_lost": o.state_lost,
                                         "duration_s": round(o.duration_s, 4), "code": o.call.code,
                                         "ours": o.shown, "recorded": o.call.recorded}) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=None, help="this many attempts, spread over the file")
    parser.add_argument("--only", nargs="+", default=[], metavar="PROBLEM:K", help="these attempts")
    parser.add_argument("--timeout", type=float, default=HARNESS_TIMEOUT_S, help="seconds per call (default 120)")
    parser.add_argument("--jobs", type=int, default=2, help="attempts run at once (default 2)")
    parser.add_argument("--preset", default="h100-gptoss", help="sandbox settings and output style")
    parser.add_argument("--display", choices=("repr", "ipython"), default=None,
                        help="the sessions' display (default: the preset's), to compare the two")
    parser.add_argument("--dump", type=Path, default=None, help="write every call's texts here (JSON lines)")
    args = parser.parse_args()
    if (args.attempts is not None and args.attempts < 1) or args.jobs < 1 or args.timeout <= 0:
        parser.error("--attempts and --jobs must be >= 1 and --timeout > 0")
    if not ATTEMPTS.is_file():
        parser.error(f"no real attempts at {ATTEMPTS} (the recorded attempts, not shipped, are not beside this checkout)")
    overrides = {"sandbox.code_mode": "stateful"}
    if args.display is not None:
        overrides["sandbox.display"] = args.display
    config = load_config(args.preset, overrides=overrides)
    style = OutputStyle.from_config(config.prompt)
    chosen = [(name, attempt_calls(attempt))
              for name, attempt in select(read_attempts(ATTEMPTS), args.attempts, args.only)]
    print(f"{len(chosen)} attempts, {sum(len(c) for _n, c in chosen)} calls, {args.jobs} at once",
          file=sys.stderr, flush=True)
    results = asyncio.run(run(chosen, config.sandbox, style, args.jobs, args.timeout))
    report(results, args.timeout, config.sandbox.timeout_s)
    if args.dump is not None:
        dump(results, args.dump)


if __name__ == "__main__":
    main()
