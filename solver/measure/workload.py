"""Real attempts as a replay plan: the turn structure of recorded gpt-oss-120b attempts, for the real engine.

A recorded attempt (``solver.replay.traces``) is a prompt and a run of requests, each generating some tokens and
ending in a python call (the harness appended the tool's message), a ``<|return|>`` without an answer (the
harness appended a follow-up) or the cut at the answer. A replay keeps that shape exactly and scripts only what
the text says, as ``solver.measure.traced.TracedEngine`` does for drawn plans:

- each request decodes the recorded number of tokens from the real engine (``ignore_eos``, ``min_tokens``,
  drawn among plain words), then a scripted ending is appended: a python call on the analysis channel, as
  gpt-oss writes them (``<|end|><|start|>assistant<|channel|>analysis to=python code<|message|>...<|call|>``),
  whose code names the recorded call, or the final answer; the ending's tokens are never decoded;
- the tool message appended after a call is the recorded one, rendered by the solver's own harmony dialect from
  ``execution_from_shown(recorded text)`` (the same ids the recording holds: checked for every call of the dev
  file); a follow-up is replayed as a tool message with the follow-up's text (the solver's loop ends an attempt
  at ``<|return|>``), a few header tokens longer than the recorded user message;
- the call "runs" for the seconds our sandbox took to re-execute the recorded code (a stateful session per
  attempt, in order, cut at the sandbox timeout: ``tool_seconds.measure_tool_times``) or a fixed time: the replay
  sandbox (``recorded_calls``: the replay room's ``RecordedCalls`` over the real sandbox) sleeps that long in the real
  sandbox and answers with the recorded output.

Caps keep a GPU run inside one call: generated tokens and requests per attempt, and the config's own limits
(``sampling.max_tokens`` per request, ``sampling.max_total_tokens`` and ``max_turns`` per attempt,
``engine.args.max_model_len`` for the context). The request where a cap bites becomes the attempt's last: it
decodes what fits and answers (``Caps.at_limit`` "answer", the engine benchmark's identical work). With
``at_limit`` "length" (the day slice) the config's own limits end an attempt as they end a live one: the request
where one bites decodes what the loop and the engine allow and stops there, no answer (status ``length``; a prompt
that already fills the context is refused: ``error``), as ``solver.offline.sim``'s plans cut recordings.

Tool seconds measured once (``benchmarks/extract_attempts.py --measure-tools``) travel in the extract, one list per
attempt (``tool_seconds``: per request, 0 where nothing ran); ``Attempt.tool_seconds`` holds them as read and ``plan``
uses them where it is told they are carried.

The plan is built by running the solver's dialogue over it once (``plan_attempt``), so every appended id and
every context length is what the pipeline will send; a contender without solver code
(``benchmarks/real_shape.py``'s (t)) replays those ids.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from solver.config import Config, from_dict, load_config
from solver.dialects import OutputStyle, TurnOutput, execution_from_shown
from solver.errors import BadInput
from solver import replay
from solver.replay import Attempt
from solver.types import Execution, GenerationRequest, Problem
from solver.measure.traced import TracedEngine, make_script

# What the recording harness ran in every kernel before the first call (tonghuikang/aimo3 notebook.py).
STARTER_CELL = "import random, numpy as np, sympy as sp\nrandom.seed(42)\nnp.random.seed(42)"
CALL_CODE = "# replayed call {key}"
_KEY = re.compile(r"^# replayed call (\S+)\s*$")


class PlanError(BadInput, ValueError):
    """Attempts that cannot be replayed as asked; the message is one line meant for the user."""


@dataclass(frozen=True)
class Caps:
    """Limits on the replay, on top of the config's own (None: no limit)."""

    problems: int = 1
    attempts: int = 8  # per problem
    attempt_tokens: int | None = None  # decoded tokens per attempt
    attempt_requests: int | None = None  # requests per attempt
    only: tuple[str, ...] = ()  # these problems, in this order (instead of the first ``problems``)
    at_limit: Literal["answer", "length"] = "answer"  # where the config's own limits bite (module docstring)

    def line(self) -> str:
        """
        >>> Caps(2, 8, 6000, None).line()
        '2 problems x 8 attempts; per attempt: tokens <= 6000, requests uncapped'
        >>> Caps(1, 8, at_limit="length").line()
        "1 problems x 8 attempts; per attempt: tokens uncapped, requests uncapped; the config's limits end attempts"
        """
        tokens = f"tokens <= {self.attempt_tokens}" if self.attempt_tokens else "tokens uncapped"
        requests = f"requests <= {self.attempt_requests}" if self.attempt_requests else "requests uncapped"
        which = ", ".join(self.only) if self.only else f"{self.problems} problems"
        ends = "; the config's limits end attempts" if self.at_limit == "length" else ""
        return f"{which} x {self.attempts} attempts; per attempt: {tokens}, {requests}{ends}"


@dataclass(frozen=True)
class ReplayStep:
    """One request of a replayed attempt."""

    tokens: int  # decoded by the engine (``TracedEngine`` reads this name)
    call: bool  # ends in a python call; else the attempt's final answer
    shown: str = ""  # the tool message's text the recording appended after it (a tool output or a follow-up)
    code: str | None = None  # the recorded code, re-executed for its time (None: a follow-up, nothing ran)
    tool_s: float = 0.0  # seconds the call runs
    recorded_tokens: int = 0  # what the recording generated in this request
    recorded_appended: int = 0  # ids the recording appended after it
    ending: tuple[int, ...] = ()  # the scripted ending's ids (not decoded)
    appended: tuple[int, ...] = ()  # what the dialogue appends after the ending (tool message, next header)
    prompt_tokens: int = 0  # the context this request is sent
    limit: bool = False  # a config limit ends the attempt here: ``tokens`` decoded, finish length, no ending


@dataclass(frozen=True)
class Replay:
    """One recorded attempt as replayed: repetition ``index`` of ``problem``."""

    problem: Problem
    index: int
    steps: tuple[ReplayStep, ...]
    answer: str

    @property
    def tokens(self) -> int:
        return sum(s.tokens for s in self.steps)

    @property
    def turns(self) -> tuple[ReplayStep, ...]:  # ``TracedEngine`` reads a plan's turns
        return self.steps

    @property
    def context_tokens(self) -> int:
        last = self.steps[-1]
        return last.prompt_tokens + last.tokens + len(last.ending)

    @property
    def answered(self) -> bool:
        """Whether the attempt ends with its answer (else a config limit ended it: ``Caps.at_limit`` "length")."""
        last = self.steps[-1]
        return not (last.call or last.limit)


def choose(problem_ids: Sequence[str], problems: int, attempts: int, only: Sequence[str] = ()) -> dict[str, list[int]]:
    """Which attempts to replay: the first ``problems`` problems (in file order; or the problems ``only`` names, in
    its order) with at least ``attempts`` attempts, and their first ``attempts`` attempts, as positions in
    ``problem_ids`` (one id per attempt).

    >>> choose(["a", "b", "a", "c", "b", "c", "c"], problems=2, attempts=2)
    {'a': [0, 2], 'b': [1, 4]}
    >>> choose(["a", "b", "a", "c", "b", "c", "c"], problems=1, attempts=2, only=["c"])
    {'c': [3, 5]}
    >>> choose(["a", "b"], problems=1, attempts=2)
    Traceback (most recent call last):
    ...
    solver.measure.workload.PlanError: 0 problems have at least 2 attempts (the most is 1), 1 wanted
    >>> choose(["a", "b"], problems=1, attempts=1, only=["x"])
    Traceback (most recent call last):
    ...
    solver.measure.workload.PlanError: problem x has 0 attempts, 1 wanted
    """
    where: dict[str, list[int]] = {}
    for position, pid in enumerate(problem_ids):
        where.setdefault(pid, []).append(position)
    if only:
        for pid in only:
            if len(where.get(pid, ())) < attempts:
                raise PlanError(f"problem {pid} has {len(where.get(pid, ()))} attempts, {attempts} wanted")
        return {pid: where[pid][:attempts] for pid in only}
    enough = {pid: positions[:attempts] for pid, positions in where.items() if len(positions) >= attempts}
    if len(enough) < problems:
        most = max((len(p) for p in where.values()), default=0)
        raise PlanError(f"{len(enough)} problems have at least {attempts} attempts (the most is {most}), "
                        f"{problems} wanted")
    return dict(list(enough.items())[:problems])


class HarmonyEndings:
    """The scripted endings of replayed requests, in harmony token ids."""

    def __init__(self) -> None:
        from solver.dialects import load_encoding

        self.encoding = load_encoding()
        self.traced = make_script("harmony", None)  # the trace workload's plain words, for the real tokens
        self.words = self.traced.words

    def encode(self, text: str) -> list[int]:
        return list(self.encoding.encode(text, allowed_special="all"))

    def call(self, key: str) -> list[int]:
        return self.encode("<|end|><|start|>assistant<|channel|>analysis to=python code<|message|>"
                           f"{CALL_CODE.format(key=key)}<|call|>")

    def answer(self, answer: str) -> list[int]:
        return self.encode(f"<|end|><|start|>assistant<|channel|>final<|message|>\\boxed{{{answer}}}<|return|>")


def recorded_code(attempt: Attempt, script: HarmonyEndings) -> list[str | None]:
    """Per request, the code of the python call it ends in (None: no call to python)."""
    from openai_harmony import HarmonyError, Role

    from solver.dialects import message_text

    out: list[str | None] = []
    for request in attempt.requests:
        code = None
        if request.end == "call":
            try:
                messages = script.encoding.parse_messages_from_completion_tokens(list(request.generated),
                                                                                 Role.ASSISTANT, strict=False)
            except HarmonyError:
                messages = []
            if messages and messages[-1].recipient == "python":
                code = message_text(messages[-1])
        out.append(code)
    return out


def key_of(problem_id: str, index: int, turn: int) -> str:
    return f"{problem_id}/{index}/{turn}"


@dataclass(frozen=True)
class ReplayLimits:
    """The config's limits a replay must stay within, so the pipeline sends every planned request."""

    max_tokens: int  # per request
    max_total_tokens: int  # per attempt, decoded and scripted tokens together (as the loop counts them)
    max_turns: int
    max_model_len: int | None

    @classmethod
    def of(cls, config: Any) -> ReplayLimits:
        s = config.sampling
        return cls(s.max_tokens, s.max_total_tokens, s.max_turns, config.engine.args.get("max_model_len"))


def plan_attempt(attempt: Attempt, problem: Problem, index: int, dialect: Any, style: OutputStyle, caps: Caps,
                 limits: ReplayLimits, script: HarmonyEndings, tool_seconds: Sequence[float] | None = None) -> Replay:
    """The replay of one recorded attempt as repetition ``index``: its requests within the caps, each with the
    ids the solver's dialogue appends after it, found by running the dialogue over the plan (the engine's own
    tokens stand in as one plain word: what is appended does not depend on them, and parsing a turn costs time in
    proportion to its length). ``tool_seconds``: per recorded request, the seconds its call runs (carried with the
    extract; the recorded code is then not read); else every call's ``tool_s`` is 0 and its ``code`` is read."""
    codes = recorded_code(attempt, script) if tool_seconds is None else [None] * len(attempt.requests)
    dialogue = dialect.start(problem)
    steps: list[ReplayStep] = []
    decoded = counted = 0  # decoded tokens; tokens the loop counts (decoded and scripted, as it limits them)
    shift = 0  # tokens the stand-in words leave out of the dialogue's context
    answer = attempt.trace_answer if attempt.trace_answer and attempt.trace_answer.isdigit() else "0"
    token_cap = caps.attempt_tokens if caps.attempt_tokens is not None else limits.max_total_tokens
    model_len = limits.max_model_len or 1 << 62
    live = caps.at_limit == "length"
    for turn, request in enumerate(attempt.requests):
        prompt = len(dialogue.prompt().token_ids or ()) + shift
        want = len(request.generated)
        shown = request.tool_output if request.tool_output is not None else request.follow_up
        key = key_of(problem.id, index, turn)
        ending = script.call(key)
        if live:  # the loop's and the engine's limits, as they stop a live attempt (solver.loop.repetition)
            left = limits.max_total_tokens - counted
            if turn >= limits.max_turns or left <= 0:
                break  # no further request: the attempt ends after its last call (status length)
            if model_len - prompt <= 0:  # the engine refuses a prompt that fills the context (status error)
                steps.append(ReplayStep(0, False, recorded_tokens=want, prompt_tokens=prompt, limit=True))
                break
            cap = min(limits.max_tokens, left, model_len - prompt)
            if want > cap and cap < token_cap - decoded:  # a limit bites before the benchmark's own cap: decoded
                steps.append(ReplayStep(cap, False, recorded_tokens=want, prompt_tokens=prompt, limit=True))
                break  # up to it, finish length, no answer
        final = (turn == len(attempt.requests) - 1 or shown is None
                 or (not live and turn + 1 >= limits.max_turns)
                 or (caps.attempt_requests is not None and turn + 1 >= caps.attempt_requests))
        if not final:
            # a call must leave room for its ending, the tool message (its text plus headers) and a next request;
            # with live limits only the benchmark's own cap is checked here (the limits were checked above)
            fits = token_cap - decoded if live else min(
                limits.max_tokens, limits.max_total_tokens - counted - len(ending) - 1, token_cap - decoded,
                model_len - prompt - len(ending) - len(script.encode(shown or "")) - 32)
            final = fits < want
        if final:  # the recorded last request, or a cap bites: this request answers with what fits
            tokens = (min(want, token_cap - decoded) if live else
                      min(want, limits.max_tokens, limits.max_total_tokens - counted, token_cap - decoded,
                          model_len - prompt - 1))
            if tokens >= 1:
                steps.append(ReplayStep(tokens, False, recorded_tokens=want, ending=tuple(script.answer(answer)),
                                        prompt_tokens=prompt))
            elif steps:  # nothing fits: the request before answers instead
                steps[-1] = replace(steps[-1], call=False, shown="", code=None, ending=tuple(script.answer(answer)),
                                    appended=())
            else:
                raise PlanError(f"problem {problem.id}: its prompt ({prompt} tokens) leaves no room to generate")
            break
        ids = [script.words[0]] * min(want, 1) + ending
        out = TurnOutput(script.encoding.decode(ids[:-1]), tuple(ids), "stop", stop_token=ids[-1])
        reading = dialogue.read(out)
        if reading.call != CALL_CODE.format(key=key):
            raise PlanError(f"problem {problem.id}: the harmony dialect did not read the scripted call "
                            f"(it read {reading.call!r})")
        dialogue.reply(out, reading, execution_from_shown("", shown or "", style))
        after = dialogue.prompt().token_ids or ()
        seconds = float(tool_seconds[turn]) if tool_seconds is not None and turn < len(tool_seconds) else 0.0
        steps.append(ReplayStep(want, True, shown or "", codes[turn], seconds, want, len(request.appended),
                                tuple(ending), tuple(after[prompt - shift + len(ids):]), prompt))
        shift += want - min(want, 1)
        decoded += want
        counted += want + len(ending)
    return Replay(problem, index, tuple(steps), answer)


def plan(attempts: Sequence[Attempt], caps: Caps, config: Any, carried: bool = False) -> list[list[Replay]]:
    """Per chosen problem (``choose``), its replays, repetition 0..K-1 in file order; ``carried``: each call runs
    for the seconds its attempt carries (``Attempt.tool_seconds``) instead of its recorded code."""
    from solver.dialects import make_dialect

    chosen = choose([a.problem_id for a in attempts], caps.problems, caps.attempts, caps.only)
    dialect = make_dialect(config, None)
    style = OutputStyle.from_config(config.prompt)
    if style.style != "jupyter":
        raise PlanError("the replay shows recorded tool outputs: prompt.output_style must be jupyter "
                        "(as in the h100-gptoss preset)")
    script, limits = HarmonyEndings(), ReplayLimits.of(config)
    out = []
    for pid, positions in chosen.items():
        first = attempts[positions[0]]
        problem = Problem(pid, first.problem, first.answer)
        out.append([plan_attempt(attempts[p], problem, i, dialect, style, caps, limits, script,
                                 attempts[p].tool_seconds if carried else None)
                    for i, p in enumerate(positions)])
    return out


def plan_summary(problems: list[list[Replay]]) -> dict[str, Any]:
    """A plan's size as the benchmarks print it: problems, attempts, requests, calls, decoded and recorded tokens,
    tool seconds (all calls, and the floor: each problem's slowest attempt's calls), contexts."""
    steps = [s for rs in problems for r in rs for s in r.steps]
    contexts = sorted(r.context_tokens for rs in problems for r in rs)
    floors = [max(sum(s.tool_s for s in r.steps if s.call) for r in rs) for rs in problems]
    return {"problems": len(problems), "attempts": sum(len(rs) for rs in problems), "requests": len(steps),
            "calls": sum(s.call for s in steps), "tokens": sum(s.tokens for s in steps),
            "recorded_tokens": sum(s.recorded_tokens for s in steps),
            "tool_s": sum(s.tool_s for s in steps), "tool_floor_s": sum(floors),
            "context_max": contexts[-1], "context_median": contexts[len(contexts) // 2],
            "appended_differ": sum(s.call and len(s.appended) != s.recorded_appended for s in steps)}


def recorded_calls(inner: Any, problems: list[list[Replay]], style: OutputStyle,
                   timeout_s: float) -> replay.RecordedCalls:
    """The sandbox a replay's pipeline runs its calls in (``solver.replay``'s ``RecordedCalls.in_sandbox``): each
    scripted call (its code names its ``key_of``) sleeps its planned seconds in the real sandbox ``inner`` (a session
    per repetition when the loop asks for one), cut just under ``timeout_s``, then answers with the recorded output,
    so the dialogue appends the recorded tool message; any other call (a warm-up) runs in ``inner`` as it is."""
    steps = {key_of(r.problem.id, r.index, t): s for replays in problems for r in replays
             for t, s in enumerate(r.steps) if s.call}

    def lookup(code: str) -> Execution | None:
        match = _KEY.match(code.strip())
        step = steps.get(match.group(1)) if match else None
        return None if step is None else execution_from_shown(code, step.shown, style, step.tool_s)

    return replay.RecordedCalls.in_sandbox(inner, lookup, timeout_s)



class AttemptsOnEngine(TracedEngine):
    """The real engine made to follow replays: each request decodes its step's tokens among plain words, then
    gets its step's scripted ending (``TracedEngine`` does the rest, and counts what was decoded). A request of no
    replay (the Kaggle supervisor's one-token health probe) goes to the engine as it is."""

    def __init__(self, inner: Any, problems: list[list[Replay]], script: HarmonyEndings) -> None:
        plans: dict[tuple[str, int], Any] = {(r.problem.id, r.index): r for replays in problems for r in replays}
        super().__init__(inner, plans, "sleep", script.traced)

    def stream(self, request: GenerationRequest) -> Any:
        if (request.problem_id, request.repetition) not in self.plans:
            return self.inner.stream(request)
        return super().stream(request)

    def ending(self, request: GenerationRequest, turn: Any, plan: Any) -> tuple[str, list[int], str | None, int] | None:
        if turn.limit:  # a config limit ended the request: it stops with finish length, as a live one does
            return None
        ids = list(turn.ending)
        return self.script.decode(ids[:-1]), ids, None, ids[-1]


def replay_on_engine(engine: Any, problems: list[list[Replay]], endings: HarmonyEndings) -> AttemptsOnEngine:
    """Recorded attempts replayed on a real engine: ``engine`` (a started ``Engine``) decodes each planned
    request's recorded number of tokens, then gets the recorded ending. The solver's one replay engine
    (``solver.replay.replay_engine``) serves recorded text without any engine; this is its mode on a real one."""
    return AttemptsOnEngine(engine, problems, endings)


def preset_engine(preset: str, gpu: bool) -> Config:
    """The preset; on CPU (``gpu`` false) with the tiny preset's engine and the tiny harmony model in place of the
    preset's engine section (its prompt, sampling, sandbox, rules and budget kept)."""
    config = load_config(preset)
    if not gpu:
        from solver.models import ensure_tiny_harmony_model

        tiny = load_config("tiny").to_dict()["engine"]
        tiny["model"] = str(ensure_tiny_harmony_model())
        tiny["args"]["skip_tokenizer_init"] = True  # harmony renders and parses ids; the model has no tokenizer
        config = from_dict({**config.to_dict(), "engine": tiny})
    return config


async def warm_up(engine: Any, endings: HarmonyEndings, n: int = 4) -> None:
    """A few short requests: the first ones pay one-off costs (graphs, kernels) no measured run should carry.
    Their prompts (plain words) share no block with a replay's, so the prefix cache gives no run a head start."""
    import asyncio
    import contextlib

    async def one(i: int) -> None:
        prompt = tuple(endings.words[i:] + endings.words[:i]) * 4
        request = GenerationRequest(f"warm-{i}", "", prompt, 16, 1.0, 1.0, i, (), extra={"ignore_eos": True})
        async with contextlib.aclosing(engine.stream(request)) as deltas:
            async for _ in deltas:
                pass

    await asyncio.gather(*(one(i) for i in range(n)))
