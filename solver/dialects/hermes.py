"""The ``hermes`` dialect: Qwen3-style tool calls. The python tool is declared to the model's own chat template
(``apply_chat_template(..., tools=[PYTHON_TOOL])``); the model calls it with
``<tool_call>{"name": "python", "arguments": {"code": ...}}</tool_call>``, a turn ends at ``</tool_call>`` (a stop
string) or at the end of its message, and the result goes back as a ``tool`` message rendered by the same
template, followed by the next assistant header.

As in every dialect the model's generated tokens stay in the prompt as generated; what the template renders
after the assistant's text (its end marker, the tool message, the next header) is taken from a render of the
conversation with a placeholder for that text, so the template alone decides the format.
"""

from __future__ import annotations

import json
from typing import Any

from solver.config import Config, ConfigError
from solver.core.answers import FinalAnswerWatch
from solver.dialects.base import Prompt, Reading, Stops, TurnOutput
from solver.dialects.fences import split_at_stop
from solver.dialects.output import OutputStyle, describe_execution
from solver.dialects.prompts import PromptTemplate
from solver.types import Execution, Problem, Tokenizer

CALL_OPEN, CALL_CLOSE = "<tool_call>", "</tool_call>"
PYTHON_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "python",
        "description": "Run Python code in a stateful session (variables and functions survive between calls) "
                       "and return what it prints, or the error. Print the values you need.",
        "parameters": {"type": "object", "properties": {"code": {"type": "string", "description": "Python code"}},
                       "required": ["code"]},
    },
}
_PLACEHOLDER = "\u2063ASSISTANT-TURN\u2063"  # never written by a model; marks where the assistant's text goes


def tool_code(text: str) -> str | None:
    """The code of the last ``<tool_call>`` in ``text`` when it calls ``python``, else None.

    >>> tool_code('Let me check.\\n<tool_call>\\n{"name": "python", "arguments": {"code": "print(6*7)"}}\\n')
    'print(6*7)'
    >>> tool_code('<tool_call>{"name": "python", "arguments": "{\\\\"code\\\\": \\\\"x = 1\\\\"}"}')
    'x = 1'
    >>> tool_code('<tool_call>{"name": "search", "arguments": {"q": "x"}}') is None
    True
    >>> tool_code("<tool_call>{not json") is None
    True
    """
    at = text.rfind(CALL_OPEN)
    if at < 0:
        return None
    try:
        call = json.loads(text[at + len(CALL_OPEN):].strip())
        arguments = call.get("arguments")
        if isinstance(arguments, str):
            arguments = json.loads(arguments)
    except (ValueError, AttributeError):
        return None
    if not isinstance(call, dict) or call.get("name") != "python" or not isinstance(arguments, dict):
        return None
    code = arguments.get("code")
    return code if isinstance(code, str) else None


class HermesDialogue:
    def __init__(self, dialect: HermesDialect, problem: Problem) -> None:
        self.dialect = dialect
        user = dialect.template.user.replace("{problem}", problem.text.strip())
        self.messages: list[dict[str, Any]] = [{"role": "system", "content": dialect.template.system},
                                               {"role": "user", "content": user}]
        self.text = dialect.render(self.messages)
        self.ids = dialect.encode(self.text)
        self._watch = FinalAnswerWatch()
        self._turn_ids: list[int] = []

    def prompt(self) -> Prompt:
        return Prompt(self.text, tuple(self.ids))

    def watch(self, text: str, token_ids: tuple[int, ...]) -> bool:
        return self._watch.feed(text)

    def read(self, out: TurnOutput) -> Reading:
        self._watch = FinalAnswerWatch()
        generated, ids = out.text, list(out.token_ids)
        decoded = self.dialect.decode(ids) if ids else ""
        if ids and decoded.startswith(out.text):
            generated = decoded  # the stop string's tokens are in the ids: their text is in the prompt too
        else:
            generated = out.text + (out.stop_reason or "" if out.finish == "stop" else "")
            ids = self.dialect.encode(generated)
        self._turn_ids = ids
        if out.finish != "stop" or out.stop_reason != CALL_CLOSE or out.ended_by_loop:
            text = generated if out.ended_by_loop else out.text
            return Reading(text, "", None, False, text)
        text, ending = split_at_stop(generated, CALL_CLOSE)
        code = tool_code(text)
        return Reading(text, ending, code, code is not None, text)

    def reply(self, out: TurnOutput, reading: Reading, execution: Execution | None) -> str:
        output = describe_execution(execution, self.dialect.output) if execution is not None else ""
        turn = [{"role": "assistant", "content": _PLACEHOLDER}, {"role": "tool", "content": output}]
        rendered = self.dialect.render(self.messages + turn)
        appended = rendered[rendered.rindex(_PLACEHOLDER) + len(_PLACEHOLDER):]
        self.messages += [{"role": "assistant", "content": reading.text + reading.ending}, turn[1]]
        self.ids = self.ids + self._turn_ids + self.dialect.encode(appended)
        self.text += reading.text + reading.ending + appended
        return appended


class HermesDialect:
    name = "hermes"
    stops = Stops(strings=(CALL_CLOSE,))

    def __init__(self, template: PromptTemplate, tokenizer: Tokenizer, output: OutputStyle) -> None:
        self.template = template
        self.tokenizer = tokenizer
        self.output = output

    def render(self, messages: list[dict[str, Any]]) -> str:
        return self.tokenizer.apply_chat_template(messages, tools=[PYTHON_TOOL], tokenize=False,
                                                  add_generation_prompt=True)

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, token_ids: list[int]) -> str:
        return self.tokenizer.decode(token_ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

    def start(self, problem: Problem) -> HermesDialogue:
        return HermesDialogue(self, problem)


def from_config(config: Config, tokenizer: Tokenizer | None, template: PromptTemplate) -> HermesDialect:
    if tokenizer is None:
        raise ConfigError("the hermes dialect renders prompts with the model's chat template: it needs the "
                          "model's tokenizer (a local model, or a server whose model is a local directory)")
    probe = tokenizer.apply_chat_template([{"role": "user", "content": "x"}], tools=[PYTHON_TOOL], tokenize=False)
    if '"python"' not in probe:
        raise ConfigError("the model's chat template does not render tools: the hermes dialect cannot declare "
                          "its python tool (choose another prompt.dialect)")
    return HermesDialect(template, tokenizer, OutputStyle.from_config(config.prompt))
