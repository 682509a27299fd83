"""Grading: whether a predicted answer is the reference answer.

Everything here is pure except :func:`_math_verify`, which bounds math-verify's work with its own deadline
because math-verify's alarm-based timeouts only work in the main thread.
"""

from __future__ import annotations

import logging
import threading
from decimal import Decimal, InvalidOperation

from solver.config import AnswerConfig
from solver.core.answers.limits import GRADE_TIMEOUT_S
from solver.core.answers.normalisation import normalise

_log = logging.getLogger(__name__)


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
