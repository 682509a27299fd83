"""One problem's attempts played on an engine time model: W at a time in launch order, each a run of requests
(prefill what is new, decode its tokens while sharing the batch, then a tool call of its recorded seconds), the
next attempt launched the moment one finishes. The result is every attempt's start and finish with nothing
stopped: a stop or a deadline only cancels what is still running, so the times up to it hold for every stopping
rule, voter and budget, and the simulator computes a timeline once per draw and plays every policy over it.

Events happen in time order: a request is admitted ``request_s`` after it is sent (its prefill then holds the
batch, ``StepCounter.prefill``), decodes until the engine's step counter reaches its target, and the attempt
sends its next request after its tool call. A decode end and an admission at one instant: the decode end first.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

from solver.timing.steps import StepCounter
from solver.timing.model import EngineTimeModel


@dataclass(frozen=True)
class AttemptPlan:
    """One attempt's requests: per request its prompt tokens, the tokens it decodes, and the seconds the attempt
    spends after it (its tool call) before it sends the next or, after the last, ends. No request: an attempt the
    engine refused at once."""

    prompts: tuple[int, ...]
    tokens: tuple[int, ...]
    tools: tuple[float, ...]

    def __post_init__(self) -> None:
        if not len(self.prompts) == len(self.tokens) == len(self.tools):
            raise ValueError("an attempt plan needs one prompt, token count and tool time per request")

    @property
    def total_tokens(self) -> int:
        return sum(self.tokens)


@dataclass(frozen=True)
class Timeline:
    """Per attempt in launch order: when it started and finished (model seconds) and the tokens it decoded."""

    starts: tuple[float, ...]
    ends: tuple[float, ...]
    tokens: tuple[float, ...]


def fixed_timeline(seconds: Sequence[float], workers: int, tokens: Sequence[float] | None = None,
                   start: float = 0.0) -> Timeline:
    """Attempts that each take their own ``seconds`` whatever else runs (recorded durations), W at a time.

    >>> fixed_timeline([1, 2, 2, 4], 2)
    Timeline(starts=(0.0, 0.0, 1.0, 2.0), ends=(1.0, 2.0, 3.0, 6.0), tokens=(0.0, 0.0, 0.0, 0.0))
    """
    if workers < 1:
        raise ValueError(f"a timeline needs at least one worker, got {workers}")
    n = len(seconds)
    starts, ends = [0.0] * n, [0.0] * n
    running: list[tuple[float, int]] = []
    now = start
    for i in range(n):
        if len(running) >= workers:
            now = heapq.heappop(running)[0]
        starts[i], ends[i] = now, now + float(seconds[i])
        heapq.heappush(running, (ends[i], i))
    made = tokens if tokens is not None else [0.0] * n
    return Timeline(tuple(starts), tuple(ends), tuple(float(t) for t in made))


def engine_timeline(attempts: Sequence[AttemptPlan], workers: int, model: EngineTimeModel,
                    start: float = 0.0) -> Timeline:
    """Every attempt's start and finish when W of them share the engine (see the module docstring).

    >>> from solver.timing.model import EngineTimeModel
    >>> m = EngineTimeModel("m", ((1, 0.01), (2, 0.01)), request_s=0.5)
    >>> a = AttemptPlan((10,), (100,), (0.0,))
    >>> engine_timeline([a, a, a], 2, m)  # 0.5 s to admit, 1 s to decode 100 tokens; the third starts at 1.5 s
    Timeline(starts=(0.0, 0.0, 1.5), ends=(1.5, 1.5, 3.0), tokens=(100.0, 100.0, 100.0))
    >>> b = AttemptPlan((10, 120), (100, 50), (2.0, 0.25))  # a tool call of 2 s between two requests, one after
    >>> engine_timeline([b, AttemptPlan((), (), ())], 1, m).ends
    (4.75, 4.75)
    """
    if workers < 1:
        raise ValueError(f"a timeline needs at least one worker, got {workers}")
    n = len(attempts)
    starts, ends = [math.nan] * n, [math.nan] * n
    clock = StepCounter(model, start)
    request_s = model.request_s
    turn = [0] * n  # the request each attempt is on (its count of requests: the attempt is ending)
    previous_end: list[int | None] = [None] * n  # context after the attempt's previous request
    joined = [0.0] * n  # step count at the current request's join
    sends: list[tuple[float, int]] = []  # (time, attempt): a request to admit, or the attempt's end
    decodes: list[tuple[float, int]] = []  # (target steps, attempt)
    launched = running = 0

    def launch(when: float) -> None:
        nonlocal launched, running
        while launched < n and running < workers:
            a, launched = launched, launched + 1
            starts[a] = when
            if attempts[a].prompts:
                running += 1
                heapq.heappush(sends, (when + request_s, a))
            else:
                ends[a] = when

    launch(start)
    while sends or decodes:
        t_decode = clock.time_of(decodes[0][0]) if decodes else math.inf
        if decodes and (not sends or t_decode <= sends[0][0]):
            target, a = heapq.heappop(decodes)
            clock.advance(t_decode)
            clock.reach(target)
            plan, k = attempts[a], turn[a]
            clock.leave(plan.prompts[k], joined[a])
            previous_end[a] = plan.prompts[k] + plan.tokens[k]
            turn[a] = k + 1
            more = k + 1 < len(plan.prompts)
            if more or plan.tools[k] > 0:
                heapq.heappush(sends, (t_decode + plan.tools[k] + (request_s if more else 0.0), a))
                continue
            ends[a], running = t_decode, running - 1
            launch(t_decode)
            continue
        when, a = heapq.heappop(sends)
        clock.advance(when)
        plan, k = attempts[a], turn[a]
        if k == len(plan.prompts):  # its last tool call is over
            ends[a], running = when, running - 1
            launch(when)
            continue
        clock.prefill(plan.prompts[k], previous_end[a])
        joined[a] = clock.join(plan.prompts[k])
        heapq.heappush(decodes, (joined[a] + plan.tokens[k], a))
    return Timeline(tuple(starts), tuple(ends), tuple(float(p.total_tokens) for p in attempts))
