"""Real attempts recorded as harmony token traces (``solver.replay.traces``) imported as repetitions, each logged
as the repetition loop would have logged it.

Each attempt is run through the loop itself (``run_repetition``) with the configured harmony dialect: a
``TraceEngine`` serves the attempt's requests one by one (its generated ids, streamed in pieces) and checks that the
dialogue's prompt is, token for token, what the recording harness sent (``Attempt.prompt_of``); the tool outputs
come back from the recording (``solver.replay``'s ``RecordedCalls`` over ``execution_from_shown``). So every turn
carries what a live run logs: the generated ids, the text and ending as the dialect reads them, the call's code, the
tool output as an ``Execution``, ``appended``, the context size, the finish, and the answers; the status is ``done``
for an attempt that ended at its answer and ``length`` for one the recording stopped mid-way (its context spent).

The import sees every recorded token: the first-answer cut is off (the harness already cut each attempt at its
first answer), and the turn and token limits are the recording's. A prompt that differs from the recording (a
preset whose texts are not the harness's) is a ``TraceImportError`` naming the attempt and the request, before
anything is written. Where the dialogue finds an answer the recording harness did not (it asked for a boxed integer
after ``\\boxed{M = 2^{14}+1 = 16385}``), the repetition ends there, as a live run would have: the recording's
later requests are left out and counted (``Imported.left_out``).

Durations come from ``turn_seconds`` (one function, so a richer time model can replace it): the generated tokens
at a given rate, or 0 without one.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, replace

from solver.config import Config
from solver.core.answers import voting_answers
from solver.dialects import make_dialect
from solver.dialects import OutputStyle, execution_from_shown
from solver.loop.repetition import run_repetition
from solver.replay import Attempt, Key, RecordedCalls, mark_served, recorded_deltas
from solver.types import Delta, Execution, GenerationRequest, Problem, Repetition, Tokenizer, Turn

# Limits lifted for an import: the recording's own requests and tokens decide where an attempt ends.
NO_LIMIT = 10**9


class TraceImportError(ValueError):
    """An attempt the configured dialect does not reproduce; the message is one line naming where."""


def turn_seconds(turn: Turn, tokens_per_s: float | None) -> float:
    """Engine seconds an imported turn is logged with: its generated tokens at ``tokens_per_s``, 0 without a rate.

    >>> turn_seconds(Turn("", 100, 300, "stop", 0.0), 150.0), turn_seconds(Turn("", 100, 300, "stop", 0.0), None)
    (2.0, 0.0)
    """
    return turn.generated_tokens / tokens_per_s if tokens_per_s else 0.0


def timed(rep: Repetition, tokens_per_s: float | None) -> Repetition:
    """The repetition with every turn's duration from ``turn_seconds`` and its own the sum of them (the recorded
    tool calls' times are not known: their executions keep 0)."""
    turns = tuple(replace(t, duration_s=turn_seconds(t, tokens_per_s)) for t in rep.turns)
    return replace(rep, turns=turns, started_at=0.0, duration_s=math.fsum(t.duration_s for t in turns))


@dataclass
class TraceEngine:
    """An ``Engine`` serving one recorded attempt: request ``k`` of the repetition gets the attempt's request ``k``,
    provided its prompt is the recorded one; otherwise an error delta, and ``fault`` says what differed."""

    attempt: Attempt
    name: str = "trace"
    tokenizer: Tokenizer | None = None
    served: int = 0  # requests served so far
    fault: str | None = None
    _open: int = 0

    async def stream(self, request: GenerationRequest) -> AsyncIterator[Delta]:
        self._open += 1
        try:
            k = request.turn
            if k >= len(self.attempt.requests):
                self.fault = f"the dialogue goes on after the recording's last request ({k})"
                yield Delta("", (), finish_reason="error", error=self.fault)
                return
            expected = self.attempt.prompt_of(k)
            sent = request.prompt_token_ids or ()
            if tuple(sent) != expected:
                at = next((i for i, (a, b) in enumerate(zip(sent, expected)) if a != b), min(len(sent), len(expected)))
                self.fault = (f"request {k}'s prompt differs from the recorded one at token {at} of {len(expected)} "
                              f"(the preset's prompt texts are not the recording harness's)")
                yield Delta("", (), finish_reason="error", error=self.fault)
                return
            self.served = k + 1
            mark_served((request.problem_id, request.repetition, k))
            generated = self.attempt.requests[k].generated
            # A request the recording cut (at its answer) ended by itself as far as the loop can tell: "stop".
            for delta in recorded_deltas("", generated, len(generated), "stop", len(expected),
                                         request.stop_token_ids):
                yield delta
        finally:
            self._open -= 1

    def running_requests(self) -> int:
        return self._open

    async def close(self) -> None:
        return None


def recorded_outputs(attempt: Attempt, style: OutputStyle) -> RecordedCalls:
    """The attempt's tool messages read back as executions (``execution_from_shown``) of the code that called, by
    the request this task was served last (``TraceEngine`` marks it), at once."""

    def lookup(key: Key, code: str) -> Execution | None:
        shown = attempt.requests[key[2]].tool_output
        return None if shown is None else execution_from_shown(code, shown, style)

    return RecordedCalls.of_turns(lookup)


def import_config(config: Config, attempt: Attempt) -> Config:
    """``config`` as the import runs an attempt: no first-answer cut, the recording's requests as the turn limit,
    no token limits, code answered in one session (the recorded outputs), and the follow-up message the recording
    sent, as often as it sent it (harness versions differ in its wording)."""
    overrides: dict[str, object] = {
        "stop.first_answer": False, "stop.confidence_warmup": 0, "sampling.logprobs": None,
        "sampling.max_turns": max(1, len(attempt.requests)), "sampling.max_tokens": NO_LIMIT,
        "sampling.max_total_tokens": NO_LIMIT, "sandbox.code_mode": "stateful", "engine.streaming_input": False}
    follow_ups = [r.follow_up for r in attempt.requests if r.follow_up is not None]
    if follow_ups:
        overrides["prompt.follow_up"] = follow_ups[0]
        overrides["prompt.max_follow_ups"] = max(config.prompt.max_follow_ups, len(follow_ups))
    return config.replace(overrides)


@dataclass(frozen=True)
class Imported:
    repetition: Repetition
    left_out: int  # recorded requests after the point where the dialogue ended the repetition


async def import_attempt(attempt: Attempt, index: int, config: Config, where: str,
                         tokens_per_s: float | None = None) -> Imported:
    """One attempt as repetition ``index`` of its problem, turn by turn as the loop logs it."""
    run_config = import_config(config, attempt)
    dialect = make_dialect(run_config, None)
    engine = TraceEngine(attempt)
    sandbox = recorded_outputs(attempt, OutputStyle.from_config(run_config.prompt))
    problem = Problem(attempt.problem_id, attempt.problem, attempt.answer)
    rep = await run_repetition(problem, index, engine=engine, sandbox=sandbox, dialect=dialect, config=run_config)
    if engine.fault is not None:
        raise TraceImportError(f"{where}: {engine.fault}")
    if rep.status == "error":
        raise TraceImportError(f"{where}: the attempt could not be replayed ({rep.error})")
    rep = replace(rep, seed=index, answers=voting_answers(rep.answers, rep.status))
    return Imported(timed(rep, tokens_per_s), len(attempt.requests) - engine.served)


def import_attempts(attempts: Iterable[tuple[str, Attempt]], config: Config,
                    tokens_per_s: float | None = None) -> list[Imported]:
    """Every ``(where, attempt)`` as a repetition, numbered per problem in order."""

    async def all_of() -> list[Imported]:
        counts: dict[str, int] = {}
        out = []
        for where, attempt in attempts:
            index = counts.get(attempt.problem_id, 0)
            counts[attempt.problem_id] = index + 1
            out.append(await import_attempt(attempt, index, config, where, tokens_per_s))
        return out

    return asyncio.run(all_of())
