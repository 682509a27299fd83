"""The ``harmony`` dialect: gpt-oss's message format, through the ``openai_harmony`` library.

The system message sets the reasoning effort and declares the python tool; the template's ``system`` text goes
in as developer instructions and its ``user`` text (with the problem) as the user message; the library renders
them to token ids (``render_conversation_for_completion``). A turn ends on a stop token, ``<|call|>`` (200012) or
``<|return|>`` (200002); its tokens are parsed with ``parse_messages_from_completion_tokens``. A message whose
recipient is ``python`` is a tool call (its text is the code). The tool's output goes back as a message from the
``python`` tool to the assistant on the call's channel, rendered by the library, followed by the next assistant
header; the reasoning stays in the conversation. Every text of the first prompt is the preset's: the template
(developer instructions and user message), ``prompt.reasoning_effort`` and ``prompt.tool_description``.

Answers: gpt-oss often boxes its answer in the ``analysis`` channel and never writes a ``final`` message, so a
boxed answer valid under the answer rules counts in any channel; the ``final`` channel wins when it gives one. The
first-answer watch fires at the first valid boxed answer in any channel (a ``\\boxed{}`` that is empty or not an
answer does not end the turn). A turn that ends without a boxed answer (``<|return|>``, or a ``<|call|>`` to no
tool) gets ``prompt.follow_up`` as a user message, at most ``prompt.max_follow_ups`` times per repetition.

Earlier turns stay in the prompt as the tokens the model generated: parsing and re-rendering a message
normalises its header (the model's ``analysis code`` comes back as ``analysis <|constrain|>code``), which would
break the prefix cache and the rule that the prompt ids are what the log shows. Where the model wrote canonical
messages, the prompt equals a full re-render of the conversation (tested).

Offline, the library needs its vocabulary file in ``TIKTOKEN_ENCODINGS_BASE``: ``scripts/setup.sh`` unpacks it
(``solver.dialects.vocabulary``) and this module points the library there.
"""

from __future__ import annotations

import functools
from typing import Any

from solver.config import AnswerConfig, Config, ConfigError
from solver.core.answers import extract_answers
from solver.dialects.base import Prompt, Reading, Stops, TurnOutput
from solver.dialects.output import OutputStyle, describe_execution
from solver.dialects.prompts import PromptTemplate
from solver.types import Answer, Execution, Problem, Tokenizer

FINAL_MARKER = "<|channel|>final<|message|>"
# A box closed by the newest streamed piece opened at most this many characters before it: an answer is short,
# so the watch looks back no further (work per piece stays bounded however long the turn grows).
WATCH_CHARS = 2000


@functools.cache
def load_encoding() -> Any:
    """The gpt-oss harmony encoding; ConfigError (one line) when its vocabulary cannot be had."""
    # Imported here, not at the top: the package imports this module, and set-up runs the vocabulary module as
    # ``python -m``, which must find it not yet imported.
    from solver.dialects.vocabulary import use_vocabulary

    use_vocabulary()
    from openai_harmony import HarmonyEncodingName, HarmonyError, load_harmony_encoding

    try:
        return load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
    except HarmonyError as exc:
        raise ConfigError("the harmony vocabulary is not available (run scripts/setup.sh, or set "
                          f"TIKTOKEN_ENCODINGS_BASE to a folder holding o200k_base.tiktoken): {exc}") from exc


def message_text(message: Any) -> str:
    return "".join(getattr(part, "text", "") for part in message.content)


def boxed_answers(text: str, rules: AnswerConfig) -> tuple[Answer, ...]:
    """The boxed answers of ``text`` valid under ``rules`` (its "the answer is" phrases are left out: in the
    analysis channel they are reasoning).

    >>> [a.value for a in boxed_answers(r"so the answer is 3? \\boxed{x} \\boxed{} \\boxed{042}", AnswerConfig())]
    ['42']
    """
    return tuple(a for a in extract_answers(text, rules) if a.source == "boxed")


class BoxWatch:
    """True from the first streamed piece that completes a boxed answer valid under ``rules``, in any channel.

    Only a piece holding ``}`` can complete a (braced) box; the text looked at is the last ``WATCH_CHARS``
    characters, so each check costs the same however long the turn is.

    >>> watch = BoxWatch(AnswerConfig())
    >>> [watch.feed(p) for p in (r"<|channel|>analysis<|message|>maybe \\boxed{", r"x}? or \\boxed{}", r" so \\boxed{1",
    ...                          "2}", " more")]
    [False, False, False, True, True]
    """

    def __init__(self, rules: AnswerConfig) -> None:
        self.rules = rules
        self._tail = ""
        self._found = False

    def feed(self, piece: str) -> bool:
        if self._found:
            return True
        self._tail = (self._tail + piece)[-(WATCH_CHARS + len(piece)):]
        if "}" in piece and ("\\boxed" in self._tail or "\\fbox" in self._tail):
            self._found = bool(boxed_answers(self._tail, self.rules))
        return self._found


class HarmonyDialogue:
    def __init__(self, dialect: HarmonyDialect, problem: Problem) -> None:
        from openai_harmony import Conversation, DeveloperContent, Message, Role

        self.dialect = dialect
        enc = dialect.encoding
        user = dialect.template.user.replace("{problem}", problem.text.strip())
        self.messages: list[Any] = [
            Message.from_role_and_content(Role.SYSTEM, dialect.system_content()),
            Message.from_role_and_content(Role.DEVELOPER,
                                          DeveloperContent.new().with_instructions(dialect.template.system)),
            Message.from_role_and_content(Role.USER, user),
        ]
        self.ids: list[int] = list(enc.render_conversation_for_completion(
            Conversation.from_messages(self.messages), Role.ASSISTANT))
        self.text = enc.decode(self.ids)
        self._watch = BoxWatch(dialect.rules)
        self._turn_ids: list[int] = []
        self._call: Any = None
        self.follow_ups = 0  # follow-up messages sent so far

    def prompt(self) -> Prompt:
        return Prompt(self.text, tuple(self.ids))

    def watch(self, text: str, token_ids: tuple[int, ...]) -> bool:
        piece = self.dialect.encoding.decode(list(token_ids)) if token_ids else text
        return self._watch.feed(piece)

    def parse(self, ids: list[int]) -> list[Any]:
        """The messages of one turn; garbage (a random model, a cut turn) gives what could be read, or none."""
        from openai_harmony import HarmonyError, Role

        try:
            return list(self.dialect.encoding.parse_messages_from_completion_tokens(ids, Role.ASSISTANT,
                                                                                    strict=False))
        except HarmonyError:
            return []

    def read(self, out: TurnOutput) -> Reading:
        self._watch, self._call = BoxWatch(self.dialect.rules), None
        enc, stops, rules = self.dialect.encoding, self.dialect.stops.token_ids, self.dialect.rules
        ids = list(out.token_ids)
        if out.stop_token is not None and (not ids or ids[-1] != out.stop_token):
            ids.append(out.stop_token)  # a backend that reports the stop token without returning it
        self._turn_ids = ids
        ended = bool(ids) and ids[-1] in stops and out.finish == "stop"
        text = enc.decode(ids[:-1] if ended else ids)
        ending = enc.decode(ids[-1:]) if ended else ""
        messages = self.parse(ids)
        final = [message_text(m) for m in messages if m.channel == "final"]
        if not final and FINAL_MARKER in text:  # a final message cut short (length, first answer)
            final = [text[text.rfind(FINAL_MARKER) + len(FINAL_MARKER):]]
        final_text = "\n".join(final)
        boxes = boxed_answers(text, rules)
        # The final channel's answer when it gives one, else the boxes written in any channel (as themselves, so
        # the loop's extraction finds exactly them).
        answer_text = final_text if extract_answers(final_text, rules) else \
            "\n".join(f"\\boxed{{{a.raw}}}" for a in boxes)
        call = messages[-1] if messages and ended and ids[-1] == self.dialect.call_token else None
        if call is not None and call.recipient != "python":
            call = None  # a call to a tool this solver does not have: answered like a turn that ended
        self._call = call
        code = message_text(call) if call is not None else None
        follow_up = ended and code is None and not boxes and self.follow_ups < self.dialect.max_follow_ups
        self.messages.extend(messages)
        return Reading(text, ending, code, code is not None or follow_up, answer_text)

    def reply(self, out: TurnOutput, reading: Reading, execution: Execution | None) -> str:
        from openai_harmony import Author, Message, Role

        enc = self.dialect.encoding
        appended_ids: list[int] = []
        message = None
        if execution is not None:
            output = describe_execution(execution, self.dialect.output)
            message = Message.from_author_and_content(Author.new(Role.TOOL, "python"), output) \
                .with_recipient("assistant")
            if self._call is not None and self._call.channel:
                message = message.with_channel(self._call.channel)
        elif reading.goes_on:  # an answerless turn the conversation goes on from: the follow-up message
            message = Message.from_role_and_content(Role.USER, self.dialect.follow_up)
            self.follow_ups += 1
        if message is not None:
            self.messages.append(message)
            appended_ids = list(enc.render(message))
        appended_ids += self.dialect.assistant_header
        appended = enc.decode(appended_ids)
        self.ids = self.ids + self._turn_ids + appended_ids
        self.text += reading.text + reading.ending + appended
        return appended


class HarmonyDialect:
    name = "harmony"

    def __init__(self, template: PromptTemplate, reasoning_effort: str, output: OutputStyle, *,
                 tool_description: str | None = None, follow_up: str = "", max_follow_ups: int = 0,
                 rules: AnswerConfig = AnswerConfig()) -> None:
        self.encoding = load_encoding()
        self.template = template
        self.reasoning_effort = reasoning_effort
        self.output = output
        self.tool_description = tool_description
        self.follow_up = follow_up
        self.max_follow_ups = max_follow_ups
        self.rules = rules
        # <|return|> 200002 and <|call|> 200012; the library gives them unordered
        self.stops = Stops(token_ids=tuple(sorted(self.encoding.stop_tokens_for_assistant_actions())))
        self.call_token = self.encoding.encode("<|call|>", allowed_special="all")[0]
        self.assistant_header = list(self.encoding.encode("<|start|>assistant", allowed_special="all"))

    def system_content(self) -> Any:
        from openai_harmony import ReasoningEffort, SystemContent, ToolNamespaceConfig

        effort = {"low": ReasoningEffort.LOW, "medium": ReasoningEffort.MEDIUM,
                  "high": ReasoningEffort.HIGH}[self.reasoning_effort]
        tool = ToolNamespaceConfig.python() if self.tool_description is None else \
            ToolNamespaceConfig(name="python", description=self.tool_description, tools=[])
        return SystemContent.new().with_reasoning_effort(effort).with_tools(tool)

    def start(self, problem: Problem) -> HarmonyDialogue:
        return HarmonyDialogue(self, problem)


def from_config(config: Config, tokenizer: Tokenizer | None, template: PromptTemplate) -> HarmonyDialect:
    # The model's own tokenizer is not needed: the library renders and parses token ids itself.
    prompt = config.prompt
    return HarmonyDialect(template, prompt.reasoning_effort, OutputStyle.from_config(prompt),
                          tool_description=prompt.tool_description, follow_up=prompt.follow_up,
                          max_follow_ups=prompt.max_follow_ups, rules=config.answers)
