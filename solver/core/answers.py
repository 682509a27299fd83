"""Answers: find candidates in model text and code output, bring them to one comparable form, grade them.

Olympiad rules (``AnswerConfig.integer``) turn every candidate into a decimal integer string, apply the modulus,
then the range; anything else is not an answer. MATH-style rules keep a canonical LaTeX string for voting and
grade with math-verify equivalence. Everything here is pure except :func:`is_correct`, which bounds
math-verify's work with its own deadline because math-verify's alarm-based timeouts only work in the main thread.
"""

from __future__ import annotations

import logging
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
    out: list[_Span] = []
    pos = 0
    while (m := _BOX_OPEN.search(text, pos)) is not None:
        pos = m.end()
        if text.startswith("{", m.end()):
            close = _matching_brace(text, m.end(), MAX_BOX_CHARS)
            if close is None and len(text) - m.end() < MAX_BOX_CHARS:
                break  # unclosed: the stream may still be growing
            if close is None:
                continue
            out.append(_Span(m.start(), text[m.end() + 1 : close]))
            pos = close + 1
        elif m.group(1):  # "\\boxed 5": a space, then one token
            token = re.match(r"[^\s$\\{}]+", text[m.end() :])
            if token is not None:
                out.append(_Span(m.start(), token.group()))
    return out


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
    out = []
    for m in _PHRASE.finditer(text):
        value = _phrase_value(text[m.end() : m.end() + 2 * MAX_ANSWER_CHARS])
        # A phrase around a box ("the final answer is $\boxed{5}$") is the box itself; count it once.
        if value is not None and "\\boxed" not in value and "\\fbox" not in value:
            out.append(_Span(m.start(), value))
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
    for _ in range(4):  # wrappers nest a few levels at most: $\boxed{\(5\)}$.
        before = s
        s = s.strip().rstrip(".").strip()
        math = _delimited(s)
        if math is not None and s.endswith(("$", "\\)", "\\]")):
            s = math.strip()
        box = _BOX_OPEN.match(s)
        if box is not None and s.startswith("{", box.end()) and _matching_brace(s, box.end()) == len(s) - 1:
            s = s[box.end() + 1 : -1].strip()
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

    >>> _drop_units(r"17\\text{ cm}")
    '17'
    >>> _drop_units(r"\\text{(C)}")
    '(C)'
    """
    s = re.sub(r"(?<=[\d}])\s*\\(?:text|mbox|mathrm)\s*\{\s*[a-zA-Z][a-zA-Z .^0-9]*\}\s*$", "", s)
    for command in ("text", "textbf", "mbox", "mathrm", "mathbf", "textnormal"):
        s = _unwrap(s, command)
    return s.strip()


def _integer(s: str) -> int | None:
    """The integer a cleaned answer denotes, or None.

    >>> [_integer(x) for x in ["042", "1,000", "1 000", "27.0", "-5", "84/2", "2^{10}", "n = 7", "17 cm"]]
    [42, 1000, 1000, 27, -5, 42, 1024, 7, 17]
    >>> [_integer(x) for x in ["2.5", "x+1", "1,2", "3/2", "2x", ""]]
    [None, None, None, None, None, None]
    >>> _integer("1 2"), _integer("- 5")
    (None, -5)
    """
    s = s.strip().rstrip(".").strip()
    s = re.sub(r"\\(?:pmod|bmod|mod)\b.*$|\(\s*mod\b.*$", "", s).strip()  # "42 \pmod{1000}"
    if (eq := re.fullmatch(r"[a-zA-Z]\w*\s*=\s*(.+)", s)) is not None:
        s = eq.group(1).strip()
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
    if (m := re.fullmatch(r"(-?\d+)\^\{?(\d+)\}?", s)) is not None:
        base, exp = int(m.group(1)), int(m.group(2))
        # Bound the result to MAX_DIGITS digits before computing it (len(str(|base|)) * exp overestimates).
        if base in (0, 1, -1) or len(str(abs(base))) * exp <= MAX_DIGITS:
            return base**exp
    return None


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
    """Every boxed and "the answer is" candidate that normalises, in order of appearance.

    >>> [(a.value, a.source) for a in extract_answers(r"The answer is 12. Check: $\\boxed{12}$", AnswerConfig())]
    [('12', 'phrase'), ('12', 'boxed')]
    >>> extract_answers(r"\\boxed{x+1}", AnswerConfig())
    ()
    """
    spans: list[tuple[_Span, AnswerSource]] = [(b, "boxed") for b in _boxes(text)]
    spans += [(p, "phrase") for p in _phrases(text)]
    return _answers(spans, rules)


def code_answer(stdout: str, rules: AnswerConfig) -> Answer | None:
    """The answer a code output gives, read from its last line holding a digit (later lines such as
    ``Done.`` are skipped): an "answer is" phrase in it, else its only number, else the whole line.

    A line with several numbers (``x = 3, y = 4``) is ambiguous, and an earlier line is not consulted:
    the last number printed is the result, earlier ones are work.

    >>> code_answer("12\\n42\\n", AnswerConfig()).value
    '42'
    >>> code_answer("Total: 27.0\\nDone.\\n", AnswerConfig()).value
    '27'
    >>> code_answer("42\\nx = 3, y = 4", AnswerConfig()) is None
    True
    """
    lines = [line.strip() for line in stdout.splitlines()]
    line = next((line for line in reversed(lines) if any(ch.isdigit() for ch in line)), None)
    if line is None:
        return None
    phrases = _phrases(line)
    numbers = [m.group() for m in _NUMBER.finditer(line) if not _inside_word(line, m)]
    only_number = numbers if len(numbers) == 1 else []
    candidates = [p.raw for p in phrases[-1:]] + only_number + [line]
    for raw in candidates:
        value = normalise(raw, rules)
        if value is not None:
            return Answer(value=value, raw=raw, source="code")
    return None


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
    return _math_verify(pred, ref, GRADE_TIMEOUT_S)


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
