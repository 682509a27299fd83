"""Conclusions: the phrases and lines with which a text concludes, so that what it concludes is a candidate and
what it only considers on the way ("Suppose the answer is 7", a number mid-derivation) is not.

In order of trust, after the text's boxes (:mod:`.boxes`): an explicit conclusion ("the answer is 12",
"Final Answer: ...", "Answer $9$", "**Answer** 9", "#### 12") that is not a supposition, not a question and not
followed by more reasoning (:func:`find_conclusions`); then, for a text with neither a box nor such a phrase, a
bare final line that is a number or a one-number equation (:func:`final_line`), else a concluding sentence that
states one value (:func:`concluding_sentence`). What a model or its chat template appends after its conclusion
("I hope it is correct.", ``<|im_start|>user``) is not reasoning and is read past.
"""

from __future__ import annotations

import re
from bisect import bisect_left

from solver.core.answers.boxes import Span, find_boxes
from solver.core.answers.limits import MAX_ANSWER_CHARS
from solver.core.answers.phrases import find_phrases, sentence_value, whole_math

# Words that make "the answer is N" a supposition or a rejected guess rather than a conclusion, when they stand
# earlier in the same sentence ("Suppose the answer is 7", "if the answer is 7", "my guess: the answer is 7").
_HYPOTHETICAL = re.compile(
    r"\b(?:suppose|supposing|assume|assuming|if|whether|guess|guessing|maybe|perhaps|might|could|would|should|"
    r"claim|let(?:'s| us) say|hypothes[ie]s)\b", re.IGNORECASE)
# A supposition word counts this many characters before the phrase at most (a sentence is rarely longer).
_HYPOTHESIS_CHARS = 300
# A phrase is a conclusion only near the end: at most this many characters of reasoning may follow its
# sentence (boxes excluded), enough for "I hope it is correct." and a short check, not for a derivation.
CONCLUSION_CHARS = 200
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")
# What follows a conclusion without being reasoning: the sign-off of Minerva-style few-shot prompts and the
# chat-template tokens a base model runs into (Math-Verify's cases end "... I hope it is correct. <|im_start|>user").
_SIGN_OFF = re.compile(r"(?:\s*(?:<\|[a-z_]+\|>(?:user|assistant|system)?|</s>|I hope it is correct\.?))+\s*$",
                       re.IGNORECASE)
# Only the end of a text can conclude it; this many characters of it are read for a final line or sentence.
_TAIL_CHARS = 2000
# A number as a line of its own: digit groups ("7,425,000", "1 000"), a sign, decimals ("1000.0").
_BARE_NUMBER = re.compile(r"[-−+]?(?:\d{1,3}(?:,\d{3})+|\d{1,3}(?: \d{3})+|\d+)(?:\.\d+)?")
# The words that open a concluding sentence.
_CONNECTIVE = re.compile(r"[\s*]*(?:therefore|thus|hence|so|consequently|in conclusion|in total|altogether)\b",
                         re.IGNORECASE)
# A concluding sentence states its value after a copula ("there are 12 ways", "the total is 5"); an instruction
# ("Thus reduce M modulo 1009", "So try bases up to 40") states none.
_COPULA = re.compile(r"\b(?:is|are|was|were|equals)\b")
_COMMANDS = re.compile(r"\\[A-Za-z]+")


def find_conclusions(text: str) -> list[Span]:
    """The phrases that conclude the text: not a supposition, not a question, and not followed by further
    reasoning (more than ``CONCLUSION_CHARS`` characters after its sentence, boxes not counted). A "Final
    Answer" heading concludes wherever it stands: what follows it is the model's appendix, not its reasoning.

    >>> [p.raw for p in find_conclusions("Adding them up, the answer is 12. I hope it is correct.")]
    ['12']
    >>> find_conclusions("Suppose the answer is 7. Then 7 is odd, a contradiction.")
    []
    >>> find_conclusions("So the answer is 7? No: 7 is odd.")
    []
    >>> find_conclusions("The answer is 7. " + "Now we redo the count more carefully. " * 10)
    []
    >>> [p.raw for p in find_conclusions("Final Answer: The final answer is 7. " + "Note: check it. " * 20)]
    ['7']
    """
    # Offsets found once, so that each phrase costs the length of its own sentence, not of the whole text (a
    # text that repeats "Final Answer:" thousands of times must not cost their square).
    marks = [m.start() for m in re.finditer(r"[.!?\n]", text)]
    ends = list(_SENTENCE_END.finditer(text))
    end_starts = [m.start() for m in ends]
    out: list[Span] = []
    tails_too_long = False  # a phrase's tail holds every later phrase's: once one is too long, all earlier are
    for phrase in reversed(find_phrases(text)):
        before = bisect_left(marks, phrase.start)
        sentence_start = marks[before - 1] + 1 if before else 0
        if _HYPOTHETICAL.search(text, max(sentence_start, phrase.start - _HYPOTHESIS_CHARS), phrase.start):
            continue
        value_at = text.find(phrase.raw, phrase.end, phrase.end + 2 * MAX_ANSWER_CHARS + len(phrase.raw))
        value_end = value_at + len(phrase.raw) if value_at >= 0 else phrase.end
        after = bisect_left(end_starts, value_end)
        end = ends[after] if after < len(ends) else None
        if end is not None and text[end.start()] == "?":
            continue
        if phrase.heading:
            out.append(phrase)
            continue
        if tails_too_long:
            continue
        tail = text[end.end() :] if end is not None else ""
        for box in find_boxes(tail):  # a box after the phrase is the answer restated, not more reasoning
            tail = tail.replace(box.raw, "")
        if len(_without_sign_off(tail).strip()) <= CONCLUSION_CHARS:
            out.append(phrase)
        else:
            tails_too_long = True
    return out[::-1]


def _without_sign_off(text: str) -> str:
    """``text`` without what follows its conclusion (sign-off, chat-template tokens), and without trailing space.

    >>> _without_sign_off("so 12. I hope it is correct. <|im_start|>user\\n")
    'so 12.'
    """
    head, tail = text[: -_TAIL_CHARS] if len(text) > _TAIL_CHARS else "", text[-_TAIL_CHARS:]
    m = _SIGN_OFF.search(tail)
    return head + (tail[: m.start()] if m is not None else tail.rstrip())


def final_line(text: str) -> Span | None:
    """The text's last line when it is an answer on its own: a number, or maths that is a value or a one-number
    equation (``$\\frac3{3}$``, ``$x=11$``); a display block that ends the text counts as one line. Code
    (``ans = 24``) and prose are not such lines.

    >>> lines = ["-5", "so\\n7,425,000", "1 000", "Thus:\\n\\n$x=11$.", "**42**", "\\\\[\\n 9\\n\\\\]"]
    >>> [final_line(t).raw for t in lines]
    ['-5', '7,425,000', '1 000', 'x=11', '42', '\\n 9\\n']
    >>> [final_line(t) for t in ["ans = 24", "x = 11", "$x = 5+5+1 = 7 = 11$", "AZYUK2A", "$x\\\\approx 11$", "$2x=4$"]]
    [None, None, None, None, None, None]
    """
    body = _without_sign_off(text)
    core = body.rstrip(".").rstrip()
    start = core.rfind("\n") + 1
    for left, right in (("$$", "$$"), ("\\[", "\\]")):  # a display block spanning lines: its opening line
        opened = core.rfind(left, 0, len(core) - len(right)) if core.endswith(right) else -1
        if opened >= 0 and "\n" in core[opened:]:
            start = min(start, core.rfind("\n", 0, opened) + 1)
    line = core[start:].strip().strip("*").strip()
    if _BARE_NUMBER.fullmatch(line):
        return Span(start, line)
    math = whole_math(line)
    return Span(start, math) if math is not None and _one_value(math) else None


def _one_value(math: str) -> bool:
    """Maths that is a value, or an equation naming one (``x=11``, ``m+n=42``: no digit on the left, no
    letter on the right).

    >>> [_one_value(m) for m in [r"\\frac3{3}", "004", "x=11", "m+n=42", "2x=4", "x=y", "a=1=2", "x+1"]]
    [True, True, True, True, False, False, False, False]
    """
    sides = re.split(r"(?<![<>!\\])=(?!=)", math)

    def letters(s: str) -> bool:
        return re.search(r"[A-Za-z]", _COMMANDS.sub("", s)) is not None

    if len(sides) == 1:
        return not letters(math) and re.search(r"\d", math) is not None
    if len(sides) == 2:
        left, right = sides
        return letters(left) and not re.search(r"\d", left) and not letters(right) and bool(re.search(r"\d", right))
    return False


def concluding_sentence(text: str) -> Span | None:
    """The text's last sentence when it concludes ("Therefore", "Thus", "Hence", "So", ...) and states one value
    after a copula.

    >>> concluding_sentence("... Therefore, there are 12 sequences. I hope it is correct. <|im_start|>user").raw
    '12'
    >>> [concluding_sentence(t) for t in ["So we need 3 more. Let us check 5 cases.", "Thus 3 or 4 work.",
    ...                                    "So if n = 5, then what?", "Hence x = 7?", "So the sum is 12. Then",
    ...                                    "Thus reduce M modulo 1009.", "Thus try k=12.", "So 5 is the start."]]
    [None, None, None, None, None, None, None, None]
    """
    body = _without_sign_off(text)
    if not body or body.endswith("?"):
        return None
    core = body.rstrip(".!").rstrip()
    window = max(0, len(core) - _TAIL_CHARS)
    ends = [m.end() for m in _SENTENCE_END.finditer(core, window)]
    start = ends[-1] if ends else window
    sentence = core[start:]
    copulas = list(_COPULA.finditer(sentence))
    if not _CONNECTIVE.match(sentence) or _HYPOTHETICAL.search(sentence) or not copulas:
        return None
    value = sentence_value(sentence)
    if value is None or sentence.rfind(value) < copulas[-1].end():
        return None
    return Span(start, value)
