"""Answers: find candidates in model text and code output, bring them to one comparable form, grade them.

Olympiad rules (``AnswerConfig.integer``) turn every candidate into a decimal integer string, apply the modulus,
then the range; anything else is not an answer. MATH-style rules keep a canonical LaTeX string for voting and
grade with math-verify equivalence. Everything here is pure except :func:`is_correct`, which bounds
math-verify's work with its own deadline because math-verify's alarm-based timeouts only work in the main thread.
"""

from __future__ import annotations

import logging
import math
import re
import threading
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from solver.config import AnswerConfig
from solver.types import Answer, AnswerSource

_log = logging.getLogger(__name__)

# Python refuses int() on strings over 4300 digits; an answer that long is not an answer anyway.
MAX_DIGITS = 4000
# A box still open this many characters after \boxed{ is not an answer being written but a stray command.
MAX_BOX_CHARS = 2000
# Longest canonical MATH-style answer kept (characters); longer candidates are prose, not answers.
MAX_ANSWER_CHARS = 300
# A \sum or \prod in an answer is expanded term by term up to this many terms.
MAX_TERMS = 200
# Expression answers nest brackets a few levels deep; deeper ones are not parsed (the parser slows steeply:
# 4 nested parentheses took 0.2 s on 2 loaded cores, 7 took 2 s, 140 took 6.6 s).
MAX_NESTING = 4
# math-verify gets at most this long (seconds) per comparison; its inputs are canonical answers, so at most
# MAX_ANSWER_CHARS characters each.
GRADE_TIMEOUT_S = 5.0

_BOX_OPEN = re.compile(r"\\(?:boxed|fbox)(?![a-zA-Z])(\s*)")
_NUMBER = re.compile(r"[-−+]?(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:/\d+)?")
# After "the answer is" a space may also group thousands ("1 000"); in code output that would merge numbers.
_PHRASE_NUMBER = re.compile(r"[-−+]?(?:\d{1,3}(?:([, ])\d{3})(?:\1\d{3})*(?!\d)|\d+)(?:\.\d+)?(?:/\d+)?")
_PHRASE = re.compile(
    r"(?:final\s+answer(?:\s+is)?|(?<![a-z])answer\s+is|(?<![a-z])answer\s*[:=]|####)", re.IGNORECASE
)
_MATH_DELIMS = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))


# ---- boxes ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Span:
    start: int  # offset of the candidate in the text, for ordering
    raw: str


def _matching_brace(text: str, open_at: int, limit: int | None = None) -> int | None:
    """Offset of the ``}`` closing the ``{`` at ``open_at``, or None when the text (or ``limit`` characters)
    ends first.

    >>> _matching_brace("{a{b}c}d", 0)
    6
    >>> _matching_brace("{a{b}", 0) is None
    True
    """
    depth = 0
    i = open_at
    end = len(text) if limit is None else min(len(text), open_at + limit)
    while i < end:
        ch = text[i]
        if ch == "\\":  # an escaped brace \{ or \} does not count
            i += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def _boxes(text: str) -> list[_Span]:
    """Every closed ``\\boxed{...}`` / ``\\fbox{...}`` (and the brace-less ``\\boxed 5``), in order.

    >>> [b.raw for b in _boxes(r"\\boxed{1} \\fbox{\\frac{2}{3}} \\boxed 4$ \\boxed{5")]
    ['1', '\\\\frac{2}{3}', '4']

    A box left open for ``MAX_BOX_CHARS`` is skipped so that boxes after it still count.
    """
    return _scan_boxes(text)[0]


def _scan_boxes(text: str) -> tuple[list[_Span], int]:
    """:func:`_boxes`, and the offset from which a box not among them could still appear as the text grows:
    every box opening before it is settled for good (closed, skipped, or not a box), so a streamed text needs
    scanning again only from there (:class:`FinalAnswerWatch`).

    >>> _scan_boxes(r"so \\boxed{5")[1], _scan_boxes(r"\\boxed $x$ \\boxe")[1], _scan_boxes("abc")[1]
    (3, 11, 0)
    """
    out: list[_Span] = []
    pos = 0
    while (m := _BOX_OPEN.search(text, pos)) is not None:
        pos = m.end()
        if pos == len(text):
            return out, m.start()  # "\\boxed" at the end: a brace, a space or a token may follow
        if text.startswith("{", pos):
            close = _matching_brace(text, pos, MAX_BOX_CHARS)
            if close is None and len(text) - pos < MAX_BOX_CHARS:
                return out, m.start()  # unclosed: the stream may still be growing
            if close is None:
                continue
            out.append(_Span(m.start(), text[pos + 1 : close]))
            pos = close + 1
        elif m.group(1):  # "\\boxed 5": a space, then one token
            token = re.match(r"[^\s$\\{}]+", text[pos:])
            if token is not None:
                out.append(_Span(m.start(), token.group()))
    # Any other opening would start in the last five characters, cut by the end ("\\boxe"); earlier ones
    # were searched and are not there.
    return out, max(pos, len(text) - len("\\boxe"))


def last_boxed(text: str) -> str | None:
    """Content of the last closed ``\\boxed{...}`` or ``\\fbox{...}``, braces matched.

    >>> last_boxed(r"so $\\boxed{\\frac{1}{2}}$ and finally \\boxed{7}.")
    '7'
    >>> last_boxed(r"\\boxed{\\frac{1}{2}}")
    '\\\\frac{1}{2}'
    >>> last_boxed(r"\\boxed{3} then \\boxed{4")
    '3'
    >>> last_boxed("no box here") is None
    True
    """
    boxes = _boxes(text)
    return boxes[-1].raw if boxes else None


def has_final_answer(text: str) -> bool:
    """True when a closed box is present; cheap enough to call on every streamed delta.

    >>> has_final_answer(r"... \\boxed{12")
    False
    >>> has_final_answer(r"... \\boxed{12}")
    True
    """
    return ("\\boxed" in text or "\\fbox" in text) and bool(_boxes(text))


class FinalAnswerWatch:
    """:func:`has_final_answer` of a text streamed piece by piece, asked at each piece holding a ``}`` (the
    only way a braced box completes), with O(1) amortised work per piece where calling it on the joined text
    costs the whole text each time: a closed box stays closed as the text grows, so once one is there the
    answer stays True, and before that only the text from the first unsettled box opening (at most
    ``MAX_BOX_CHARS`` and the pieces since the last check) is scanned again.

    With ``after``, only the text after the last occurrence of that marker counts (a dialect's final-answer
    channel); before the marker nothing does, and a new marker starts the counted text again.

    >>> watch = FinalAnswerWatch()
    >>> [watch.feed(p) for p in ("so \\\\box", "ed{\\\\frac{1}", "{2}", "}", " done", "}")]
    [False, False, False, True, False, True]
    >>> watch = FinalAnswerWatch(after="<final>")
    >>> [watch.feed(p) for p in (r"\\boxed{1}", "<fin", "al>", r"\\boxed{2}", "<final>x}")]
    [False, False, False, True, False]
    """

    def __init__(self, after: str | None = None) -> None:
        self.after = after
        self._pending: list[str] = []  # pieces since the last check
        self._tail = ""  # the counted text from the first unsettled box opening (see _scan_boxes)
        self._counting = after is None  # the marker has been seen (always, without one)
        self._carry = ""  # the last len(after) - 1 characters: a marker cut between pieces
        self._found = False

    def feed(self, piece: str) -> bool:
        """True when ``piece`` holds a ``}`` and the counted text so far holds a closed box."""
        self._pending.append(piece)
        if "}" not in piece:
            return False
        new = "".join(self._pending)
        self._pending.clear()
        if self.after is not None:
            seen = self._carry + new
            at = seen.rfind(self.after)
            self._carry = seen[max(0, len(seen) - len(self.after) + 1):]
            if at >= 0:
                self._counting, self._found, self._tail = True, False, ""
                new = seen[at + len(self.after):]
        if not self._counting or self._found:
            return self._found
        boxes, resume = _scan_boxes(self._tail + new)
        self._found = bool(boxes)
        self._tail = "" if self._found else (self._tail + new)[resume:]
        return self._found


# ---- phrases -------------------------------------------------------------------------------------------


def _delimited(tail: str) -> str | None:
    """The maths between the delimiters that open ``tail`` (``$..$``, ``\\(..\\)``...), if it opens with one."""
    for left, right in _MATH_DELIMS:
        if tail.startswith(left):
            end = tail.find(right, len(left))
            return tail[len(left) : end] if end >= 0 else None
    return None


def _phrase_value(tail: str) -> str | None:
    """What follows "the answer is": delimited maths, a leading number, or the rest of the sentence.

    >>> _phrase_value("12. Done")
    '12'
    >>> _phrase_value(r"$\\frac{1}{2}$.")
    '\\\\frac{1}{2}'
    >>> _phrase_value("1,000 apples"), _phrase_value("1 000."), _phrase_value("12 345, 6")
    ('1,000', '1 000', '12 345')
    >>> _phrase_value("odd, because ...")
    'odd, because ...'
    """
    tail = tail.lstrip(" \t\r\n*:=#")
    if tail.lower().startswith("is "):
        tail = tail[3:].lstrip()
    math = _delimited(tail)
    if math is not None:
        return math
    number = _PHRASE_NUMBER.match(tail)
    if number is not None and not re.match(r"[\w^{\\]", tail[number.end() :]):
        return number.group()
    line = tail.split("\n", 1)[0]
    line = re.split(r"\.(?:\s|$)", line, maxsplit=1)[0]
    line = line.strip().strip("*").strip()
    return line[:MAX_ANSWER_CHARS] or None


def _phrases(text: str) -> list[_Span]:
    """Every "the answer is" phrase with its value, wherever it stands (code output reads them this way)."""
    out = []
    for m in _PHRASE.finditer(text):
        value = _phrase_value(text[m.end() : m.end() + 2 * MAX_ANSWER_CHARS])
        # A phrase around a box ("the final answer is $\boxed{5}$") is the box itself; count it once.
        if value is not None and "\\boxed" not in value and "\\fbox" not in value:
            out.append(_Span(m.start(), value))
    return out


# Words that make "the answer is N" a supposition or a rejected guess rather than a conclusion, when they stand
# earlier in the same sentence ("Suppose the answer is 7", "if the answer is 7", "my guess: the answer is 7").
_HYPOTHETICAL = re.compile(
    r"\b(?:suppose|supposing|assume|assuming|if|whether|guess|guessing|maybe|perhaps|might|could|would|should|"
    r"claim|let(?:'s| us) say|hypothes[ie]s)\b", re.IGNORECASE)
# A phrase is a conclusion only near the end: at most this many characters of reasoning may follow its
# sentence (boxes excluded), enough for "I hope it is correct." and a short check, not for a derivation.
CONCLUSION_CHARS = 200
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")


def _conclusions(text: str) -> list[_Span]:
    """The "the answer is N" phrases that conclude the text: not a supposition, not a question, and not followed
    by further reasoning (more than ``CONCLUSION_CHARS`` characters after its sentence, boxes not counted).

    >>> [p.raw for p in _conclusions("Adding them up, the answer is 12. I hope it is correct.")]
    ['12']
    >>> _conclusions("Suppose the answer is 7. Then 7 is odd, a contradiction.")
    []
    >>> _conclusions("So the answer is 7? No: 7 is odd.")
    []
    >>> _conclusions("The answer is 7. " + "Now we redo the count more carefully. " * 10)
    []
    """
    out = []
    for span in _phrases(text):
        sentence_start = max(text.rfind(ch, 0, span.start) for ch in ".!?\n") + 1
        if _HYPOTHETICAL.search(text, sentence_start, span.start):
            continue
        match = _PHRASE.match(text, span.start)
        value_at = text.find(span.raw, match.end() if match else span.start)
        value_end = value_at + len(span.raw) if value_at >= 0 else span.start
        end = _SENTENCE_END.search(text, value_end)
        if end is not None and text[end.start()] == "?":
            continue
        tail = text[end.end() :] if end is not None else ""
        for box in _boxes(tail):  # a box after the phrase is the answer restated, not more reasoning
            tail = tail.replace(box.raw, "")
        if len(tail.strip()) <= CONCLUSION_CHARS:
            out.append(span)
    return out


# ---- normalisation -------------------------------------------------------------------------------------


def _unwrap(s: str, command: str) -> str:
    """Replace every ``\\command{x}`` by ``x`` (braces matched).

    >>> _unwrap(r"\\text{a\\text{b}}c", "text")
    'abc'
    """
    pattern = re.compile(r"\\" + command + r"\s*\{")
    while (m := pattern.search(s)) is not None:
        close = _matching_brace(s, m.end() - 1)
        if close is None:
            return s
        s = s[: m.start()] + s[m.end() : close] + s[close + 1 :]
    return s


def _strip_wrappers(raw: str) -> str:
    """Remove what surrounds an answer but is not part of it: boxes, maths delimiters, trailing periods."""
    s = raw.strip()
    for _ in range(4):  # wrappers nest a few levels at most: $\boxed{\(5\)}$, \boxed{{5}}.
        before = s
        s = s.strip().rstrip(".").strip()
        math = _delimited(s)
        if math is not None and s.endswith(("$", "\\)", "\\]")):
            s = math.strip()
        box = _BOX_OPEN.match(s)
        if box is not None and s.startswith("{", box.end()) and _matching_brace(s, box.end()) == len(s) - 1:
            s = s[box.end() + 1 : -1].strip()
        while s.startswith("{") and _matching_brace(s, 0) == len(s) - 1:  # doubled braces: \boxed{{42}}
            s = s[1:-1].strip()
        if s == before:
            break
    return s


def _clean_latex(s: str) -> str:
    """Spacing and presentation commands removed; ``\\dfrac``/``\\tfrac`` become ``\\frac``."""
    s = re.sub(r"\\(?:left|right|displaystyle|bigl|bigr|Bigl|Bigr|big|Big)(?![a-zA-Z])", "", s)
    s = re.sub(r"\\[,;:! ]|~|\\quad|\\qquad", " ", s)
    s = re.sub(r"\\[dt]frac(?![a-zA-Z])", r"\\frac", s)
    s = re.sub(r"\^\s*\{?\s*\\circ\s*\}?|°|\\degree(?![a-zA-Z])", "", s)  # degrees
    s = re.sub(r"\\?%|\\percent(?![a-zA-Z])", "", s)
    s = s.replace("{,}", ",").replace("−", "-")
    return s.strip()


def _drop_units(s: str) -> str:
    """Drop a trailing ``\\text{ cm}``-style unit after a value; unwrap any other ``\\text{...}``.

    >>> _drop_units(r"17\\text{ cm}"), _drop_units(r"3\\text{ cm}^2")
    ('17', '3')
    >>> _drop_units(r"\\text{(C)}")
    '(C)'
    """
    s = re.sub(r"(?<=[\d}])\s*\\(?:text|mbox|mathrm)\s*\{\s*[a-zA-Z][a-zA-Z .^0-9]*\}(?:\^\s*\{?\s*\d\s*\}?)?\s*$",
               "", s)
    for command in ("text", "textbf", "mbox", "mathrm", "mathbf", "textnormal"):
        s = _unwrap(s, command)
    return s.strip()


# What may stand before the value in an integer answer and is not part of it.
_LEAD_PHRASE = re.compile(r"(?:the\s+)?(?:final\s+)?answer\s*(?:is\b|[:=])\s*", re.IGNORECASE)
_CHOICE_LABEL = re.compile(r"(?:\(\s*[A-Ea-e]\s*\)|[A-E][.)])\s*[.:]?\s*(?=.*\d)")  # "(B) 12", "B. 12"
_CURRENCY = re.compile(r"^(?:\\\$|\$|US\$|USD|€|£|¥|\\euro|\\pounds|\\yen)\s*|\s*(?:\\\$|\$|€|£|¥)$")
# An equation's right side is the value unless its left side is still to be solved ("2x = 10", "x^2 = 49").
_UNSOLVED_SIDE = re.compile(r"\d\s*[a-zA-Z(]|[a-zA-Z})]\s*\^|[,;]")


def _value_part(s: str) -> str:
    """The part of an integer answer that holds its value: labels, currency, an equation's left side dropped.

    >>> [_value_part(x) for x in ["The answer is 42", "(B) 12", r"\\$42", "m+n=42", r"x \\equiv 7 \\pmod{9}"]]
    ['42', '12', '42', '42', '7']
    >>> _value_part("2x = 10"), _value_part("a=3, b=4"), _value_part("(x+1)^2 = 49"), _value_part("2(x+1) = 8")
    ('2x = 10', 'a=3, b=4', '(x+1)^2 = 49', '2(x+1) = 8')
    """
    s = s.strip().rstrip(".").strip()
    s = re.sub(r"\\pmod\b.*$|\(\s*mod\b.*$", "", s).strip()  # "42 \pmod{1000}": a congruence, not an operation
    if (m := _LEAD_PHRASE.match(s)) is not None:
        s = s[m.end() :]
    if (m := _CHOICE_LABEL.match(s)) is not None:
        s = s[m.end() :]
    s = _CURRENCY.sub("", s).strip()
    equals = [m for m in re.finditer(r"=|\\equiv(?![a-zA-Z])", s) if _depth(s, m.start()) == 0]
    if equals and not _UNSOLVED_SIDE.search(s[: equals[-1].start()]):  # "\sum_{k=1}" is no equation
        s = s[equals[-1].end() :].strip()
    return s


def _depth(s: str, at: int) -> int:
    """Brace depth at offset ``at``.

    >>> _depth("a_{k=1}=5", 4), _depth("a_{k=1}=5", 7)
    (1, 0)
    """
    return s.count("{", 0, at) - s.count("}", 0, at)


def _integer(s: str) -> int | None:
    """The integer a cleaned answer denotes, or None.

    >>> [_integer(x) for x in ["042", "1,000", "1 000", "27.0", "-5", "84/2", "2^{10}", "n = 7", "17 cm"]]
    [42, 1000, 1000, 27, -5, 42, 1024, 7, 17]
    >>> [_integer(x) for x in ["2.5", "x+1", "1,2", "3/2", "2x", ""]]
    [None, None, None, None, None, None]
    >>> _integer("1 2"), _integer("- 5"), _integer("-2^2"), _integer("1.2e3")
    (None, -5, -4, 1200)
    >>> _integer(r"1234 \\bmod 1000"), _integer(r"\\binom{10}{3}"), _integer(r"\\sqrt{144}"), _integer("5!")
    (234, 120, 12, 120)
    """
    s = _value_part(s)
    s = re.sub(r"(?<=\d)\s+(?=[a-zA-Z]{2,}(?:\s+[a-zA-Z]+)*$)[a-zA-Z\s]*$", "", s)  # "17 cm", "3 ways"
    if re.fullmatch(r"[-+]?\d{1,3}(?: \d{3})+", s):
        s = s.replace(" ", "")
    s = re.sub(r"(?<!\d) | (?!\d)", "", s)  # "- 5" and "5 ." but not "1 2"
    if len(s) > MAX_DIGITS:
        return None
    if re.fullmatch(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.0+)?", s):
        s = s.replace(",", "")
    if (m := re.fullmatch(r"([-+]?\d+)(?:\.0*)?", s)) is not None:
        return int(m.group(1))
    if (m := re.fullmatch(r"([-+]?\d+)/(\d+)|([-+]?)\\frac\{(\d+)\}\{(\d+)\}", s)) is not None:
        num, den = (m.group(1), m.group(2)) if m.group(1) else (m.group(3) + m.group(4), m.group(5))
        value = Fraction(int(num), int(den)) if int(den) else None
        return int(value) if value is not None and value.denominator == 1 else None
    if (m := re.fullmatch(r"([-+]?)(\d+)\^\{?(\d+)\}?", s)) is not None:
        # The sign stays outside the power: -2^2 is -(2^2).
        sign, base, exp = -1 if m.group(1) == "-" else 1, int(m.group(2)), int(m.group(3))
        # Bound the result to MAX_DIGITS digits before computing it (len(str(base)) * exp overestimates).
        if base in (0, 1) or len(str(base)) * exp <= MAX_DIGITS:
            return sign * base**exp
        return None
    if (m := re.fullmatch(r"([-+]?\d+(?:\.\d+)?)[eE]([-+]?\d+)", s)) is not None:  # 1.2e3, scientific notation
        if abs(int(m.group(2))) > MAX_DIGITS:
            return None
        number = Fraction(Decimal(s))
        return int(number) if number.denominator == 1 else None
    value = _evaluated(s)
    return int(value) if value is not None and value.denominator == 1 else None


# ---- integer-valued expressions -------------------------------------------------------------------------
# Roots, powers, products, binomials, factorials, scientific notation and \bmod: the LaTeX is parsed by
# latex2sympy2_extended (unevaluated) and the tree is evaluated exactly here with every operation bounded
# before it runs, so no candidate can make the solver compute a huge number. Time is bounded by construction:
# the input is at most MAX_ANSWER_CHARS characters and every intermediate value at most MAX_DIGITS digits.


def _evaluated(s: str) -> Fraction | None:
    """The exact value of a numeric LaTeX expression, or None (letters, non-rational, too large, unparsable).

    >>> [_evaluated(x) for x in [r"\\frac{-6}{2}", r"3 \\times 10^{4}", r"\\prod_{k=1}^{4} k", r"\\sqrt[3]{27}"]]
    [Fraction(-3, 1), Fraction(30000, 1), Fraction(24, 1), Fraction(3, 1)]
    >>> [_evaluated(x) for x in [r"\\sqrt{2}", r"2^{2^{40}}", r"\\binom{10^{9}}{5 \\cdot 10^{8}}", "x+1", r"\\pi"]]
    [None, None, None, None, None]
    """
    if len(s) > MAX_ANSWER_CHARS or not re.search(r"\d", s) or _nesting(s) > MAX_NESTING:
        return None

    # Letters outside commands mean unknowns (x, n, cm): not a number, and no reason to parse.
    bare = re.sub(r"\\[a-zA-Z]+|\\sum_\{?[a-z]|\\prod_\{?[a-z]|\bmod\b", "", s)
    bound = re.search(r"\\(?:sum|prod)_\{?\s*([a-z])", s)
    if re.search(r"[a-zA-Z]", bare if bound is None else bare.replace(bound.group(1), "")):
        return None
    s = re.sub(r"\\bmod(?![a-zA-Z])", r"\\mod ", s)
    try:
        from latex2sympy2_extended import latex2sympy  # ~0.5 s to import: only paid for expression answers
        from latex2sympy2_extended.math_normalization import NormalizationConfig, normalize_latex
        from sympy.core.parameters import evaluate

        # Only the brace-less operators are repaired (\frac{84}2, \sqrt2); the rest is already clean.
        s = normalize_latex(s, NormalizationConfig(basic_latex=False, units=False, malformed_operators=True,
                                                   nits=False, boxed="none", equations=False))
        with evaluate(False):  # keep 2^{2^{40}} a tree: sizes are checked before anything is computed
            expr = latex2sympy(s, normalization_config=None)
    except (Exception, RecursionError) as exc:  # noqa: BLE001 - the parser raises bare Exception on bad LaTeX
        _log.debug("not an expression: %r (%r)", s, exc)
        return None
    return _exact(expr)


def _nesting(s: str) -> int:
    """The deepest nesting of brackets and braces; the parser's time grows steeply with it.

    >>> _nesting(r"\\frac{(1+2)}{3}"), _nesting("((((1))))")
    (2, 4)
    """
    depth = deepest = 0
    for ch in s:
        if ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth -= 1
    return deepest


def prepare_expressions() -> None:
    """Import the LaTeX parser now (~0.5 s), so the first expression answer does not pay for it mid-run."""
    import latex2sympy2_extended  # noqa: F401


def _digits(value: Fraction) -> int:
    """Decimal digits of the larger of numerator and denominator, at most one too many, from their bit
    lengths (``str`` would take quadratic time on huge numbers, and refuses more than 4300 digits).

    >>> _digits(Fraction(999)), _digits(Fraction(1, 1000)), _digits(Fraction(10**5000))  # 3, 4 and 5001 exactly
    (4, 4, 5001)
    """
    bits = max(abs(value.numerator).bit_length(), value.denominator.bit_length())
    return bits * 30103 // 100000 + 1  # log10(2) = 0.30103


def _exact(expr: object, depth: int = 0) -> Fraction | None:
    """Evaluate a sympy tree of numbers exactly, refusing (None) any step whose result would pass MAX_DIGITS."""
    import sympy

    if depth > 100:
        return None
    args = getattr(expr, "args", ())
    if isinstance(expr, (sympy.Integer, sympy.Rational)):
        return Fraction(int(expr.p), int(expr.q))
    if isinstance(expr, sympy.Float):
        return Fraction(Decimal(str(expr))) if expr.is_finite else None  # the digits as written: 1.5 is 3/2
    if isinstance(expr, sympy.Equality):
        return _exact(expr.rhs, depth + 1) if not expr.rhs.free_symbols else None
    if isinstance(expr, (sympy.Sum, sympy.Product)):
        return _series(expr, depth)
    values = [_exact(a, depth + 1) for a in args] if args else []
    if not args or any(v is None for v in values):
        return None
    out: Fraction | None
    if isinstance(expr, sympy.Add):
        out = sum(values, Fraction(0))  # type: ignore[arg-type]
    elif isinstance(expr, sympy.Mul):
        out = Fraction(1)
        for v in values:
            out *= v  # type: ignore[operator]
            if _digits(out) > 2 * MAX_DIGITS:
                return None
    elif isinstance(expr, sympy.Pow):
        out = _power(values[0], values[1])  # type: ignore[arg-type]
    elif isinstance(expr, sympy.Mod):
        a, m = values
        out = a % m if a.denominator == 1 and m.denominator == 1 and m != 0 else None  # type: ignore[union-attr,operator]
    elif isinstance(expr, sympy.factorial):
        n = values[0]
        ok = n.denominator == 1 and 0 <= n and math.lgamma(int(n) + 1) / math.log(10) <= MAX_DIGITS  # type: ignore[union-attr,operator]
        out = Fraction(math.factorial(int(n))) if ok else None  # type: ignore[arg-type]
    elif isinstance(expr, sympy.binomial):
        n, k = values
        out = _binomial(n, k)  # type: ignore[arg-type]
    elif isinstance(expr, (sympy.floor, sympy.ceiling)):
        out = Fraction(math.floor(values[0]) if isinstance(expr, sympy.floor) else math.ceil(values[0]))  # type: ignore[arg-type]
    elif isinstance(expr, sympy.Abs):
        out = abs(values[0])  # type: ignore[arg-type]
    else:
        return None
    return out if out is not None and _digits(out) <= 2 * MAX_DIGITS else None


def _power(base: Fraction, exp: Fraction) -> Fraction | None:
    """``base ** exp`` when it is rational and at most MAX_DIGITS digits; roots only when exact.

    >>> _power(Fraction(27), Fraction(1, 3)), _power(Fraction(2), Fraction(-2)), _power(Fraction(2), Fraction(1, 2))
    (Fraction(3, 1), Fraction(1, 4), None)
    >>> _power(Fraction(10), Fraction(10**9)) is None, _power(Fraction(0), Fraction(-1)) is None
    (True, True)
    """
    from sympy import integer_nthroot

    if base == 0:
        return Fraction(0) if exp > 0 else None
    if abs(exp.numerator) * _digits(base) > MAX_DIGITS * max(1, exp.denominator) or exp.denominator > 64:
        return None
    if exp.denominator > 1:
        if base < 0:
            return None
        roots = [integer_nthroot(part, exp.denominator) for part in (base.numerator, base.denominator)]
        if not all(exact for _, exact in roots):
            return None
        base = Fraction(int(roots[0][0]), int(roots[1][0]))
    return base ** exp.numerator


def _binomial(n: Fraction, k: Fraction) -> Fraction | None:
    if n.denominator != 1 or k.denominator != 1 or n < 0:
        return None
    n_, k_ = int(n), int(k)
    if not 0 <= k_ <= n_:
        return Fraction(0)
    k_ = min(k_, n_ - k_)
    log10 = (math.lgamma(n_ + 1) - math.lgamma(k_ + 1) - math.lgamma(n_ - k_ + 1)) / math.log(10)
    return Fraction(math.comb(n_, k_)) if log10 <= MAX_DIGITS else None


def _series(expr: object, depth: int) -> Fraction | None:
    """A ``\\sum`` or ``\\prod`` over at most MAX_TERMS integer steps, each term evaluated exactly."""
    import sympy
    from sympy.core.parameters import evaluate

    term, (var, low, high) = expr.args[0], expr.args[1]  # type: ignore[attr-defined]
    lo, hi = _exact(low, depth + 1), _exact(high, depth + 1)
    if lo is None or hi is None or lo.denominator != 1 or hi.denominator != 1 or hi - lo > MAX_TERMS:
        return None
    product = isinstance(expr, sympy.Product)
    out = Fraction(1 if product else 0)
    for i in range(int(lo), int(hi) + 1):
        with evaluate(False):
            value = _exact(term.subs(var, sympy.Integer(i)), depth + 1)
        if value is None:
            return None
        out = out * value if product else out + value
        if _digits(out) > 2 * MAX_DIGITS:
            return None
    return out


def _canonical(s: str) -> str | None:
    """A comparable MATH-style string: whitespace dropped except where it separates a command from letters.

    >>> _canonical(r"\\frac12")
    '\\\\frac{1}{2}'
    >>> _canonical(r"\\pi r ^2")
    '\\\\pi r^2'
    >>> _canonical("27.0"), _canonical("10,000"), _canonical("0.50")
    ('27', '10000', '0.5')
    """
    s = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\sqrt(\d)", r"\\sqrt{\1}", s)
    s = re.sub(r"(\\[a-zA-Z]+)?\s+", _space, s).strip()
    if re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", s):
        s = s.replace(",", "")
    if re.fullmatch(r"-?\d+(?:\.\d+)?", s):
        try:
            value = Decimal(s)
        except InvalidOperation:
            return None
        s = format(value.normalize(), "f") if value != 0 else "0"
    return s if 0 < len(s) <= MAX_ANSWER_CHARS else None


def _space(m: re.Match[str]) -> str:
    """Keep one space after a command followed by a letter (``\\pi r``); drop every other run of spaces."""
    command = m.group(1) or ""
    follows_letter = m.end() < len(m.string) and m.string[m.end()].isalpha()
    return command + " " if command and follows_letter else command


def normalise(raw: str, rules: AnswerConfig) -> str | None:
    """The comparable form of one candidate, or None when it is not an answer under ``rules``.

    >>> rules = AnswerConfig()
    >>> [normalise(x, rules) for x in ["042", "1,000", "27.0", "$17$", r"\\text{17}", r"17^\\circ", r"\\boxed{ 5 }"]]
    ['42', '1000', '27', '17', '17', '17', '5']
    >>> [normalise(x, rules) for x in ["2.5", "x+1", "-3", "100000"]]
    [None, None, None, None]
    >>> normalise("-3", AnswerConfig(modulus=1000, high=999)), normalise("123456", AnswerConfig(modulus=1000))
    ('997', '456')
    >>> normalise(r"\\left( 1, \\dfrac{1}{2} \\right)", AnswerConfig(integer=False))
    '(1,\\\\frac{1}{2})'
    """
    s = _drop_units(_clean_latex(_strip_wrappers(raw)))
    if not rules.integer:
        return _canonical(s.rstrip(".").strip())
    value = _integer(s)
    if value is None:
        return None
    if rules.modulus is not None:
        value %= rules.modulus  # Python's % is non-negative for a positive modulus
    return str(value) if rules.low <= value <= rules.high else None


# ---- candidates ----------------------------------------------------------------------------------------


def _answers(spans: list[tuple[_Span, AnswerSource]], rules: AnswerConfig) -> tuple[Answer, ...]:
    out = []
    for span, source in sorted(spans, key=lambda pair: pair[0].start):
        value = normalise(span.raw, rules)
        if value is not None:
            out.append(Answer(value=value, raw=span.raw, source=source))
    return tuple(out)


def extract_answers(text: str, rules: AnswerConfig) -> tuple[Answer, ...]:
    """Every boxed candidate and every concluding "the answer is" phrase that normalises, in order.

    A phrase in the middle of the reasoning ("Suppose the answer is 7. Then ...") is not a candidate; see
    :func:`_conclusions`.

    >>> [(a.value, a.source) for a in extract_answers(r"The answer is 12. Check: $\\boxed{12}$", AnswerConfig())]
    [('12', 'phrase'), ('12', 'boxed')]
    >>> extract_answers(r"\\boxed{x+1}", AnswerConfig())
    ()
    """
    spans: list[tuple[_Span, AnswerSource]] = [(b, "boxed") for b in _boxes(text)]
    spans += [(p, "phrase") for p in _conclusions(text)]
    return _answers(spans, rules)


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
    phrased = [span for line in lines for span in _phrases(line)]
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


# ---- grading -------------------------------------------------------------------------------------------


def is_correct(predicted: str, reference: str, rules: AnswerConfig) -> bool:
    """Whether ``predicted`` is the reference answer under ``rules``.

    Integer rules compare normalised values; MATH-style rules compare canonical strings, then ask math-verify.

    >>> is_correct("042", "42", AnswerConfig()), is_correct("41", "42", AnswerConfig())
    (True, False)
    >>> is_correct("0.5", r"\\frac{1}{2}", AnswerConfig(integer=False))
    True
    """
    pred = normalise(predicted, rules)
    ref = normalise(reference, rules)
    if pred is None or ref is None:
        return False
    if rules.integer or pred == ref:
        return pred == ref
    preds, refs = _percent_forms(predicted, pred), _percent_forms(reference, ref)
    if set(preds) & set(refs):
        return True
    return any(_math_verify(p, r, GRADE_TIMEOUT_S) for p in preds for r in refs)


def _percent_forms(raw: str, value: str) -> list[str]:
    """A percentage compares both as written and as a fraction of one: ``50\\%`` is 50 and 0.5.

    >>> _percent_forms(r"12.5\\%", "12.5"), _percent_forms("0.5", "0.5")
    (['12.5', '0.125'], ['0.5'])
    """
    if "%" not in raw and "\\percent" not in raw:
        return [value]
    try:
        fraction = Decimal(value) / 100
    except InvalidOperation:
        return [value]
    return [value, format(fraction.normalize(), "f") if fraction != 0 else "0"]


class _OwnTimeoutFilter(logging.Filter):
    """Drops math-verify's "timeout is disabled" warning: the bound is ours (see :func:`_math_verify`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith("Timeout is disabled")


_OWN_TIMEOUT = _OwnTimeoutFilter()


def _math_verify(predicted: str, reference: str, timeout_s: float) -> bool:
    """math-verify equivalence with its alarm-based timeouts off and a thread bound of ``timeout_s`` instead.

    A comparison that overruns is reported as not equivalent; its daemon thread is left to finish on its own
    (Python cannot kill a thread) and never blocks interpreter exit.
    """
    import math_verify  # ~1.8 s to import: only paid when MATH-style grading is used

    for name in ("math_verify.parser", "math_verify.grader"):
        logger = logging.getLogger(name)
        if _OWN_TIMEOUT not in logger.filters:
            logger.addFilter(_OWN_TIMEOUT)

    result: list[bool] = []

    def work() -> None:
        try:
            gold = math_verify.parse(f"${reference}$", parsing_timeout=None)  # type: ignore[arg-type]
            target = math_verify.parse(f"${predicted}$", parsing_timeout=None)  # type: ignore[arg-type]
            result.append(bool(gold and target and math_verify.verify(gold, target, timeout_seconds=None)))
        except Exception as exc:  # noqa: BLE001 - a grader failure means "not shown equivalent", logged
            _log.debug("math-verify failed on %r vs %r: %r", predicted, reference, exc)
            result.append(False)

    worker = threading.Thread(target=work, name="math-verify", daemon=True)
    worker.start()
    worker.join(timeout_s)
    return bool(result and result[0])
