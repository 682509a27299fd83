"""The seconds a replayed call runs: carried with the extract (measured once, ``tool_seconds``), measured again in
our sandbox, or fixed; ``--tool-time``'s words and how a plan takes the seconds (``with_tool_times``). The workload's
(``solver.measure.workload``) calls sleep them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, get_args

from solver.errors import BadInput
from solver.measure.workload import STARTER_CELL, Replay, key_of


def with_tool_times(problems: list[list[Replay]], times: dict[str, float]) -> list[list[Replay]]:
    """The replays with each call's seconds from ``times`` (by ``key_of``; a call not in it keeps its own)."""
    return [[replace(r, steps=tuple(replace(s, tool_s=times.get(key_of(r.problem.id, r.index, t), s.tool_s))
                                    if s.call else s for t, s in enumerate(r.steps))) for r in replays]
            for replays in problems]


ToolTimeMode = Literal["auto", "carried", "measure"]  # --tool-time's words; any other value is seconds per call
TOOL_TIME_MODES: tuple[ToolTimeMode, ...] = get_args(ToolTimeMode)


def tool_time_seconds(value: str, error: type[Exception] = BadInput) -> float:
    """``--tool-time``'s seconds per call, where it is not one of ``TOOL_TIME_MODES``; bad input raises ``error``.

    >>> tool_time_seconds("0.5")
    0.5
    >>> tool_time_seconds("soon")
    Traceback (most recent call last):
    ...
    solver.errors.BadInput: --tool-time: 'auto', 'carried', 'measure' or seconds, not 'soon'
    """
    try:
        seconds = float(value)
    except ValueError:
        raise error(f"--tool-time: 'auto', 'carried', 'measure' or seconds, not {value!r}") from None
    if seconds < 0:
        raise error("--tool-time must be >= 0 seconds")
    return seconds


def tool_time_mode(value: str, carried: Sequence[tuple[float, ...] | None], path: Path,
                   error: type[Exception] = BadInput) -> str:
    """``--tool-time`` for the trace file at ``path`` (``carried``: its attempts' ``tool_seconds``): ``'carried'``,
    ``'measure'``, or ``value`` itself (seconds per call, checked by ``tool_time_seconds``); ``'auto'`` is carried
    when every attempt carries its seconds, else measure. Bad input raises ``error``.

    >>> x = Path("x.jsonl")
    >>> tool_time_mode("auto", [(1.0,)], x), tool_time_mode("auto", [(1.0,), None], x), tool_time_mode("0.5", [None], x)
    ('carried', 'measure', '0.5')
    >>> tool_time_mode("carried", [None], x)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    solver.errors.BadInput: --tool-time carried: x.jsonl carries no tool_seconds (write the extract with extract_attempts.py ...)
    """
    if value not in TOOL_TIME_MODES:
        tool_time_seconds(value, error)
        return value
    has_times = bool(carried) and all(x is not None for x in carried)
    if value == "carried" and not has_times:
        raise error(f"--tool-time carried: {path} carries no tool_seconds (write the extract with "
                    "extract_attempts.py --measure-tools)")
    if value == "auto":
        return "carried" if has_times else "measure"
    return value


def carried_tool_times(problems: list[list[Replay]]) -> dict[str, float]:
    """Seconds per call (``key_of``) as the plan holds them: the extract's carried seconds once planned with them."""
    return {key_of(r.problem.id, r.index, t): s.tool_s
            for replays in problems for r in replays for t, s in enumerate(r.steps) if s.call}


def fixed_tool_times(problems: list[list[Replay]], seconds: float) -> dict[str, float]:
    """Every call runs ``seconds``; a follow-up (nothing ran in the recording) none."""
    return {key_of(r.problem.id, r.index, t): seconds if s.code is not None else 0.0
            for replays in problems for r in replays for t, s in enumerate(r.steps) if s.call}


async def measure_tool_times(problems: list[list[Replay]], sandbox: Any, timeout_s: float) -> dict[str, float]:
    """Re-execute every replayed call's recorded code in our sandbox (``solver.recordings.tool_times.measure_calls``:
    one stateful session per attempt, the harness's starter cell first, untimed, calls in order, each cut at
    ``timeout_s``); attempts at once (the pool bounds how many run). Seconds per call (``key_of``); a follow-up
    takes none."""
    from solver.recordings import measure_calls

    replays = [r for group in problems for r in group]
    calls = [[s.code for s in r.steps if s.call] for r in replays]
    seconds = await measure_calls(calls, sandbox, timeout_s, starter=STARTER_CELL, concurrency=len(replays) or 1)
    return {key_of(r.problem.id, r.index, turn): value for r, times in zip(replays, seconds)
            for turn, value in zip((t for t, s in enumerate(r.steps) if s.call), times)}



def measure_tool_times_alone(problems: list[list[Replay]], sandbox_config: Any) -> dict[str, float]:
    """``measure_tool_times`` in a sandbox pool of its own (``sandbox_config``'s), started and closed here, for a
    caller outside any event loop (the day's plan, the real shape's)."""
    import asyncio

    from solver.sandbox.pool import create_sandbox

    async def measure() -> dict[str, float]:
        sandbox = create_sandbox(sandbox_config)
        await sandbox.start()
        try:
            return await measure_tool_times(problems, sandbox, sandbox_config.timeout_s)
        finally:
            await sandbox.close()

    return asyncio.run(measure())
