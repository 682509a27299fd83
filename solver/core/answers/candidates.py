"""Candidates: the answers a repetition offers, from its text and from its code outputs, and which of them may
vote."""

from __future__ import annotations

import re

from solver.config import AnswerConfig
from solver.core.answers.boxes import Span, find_boxes
from solver.core.answers.conclusions import concluding_sentence, final_line, find_conclusions
from solver.core.answers.phrases import find_phrases
from solver.core.answers.normalisation import normalise
from solver.types import Answer, AnswerSource

_NUMBER = re.compile(r"[-−+]?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:/\d+)?")


def extract_answers(text: str, rules: AnswerConfig) -> tuple[Answer, ...]:
    """The candidates a text gives, in order: every box, and every phrase that concludes the text; a text with
    neither gives its bare final line (``-5``, ``$x=11$``) or else its concluding sentence ("Therefore, there are
    12 ways."). When the text's last candidate is a phrase, the boxes before it that say otherwise were
    intermediate results and are no candidates (``\\boxed{255}`` on the way, then "The final answer is 10,455").

    A phrase in the middle of the reasoning ("Suppose the answer is 7. Then ...") is not a candidate; see
    :mod:`solver.core.answers.conclusions`.

    >>> [(a.value, a.source) for a in extract_answers(r"The answer is 12. Check: $\\boxed{12}$", AnswerConfig())]
    [('12', 'phrase'), ('12', 'boxed')]
    >>> text = r"So $\\boxed{255}$ dollars more. The final answer is $10,455$."
    >>> [(a.value, a.source) for a in extract_answers(text, AnswerConfig())]
    [('10455', 'phrase')]
    >>> [(a.value, a.source) for a in extract_answers("We get\\n\\n$x=11$", AnswerConfig())]
    [('11', 'phrase')]
    >>> extract_answers(r"\\boxed{x+1}", AnswerConfig())
    ()
    """
    boxes = find_boxes(text)
    phrases = find_conclusions(text)
    if not boxes and not phrases:
        last = final_line(text) or concluding_sentence(text)
        phrases = [last] if last is not None else []
    spans: list[tuple[Span, AnswerSource]] = [(b, "boxed") for b in boxes] + [(p, "phrase") for p in phrases]
    found = []
    for span, source in sorted(spans, key=lambda pair: pair[0].start):
        value = normalise(span.raw, rules)
        if value is not None:
            found.append(Answer(value=value, raw=span.raw, source=source))
    if found and found[-1].source == "phrase":
        concluded = found[-1].value
        found = [a for a in found if a.source != "boxed" or a.value == concluded]
    return tuple(found)


def voting_answers(answers: tuple[Answer, ...], status: str) -> tuple[Answer, ...]:
    """The candidates a finished repetition may vote with: a repetition cut by length never concluded, so its
    "the answer is" phrases are reasoning, not an answer (boxes and code outputs still count).

    >>> found = (Answer("7", "7", "phrase"), Answer("9", "9", "code"))
    >>> [a.value for a in voting_answers(found, "length")], [a.value for a in voting_answers(found, "done")]
    (['9'], ['7', '9'])
    """
    if status != "length":
        return answers
    return tuple(a for a in answers if a.source != "phrase")


# A printed value line: an optional label ("Total:", "The count is", "x1 =") then one value at the line's end.
_VALUE_LINE = re.compile(r"(?:.*?(?:[:=]|\bis)\s*)?[-−+$]?[\d(](?:[^a-zA-Z]*[\d)])?\.?")


def code_answer(stdout: str, rules: AnswerConfig) -> Answer | None:
    """The answer a code output gives: its last "answer is" phrase, else its last line that ends with a value
    (``42``, ``Total: 27.0``); commentary after the result (``checked 10 cases``, ``(elapsed 3 s)``, ``Done.``)
    is skipped. Without such a line, the last line holding a digit gives its only number.

    A value line with several numbers (``x = 3, y = 4``) is ambiguous, and an earlier line is not consulted:
    the last value printed is the result, earlier ones are work.

    >>> code_answer("12\\n42\\n", AnswerConfig()).value
    '42'
    >>> code_answer("42\\nchecked 10 cases\\n", AnswerConfig()).value, code_answer("answer: 42\\n(elapsed 3 s)", AnswerConfig()).value
    ('42', '42')
    >>> code_answer("42\\nx = 3, y = 4", AnswerConfig()) is None
    True
    """
    lines = [line.strip() for line in stdout.splitlines()]
    phrased = [span for line in lines for span in find_phrases(line)]
    for raw in [p.raw for p in phrased[-1:]]:
        value = normalise(raw, rules)
        if value is not None:
            return Answer(value=value, raw=raw, source="code")
    line = next((line for line in reversed(lines) if _VALUE_LINE.fullmatch(line)), None)
    if line is None:  # no value line: the last line with a free-standing number ("in 0.3s" has none)
        line = next((line for line in reversed(lines) if _free_numbers(line)), None)
    if line is None:
        return None
    numbers = _free_numbers(line)
    only_number = numbers if len(numbers) == 1 else []
    candidates = only_number + [line]
    for raw in candidates:
        value = normalise(raw, rules)
        if value is not None:
            return Answer(value=value, raw=raw, source="code")
    return None


def _free_numbers(line: str) -> list[str]:
    """The numbers of a line that are not glued to letters.

    >>> _free_numbers("x1 = 5, done in 0.3s"), _free_numbers("checked 10 cases")
    (['5'], ['10'])
    """
    return [m.group() for m in _NUMBER.finditer(line) if not _inside_word(line, m)]


def _inside_word(line: str, m: re.Match[str]) -> bool:
    """A number glued to letters (``x1``, ``3rd``) is a name, not a value."""
    before = line[m.start() - 1] if m.start() > 0 else " "
    after = line[m.end()] if m.end() < len(line) else " "
    return before.isalpha() or before == "_" or after.isalpha() or after == "_"
