"""The ``fences`` dialect: the model writes ```python blocks in plain text; a turn ends when a fence closes
(```` ``` ```` + newline) and the block's output comes back as an ```output block. Prompts are rendered by the
tokenizer's chat template; later turns extend the token ids, never re-tokenise, so the prefix cache sees an exact
prefix.

Token fidelity: vLLM keeps the tokens that complete a stop string in ``token_ids`` and cuts the stop string only
from the text (a token may also carry text past the stop string). The next prompt therefore continues from the
generated ids as they are, and the logged turn is their decoded text split at the stop string: ``Turn.text`` up
to it, ``Turn.appended`` from it on (the fence, anything its last token carried, then the tool output). The
fence is never added a second time.
"""

from __future__ import annotations

import re

from solver.core.answers import FinalAnswerWatch
from solver.config import Config
from solver.dialects.base import Prompt, Reading, Stops, TurnOutput
from solver.dialects.output import OutputStyle, describe_execution
from solver.dialects.prompts import PromptTemplate
from solver.types import Execution, Problem, Tokenizer

CODE_STOP = "```\n"  # generation pauses when a fenced block closes; the loop decides whether it was python
STOP_STRINGS: tuple[str, ...] = (CODE_STOP, "```output")  # a model may start writing the output itself

_PYTHON_OPEN = re.compile(r"```(?:python|py)[ \t]*\n", re.IGNORECASE)


def open_python_block(text: str) -> str | None:
    """The code of the last ```python block in ``text`` that has no closing fence yet, else None.

    >>> open_python_block("Let me compute.\\n```python\\nprint(6*7)\\n")
    'print(6*7)\\n'
    >>> open_python_block("```python\\nx=1\\n```\\nDone.") is None
    True
    """
    matches = list(_PYTHON_OPEN.finditer(text))
    if not matches:
        return None
    body = text[matches[-1].end():]
    if "```" in body:
        return None
    return body


def split_at_stop(generated: str, stop: str) -> tuple[str, str]:
    """The generated text up to the stop string that ended it, and the rest (the stop string first).

    The engine stops at the first occurrence, so that is where the cut is; text a token carried past the stop
    string stays in the rest. Without the stop string (a backend that dropped it) the rest is the stop string.

    >>> split_at_stop("x = 1\\n```\\n", "```\\n")
    ('x = 1\\n', '```\\n')
    >>> split_at_stop("x = 1\\n```\\n\\n", "```\\n")
    ('x = 1\\n', '```\\n\\n')
    >>> split_at_stop("x = 1\\n", "```\\n")
    ('x = 1\\n', '```\\n')
    """
    at = generated.find(stop)
    if at < 0:
        return generated, stop
    return generated[:at], generated[at:]


class FencesDialogue:
    def __init__(self, dialect: FencesDialect, problem: Problem) -> None:
        self.dialect = dialect
        messages = dialect.messages(problem)
        tokenizer = dialect.tokenizer
        if tokenizer is None:
            # No tokenizer (replay, or a server known only by name): a plain rendering the engine sees as text.
            self.text = "".join(f"<|{m['role']}|>\n{m['content']}\n" for m in messages) + "<|assistant|>\n"
            self.ids: list[int] | None = None
        else:
            self.text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
            self.ids = dialect.encode(self.text)
        self._watch = FinalAnswerWatch()
        self._ids_of_turn: tuple[int, ...] | None = None  # the last turn read, as the next prompt carries it

    def prompt(self) -> Prompt:
        return Prompt(self.text, tuple(self.ids) if self.ids is not None else None)

    def watch(self, text: str, token_ids: tuple[int, ...]) -> bool:
        return self._watch.feed(text)

    def generated(self, out: TurnOutput) -> tuple[str, tuple[int, ...] | None]:
        """The turn as the model saw it, as text and (with a tokenizer) ids: the ids as generated and their
        decoded text (the stop string's tokens included). A text-only backend, or an engine whose text is not
        what its ids decode to, gets its text with the stop string that was cut from it, encoded once."""
        cut = out.stop_reason if out.finish == "stop" and not out.ended_by_loop else None
        if self.ids is not None and out.token_ids:
            decoded = self.dialect.decode(out.token_ids)
            if decoded.startswith(out.text):
                return decoded, out.token_ids
        text = out.text + (cut or "")
        return text, (tuple(self.dialect.encode(text)) if self.ids is not None else None)

    def read(self, out: TurnOutput) -> Reading:
        self._watch = FinalAnswerWatch()
        if out.finish != "stop" or out.stop_reason is None or out.ended_by_loop:
            # The turn ends the repetition (end of text, a limit, or the loop left): nothing continues from it.
            text = self.generated(out)[0] if out.ended_by_loop else out.text
            return Reading(text, "", None, False, text)
        generated, self._ids_of_turn = self.generated(out)
        text, ending = split_at_stop(generated, out.stop_reason)
        code = open_python_block(text)
        # A fence that is not python closed: keep going. The model starting an output block itself ends it.
        goes_on = code is not None or out.stop_reason == CODE_STOP
        return Reading(text, ending, code, goes_on, text)

    def reply(self, out: TurnOutput, reading: Reading, execution: Execution | None) -> str:
        appended = self.dialect.tool_output(execution) if execution is not None else ""
        if self.ids is not None:
            generated = list(self._ids_of_turn or ())
            self.ids = self.ids + generated + (self.dialect.encode(appended) if appended else [])
        self.text += reading.text + reading.ending + appended
        return appended


class FencesDialect:
    name = "fences"
    stops = Stops(strings=STOP_STRINGS)

    def __init__(self, template: PromptTemplate, tokenizer: Tokenizer | None, output: OutputStyle) -> None:
        self.template = template
        self.tokenizer = tokenizer
        self.output = output

    def messages(self, problem: Problem) -> list[dict[str, str]]:
        user = self.template.user.replace("{problem}", problem.text.strip())
        return [{"role": "system", "content": self.template.system}, {"role": "user", "content": user}]

    def start(self, problem: Problem) -> FencesDialogue:
        return FencesDialogue(self, problem)

    def encode(self, text: str) -> list[int]:
        assert self.tokenizer is not None
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, token_ids: tuple[int, ...] | list[int]) -> str:
        assert self.tokenizer is not None
        # Special tokens kept and no space clean-up: the text must be exactly what the ids are.
        return self.tokenizer.decode(list(token_ids), skip_special_tokens=False,
                                     clean_up_tokenization_spaces=False)

    def tool_output(self, execution: Execution) -> str:
        return self.template.output.replace("{output}", describe_execution(execution, self.output))


def from_config(config: Config, tokenizer: Tokenizer | None, template: PromptTemplate) -> FencesDialect:
    return FencesDialect(template, tokenizer, OutputStyle.from_config(config.prompt))
