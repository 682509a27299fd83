"""Test doubles that isolate control flow: a scripted engine (replies chosen per repetition and turn) and a
scripted sandbox. Real-engine tests use the real vLLM engine instead; these never stand in for it there."""

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
