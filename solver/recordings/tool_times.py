"""Tool-call times measured again: recorded attempts keep what their calls printed, not how long they ran, so each
call's recorded code is run again in our sandbox, in order, in one stateful session per attempt (names made by
earlier calls exist, as they did when it was recorded), each cut at the sandbox's time limit.

One function for every caller: ``solver import-samples --measure-tools`` writes the seconds into each imported
turn's ``Execution.duration_s`` (the recorded output stays what the model saw), and the engine benchmark's real
workload (``solver.measure.workload``) waits them out between requests.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from dataclasses import replace

from solver.config import SandboxConfig
from solver.types import Repetition, Sandbox


async def measure_calls(calls: Sequence[Sequence[str | None]], sandbox: Sandbox, timeout_s: float, *,
                        starter: str = "", concurrency: int = 1,
                        on_attempt: Callable[[int], None] | None = None) -> list[list[float]]:
    """Per attempt, the seconds each of its calls takes when run again: one stateful session per attempt,
    ``starter`` run first and not timed (a cell the recording harness ran before the model's first call), the
    calls in order, each cut at ``timeout_s`` (a call that reaches it counts ``timeout_s``: a live run interrupts
    it there). ``None`` is a call that ran nothing (0 s). ``concurrency`` attempts at once; ``on_attempt(i)`` is
    called as attempt ``i`` is done.

    >>> from solver.config import SandboxConfig
    >>> from solver.sandbox.pool import create_sandbox
    >>> async def demo():
    ...     sandbox = create_sandbox(SandboxConfig(code_mode="stateful", timeout_s=2.0))
    ...     try:
    ...         return await measure_calls([["import time; t = 0.3", "time.sleep(t)", None]], sandbox, 2.0)
    ...     finally:
    ...         await sandbox.close()
    >>> (first, slept, nothing), = asyncio.run(demo())
    >>> first < 0.3 <= slept < 1.5, nothing
    (True, 0.0)
    """
    gate = asyncio.Semaphore(max(1, concurrency))

    async def one(index: int, codes: Sequence[str | None]) -> list[float]:
        async with gate:
            session = await sandbox.session()
            try:
                if starter.strip():
                    await session.run(starter, timeout_s=timeout_s)
                out = []
                for code in codes:
                    seconds = 0.0
                    if code is not None:
                        seconds = min(timeout_s, (await session.run(code, timeout_s=timeout_s)).duration_s)
                    out.append(seconds)
            finally:
                await session.close()
        if on_attempt is not None:
            on_attempt(index)
        return out

    return list(await asyncio.gather(*(one(i, codes) for i, codes in enumerate(calls))))


def call_codes(rep: Repetition) -> list[str | None]:
    """The code of each turn's call, in turn order (None: the turn ran nothing)."""
    return [t.execution.code if t.execution is not None else None for t in rep.turns]


def with_call_seconds(rep: Repetition, seconds: Sequence[float]) -> Repetition:
    """``rep`` with each executed turn's ``duration_s`` replaced by ``seconds`` (one per turn); the outputs stay."""
    turns = tuple(replace(t, execution=replace(t.execution, duration_s=float(s))) if t.execution is not None else t
                  for t, s in zip(rep.turns, seconds, strict=True))
    return replace(rep, turns=turns)


def measure_repetitions(reps: Sequence[Repetition], sandbox_config: SandboxConfig, *,
                        on_attempt: Callable[[int], None] | None = None) -> list[Repetition]:
    """Every repetition with its calls' seconds measured again (``measure_calls``) in a sandbox built from
    ``sandbox_config`` (its time limit, display and starter cell), ``sandbox.workers`` attempts at once (0: the
    pool's default, usable cores minus one)."""
    from solver.sandbox.pool import create_sandbox, default_workers

    if sandbox_config.code_mode != "stateful":
        sandbox_config = replace(sandbox_config, code_mode="stateful")
    concurrency = sandbox_config.workers or default_workers()

    async def main() -> list[list[float]]:
        sandbox = create_sandbox(sandbox_config, busy=concurrency)
        try:
            await sandbox.start()  # type: ignore[attr-defined]
            return await measure_calls([call_codes(r) for r in reps], sandbox, sandbox_config.timeout_s,
                                       concurrency=concurrency, on_attempt=on_attempt)
        finally:
            await sandbox.close()

    seconds = asyncio.run(main())
    return [with_call_seconds(rep, s) for rep, s in zip(reps, seconds, strict=True)]
