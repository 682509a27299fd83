"""The seam between the repetition loop and a model's conversation format.

A dialect owns everything format-specific: rendering the conversation to a prompt (text and token ids), what
ends a turn (stop strings or stop token ids), reading a tool call and its code from a finished turn, rendering
a tool result back, and where the final answer lives. The loop only asks a ``Dialogue`` (one repetition's
conversation) for the next prompt, hands it each turn's output, and runs the code it is given.

The fidelity rule every dialect keeps: the next prompt is the previous prompt, then the tokens the model
generated (all of them, the ones that completed a stop string included), then the rendered tool result. So the
prompt token ids of every turn decode to exactly the prompt text, which is the first prompt followed by each
earlier turn's ``text + ending + appended`` as the log records it (``Turn.text`` and ``Turn.appended``), and
the engine's prefix cache sees an exact prefix.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from solver.types import Execution, FinishReason, Problem


@dataclass(frozen=True)
class Prompt:
    """The prompt of the next request; ``token_ids`` is None when no tokenizer is at hand (text-only engines)."""

    text: str
    token_ids: tuple[int, ...] | None


@dataclass(frozen=True)
class Stops:
    """What ends a turn: stop strings (cut from the engine's text) and stop token ids (kept in its ids)."""

    strings: tuple[str, ...] = ()
    token_ids: tuple[int, ...] = ()


@dataclass(frozen=True)
class TurnOutput:
    """What one engine request returned, as the loop collected it."""

    text: str  # the engine's text (a stop string is cut from it)
    token_ids: tuple[int, ...]  # the generated ids (the ids that completed a stop string are kept)
    finish: FinishReason
    stop_reason: str | None = None  # the stop string that ended it
    stop_token: int | None = None  # the stop token id that ended it
    ended_by_loop: bool = False  # the loop left the stream itself (first answer, low confidence)


@dataclass(frozen=True)
class Reading:
    """What a finished turn means."""

    text: str  # what the model wrote up to the marker that ended the turn (logged as ``Turn.text``)
    ending: str  # the ending marker as the model saw it: a stop string (plus any text its last token carried
    # past it), a stop token's text; the start of ``Turn.appended``
    call: str | None  # python code the turn asks to run, None for no tool call
    goes_on: bool  # the conversation continues after this turn (a tool call, a fence that is not python, or a
    # harmony turn that ended without an answer and gets the follow-up message)
    answer_text: str  # where this turn's final answer is read from: all of it (fences, hermes); harmony's final
    # channel, or without an answer there the boxed answers of any channel


class Dialogue(Protocol):
    """One repetition's conversation in one dialect."""

    def prompt(self) -> Prompt:
        """The prompt of the next request."""
        ...

    def watch(self, text: str, token_ids: tuple[int, ...]) -> bool:
        """Fed each streamed piece of the turn in flight; True once a final answer is complete in it (for the
        first-answer early stop)."""
        ...

    def read(self, out: TurnOutput) -> Reading:
        """What the finished turn means; resets ``watch``."""
        ...

    def reply(self, out: TurnOutput, reading: Reading, execution: Execution | None) -> str:
        """Extend the conversation with the turn and (for a tool call) its result, or (a reading that goes on
        without a call) what the dialect says next; the text appended after the turn's ending, which the next
        prompt ends with."""
        ...


class Dialect(Protocol):
    name: str
    stops: Stops

    def start(self, problem: Problem) -> Dialogue: ...
