"""The contract: records that flow through a run and the protocols the parts implement.

Every other module depends on this one and not on each other's internals.
Times are seconds (floats); token counts are integers; statuses are ``Literal``s.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

ExecStatus = Literal["ok", "error", "timeout", "memory", "killed", "truncated", "cancelled"]
"""ok: exited 0; error: raised or exited non-zero; timeout: wall or CPU limit; memory: address-space cap;
killed: died by a signal; truncated: ran but output exceeded the cap; cancelled: never ran or was stopped."""

FinishReason = Literal["stop", "length", "abort", "error"]
"""Why one engine request ended (vLLM's vocabulary; "error" covers a failed request)."""

RepetitionStatus = Literal["done", "length", "cancelled", "filtered", "error"]
"""done: the model finished by itself (or gave its first answer when told to stop there); length: a token or turn
limit ended it; cancelled: an early stop or a deadline ended it; filtered: the online confidence filter ended it;
error: the engine failed. Every status but cancelled has finished: it used one of the problem's repetitions and
counts in the problem's decision (solver/core/state.py); only done/length repetitions vote with an answer."""

AnswerSource = Literal["boxed", "phrase", "code"]


@dataclass(frozen=True)
class Problem:
    id: str
    text: str
    answer: str | None = None  # the reference answer, when known
    meta: dict[str, str] = field(default_factory=dict)  # e.g. {"level": "3", "subset": "math500"}


@dataclass(frozen=True)
class Execution:
    code: str
    status: ExecStatus
    stdout: str  # excerpt, already capped
    stderr: str  # excerpt, already capped
    duration_s: float
    # A stateful session that had to be killed (and restarted empty) during or after this call: the model must
    # be told that names defined by earlier calls are gone.
    state_lost: bool = False


@dataclass(frozen=True)
class Answer:
    value: str  # normalised, comparable form ("42", or a canonical expression)
    raw: str  # as written by the model or printed by the code
    source: AnswerSource


@dataclass(frozen=True)
class Turn:
    """One engine request of a repetition and the code run after it."""

    text: str  # generated in this turn
    prompt_tokens: int
    generated_tokens: int
    finish_reason: FinishReason
    duration_s: float  # engine wall time of this request
    execution: Execution | None = None
    appended: str = ""  # text added after this turn before the next request (the rendered tool output)
    confidence: float | None = None  # mean token confidence (-mean top-k logprob), when logprobs were on
    tail_confidence: float | None = None  # lowest sliding-window group confidence seen in this turn
    cached_tokens: int | None = None  # prompt tokens the engine took from its prefix cache, when it says
    # The ids this request generated, a stop token included (empty when the engine gave counts, not ids): what a
    # dialect that reads tokens (harmony) needs to replay the turn exactly.
    token_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class Repetition:
    problem_id: str
    index: int  # 0-based repetition number within the problem
    seed: int
    status: RepetitionStatus
    turns: tuple[Turn, ...]
    answers: tuple[Answer, ...]  # every candidate found (boxed, phrase, code), in order of appearance
    started_at: float  # unix time
    duration_s: float
    error: str | None = None

    @property
    def text(self) -> str:
        """The generated text with tool outputs spliced in, as the model saw it."""
        return "".join(t.text + t.appended for t in self.turns)

    @property
    def generated_tokens(self) -> int:
        return sum(t.generated_tokens for t in self.turns)

    @property
    def prompt_tokens(self) -> int:
        return self.turns[0].prompt_tokens if self.turns else 0

    @property
    def executions(self) -> tuple[Execution, ...]:
        return tuple(t.execution for t in self.turns if t.execution is not None)

    @property
    def finished(self) -> bool:
        """It ran to an end of its own (not cut by a stop or a deadline)."""
        return self.status != "cancelled"

    @property
    def votes(self) -> bool:
        return self.status in ("done", "length")

    def answer_from(self, source: AnswerSource) -> Answer | None:
        """The last candidate of one source, e.g. the last code output answer."""
        for answer in reversed(self.answers):
            if answer.source == source:
                return answer
        return None


StopReason = str  # the name of the policy that fired, e.g. "beta:0.95", "agree:4", "max_reps", "deadline"


@dataclass(frozen=True)
class ProblemResult:
    problem_id: str
    answer: str  # the submitted answer (the default answer when nothing voted)
    votes: dict[str, float]  # answer value -> total weight, in first-seen order
    repetitions: int  # repetitions that finished (voted or not)
    launched: int  # repetitions started, including cancelled ones
    stopped_by: StopReason
    duration_s: float
    generated_tokens: int
    correct: bool | None = None  # None when the reference answer is unknown


# ---- protocols -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GenerationRequest:
    request_id: str
    prompt: str  # the full prompt text (chat template applied, earlier turns and tool outputs appended)
    prompt_token_ids: tuple[int, ...] | None  # the same prompt as token ids, when a tokenizer is at hand
    max_tokens: int
    temperature: float
    top_p: float
    seed: int
    stop: tuple[str, ...]
    logprobs: int | None = None  # top-k logprobs per token for confidence, None = off
    # Token ids that end the request, kept in the output (a dialect such as harmony ends a turn on
    # <|call|> / <|return|>, not on text). Needs ``prompt_token_ids``.
    stop_token_ids: tuple[int, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=dict)  # engine sampling parameters passed unchanged
    # Scheduling order when the engine schedules by priority (lower first): the repetition's launch order, so a
    # started repetition's next turn goes before repetitions that have not started yet.
    priority: int = 0
    # Where the request belongs; used by the replay engine and for logs.
    problem_id: str = ""
    repetition: int = 0
    turn: int = 0


@dataclass(frozen=True)
class Delta:
    """New output of one request since the previous delta; the last one carries ``finish_reason``."""

    text: str
    token_ids: tuple[int, ...]
    token_count: int = 0  # new tokens when ``token_ids`` is empty (a backend that knows counts, not ids)
    confidences: tuple[float, ...] = ()  # per new token, when logprobs were requested
    finish_reason: FinishReason | None = None
    stop_reason: str | None = None  # the stop string that ended the request
    stop_token: int | None = None  # the stop token id that ended the request (one of ``stop_token_ids``)
    prompt_tokens: int | None = None
    cached_tokens: int | None = None  # of the prompt, found in the engine's prefix cache (first delta)
    error: str | None = None


class Tokenizer(Protocol):
    def encode(self, text: str, add_special_tokens: bool = ...) -> list[int]: ...

    def decode(self, token_ids: Sequence[int], **kwargs: Any) -> str: ...

    def apply_chat_template(self, conversation: list[dict[str, str]], **kwargs: object) -> str: ...


class Engine(Protocol):
    """Streams completions. Leaving the stream early (break, cancel, aclose) aborts the request in the engine."""

    name: str
    tokenizer: Tokenizer | None

    def stream(self, request: GenerationRequest) -> AsyncIterator[Delta]: ...

    def running_requests(self) -> int:
        """Requests the engine itself still holds (its own counter, not ours)."""
        ...

    async def close(self) -> None: ...


class EngineSession(Protocol):
    """One repetition's turns as one engine request (``Engine.session()`` where the backend has it): each
    ``stream`` is one turn, its prompt the whole context so far; turns are sequential; ``close`` ends the request."""

    def stream(self, request: GenerationRequest) -> AsyncIterator[Delta]: ...

    async def close(self) -> None: ...


class PythonSession(Protocol):
    """One repetition's stateful interpreter: names, imports and functions survive from one call to the next.

    Held by exactly one repetition, never shared; released by ``close`` when the repetition ends or is cancelled.
    Never raises for anything the code does: failures are statuses, and ``Execution.state_lost`` says the
    session was killed and restarted empty."""

    async def run(self, code: str, *, timeout_s: float | None = None) -> Execution: ...

    async def close(self) -> None: ...


class Sandbox(Protocol):
    """Runs one snippet in isolation. Never raises for anything the snippet does: failures are statuses."""

    async def run(self, code: str, *, timeout_s: float | None = None) -> Execution: ...

    async def session(self) -> PythonSession:
        """A fresh stateful session with the same isolation as one-off snippets."""
        ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class Ballot:
    answer: str
    weight: float = 1.0


@dataclass(frozen=True)
class VoteState:
    """What a stopping rule may look at: one entry per finished repetition, in finish order."""

    ballots: tuple[Ballot | None, ...]  # None: the repetition finished without a usable answer
    max_repetitions: int

    @property
    def counts(self) -> dict[str, float]:
        """Answer -> total weight, in first-seen order.

        >>> VoteState((Ballot("7"), None, Ballot("3"), Ballot("7")), 8).counts
        {'7': 2.0, '3': 1.0}
        """
        out: dict[str, float] = {}
        for b in self.ballots:
            if b is not None:
                out[b.answer] = out.get(b.answer, 0.0) + b.weight
        return out

    @property
    def finished(self) -> int:
        return len(self.ballots)


class Voter(Protocol):
    name: str

    def ballot(self, repetition: Repetition) -> Ballot | None:
        """The answer and weight this repetition casts, or None when it has nothing to vote for."""
        ...

    def winner(self, ballots: Sequence[Ballot | None]) -> str | None:
        """The winning answer, or None when nothing voted (the caller applies the default answer)."""
        ...


class Stopper(Protocol):
    name: str

    def __call__(self, state: VoteState) -> bool:
        """True when sampling for this problem may stop. Pure: same state, same decision."""
        ...


class Clock(Protocol):
    """Seconds on a monotonic scale; a fake one makes budgets testable without sleeping."""

    def now(self) -> float: ...
