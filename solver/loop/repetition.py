"""One tool-integrated repetition: generate until the model calls its python tool, run the code, give the result
back, continue until it stops calling.

What a turn means (a fence, a harmony message to ``python``, a ``<tool_call>``) is the dialect's business
(``solver/dialects``); this loop only asks the dialogue for the next prompt, streams the request, and runs the
code it is handed: in a fresh process per call, re-running earlier clean blocks (``accumulate``), or in one
stateful session held for the repetition's life (``stateful``; closed when it ends or is cancelled).

Limits: ``sampling.max_turns`` engine requests, ``sampling.max_total_tokens`` generated tokens over all turns,
``sampling.max_tokens`` per request, and the problem's deadline (the caller cancels the task when it passes).
Cancellation is a value: a cancelled repetition returns its partial record with status "cancelled".
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from solver.config import Config
from solver.core.answers import code_answer, extract_answers
from solver.core.confidence import ConfidenceWindow
from solver.dialects import Dialect, Dialogue, TurnOutput
from solver.types import (
    Answer,
    Engine,
    EngineSession,
    Execution,
    FinishReason,
    GenerationRequest,
    Problem,
    PythonSession,
    Repetition,
    RepetitionStatus,
    Sandbox,
    Turn,
)

log = logging.getLogger(__name__)


def compose_program(earlier: Sequence[str], code: str, mode: Literal["newest", "accumulate"]) -> str:
    """The program to run for a new code block.

    ``newest`` runs the block alone. ``accumulate`` first re-runs the earlier successful blocks with their
    printed output hidden (so their definitions exist), all on one line, then the new block: its line numbers
    in tracebacks are one more than in the block itself.

    >>> compose_program(["x = 2"], "print(x + 1)", "newest")
    'print(x + 1)'
    >>> program = compose_program(["x = 2", "print('hidden')"], "print(x + 1)", "accumulate")
    >>> exec(program, {})
    3
    >>> compose_program([], "x", "accumulate")
    'x'
    """
    if mode == "newest" or not earlier:
        return code
    cells = "; ".join(f"exec(compile({block!r}, '<cell {i}>', 'exec'))" for i, block in enumerate(earlier, 1))
    return f"with __import__('contextlib').redirect_stdout(__import__('io').StringIO()): {cells}\n{code}"


def repetition_seed(base: int, problem_id: str, index: int) -> int:
    """A stable per-repetition seed: the same (base, problem, index) always samples the same way.

    >>> repetition_seed(0, "p1", 3) == repetition_seed(0, "p1", 3) != repetition_seed(0, "p1", 4)
    True
    """
    digest = hashlib.sha256(f"{base}:{problem_id}:{index}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF


@dataclass
class _Stream:
    """What one engine request produced."""

    text: str = ""
    token_ids: list[int] = field(default_factory=list)
    token_count: int = 0  # tokens generated, also when the engine reports counts without ids (replay)
    confidences: list[float] = field(default_factory=list)
    finish: FinishReason = "error"
    stop_reason: str | None = None
    prompt_tokens: int = 0
    cached_tokens: int | None = None
    error: str | None = None
    lowest_group: float | None = None
    stop_token: int | None = None
    ended_by: str | None = None  # "first_answer" | "low_confidence" when the loop ended the request itself
    parts: list[str] = field(default_factory=list)  # text pieces as they stream


@dataclass
class Activity:
    """How many of a problem's repetitions are running code right now (so are not in the engine); adaptive
    workers launch another repetition when one leaves the engine for the sandbox."""

    executing: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def move(self, step: int) -> None:
        self.executing += step
        self.changed.set()


async def _generate(engine: Engine | EngineSession, request: GenerationRequest, out: _Stream, dialogue: Dialogue, *,
                    first_answer: bool, window: ConfidenceWindow | None,
                    floor: Callable[[], float | None]) -> _Stream:
    """Consume one request's stream into ``out`` (filled as it goes, so a cancelled turn keeps its part)."""
    text_parts = out.parts
    async with contextlib.aclosing(engine.stream(request)) as deltas:
        async for delta in deltas:
            text_parts.append(delta.text)
            out.token_ids.extend(delta.token_ids)
            out.token_count += len(delta.token_ids) or delta.token_count
            out.confidences.extend(delta.confidences)
            if delta.prompt_tokens is not None:
                out.prompt_tokens = delta.prompt_tokens
            if delta.cached_tokens is not None:
                out.cached_tokens = delta.cached_tokens
            if delta.finish_reason is not None:
                out.finish, out.stop_reason, out.error = delta.finish_reason, delta.stop_reason, delta.error
                out.stop_token = delta.stop_token
                break
            if first_answer and dialogue.watch(delta.text, delta.token_ids):
                out.finish, out.ended_by = "stop", "first_answer"
                break  # leaving the stream aborts the request in the engine
            if window is not None and delta.confidences:
                lowest = window.add(delta.confidences)
                threshold = floor()
                if threshold is not None and lowest is not None and lowest < threshold:
                    out.finish, out.ended_by = "abort", "low_confidence"
                    break
    out.text = "".join(text_parts)
    out.lowest_group = window.lowest if window is not None else None
    return out


class _Python:
    """Where a repetition's code runs: a fresh process per call, or (``stateful``) one session opened at the
    first call and closed when the repetition ends. A sandbox without sessions runs every call fresh."""

    def __init__(self, sandbox: Sandbox, mode: str) -> None:
        self.sandbox = sandbox
        self.mode = mode
        self.accepted: list[str] = []  # blocks that ran cleanly, for the "accumulate" mode
        self.session: PythonSession | None = None
        self.stateful = mode == "stateful" and callable(getattr(sandbox, "session", None))

    async def run(self, code: str) -> Execution:
        if self.stateful:
            if self.session is None:
                self.session = await self.sandbox.session()
            return await self.session.run(code)
        mode = "accumulate" if self.mode == "accumulate" else "newest"
        execution = await self.sandbox.run(compose_program(self.accepted, code, mode))
        if execution.status == "ok":
            self.accepted.append(code)
        return execution

    async def close(self) -> None:
        session, self.session = self.session, None
        if session is not None:
            await session.close()


async def run_repetition(problem: Problem, index: int, *, engine: Engine, sandbox: Sandbox, dialect: Dialect,
                         config: Config, confidence_floor: Callable[[], float | None] = lambda: None,
                         activity: Activity | None = None, priority: int = 0) -> Repetition:
    """Run one repetition to its end (or until cancelled) and return its record; never raises for run faults."""
    sampling, rules = config.sampling, config.answers
    seed = repetition_seed(sampling.seed, problem.id, index)
    started_wall, started = time.time(), time.monotonic()
    turns: list[Turn] = []
    answers: list[Answer] = []
    generated = 0
    status: RepetitionStatus = "length"  # unless the model finishes within the turn limit
    error: str | None = None
    window = ConfidenceWindow(config.stop.confidence_window) if sampling.logprobs else None
    partial: _Stream | None = None  # the request in flight, kept for the record if the repetition is cancelled
    python = _Python(sandbox, config.sandbox.code_mode)
    # One engine request across the repetition's tool calls, where the engine offers it (vllm_async.VllmSession).
    opener = getattr(engine, "session", None) if config.engine.streaming_input else None
    session: EngineSession | None = opener() if callable(opener) else None
    t0 = time.monotonic()
    try:
        dialogue = dialect.start(problem)
        for turn_no in range(sampling.max_turns):
            left = sampling.max_total_tokens - generated
            if left <= 0:
                status = "length"
                break
            prompt = dialogue.prompt()
            request = GenerationRequest(
                request_id=f"{problem.id}-r{index}-t{turn_no}", prompt=prompt.text,
                prompt_token_ids=prompt.token_ids, max_tokens=min(sampling.max_tokens, left),
                temperature=sampling.temperature, top_p=sampling.top_p, seed=seed + turn_no,
                stop=dialect.stops.strings, stop_token_ids=dialect.stops.token_ids, logprobs=sampling.logprobs,
                extra=sampling.extra, priority=priority, problem_id=problem.id, repetition=index, turn=turn_no)
            t0 = time.monotonic()
            partial = _Stream(finish="abort", prompt_tokens=len(prompt.token_ids or ()))
            got = await _generate(session or engine, request, partial, dialogue, first_answer=config.stop.first_answer,
                                  window=window, floor=confidence_floor)
            partial = None
            elapsed = time.monotonic() - t0
            generated += got.token_count
            out = TurnOutput(text=got.text, token_ids=tuple(got.token_ids), finish=got.finish,
                             stop_reason=got.stop_reason, stop_token=got.stop_token,
                             ended_by_loop=got.ended_by is not None)
            reading = dialogue.read(out)
            answers.extend(extract_answers(reading.answer_text, rules))
            confidence = sum(got.confidences) / len(got.confidences) if got.confidences else None
            turn = Turn(text=reading.text, prompt_tokens=got.prompt_tokens, generated_tokens=got.token_count,
                        finish_reason=got.finish, duration_s=elapsed, confidence=confidence,
                        tail_confidence=got.lowest_group, cached_tokens=got.cached_tokens,
                        appended=reading.ending, token_ids=tuple(got.token_ids))
            if got.finish == "error":
                turns.append(turn)
                status, error = "error", got.error or "engine error"
                break
            if got.ended_by == "low_confidence":
                turns.append(turn)
                status = "filtered"
                break
            if not reading.goes_on:
                turns.append(turn)
                status = "length" if got.finish == "length" else "done"
                break
            if reading.call is None:
                # The turn paused without a tool call (a fence that is not python closed): keep going.
                turns.append(replace(turn, appended=reading.ending + dialogue.reply(out, reading, None)))
                continue
            turns.append(turn)  # recorded before the run, so a cancel during execution keeps this turn
            if activity is not None:
                activity.move(+1)
            try:
                execution = await python.run(reading.call)
            finally:
                if activity is not None:
                    activity.move(-1)
            turns.pop()
            if execution.status == "ok":
                found = code_answer(execution.stdout, rules)
                if found is not None:
                    answers.append(found)
            appended = dialogue.reply(out, reading, execution)
            turns.append(replace(turn, execution=execution, appended=reading.ending + appended))
    except Exception as exc:  # a backend, dialect or sandbox fault ends this repetition only, as a value
        status, error = "error", f"{type(exc).__name__}: {exc}"
    except asyncio.CancelledError:
        # Early stop or deadline: the partial record is logged with a cancelled status; the engine request was
        # aborted by leaving its stream and the sandbox killed the running snippet.
        status = "cancelled"
        if partial is not None:
            turns.append(Turn(text="".join(partial.parts), prompt_tokens=partial.prompt_tokens,
                              generated_tokens=partial.token_count, finish_reason="abort",
                              duration_s=time.monotonic() - t0))
    finally:
        # The session is this repetition's alone: released however it ends (a cancel included).
        if session is not None:  # frees the engine's hold on the context (an abort when a turn was cut)
            try:
                await asyncio.shield(session.close())
            except Exception as exc:  # the record stands; the engine reaps a request it no longer streams
                log.warning("closing the engine session of %s-r%d failed: %r", problem.id, index, exc)
        try:
            await asyncio.shield(python.close())
        except Exception as exc:  # the record stands; a session that fails to close is the sandbox's to reap
            log.warning("closing the python session of %s-r%d failed: %r", problem.id, index, exc)
    return Repetition(problem_id=problem.id, index=index, seed=seed, status=status, turns=tuple(turns),
                      answers=tuple(answers), started_at=started_wall, duration_s=time.monotonic() - started,
                      error=error)
