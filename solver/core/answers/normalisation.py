"""Normalisation: one candidate span brought to the form votes compare.

Olympiad rules (``AnswerConfig.integer``) turn every candidate into a decimal integer string, apply the modulus,
then the range; anything else is not an answer. MATH-style rules keep a canonical LaTeX string.
"""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from fractions import Fraction

from solver.config import AnswerConfig
from solver.core.answers.exact import evaluated
from solver.core.answers.boxes import BOX_OPEN, matching_brace
from solver.core.answers.limits import MAX_ANSWER_CHARS, MAX_DIGITS
from solver.core.answers.phrases import delimited


def _unwrap(s: str, command: str) -> str:
    """Replace every ``\\command{x}`` by ``x`` (braces matched).

    >>> _unwrap(r"\\text{a\\text{b}}c", "text")
    'abc'
    """
    pattern = re.compile(r"\\" + command + r"\s*\{")
    while (m := pattern.search(s)) is not None:
        close = matching_brace(s, m.end() - 1)
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
        math = delimited(s)
        if math is not None and s.endswith(("$", "\\)", "\\]")):
            s = math.strip()
        box = BOX_OPEN.match(s)
        if box is not None and s.startswith("{", box.end()) and matching_brace(s, box.end()) == len(s) - 1:
            s = s[box.end() + 1 : -1].strip()
        while s.startswith("{") and matching_brace(s, 0) == len(s) - 1:  # doubled braces: \boxed{{42}}
            s = s[1:-1].strip()
        if s == before:
            break
    return s


def _clean_latex(s: str) -> str:
    """Spacing and presentation commands removed; ``\\dfrac``/``\\tfrac`` become ``\\frac``; a comma LaTeX
    writes as a digit-group separator (``14 {,} 916``, ``32,\\! 349``) becomes a plain one.

    >>> _clean_latex(r"14 {, }916"), _clean_latex(r"11,\\! 111,\\!100"), _clean_latex(r"\\dfrac{1}{2}")
    ('14,916', '11,111,100', '\\\\frac{1}{2}')
    """
    s = re.sub(r"\\(?:left|right|displaystyle|bigl|bigr|Bigl|Bigr|big|Big)(?![a-zA-Z])", "", s)
    s = re.sub(r"\s*\{\s*,\s*\}\s*|,\s*\\!\s*", ",", s)
    s = re.sub(r"\\[,;:! ]|~|\\quad|\\qquad", " ", s)
    s = re.sub(r"\\[dt]frac(?![a-zA-Z])", r"\\frac", s)
    s = re.sub(r"\^\s*\{?\s*\\circ\s*\}?|°|\\degree(?![a-zA-Z])", "", s)  # degrees
    s = re.sub(r"\\?%|\\percent(?![a-zA-Z])", "", s)
    s = s.replace("−", "-")
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
    >>> [_integer(x) for x in ["2.5", "x+1", "1,2", "3/2", "2x", "", "32, 349"]]
    [None, None, None, None, None, None, None]
    >>> _integer("1 2"), _integer("- 5"), _integer("-2^2"), _integer("1.2e3")
    (None, -5, -4, 1200)
    >>> _integer(r"1234 \\bmod 1000"), _integer(r"\\binom{10}{3}"), _integer(r"\\sqrt{144}"), _integer("5!")
    (234, 120, 12, 120)
    """
    s = _value_part(s)
    s = re.sub(r"(?<=\d)\s+(?=[a-zA-Z]{2,}(?:\s+[a-zA-Z]+)*$)[a-zA-Z\s]*$", "", s)  # "17 cm", "3 ways"
    if re.fullmatch(r"[-+]?\d{1,3}(?: \d{3})+", s):
        s = s.replace(" ", "")
    if re.search(r"\d\s*,\s+\d", s):  # "32, 349": two numbers listed, not one number grouped
        return None
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
    value = evaluated(s)
    return int(value) if value is not None and value.denominator == 1 else None


def _canonical(s: str) -> str | None:
    """A comparable MATH-style string: whitespace dropped except where it separates a command from letters.

    >>> _canonical(r"\\frac12")
    '\\\\frac{1}{2}'
    >>> _canonical(r"\\pi r ^2")
    '\\\\pi r^2'
    >>> _canonical("27.0"), _canonical("10,000"), _canonical("0.50"), _canonical("32, 349")
    ('27', '10000', '0.5', '32,349')
    """
    s = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\sqrt(\d)", r"\\sqrt{\1}", s)
    grouped = re.fullmatch(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?", s.strip())  # before spaces go: "32, 349" lists
    s = re.sub(r"(\\[a-zA-Z]+)?\s+", _space, s).strip()
    if grouped:
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
