"""Rows in, frames out: what one gateway call passes to ``predict`` and what it must get back (pure)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from solver.core.answers import normalise
from solver.kaggle.competition import Competition


class RowError(ValueError):
    """The gateway passed something that is not one row with an id and a problem."""


@dataclass(frozen=True)
class Row:
    id: str | int  # as the gateway gave it: the answer frame must echo it unchanged
    text: str


def _scalar(value: Any, what: str) -> Any:
    """The single value of a one-element polars/pandas Series, or a plain scalar."""
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return value
    if isinstance(value, pl.Series):
        if len(value) != 1:
            raise RowError(f"{what}: expected one value, got {len(value)}")
        return value.item(0)
    if hasattr(value, "iloc") and hasattr(value, "to_numpy") and getattr(value, "ndim", 0) == 1:  # pandas
        if len(value) != 1:
            raise RowError(f"{what}: expected one value, got {len(value)}")
        item = value.iloc[0]
        return item.item() if hasattr(item, "item") else item  # numpy scalar -> Python scalar
    raise RowError(f"{what}: unsupported type {type(value).__name__}")


def read_row(*args: Any, **kwargs: Any) -> Row:
    """The problem of one gateway call: ``predict(id_, problem)``, each a one-element Series (the row's columns).

    >>> read_row(pl.Series("id", ["a1"]), pl.Series("problem", ["1+1?"]))
    Row(id='a1', text='1+1?')
    >>> read_row(pl.Series("id", ["a", "b"]), pl.Series("question", ["x", "y"]))
    Traceback (most recent call last):
    ...
    solver.kaggle.rows.RowError: id: expected one value, got 2
    >>> read_row(pl.DataFrame({"id": ["a"], "problem": ["x"]}))
    Traceback (most recent call last):
    ...
    solver.kaggle.rows.RowError: predict expects the row's two columns (id, problem), got 1 value(s)
    """
    values = list(args) + list(kwargs.values())
    if len(values) != 2:
        raise RowError(f"predict expects the row's two columns (id, problem), got {len(values)} value(s)")
    row_id, text = _scalar(values[0], "id"), _scalar(values[1], "problem")
    if not isinstance(row_id, (str, int)) or isinstance(row_id, bool):
        raise RowError(f"id: expected text or an integer, got {type(row_id).__name__}")
    if not isinstance(text, str) or not text.strip():
        raise RowError("problem: expected non-empty text")
    return Row(row_id, text)


def fallback_id(*values: Any) -> str | int:
    """The row id as well as it can be read from a call ``read_row`` refused, so the frame still lines up.

    >>> fallback_id(pl.Series("id", ["c3"]), pl.Series("problem", [""])), fallback_id(None)
    ('c3', '')
    """
    if values:
        try:
            got = _scalar(values[0], "id")
        except RowError:
            return ""
        if isinstance(got, (str, int)):
            return got
    return ""


def to_answer(value: str | None, comp: Competition) -> int:
    """An integer the competition accepts: the voted answer under its rules, else its default.

    >>> from solver.kaggle.competition import competition
    >>> c = competition("aimo2")
    >>> to_answer("42", c), to_answer("123456", c), to_answer("-1", c), to_answer("x", c), to_answer(None, c)
    (42, 456, 999, 0, 0)
    >>> to_answer("123456", competition("aimo3"))
    0
    """
    if value is None:
        return comp.default
    normal = normalise(str(value), comp.answers)
    return int(normal) if normal is not None else comp.default


def answer_frame(row_id: str | int, answer: int) -> pl.DataFrame:
    """
    >>> answer_frame("a1", 7).to_dicts()
    [{'id': 'a1', 'answer': 7}]
    """
    return pl.DataFrame({"id": [row_id], "answer": pl.Series([answer], dtype=pl.Int64)})


def check_prediction(frame: Any, row_id: str | int, low: int, high: int) -> tuple[int | None, str | None]:
    """The answer in a ``predict`` result, or why the gateway would refuse it (or the competition score it 0).

    >>> check_prediction(pl.DataFrame({"id": ["a"], "answer": [7]}), "a", 0, 999)
    (7, None)
    >>> check_prediction(pl.DataFrame({"id": ["b"], "answer": [7]}), "a", 0, 999)
    (None, "id 'b' does not match the row id 'a'")
    >>> check_prediction(pl.DataFrame({"id": ["a"], "answer": [1000]}), "a", 0, 999)
    (None, 'answer 1000 is outside 0..999')
    >>> check_prediction(pl.DataFrame({"id": ["a"], "answer": [1.5]}), "a", 0, 999)
    (None, 'answer 1.5 is not an integer')
    """
    if isinstance(frame, pl.DataFrame):
        rows, columns = frame.height, list(frame.columns)
    elif hasattr(frame, "iloc") and hasattr(frame, "columns"):  # pandas, read without converting
        rows, columns = len(frame), [str(c) for c in frame.columns]
    else:
        return None, f"predict returned {type(frame).__name__}, not a DataFrame"
    if rows != 1:
        return None, f"expected 1 row, got {rows}"
    if "id" not in columns or "answer" not in columns:
        return None, f"columns {columns}, expected id and answer"
    if isinstance(frame, pl.DataFrame):
        got_id, answer = frame["id"].item(0), frame["answer"].item(0)
    else:
        got_id, answer = frame["id"].iloc[0], frame["answer"].iloc[0]
        answer = answer.item() if hasattr(answer, "item") else answer  # numpy scalar -> Python
    if str(got_id) != str(row_id):
        return None, f"id {got_id!r} does not match the row id {row_id!r}"
    if isinstance(answer, bool) or not isinstance(answer, int):
        return None, f"answer {answer!r} is not an integer"
    if not low <= answer <= high:
        return None, f"answer {answer} is outside {low}..{high}"
    return answer, None
