"""Exact arithmetic on integer-valued LaTeX answers, every step bounded before it runs.

Roots, powers, products, binomials, factorials, scientific notation and ``\\bmod``: the LaTeX is parsed by
latex2sympy2_extended (unevaluated) and the tree is evaluated exactly here with every operation bounded
before it runs, so no candidate can make the solver compute a huge number. Time is bounded by construction:
the input is at most MAX_ANSWER_CHARS characters and every intermediate value at most MAX_DIGITS digits.
"""

from __future__ import annotations

import logging
import math
import re
from decimal import Decimal
from fractions import Fraction

from solver.core.answers.limits import MAX_ANSWER_CHARS, MAX_DIGITS, MAX_NESTING, MAX_TERMS

_log = logging.getLogger(__name__)


def evaluated(s: str) -> Fraction | None:
    """The exact value of a numeric LaTeX expression, or None (letters, non-rational, too large, unparsable).

    >>> [evaluated(x) for x in [r"\\frac{-6}{2}", r"3 \\times 10^{4}", r"\\prod_{k=1}^{4} k", r"\\sqrt[3]{27}"]]
    [Fraction(-3, 1), Fraction(30000, 1), Fraction(24, 1), Fraction(3, 1)]
    >>> [evaluated(x) for x in [r"\\sqrt{2}", r"2^{2^{40}}", r"\\binom{10^{9}}{5 \\cdot 10^{8}}", "x+1", r"\\pi"]]
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
