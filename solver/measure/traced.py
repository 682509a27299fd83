"""Scripted work on the real engine, so every contender of ``benchmarks/engine.py`` does exactly the same work.

The tiny model rarely writes code, and what it writes runs in a millisecond; a maths model's repetitions look
different: several turns of uneven length, each ending in a program that may compute for seconds (the AIMO1
winner allowed 5 s per run and 4 rounds). A plan fixes, per repetition, how many turns it has, how many tokens
each turn generates and how long each turn's program runs. ``TracedEngine`` makes the real engine follow it:
each turn decodes exactly its planned number of tokens from the real model (end-of-sequence ignored), and its
text is replaced by the plan's (a python block whose program runs for the planned seconds, or, in the last
turn, a boxed answer). The engine, prefill of the growing context, the sandbox and the solver's loop all do
their real work; only what the text says is scripted.

Programs wait (``time.sleep``) by default: on a GPU machine code runs on CPU cores while the accelerator
generates, and on this CPU-only machine a busy program would instead take the cores the engine itself runs on.
``kind="spin"`` makes them busy, to see that case too.
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, replace
from typing import Literal

from solver.dialects import CODE_STOP
from solver.measure.wrapped import WrappedEngine
from solver.types import Delta, Engine, GenerationRequest


@dataclass(frozen=True)
class Profile:
    """How planned repetitions are drawn. Lengths in tokens, times in seconds."""

    max_turns: int = 4  # a repetition has 1..max_turns turns (uniform); all but the last end in code
    max_tokens: int = 96  # per turn; turn lengths are log-normal with median max_tokens * median_share
    median_share: float = 0.4
    length_sigma: float = 0.8  # log-normal spread of turn lengths: real turns are heavy-tailed
    total_tokens: int = 384  # per repetition, as sampling.max_total_tokens
    code_median_s: float = 0.5  # log-normal program time; the sandbox kills it at its timeout
    code_sigma: float = 1.0
    kind: Literal["sleep", "spin"] = "sleep"


@dataclass(frozen=True)
class TurnPlan:
    tokens: int
    code_s: float | None  # None: the last turn, which answers


@dataclass(frozen=True)
class RepetitionPlan:
    turns: tuple[TurnPlan, ...]
    answer: int

    @property
    def tokens(self) -> int:
        return sum(t.tokens for t in self.turns)


def code_floor(plans: dict[tuple[str, int], RepetitionPlan], timeout_s: float) -> tuple[float, float, float]:
    """Seconds of programs no pipeline can hide (each program cut at the sandbox timeout): the slowest
    repetition's programs for all problems at once, the same summed over problems solved one after another (no
    problem ends before its slowest repetition's programs have run, whatever the engine does), and every
    program's seconds (divided by the sandbox workers: the pool's own floor).

    >>> plans = {("p", 0): RepetitionPlan((TurnPlan(9, 1.0), TurnPlan(9, 9.0), TurnPlan(9, None)), 1),
    ...          ("p", 1): RepetitionPlan((TurnPlan(9, 2.0), TurnPlan(9, None)), 1),
    ...          ("q", 0): RepetitionPlan((TurnPlan(9, 3.0), TurnPlan(9, None)), 1)}
    >>> code_floor(plans, timeout_s=5.0)
    (6.0, 9.0, 11.0)
    """
    per_problem: dict[str, float] = {}
    total = 0.0
    for (problem_id, _), plan in plans.items():
        seconds = sum(min(t.code_s, timeout_s) for t in plan.turns if t.code_s is not None)
        per_problem[problem_id] = max(per_problem.get(problem_id, 0.0), seconds)
        total += seconds
    return max(per_problem.values(), default=0.0), sum(per_problem.values()), total


def lognormal(rng: random.Random, median: float, sigma: float) -> float:
    return median * math.exp(sigma * rng.gauss(0.0, 1.0))


def make_plans(problem_ids: list[str], reps: int, profile: Profile,
               seed: int = 0) -> dict[tuple[str, int], RepetitionPlan]:
    """One plan per (problem, repetition), the same for a given seed.

    >>> plans = make_plans(["p"], 3, Profile(max_turns=3, max_tokens=50, total_tokens=80))
    >>> all(1 <= len(p.turns) <= 3 and p.tokens <= 80 for p in plans.values())
    True
    >>> all(p.turns[-1].code_s is None and all(t.code_s is not None for t in p.turns[:-1]) for p in plans.values())
    True
    >>> plans == make_plans(["p"], 3, Profile(max_turns=3, max_tokens=50, total_tokens=80))
    True
    """
    rng = random.Random(seed)
    plans = {}
    for pid in problem_ids:
        for index in range(reps):
            count = rng.randint(1, profile.max_turns)
            left, turns = profile.total_tokens, []
            for turn in range(count):
                want = lognormal(rng, profile.max_tokens * profile.median_share, profile.length_sigma)
                tokens = max(4, min(profile.max_tokens, left, round(want)))
                left -= tokens
                last = turn == count - 1 or left < 4
                turns.append(TurnPlan(tokens, None if last else lognormal(rng, profile.code_median_s,
                                                                           profile.code_sigma)))
                if last:
                    break
            plans[(pid, index)] = RepetitionPlan(tuple(turns), rng.choice((7, 7, 7, 12, 30)))
    return plans


def program(seconds: float, kind: Literal["sleep", "spin"], value: int) -> str:
    """A program that runs for ``seconds`` and prints ``value``.

    >>> print(program(0.25, "sleep", 3))
    import time
    time.sleep(0.250)
    print(3)
    """
    if kind == "sleep":
        body = f"time.sleep({seconds:.3f})"
    else:
        body = f"t0 = time.perf_counter()\nwhile time.perf_counter() - t0 < {seconds:.3f}:\n    pass"
    return f"import time\n{body}\nprint({value})"


# Plain words: the real tokens of a traced turn are drawn among these, so any sequence of them decodes to valid
# text that a dialect parses as a message body (a random model, e.g. dummy weights, would otherwise emit bytes
# that are not UTF-8, or special tokens).
WORDS = (" the sum of all numbers is a prime and so the answer follows from this case we check each value then"
         " count how many ways there are to pick two odd even digits in total")


@dataclass(frozen=True)
class TurnScript:
    """How a dialect spells a traced turn's scripted ending, as token ids appended to the turn's real tokens."""

    dialect: str
    encode: Callable[[str], list[int]]
    decode: Callable[[list[int]], str]
    words: tuple[int, ...]  # the ids the real tokens are drawn from

    def ending(self, code: str | None, answer: int) -> tuple[str, list[int], str | None, int | None]:
        """(text the engine would return, ids, stop string, stop token) of a turn's scripted end: a python call,
        or (``code`` None) the final answer."""
        if self.dialect == "fences":
            if code is None:
                text = f"\\boxed{{{answer}}}"
                return text, self.encode(text), None, None
            text = f"```python\n{code}\n"
            return text, self.encode(text + CODE_STOP), CODE_STOP, None
        if code is None:
            ids = self.encode(f"<|end|><|start|>assistant<|channel|>final<|message|>\\boxed{{{answer}}}<|return|>")
        else:
            ids = self.encode("<|end|><|start|>assistant<|channel|>commentary to=python <|constrain|>code<|message|>"
                              f"{code}\n<|call|>")
        return self.decode(ids[:-1]), ids, None, ids[-1]


def make_script(dialect: str, tokenizer) -> TurnScript:
    """The script for the dialect in use: fences through the model's tokenizer, harmony through its library."""
    if dialect == "harmony":
        from solver.dialects import load_encoding

        enc = load_encoding()
        return TurnScript("harmony", lambda t: list(enc.encode(t, allowed_special="all")), lambda ids: enc.decode(ids),
                          tuple(sorted(set(enc.encode(WORDS)))))
    if dialect != "fences" or tokenizer is None:
        raise ValueError(f"the trace workload speaks fences (with a tokenizer) or harmony, not {dialect!r}")
    words = tuple(sorted(set(tokenizer.encode(WORDS, add_special_tokens=False))))
    return TurnScript("fences", lambda t: list(tokenizer.encode(t, add_special_tokens=False)),
                      lambda ids: tokenizer.decode(ids), words)


class TracedEngine(WrappedEngine):
    """The real engine, made to follow the plans: exact token counts per turn, drawn among plain words, then the
    plan's scripted ending (a python call or the answer) appended as the dialect spells it. The ending's tokens are
    reported as generated but were never decoded: ``decoded`` counts what the engine really generated, per
    (problem, repetition), which is the token volume every contender is charged with."""

    def __init__(self, inner: Engine, plans: dict[tuple[str, int], RepetitionPlan], kind: Literal["sleep", "spin"],
                 script: TurnScript):
        super().__init__(inner)
        self.plans, self.kind, self.script = plans, kind, script
        self.decoded: dict[tuple[str, int], int] = {}

    def session(self) -> TracedSession | None:
        make = getattr(self.inner, "session", None)
        inner = make() if callable(make) else None
        return TracedSession(self, inner) if inner is not None else None

    def stream(self, request: GenerationRequest) -> AsyncIterator[Delta]:
        return self.follow(request, self.inner.stream)

    def forced(self, request: GenerationRequest) -> tuple[GenerationRequest, TurnPlan, RepetitionPlan]:
        plan = self.plans[(request.problem_id, request.repetition)]
        turn = plan.turns[min(request.turn, len(plan.turns) - 1)]
        n = min(turn.tokens, request.max_tokens)
        extra = {**request.extra, "ignore_eos": True, "min_tokens": n, "allowed_token_ids": list(self.script.words)}
        return replace(request, max_tokens=n, stop=(), stop_token_ids=(), extra=extra), turn, plan

    def ending(self, request: GenerationRequest, turn: TurnPlan,
               plan: RepetitionPlan) -> tuple[str, list[int], str | None, int | None] | None:
        """The scripted end of a turn that decoded all its tokens: the plan's program, or the answer (None: the
        turn ends as the engine ended it)."""
        code = None if turn.code_s is None else program(turn.code_s, self.kind, request.turn)
        return self.script.ending(code, plan.answer)

    async def follow(self, request: GenerationRequest,
                     stream: Callable[[GenerationRequest], AsyncIterator[Delta]]) -> AsyncIterator[Delta]:
        forced, turn, plan = self.forced(request)
        key = (request.problem_id, request.repetition)
        real: list[int] = []
        async with contextlib.aclosing(stream(forced)) as deltas:
            async for delta in deltas:
                real.extend(delta.token_ids)
                self.decoded[key] = self.decoded.get(key, 0) + len(delta.token_ids)
                scripted = None
                if delta.finish_reason == "length" and forced.max_tokens >= turn.tokens:
                    scripted = self.ending(request, turn, plan)
                if scripted is None:
                    yield delta
                    continue
                text, ids, stop, token = scripted
                yield replace(delta, text=delta.text + text, token_ids=delta.token_ids + tuple(ids),
                              finish_reason="stop", stop_reason=stop, stop_token=token)


class TracedSession:
    """A streaming-input session of the inner engine, following the same plans."""

    def __init__(self, traced: TracedEngine, inner) -> None:
        self.traced, self.inner = traced, inner

    def stream(self, request: GenerationRequest) -> AsyncIterator[Delta]:
        return self.traced.follow(request, self.inner.stream)

    async def close(self) -> None:
        await self.inner.close()

    @property
    def turns(self) -> int:
        return self.inner.turns
