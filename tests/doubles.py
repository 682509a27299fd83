"""Test doubles that isolate control flow: a scripted engine (replies chosen per repetition and turn), a
scripted sandbox and a clock the test moves. Real-engine tests use the real vLLM engine instead; these never stand in for it there."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from solver.types import Delta, Execution, GenerationRequest

Script = Callable[[GenerationRequest], str]


@dataclass
class ScriptedEngine:
    """Streams ``script(request)`` word by word, ``delay_s`` apart, honouring stop strings like vLLM does
    (the stop string is cut from the text and reported as ``stop_reason``)."""

    script: Script
    delay_s: float = 0.0
    max_tokens_cap: int | None = None
    name: str = "scripted"
    tokenizer: None = None
    requests: list[GenerationRequest] = field(default_factory=list)
    open_streams: int = 0
    aborted: list[str] = field(default_factory=list)
    tokens_after_abort: int = 0

    async def stream(self, request: GenerationRequest) -> AsyncIterator[Delta]:
        self.requests.append(request)
        self.open_streams += 1
        finished = False
        try:
            text = self.script(request)
            cut, reason = len(text), None
            for stop in request.stop:
                at = text.find(stop)
                if 0 <= at < cut:
                    cut, reason = at, stop
            words = text[:cut].split(" ")
            limit = min(request.max_tokens, self.max_tokens_cap or request.max_tokens)
            for i, word in enumerate(words[:limit]):
                if self.delay_s:
                    await asyncio.sleep(self.delay_s)
                piece = word if i == 0 else " " + word
                yield Delta(text=piece, token_ids=(i,))
            finish = "length" if len(words) > limit else "stop"
            finished = True
            yield Delta(text="", token_ids=(), finish_reason=finish, stop_reason=reason if finish == "stop" else None,
                        prompt_tokens=len(request.prompt.split()))
        finally:
            self.open_streams -= 1
            if not finished:
                self.aborted.append(request.request_id)

    def running_requests(self) -> int:
        return self.open_streams

    async def close(self) -> None:
        return None


@dataclass
class ScriptedSandbox:
    """Runs nothing: answers ``outputs(code)`` after ``delay_s``; records what it was asked to run."""

    outputs: Callable[[str], Execution]
    delay_s: float = 0.0
    ran: list[str] = field(default_factory=list)

    async def start(self) -> None:
        return None

    async def run(self, code: str, *, timeout_s: float | None = None) -> Execution:
        self.ran.append(code)
        if self.delay_s:
            await asyncio.sleep(self.delay_s)
        return self.outputs(code)

    async def close(self) -> None:
        return None


def printed(value: str) -> Callable[[str], Execution]:
    return lambda code: Execution(code=code, status="ok", stdout=value + "\n", stderr="", duration_s=0.001)


TokenScript = Callable[[GenerationRequest], list[int]]


@dataclass
class ScriptedTokenEngine:
    """Streams the token ids ``script(request)`` returns, a few per delta, with no text (like vLLM running
    without a tokenizer), honouring stop token ids like vLLM does: the stop token is kept in the ids and
    reported as ``stop_token``."""

    script: TokenScript
    per_delta: int = 3
    delay_s: float = 0.0
    name: str = "scripted-tokens"
    tokenizer: None = None
    requests: list[GenerationRequest] = field(default_factory=list)
    open_streams: int = 0

    async def stream(self, request: GenerationRequest) -> AsyncIterator[Delta]:
        self.requests.append(request)
        self.open_streams += 1
        try:
            ids = self.script(request)
            cut = next((i + 1 for i, t in enumerate(ids) if t in request.stop_token_ids), None)
            finish, stop_token = "stop", None
            if cut is not None and cut <= request.max_tokens:
                ids, stop_token = ids[:cut], ids[cut - 1]
            elif len(ids) > request.max_tokens:
                ids, finish = ids[: request.max_tokens], "length"
            for start in range(0, len(ids), self.per_delta):
                if self.delay_s:
                    await asyncio.sleep(self.delay_s)
                yield Delta(text="", token_ids=tuple(ids[start:start + self.per_delta]))
            yield Delta(text="", token_ids=(), finish_reason=finish, stop_token=stop_token,
                        prompt_tokens=len(request.prompt_token_ids or ()))
        finally:
            self.open_streams -= 1

    def running_requests(self) -> int:
        return self.open_streams

    async def close(self) -> None:
        return None


@dataclass
class ExecSession:
    """A stateful Python session double: runs code with ``exec`` in one namespace kept between calls (in this
    process, no isolation; for loop tests only) and records its calls and whether it was closed."""

    ran: list[str] = field(default_factory=list)
    closed: bool = False
    namespace: dict[str, object] = field(default_factory=dict)

    async def run(self, code: str, *, timeout_s: float | None = None) -> Execution:
        import contextlib
        import io

        self.ran.append(code)
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(compile(code, "<session>", "exec"), self.namespace)
        except Exception as exc:  # the snippet's failure is a status, as in the real session
            return Execution(code=code, status="error", stdout=out.getvalue(), stderr=f"{type(exc).__name__}: {exc}",
                             duration_s=0.0)
        return Execution(code=code, status="ok", stdout=out.getvalue(), stderr="", duration_s=0.0)

    async def close(self) -> None:
        self.closed = True


@dataclass
class SessionSandbox(ScriptedSandbox):
    """A scripted sandbox that also hands out ``ExecSession`` doubles (recorded in ``sessions``)."""

    sessions: list[ExecSession] = field(default_factory=list)

    async def session(self) -> ExecSession:
        self.sessions.append(ExecSession())
        return self.sessions[-1]


class FakeClock:
    """A ``solver.types.Clock`` that stands still until the test moves it: deadlines and budgets without sleeping."""

    def __init__(self, t: float = 0.0) -> None:
        self.t = t

    def now(self) -> float:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds
