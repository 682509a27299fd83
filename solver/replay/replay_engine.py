"""Replay engine: serves recorded completions from earlier runs, so everything after generation (code execution,
voting, stopping, budgets) can be rerun and tuned without a GPU. Its mode on a real engine, where the engine
decodes each recorded request's number of tokens (recorded gpt-oss attempts, for measuring the engine), is
``solver.measure``'s ``replay_on_engine``.

A request is answered from the recording keyed by ``(problem_id, repetition, turn)``. Repetition ``i`` of a
problem is the ``i``-th finished (non-cancelled) repetition of that problem over the run directories in the
order given, so several runs pool into one larger sample. Nothing recorded for a key gives one Delta with
``finish_reason="error"``; the engine never raises for a request.

A turn recorded with its token ids (``Turn.token_ids``: a dialect that reads tokens, such as harmony) streams
them in pieces of ``TOKENS_PER_PIECE``, with its text cut into as many pieces; the last piece names the stop token
that ended the turn. Beyond the request's ``max_tokens`` it is cut, with finish ``length`` (its text is then not
sent: a dialect that reads tokens reads the ids). Other turns stream their text. Either way a consumer that
leaves mid-turn (the first-answer watch, a cancellation) gets no more of it.

Timing: each turn takes its recorded engine time (``Turn.duration_s``), or ``generated_tokens / tokens_per_s``
when a rate is configured, multiplied by ``time_scale`` (1 = as recorded, 0 = instant). The scale is
``engine.replay_time_scale``. With ``engine.replay_timing: model`` the turns share one engine under its time model
(``engine.time_model``, ``solver.timing``) as the simulator plays them: a request waits its latency, its uncached
prompt is prefilled (holding every stream), and each piece of tokens arrives when the engine's step counter, which
moves at the speed of the sequences decoding and their contexts (``StepCounter``), reaches it; a stream joining or
leaving wakes the others to take the new speed. The recorded outputs (``engine.replay_outputs``) then take their
calls' recorded seconds, at the same scale. A request past the engine's context (``engine.args.max_model_len``)
stops there with finish ``length``; a prompt that already fills it fails.

Recorded outputs (``engine.replay_outputs``): instead of running the code, the replay room's one sandbox for
recorded calls (``solver.replay.calls.RecordedCalls.of_turns``) answers each call with the execution recorded for
the turn that asked for it. Which turn that is, the engine says: serving a request marks its ``(problem_id,
repetition, turn)`` in the serving task's context (``mark_served``), and the repetition runs its code in that same
task right after the turn.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from solver.config import Config, ConfigError
from solver.replay.calls import Key, RecordedCalls, mark_served
from solver.runlog import LogError, read_log
from solver.timing.steps import StepCounter
from solver.timing.model import EngineTimeModel, load_time_model
from solver.types import (Delta, Engine, Execution, FinishReason, GenerationRequest, Problem, Repetition, Sandbox,
                          Tokenizer, Turn)

Sleep = Callable[[float], Awaitable[None]]
TOKENS_PER_PIECE = 16  # recorded text is streamed in pieces of about this many tokens, so cancellation bites


def pooled_repetitions(run_dirs: Sequence[str | Path]) -> dict[str, list[Repetition]]:
    """Finished repetitions per problem over several runs, in run order then index order."""
    pooled: dict[str, list[Repetition]] = {}
    for run_dir in run_dirs:
        for pid, reps in read_log(Path(run_dir)).finished().items():
            pooled.setdefault(pid, []).extend(reps)
    return pooled


def problems_from_log(run_dir: str | Path) -> list[Problem]:
    """The problems a run recorded (text and reference answer), in first-seen order."""
    records = read_log(Path(run_dir))
    seen: dict[str, Problem] = {}
    for problem in records.problems:
        seen.setdefault(problem.id, problem)
    if not seen:
        raise LogError(f"run log {records.path} records no problems; give the problem file as well")
    return list(seen.values())


def split_text(text: str, pieces: int) -> list[str]:
    """``text`` cut into ``pieces`` nearly equal parts (fewer when the text is short; one when it is empty).

    >>> split_text("abcdefg", 3)
    ['abc', 'de', 'fg']
    >>> split_text("", 4), split_text("ab", 5)
    ([''], ['a', 'b'])
    """
    pieces = max(1, min(pieces, len(text)))
    base, extra = divmod(len(text), pieces)
    out, start = [], 0
    for i in range(pieces):
        end = start + base + (1 if i < extra else 0)
        out.append(text[start:end])
        start = end
    return out


def spread(total: int, parts: int) -> list[int]:
    """``total`` split into ``parts`` nearly equal whole numbers that add up to it.

    >>> spread(10, 3), spread(0, 2)
    ([4, 3, 3], [0, 0])
    """
    base, extra = divmod(max(0, total), parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


def stop_reason_of(turn: Turn, stop: Sequence[str]) -> str | None:
    """The stop string that most likely ended a recorded turn (turns do not record it): the one the tool output
    appended after the turn starts with, else the first stop string when code ran after it, else None (the model
    ended by itself).

    >>> t = Turn("x", 1, 1, "stop", 0.1, None, "```output\\n4\\n```\\n")
    >>> stop_reason_of(t, ("```\\n", "```output"))
    '```output'
    >>> stop_reason_of(Turn("x", 1, 1, "stop", 0.1), ("```output",)) is None
    True
    """
    if turn.finish_reason != "stop" or not stop:
        return None
    for s in stop:
        if s and turn.appended.startswith(s):
            return s
    return stop[0] if turn.execution is not None else None


def recorded_deltas(text: str, token_ids: Sequence[int], generated_tokens: int, finish: FinishReason,
                    prompt_tokens: int, stop_token_ids: Sequence[int] = (),
                    stop_reason: str | None = None) -> list[Delta]:
    """One recorded request as the deltas an engine would stream: its ids in pieces of ``TOKENS_PER_PIECE`` (the
    text cut into as many pieces) when it has ids, else its text in pieces of about that many tokens; the last
    delta carries the finish, the stop string and the stop token (its last id, when that is one of
    ``stop_token_ids``).

    >>> [(d.text, d.token_ids, d.finish_reason, d.stop_token) for d in recorded_deltas("ab", (5,) * 17 + (9,), 18,
    ...                                                                                  "stop", 3, (9,))]
    [('a', (5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5), None, None), ('b', (5, 9), 'stop', 9)]
    >>> [(d.text, d.token_count, d.finish_reason) for d in recorded_deltas("abc", (), 20, "length", 3)]
    [('ab', 10, None), ('c', 10, 'length')]
    """
    ids = tuple(token_ids)
    if ids:
        id_pieces = [ids[i: i + TOKENS_PER_PIECE] for i in range(0, len(ids), TOKENS_PER_PIECE)]
        texts = split_text(text, len(id_pieces))
        texts += [""] * (len(id_pieces) - len(texts))
        counts = [len(p) for p in id_pieces]
    else:
        texts = split_text(text, math.ceil(max(1, generated_tokens) / TOKENS_PER_PIECE))
        id_pieces = [()] * len(texts)
        counts = spread(generated_tokens, len(texts))
    stop_token = ids[-1] if finish == "stop" and ids and ids[-1] in stop_token_ids else None
    last = len(texts) - 1
    return [Delta(text=piece, token_ids=piece_ids, token_count=0 if ids else count,
                  finish_reason=finish if i == last else None, stop_reason=stop_reason if i == last else None,
                  stop_token=stop_token if i == last else None, prompt_tokens=prompt_tokens if i == 0 else None)
            for i, (piece, piece_ids, count) in enumerate(zip(texts, id_pieces, counts))]


@dataclass(frozen=True)
class TimingModel:
    """Seconds a recorded turn takes in replay.

    >>> t = Turn("x", 10, 60, "stop", 2.0)
    >>> TimingModel().seconds(t), TimingModel(tokens_per_s=30).seconds(t), TimingModel(time_scale=0).seconds(t)
    (2.0, 2.0, 0.0)
    """

    tokens_per_s: float | None = None  # None: the recorded duration
    time_scale: float = 1.0  # 0: instant

    def __post_init__(self) -> None:
        if self.tokens_per_s is not None and self.tokens_per_s <= 0:
            raise ConfigError("engine.replay_tokens_per_s must be > 0 or null")
        if not self.time_scale >= 0:
            raise ConfigError("replay time_scale must be >= 0")

    def seconds(self, turn: Turn) -> float:
        base = turn.duration_s if self.tokens_per_s is None else turn.generated_tokens / self.tokens_per_s
        return max(0.0, base) * self.time_scale


class EngineTime:
    """The replay engine's streams on one engine under a time model (module docstring), on the running loop's
    clock scaled by ``time_scale`` (model seconds = loop seconds / scale; the scale must be > 0)."""

    def __init__(self, model: EngineTimeModel, time_scale: float) -> None:
        if not time_scale > 0:
            raise ConfigError("engine.replay_timing model needs engine.replay_time_scale > 0")
        self.model = model
        self.scale = time_scale
        self.clock = StepCounter(model)
        self._origin: float | None = None
        self._changed = asyncio.Event()
        self._ends: dict[tuple[str, int], int] = {}  # context after each repetition's previous request

    def now(self) -> float:
        """Model seconds since the first request."""
        t = asyncio.get_running_loop().time()
        if self._origin is None:
            self._origin = t
        return (t - self._origin) / self.scale

    def _wake(self) -> None:
        changed, self._changed = self._changed, asyncio.Event()
        changed.set()

    async def _reach(self, steps: float) -> None:
        """Wait until the engine's step counter reaches ``steps``, waking to recompute at every change."""
        clock = self.clock
        while True:
            now = self.now()
            clock.advance(now)
            due = clock.time_of(steps)
            if due <= now + 1e-9:
                clock.reach(steps)
                return
            changed = self._changed
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(changed.wait(), (due - now) * self.scale)

    async def pace(self, owner: tuple[str, int], prompt: int, deltas: Sequence[Delta],
                   last: bool) -> AsyncIterator[Delta]:
        """``deltas`` of one request of repetition ``owner``, each when the engine has decoded it; ``last``: the
        repetition sends no request after this one."""
        await asyncio.sleep(self.model.request_s * self.scale)
        clock = self.clock
        clock.advance(self.now())
        clock.prefill(prompt, self._ends.get(owner))
        joined = clock.join(prompt)
        self._wake()
        done = 0
        try:
            for delta in deltas:
                done += len(delta.token_ids) or delta.token_count
                await self._reach(joined + done)
                yield delta
        finally:
            clock.advance(self.now())
            clock.leave(prompt, joined)
            self._wake()
            if last:
                self._ends.pop(owner, None)
            else:
                self._ends[owner] = prompt + done


class ReplayEngine:
    """An ``Engine`` over recorded repetitions; ``tokenizer`` is None (prompts are not re-tokenised)."""

    name = "replay"
    tokenizer: Tokenizer | None = None

    def __init__(self, recorded: dict[str, list[Repetition]], timing: TimingModel | EngineTime = TimingModel(),
                 sleep: Sleep = asyncio.sleep, max_model_len: int | None = None) -> None:
        self._recorded = recorded
        self.timing = timing
        self._sleep = sleep
        self.max_model_len = max_model_len
        self._open = 0  # streams started and not yet ended (finished, failed or left by the consumer)

    def recorded_turn(self, problem_id: str, repetition: int, turn: int) -> Turn | None:
        reps = self._recorded.get(problem_id, [])
        if not 0 <= repetition < len(reps) or not 0 <= turn < len(reps[repetition].turns):
            return None
        return reps[repetition].turns[turn]

    def available(self, problem_id: str) -> int:
        """Recorded repetitions of a problem."""
        return len(self._recorded.get(problem_id, []))

    async def stream(self, request: GenerationRequest) -> AsyncIterator[Delta]:
        self._open += 1
        try:
            turn = self.recorded_turn(request.problem_id, request.repetition, request.turn)
            if turn is None:
                yield Delta(text="", token_ids=(), finish_reason="error",
                            error=(f"nothing recorded for problem {request.problem_id!r} repetition "
                                   f"{request.repetition} turn {request.turn} "
                                   f"({self.available(request.problem_id)} repetitions recorded)"))
                return
            mark_served((request.problem_id, request.repetition, request.turn))
            limit = request.max_tokens
            if self.max_model_len is not None:
                room = self.max_model_len - turn.prompt_tokens
                if room <= 0:
                    yield Delta(text="", token_ids=(), finish_reason="error",
                                error=f"the prompt ({turn.prompt_tokens} tokens) fills the engine's context "
                                      f"({self.max_model_len})")
                    return
                limit = min(limit, room)
            if len(turn.token_ids) > limit:  # the request's limit (or the context's) comes first: cut there
                ids = turn.token_ids[:limit]
                deltas = recorded_deltas("", ids, len(ids), "length", turn.prompt_tokens)
            else:
                deltas = recorded_deltas(turn.text, turn.token_ids, turn.generated_tokens, turn.finish_reason,
                                         turn.prompt_tokens, request.stop_token_ids,
                                         stop_reason_of(turn, request.stop))
            if isinstance(self.timing, EngineTime):
                last = request.turn + 1 >= len(self._recorded[request.problem_id][request.repetition].turns)
                owner = (request.problem_id, request.repetition)
                async with contextlib.aclosing(self.timing.pace(owner, turn.prompt_tokens, deltas, last)) as paced:
                    async for delta in paced:
                        yield delta
                return
            pause = self.timing.seconds(turn) / len(deltas)
            for delta in deltas:
                if pause > 0:
                    await self._sleep(pause)
                yield delta
        finally:
            self._open -= 1

    def recorded_execution(self, key: Key, code: str) -> Execution | None:
        """The execution recorded after the turn ``key`` (whatever ``code`` the run asks for: a replay runs the
        recorded turns' code)."""
        turn = self.recorded_turn(*key)
        return turn.execution if turn is not None else None

    def running_requests(self) -> int:
        return self._open

    async def close(self) -> None:
        self._recorded = {}


def timing_from_config(config: Config) -> TimingModel | EngineTime:
    """The recorded durations (or a rate), or with ``engine.replay_timing: model`` the engine time model."""
    e = config.engine
    if e.replay_timing == "model" and e.time_model:
        return EngineTime(load_time_model(e.time_model), e.replay_time_scale)
    return TimingModel(tokens_per_s=e.replay_tokens_per_s, time_scale=e.replay_time_scale)


async def open_replay_engine(config: Config) -> ReplayEngine:
    """The replay engine over ``config.engine.replay_from``; a missing or unreadable run is a ConfigError."""
    if not config.engine.replay_from:
        raise ConfigError("the replay engine needs engine.replay_from (a run directory: --from RUN_DIR)")
    timing = timing_from_config(config)
    try:
        recorded = pooled_repetitions(config.engine.replay_from)
    except LogError as exc:
        raise ConfigError(str(exc)) from exc
    length = config.engine.args.get("max_model_len")
    return ReplayEngine(recorded, timing, max_model_len=int(length) if length else None)


@contextlib.asynccontextmanager
async def recorded_parts(config: Config) -> AsyncIterator[tuple[Engine, Sandbox]]:
    """The replay engine and, for ``engine.replay_outputs``, the sandbox that gives back its recorded outputs
    (after their recorded seconds, scaled, when the engine is timed by its model)."""
    engine = await open_replay_engine(config)
    scale = config.engine.replay_time_scale if isinstance(engine.timing, EngineTime) else 0.0
    try:
        yield engine, RecordedCalls.of_turns(engine.recorded_execution, scale)
    finally:
        await engine.close()
