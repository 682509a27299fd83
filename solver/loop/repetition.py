"""One tool-integrated repetition: generate until a python block closes, run it, append the output, continue.

Limits: ``sampling.max_turns`` engine requests, ``sampling.max_total_tokens`` generated tokens over all turns,
``sampling.max_tokens`` per request, and the problem's deadline (the caller cancels the task when it passes).
Cancellation is a value: a cancelled repetition returns its partial record with status "cancelled".
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from solver.core.answers import code_answer, extract_answers, has_final_answer
from solver.config import Config
from solver.loop.prompts import CODE_STOP, STOP_STRINGS, PromptBuilder, open_python_block
from solver.sandbox.pool import compose_program
from solver.types import (
    Answer,
    Engine,
    FinishReason,
    GenerationRequest,
    Problem,
    Repetition,
    RepetitionStatus,
    Sandbox,
    Turn,
)


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


class ConfidenceWindow:
    """Sliding mean of token confidences over ``size`` tokens; tracks the lowest full-window mean (DeepConf)."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.window: deque[float] = deque()
        self.total = 0.0
        self.lowest: float | None = None

    def add(self, values: tuple[float, ...]) -> float | None:
        for v in values:
            self.window.append(v)
            self.total += v
            if len(self.window) > self.size:
                self.total -= self.window.popleft()
            if len(self.window) == self.size:
                mean = self.total / self.size
                self.lowest = mean if self.lowest is None else min(self.lowest, mean)
        return self.lowest


async def _generate(engine: Engine, request: GenerationRequest, out: _Stream, *, first_answer: bool,
                    window: ConfidenceWindow | None, floor: Callable[[], float | None]) -> _Stream:
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
                break
            # A closing brace is the only way a \boxed{} can complete: check the whole text only then.
            if first_answer and "}" in delta.text and has_final_answer("".join(text_parts)):
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


async def run_repetition(problem: Problem, index: int, *, engine: Engine, sandbox: Sandbox,
                         prompt: PromptBuilder, config: Config,
                         confidence_floor: Callable[[], float | None] = lambda: None,
                         activity: Activity | None = None, priority: int = 0) -> Repetition:
    """Run one repetition to its end (or until cancelled) and return its record; never raises for run faults."""
    sampling, rules = config.sampling, config.answers
    seed = repetition_seed(sampling.seed, problem.id, index)
    started_wall, started = time.time(), time.monotonic()
    text, ids = prompt.first(problem)
    turns: list[Turn] = []
    answers: list[Answer] = []
    accepted_code: list[str] = []  # blocks that ran cleanly, for the "accumulate" code mode
    generated = 0
    status: RepetitionStatus = "length"  # unless the model finishes within the turn limit
    error: str | None = None
    window = ConfidenceWindow(config.stop.confidence_window) if sampling.logprobs else None
    partial: _Stream | None = None  # the request in flight, kept for the record if the repetition is cancelled
    t0 = time.monotonic()
    try:
        for turn_no in range(sampling.max_turns):
            left = sampling.max_total_tokens - generated
            if left <= 0:
                status = "length"
                break
            request = GenerationRequest(
                request_id=f"{problem.id}-r{index}-t{turn_no}", prompt=text,
                prompt_token_ids=tuple(ids) if ids is not None else None,
                max_tokens=min(sampling.max_tokens, left), temperature=sampling.temperature,
                top_p=sampling.top_p, seed=seed + turn_no, stop=STOP_STRINGS,
                logprobs=sampling.logprobs, extra=sampling.extra, priority=priority, problem_id=problem.id,
                repetition=index, turn=turn_no)
            t0 = time.monotonic()
            partial = _Stream(finish="abort", prompt_tokens=len(ids) if ids is not None else 0)
            got = await _generate(engine, request, partial, first_answer=config.stop.first_answer,
                                  window=window, floor=confidence_floor)
            partial = None
            elapsed = time.monotonic() - t0
            generated += got.token_count
            if ids is not None and got.text and not got.token_ids:
                got.token_ids = prompt.encode(got.text) or []  # a backend that streams text only
            turn_answers = list(extract_answers(got.text, rules))
            answers.extend(turn_answers)
            confidence = sum(got.confidences) / len(got.confidences) if got.confidences else None
            turn = Turn(text=got.text, prompt_tokens=got.prompt_tokens, generated_tokens=got.token_count,
                        finish_reason=got.finish, duration_s=elapsed, confidence=confidence,
                        tail_confidence=got.lowest_group, cached_tokens=got.cached_tokens)
            if got.finish == "error":
                turns.append(turn)
                status, error = "error", got.error or "engine error"
                break
            if got.ended_by == "low_confidence":
                turns.append(turn)
                status = "filtered"
                break
            if got.ended_by == "first_answer":
                turns.append(turn)
                status = "done"
                break
            code = open_python_block(got.text) if got.finish == "stop" and got.stop_reason is not None else None
            if code is None:
                if got.finish == "stop" and got.stop_reason is not None:
                    # A non-python fence closed (or the model began an output block itself): keep going.
                    appended = got.stop_reason if got.stop_reason == CODE_STOP else ""
                    turns.append(replace(turn, appended=appended))
                    text += got.text + appended
                    ids = _extend(ids, got.token_ids, prompt.encode(appended) if appended else [])
                    if got.stop_reason != CODE_STOP:
                        status = "done"
                        break
                    continue
                turns.append(turn)
                status = "length" if got.finish == "length" else "done"
                break
            program = compose_program(accepted_code, code, config.sandbox.code_mode)
            turns.append(turn)  # recorded before the run, so a cancel during execution keeps this turn
            if activity is not None:
                activity.move(+1)
            try:
                execution = await sandbox.run(program)
            finally:
                if activity is not None:
                    activity.move(-1)
            turns.pop()
            if execution.status == "ok":
                accepted_code.append(code)
                found = code_answer(execution.stdout, rules)
                if found is not None:
                    answers.append(found)
            appended = CODE_STOP + prompt.tool_output(execution)
            turns.append(replace(turn, execution=execution, appended=appended))
            text += got.text + appended
            ids = _extend(ids, got.token_ids, prompt.encode(appended))
    except Exception as exc:  # a backend or sandbox fault ends this repetition only, as a value
        status, error = "error", f"{type(exc).__name__}: {exc}"
    except asyncio.CancelledError:
        # Early stop or deadline: the partial record is logged with a cancelled status; the engine request was
        # aborted by leaving its stream and the sandbox killed the running snippet.
        status = "cancelled"
        if partial is not None:
            turns.append(Turn(text="".join(partial.parts), prompt_tokens=partial.prompt_tokens,
                              generated_tokens=partial.token_count, finish_reason="abort",
                              duration_s=time.monotonic() - t0))
    return Repetition(problem_id=problem.id, index=index, seed=seed, status=status, turns=tuple(turns),
                      answers=tuple(answers), started_at=started_wall, duration_s=time.monotonic() - started,
                      error=error)


def _extend(ids: list[int] | None, generated: list[int], appended: list[int] | None) -> list[int] | None:
    if ids is None:
        return None
    return ids + generated + (appended or [])
