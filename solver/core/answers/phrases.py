"""Phrases: where text states its answer in words, as raw spans: "the answer is 12", "Final Answer: ...",
"Answer $9$", "**Answer** 9", "#### 18"; and the maths delimiters answers are written in.

A phrase is found wherever it stands; whether it concludes the text is :mod:`.conclusions`' judgement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from solver.core.answers.boxes import Span
from solver.core.answers.limits import MAX_ANSWER_CHARS

# After "the answer is" a space may also group thousands ("1 000"); in code output that would merge numbers.
_PHRASE_NUMBER = re.compile(r"[-−+]?(?:\d{1,3}(?:([, ])\d{3})(?:\1\d{3})*(?!\d)|\d+)(?:\.\d+)?(?:/\d+)?")
# The markers. "Answer" directly before maths counts only at a line's start ("Answer $ 9 $", "Answer \[ 9 \]",
# Math-Verify's latex_notation cases), so that "the answer $x$ satisfies ..." in prose is no marker.
PHRASE = re.compile(
    r"final\s+answer(?:\s+is)?|(?<![a-z])answer\s+is|(?<![a-z])answer\s*[:=]|\*\*answer\*\*"
    r"|^[ \t>#*]*answer(?=[ \t]*(?:\$|\\\[|\\\())|####", re.IGNORECASE | re.MULTILINE)
# A label, capitalised as one ("Final Answer: The largest $n$ is 34.", "**Answer:** ..."): what follows is the
# answer even as a sentence, so the sentence's one value is taken. In prose ("before the final answer we check
# the 2 edge cases") the words are no label.
_LABEL = re.compile(r"(?:\*\*)?(?:Final Answer|FINAL ANSWER|Answer|ANSWER)(?:\*\*)?[ \t]*(?::|\*\*|\n|$)")
# "Final Answer" as a heading concludes wherever it stands (see conclusions.find_conclusions).
_HEADING = re.compile(r"(?:Final Answer|FINAL ANSWER)(?:\*\*)?[ \t]*(?::|\*\*|\n|$)")
_MATH_DELIMS = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))
_INLINE = ("\\(", "$")
# A span of maths in prose, display or inline (inline maths stays on its line).
_MATH_SPAN = re.compile(r"\$\$(.+?)\$\$|\\\[(.+?)\\\]|\$([^$\n]+?)\$|\\\(([^\n]+?)\\\)", re.DOTALL)
# A number standing as a word of prose: not glued to letters (x1, 3rd), not part of LaTeX (\sqrt{3}, 2^{10}, a_1).
_PROSE_NUMBER = re.compile(
    r"(?<![\w{}^_\\/.,$−-])[-−]?(?:\d{1,3}(?:,\d{3})+(?![\d,])|\d+)(?:\.\d+)?(?![\w{}^_/%]|[.,]\d)")


@dataclass(frozen=True)
class Phrase(Span):
    end: int  # offset just after the marker
    heading: bool  # "Final Answer" as a heading or label: it concludes wherever it stands


def delimited(tail: str) -> str | None:
    """The maths between the delimiters that open ``tail`` (``$..$``, ``\\(..\\)``...), if it opens with one.
    Inline maths does not run over a line break (Math-Verify's latex_notation cases: ``Answer $ \\n 9 \\n $``
    gives no answer where ``Answer $$ \\n 9 \\n $$`` gives 9).

    >>> delimited("$$ \\n 9 \\n $$ done"), delimited("$ \\n 9 \\n $"), delimited(r"\\(12\\), so")
    (' \\n 9 \\n ', None, '12')
    """
    for left, right in _MATH_DELIMS:
        if tail.startswith(left):
            end = tail.find(right, len(left))
            body = tail[len(left) : end] if end >= 0 else None
            return None if body is None or (left in _INLINE and "\n" in body) else body
    return None


def whole_math(line: str) -> str | None:
    """The maths of a line that is one delimited span and nothing else.

    >>> whole_math("$x=11$"), whole_math(r"\\[ 9 \\]"), whole_math("$1$ and $2$"), whole_math("12")
    ('x=11', ' 9 ', None, None)
    """
    for left, right in _MATH_DELIMS:
        if line.startswith(left) and line.endswith(right) and len(line) >= len(left) + len(right):
            body = line[len(left) : len(line) - len(right)]
            if right not in body and not (left in _INLINE and "\n" in body):
                return body
    return None


def sentence_value(sentence: str) -> str | None:
    """The one value a sentence of prose states: its only number or maths holding a digit; None when it states
    none or several, or is not prose (no word of two letters outside maths and commands).

    >>> sentence_value("The largest $n$ is 34"), sentence_value("Jane started growing Sphere 3 hours ago")
    ('34', '3')
    >>> sentence_value("there are 12 sequences that meet the three given conditions")
    '12'
    >>> sentence_value("The final answer is $14 {,}916$"), sentence_value("so 1,000 apples")
    ('14 {,}916', '1,000')
    >>> [sentence_value(s) for s in ["x = 3, y = 4", r"\\sqrt{3}", "odd", "f(2) is 12", "3 and 4 give 7"]]
    [None, None, None, None, None]
    """
    values = [v for m in _MATH_SPAN.finditer(sentence) if re.search(r"\d", v := m.group(m.lastindex or 0))]
    prose = _MATH_SPAN.sub(" ", sentence)
    if not re.search(r"[A-Za-z]{2,}", re.sub(r"\\[A-Za-z]+", " ", prose)):
        return None
    values += [m.group() for m in _PROSE_NUMBER.finditer(prose)]
    return values[0].strip() if len(values) == 1 else None


def _phrase_value(tail: str, labelled: bool = False) -> str | None:
    """What follows a marker: delimited maths, a leading number, or the rest of the sentence; after a label
    ("Final Answer:", "Answer:"), a sentence's one value ("Final Answer: The largest $n$ is 34").

    >>> _phrase_value("12. Done")
    '12'
    >>> _phrase_value(r"$\\frac{1}{2}$.")
    '\\\\frac{1}{2}'
    >>> _phrase_value("1,000 apples"), _phrase_value("1 000."), _phrase_value("12 345, 6")
    ('1,000', '1 000', '12 345')
    >>> _phrase_value("odd, because ...")
    'odd, because ...'
    >>> _phrase_value(": The largest $n$ is 34. I hope", labelled=True), _phrase_value("at most 5", labelled=False)
    ('34', 'at most 5')
    """
    tail = tail.lstrip(" \t\r\n*:=#")
    if tail.lower().startswith("is "):
        tail = tail[3:].lstrip()
    math = delimited(tail)
    if math is not None:
        return math
    number = _PHRASE_NUMBER.match(tail)
    if number is not None and not re.match(r"[\w^{\\]", tail[number.end() :]):
        return number.group()
    line = tail.split("\n", 1)[0]
    line = re.split(r"\.(?:\s|$)", line, maxsplit=1)[0]
    line = line.strip().strip("*").strip()[:MAX_ANSWER_CHARS]
    return (sentence_value(line) if labelled else None) or line or None


def find_phrases(text: str) -> list[Phrase]:
    """Every marker with its value, wherever it stands (code output reads them this way)."""
    out = []
    for m in PHRASE.finditer(text):
        labelled = _LABEL.match(text, m.start()) is not None
        value = _phrase_value(text[m.end() : m.end() + 2 * MAX_ANSWER_CHARS], labelled)
        # A phrase around a box ("the final answer is $\boxed{5}$") is the box itself; count it once.
        if value is not None and "\\boxed" not in value and "\\fbox" not in value:
            heading = _HEADING.match(text, m.start()) is not None
            out.append(Phrase(m.start(), value, m.end(), heading))
    return out
