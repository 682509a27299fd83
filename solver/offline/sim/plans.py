"""Recorded repetitions as a live run would make them under a config's limits, and as the engine serves them.

A recording made without limits (the real attempts were imported with every recorded token) is cut where the
config's run would stop: ``sampling.max_turns`` requests, ``sampling.max_tokens`` per request and
``sampling.max_total_tokens`` per repetition (the loop's limits, ``solver.loop.repetition``), and the engine's
context, ``engine.args.max_model_len`` (a request stops there; a prompt that already fills it fails). A cut
repetition ends with status ``length`` (``error`` for a prompt past the context) and keeps the answers its kept
turns gave: the code outputs' (``code_answer``, as the loop reads them); the attempts end at their first box, so
no box comes before a cut. ``tests/offline/test_plans.py`` checks this against the loop itself on real attempts.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from solver.config import AnswerConfig, Config
from solver.core.answers import code_answer
from solver.timing.timeline import AttemptPlan
from solver.types import Answer, Repetition, RepetitionStatus, Turn


@dataclass(frozen=True)
class Limits:
    """Where a live run stops a repetition.

    >>> Limits.of(Config()).max_turns, Limits.of(Config()).max_model_len is None
    (4, True)
    """

    max_turns: int
    max_tokens: int  # per request
    max_total_tokens: int  # per repetition
    max_model_len: int | None  # prompt plus generated tokens of one request

    @classmethod
    def of(cls, config: Config) -> Limits:
        s = config.sampling
        length: Any = config.engine.args.get("max_model_len")
        return cls(s.max_turns, s.max_tokens, s.max_total_tokens, int(length) if length else None)


def limited(rep: Repetition, limits: Limits, rules: AnswerConfig) -> Repetition:
    """``rep`` as a run under ``limits`` records it: unchanged when it fits, else cut (module docstring).

    >>> from solver.types import Execution
    >>> run = Execution("print(5)", "ok", "5\\n", "", 0.1)
    >>> rep = Repetition("p", 0, 0, "done", (Turn("a", 100, 50, "stop", 0.0, run), Turn("b", 160, 60, "stop", 0.0)),
    ...                  (Answer("5", "5", "code"), Answer("7", "7", "boxed")), 0.0, 0.0)
    >>> limited(rep, Limits(4, 1000, 1000, None), AnswerConfig()) is rep
    True
    >>> cut = limited(rep, Limits(4, 1000, 80, None), AnswerConfig())
    >>> cut.status, [t.generated_tokens for t in cut.turns], [a.value for a in cut.answers]
    ('length', [50, 30], ['5'])
    >>> limited(rep, Limits(4, 1000, 1000, 150), AnswerConfig()).status  # the second prompt fills the context
    'error'
    """
    kept: list[Turn] = []
    generated = 0
    status: RepetitionStatus | None = None
    for k, turn in enumerate(rep.turns):
        left = limits.max_total_tokens - generated
        if k >= limits.max_turns or left <= 0:
            status = "length"
            break
        cap = min(limits.max_tokens, left)
        if limits.max_model_len is not None:
            room = limits.max_model_len - turn.prompt_tokens
            if room <= 0:
                kept.append(Turn("", turn.prompt_tokens, 0, "error", 0.0))
                status = "error"
                break
            cap = min(cap, room)
        if turn.generated_tokens > cap:
            kept.append(Turn("", turn.prompt_tokens, cap, "length", 0.0, token_ids=turn.token_ids[:cap]))
            status = "length"
            break
        kept.append(turn)
        generated += turn.generated_tokens
    if status is None:
        return rep
    answers: list[Answer] = []
    for turn in kept:
        if turn.execution is not None and turn.execution.status == "ok":
            found = code_answer(turn.execution.stdout, rules)
            if found is not None:
                answers.append(found)
    return replace(rep, status=status, turns=tuple(kept), answers=tuple(answers) if status == "length" else (),
                   error="the prompt fills the engine's context" if status == "error" else None)


def attempt_plan(rep: Repetition) -> AttemptPlan:
    """The requests an engine serves for ``rep``: prompt and generated tokens per turn, and the seconds its code
    ran after each (``Execution.duration_s``; 0 where nothing ran). A request the engine refused (an error with no
    token: a prompt past the context, a failed engine) is no request: the attempt ends when it is refused.

    >>> from solver.types import Execution
    >>> rep = Repetition("p", 0, 0, "done", (Turn("a", 100, 50, "stop", 0.0, Execution("", "ok", "", "", 0.4)),
    ...                                      Turn("b", 160, 60, "stop", 0.0)), (), 0.0, 0.0)
    >>> attempt_plan(rep)
    AttemptPlan(prompts=(100, 160), tokens=(50, 60), tools=(0.4, 0.0))
    """
    turns = [t for t in rep.turns if not (t.finish_reason == "error" and t.generated_tokens == 0)]
    return AttemptPlan(tuple(t.prompt_tokens for t in turns), tuple(t.generated_tokens for t in turns),
                       tuple(t.execution.duration_s if t.execution is not None else 0.0 for t in turns))
