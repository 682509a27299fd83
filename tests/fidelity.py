"""The token-fidelity check, shared by the in-process and the OpenAI-server real-engine tests.

Runs real repetitions through the real engine with a recording wrapper (it observes requests and generated ids;
it changes nothing) and checks, for every turn of every repetition: the prompt token ids decode to exactly the
prompt text; that text is the first prompt followed by the earlier turns as the log records them
(``Turn.text + Turn.appended``); and a stop string that ended a turn appears there once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from solver.config import Config
from solver.dialects import Dialect, make_dialect
from solver.loop.repetition import run_repetition
from solver.types import Delta, Engine, GenerationRequest, Problem, Repetition

# Asks for a code block the tiny model usually writes, so turns stop at the closing fence and continue.
CODE_PROBLEM = Problem("fid", "Write a short ```python code block that prints 12345 * 6789, then give the result.")


def key(request: GenerationRequest) -> tuple[str, int]:
    return request.request_id, request.seed


@dataclass
class Recording:
    """Every request an engine got, with the ids it generated for it and how it ended (an observer only)."""

    engine: Engine
    name: str = "recording"
    requests: list[GenerationRequest] = field(default_factory=list)
    # keyed by ``key(request)``: request ids repeat across repetitions of different seeds
    generated: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    endings: dict[tuple[str, int], Delta] = field(default_factory=dict)

    @property
    def tokenizer(self):  # type: ignore[no-untyped-def]
        return self.engine.tokenizer

    async def stream(self, request: GenerationRequest) -> AsyncIterator[Delta]:
        self.requests.append(request)
        ids = self.generated.setdefault(key(request), [])
        async with contextlib.aclosing(self.engine.stream(request)) as deltas:
            async for delta in deltas:
                ids.extend(delta.token_ids)
                if delta.finish_reason is not None:
                    self.endings[key(request)] = delta
                yield delta

    def running_requests(self) -> int:
        return self.engine.running_requests()

    async def close(self) -> None:
        return None


@dataclass(frozen=True)
class FidelityReport:
    repetitions: list[Repetition]
    turns_checked: int  # prompts after a turn that continued, checked against the log
    stop_continuations: int  # of those, turns that ended at a stop string
    fence_continuations: int  # of those, turns that ended at the closing fence "```\n"
    engine_kept_stop_tokens: int  # stop-ended turns whose generated ids decode past the engine's text


async def record_repetitions(engine: Engine, config: Config, sandbox, seeds: range,
                             problem: Problem = CODE_PROBLEM, dialect: Dialect | None = None,
                             ) -> tuple[list[Repetition], Recording]:
    """One repetition per seed, all at once, through a recording of ``engine``."""
    recording = Recording(engine)
    dialect = dialect or make_dialect(config, engine.tokenizer)
    reps = await asyncio.gather(*(run_repetition(problem, 0, engine=recording, sandbox=sandbox, dialect=dialect,
                                                 config=config.replace({"sampling.seed": seed}))
                                  for seed in seeds))
    return list(reps), recording


def check_fidelity(reps: list[Repetition], recording: Recording) -> FidelityReport:
    """Assert the fidelity rule on every turn of ``reps`` (see the module's docstring)."""
    tokenizer = recording.tokenizer
    assert tokenizer is not None

    def decode(ids) -> str:  # type: ignore[no-untyped-def]
        return tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)

    checked = stopped = fences = kept = 0
    for rep in reps:
        assert rep.status != "error", rep.error
        mine = [r for r in recording.requests if r.seed - r.turn == rep.seed]
        assert len(mine) == len(rep.turns)
        first = mine[0].prompt
        for k, request in enumerate(mine):
            assert request.prompt_token_ids is not None
            assert decode(request.prompt_token_ids) == request.prompt  # the ids are the text
            logged = first + "".join(t.text + t.appended for t in rep.turns[:k])
            assert request.prompt == logged  # the text is what the log records
            if k == 0:
                continue
            checked += 1
            before, prior = mine[k - 1], rep.turns[k - 1]
            generated = recording.generated[key(before)]
            # The ids grow by exactly what was generated (no token dropped or doubled), then the tool output.
            assert request.prompt_token_ids[: len(before.prompt_token_ids) + len(generated)] == \
                tuple(before.prompt_token_ids) + tuple(generated)
            ending = recording.endings[key(before)]
            if ending.stop_reason is not None:
                stop = ending.stop_reason
                stopped += 1
                fences += stop == "```\n"
                kept += decode(generated).startswith(prior.text + stop)
                # The stop string is there once: right after the turn's text, never repeated by the loop.
                assert prior.appended.startswith(stop) and not prior.appended.startswith(stop + stop)
    return FidelityReport(list(reps), checked, stopped, fences, kept)
