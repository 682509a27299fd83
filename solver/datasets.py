"""Problem sets from files: Kaggle-style CSV and JSONL in the AIME / AMC / MATH / GSM8K shapes.

Every fault in a file (unreadable, unknown extension, malformed line, missing column, empty problem text,
duplicate id) is a ``DatasetError`` with one line naming the file, so a command can print it and exit.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from pathlib import Path
from typing import Any

from solver.errors import BadInput, first_line
from solver.types import Problem

# Where bundled sets live: the source tree's evaluation/data, or solver/data inside an installed wheel.
_BUNDLED_DIRS = (Path(__file__).resolve().parent.parent / "evaluation" / "data", Path(__file__).parent / "data")
_SUFFIXES = (".csv", ".jsonl")

_TEXT_KEYS = ("problem", "question")  # JSONL: the first one present is the problem text
_ID_KEYS = ("id", "unique_id", "idx")  # JSONL: the first one present is the id
_NOT_META = {"answer", "solution", *_TEXT_KEYS, *_ID_KEYS}  # worked solutions are long and are not metadata
_GSM8K_FINAL = re.compile(r"####\s*(.*?)\s*$", re.DOTALL)


class DatasetError(BadInput, ValueError):
    """A problem file that cannot be used; the message is one line naming the file."""


def dataset_names() -> dict[str, Path]:
    """Bundled problem sets by name (the file stem), e.g. ``"demo"``.

    >>> dataset_names()["demo"].name
    'demo.csv'
    """
    names: dict[str, Path] = {}
    for folder in _BUNDLED_DIRS:
        if folder.is_dir():
            for path in sorted(folder.iterdir()):
                if path.suffix in _SUFFIXES:
                    names.setdefault(path.stem, path)
    return names


def load_problems(path: str | Path, *, limit: int | None = None) -> list[Problem]:
    """Problems from a CSV or JSONL file, or from a bundled set by name; the first ``limit`` when given.

    >>> [(p.id, p.answer) for p in load_problems("demo", limit=2)]
    [('demo-01', '42'), ('demo-02', '156')]
    """
    if limit is not None and limit < 1:
        raise DatasetError(f"limit must be at least 1, got {limit}")
    file = resolve(path)
    try:
        text = file.read_text(encoding="utf-8-sig")  # -sig: spreadsheets often prepend a byte-order mark
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"{file}: cannot read: {first_line(exc)}") from exc
    if file.suffix == ".csv":
        problems = _from_csv(text, file)
    elif file.suffix == ".jsonl":
        problems = _from_jsonl(text, file)
    else:
        raise DatasetError(f"{file}: unknown extension {file.suffix!r} (use .csv or .jsonl)")
    if not problems:
        raise DatasetError(f"{file}: no problems")
    return problems[:limit] if limit is not None else problems


def resolve(path: str | Path) -> Path:
    """The file behind ``path``: an existing path as given, else a bundled set's name.

    >>> resolve("demo") == dataset_names()["demo"]
    True
    """
    file = Path(path)
    if file.exists():
        return file
    bundled = dataset_names()
    if str(path) in bundled:
        return bundled[str(path)]
    choices = ", ".join(bundled) or "none"
    raise DatasetError(f"{file}: no such file or bundled set (bundled: {choices})")


# ---- CSV ---------------------------------------------------------------------------------------------------


def _from_csv(text: str, file: Path) -> list[Problem]:
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise DatasetError(f"{file}: empty file") from None
    except csv.Error as exc:
        raise DatasetError(f"{file}: line 1: {exc}") from exc
    missing = [c for c in ("id", "problem") if c not in header]
    if missing:
        raise DatasetError(f"{file}: missing column {missing[0]!r} (columns: {', '.join(header)})")
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise DatasetError(f"{file}: line {reader.line_num}: {exc}") from exc
        line = reader.line_num
        if not any(cell.strip() for cell in row):
            continue  # blank line
        if len(row) != len(header):
            raise DatasetError(f"{file}: line {line}: {len(row)} fields, expected {len(header)}")
        cells = dict(zip(header, row))
        meta = {k: v for k, v in cells.items() if k not in ("id", "problem", "answer")}
        answer = cells.get("answer", "").strip() or None
        problems.append(_problem(file, line, cells["id"].strip(), cells["problem"], answer, meta, seen))
    return problems


# ---- JSONL -------------------------------------------------------------------------------------------------


def _from_jsonl(text: str, file: Path) -> list[Problem]:
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for line, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{file}: line {line}: not JSON ({exc.msg})") from exc
        if not isinstance(record, dict):
            raise DatasetError(f"{file}: line {line}: expected a JSON object")
        text_key = next((k for k in _TEXT_KEYS if k in record), None)
        if text_key is None:
            raise DatasetError(f"{file}: line {line}: missing 'problem' or 'question'")
        if not isinstance(record[text_key], str):
            raise DatasetError(f"{file}: line {line}: {text_key!r} must be text")
        id_key = next((k for k in _ID_KEYS if k in record), None)
        problem_id = _scalar(record[id_key], file, line, id_key) if id_key else str(len(problems))
        answer = _answer(record.get("answer"), file, line)
        meta = {k: _scalar(v, file, line, k) for k, v in record.items()
                if k not in _NOT_META and v is not None and not isinstance(v, (dict, list))}
        problems.append(_problem(file, line, problem_id, record[text_key], answer, meta, seen))
    return problems


def _answer(value: Any, file: Path, line: int) -> str | None:
    """The reference answer as text: numbers without a spurious ``.0``, GSM8K solutions cut to their final line.

    >>> _answer(27.0, Path("x"), 1), _answer("It is 3 + 4 = 7.\\n#### 1,007", Path("x"), 1)
    ('27', '1007')
    >>> _answer("\\\\frac{1}{2}", Path("x"), 1), _answer(None, Path("x"), 1)
    ('\\\\frac{1}{2}', None)
    """
    if value is None:
        return None
    if isinstance(value, str):
        final = _GSM8K_FINAL.search(value)
        if final is not None:
            value = final.group(1).replace(",", "").strip()
        value = value.strip()
        if not value:
            raise DatasetError(f"{file}: line {line}: empty answer")
        return value
    return _scalar(value, file, line, "answer")


def _scalar(value: Any, file: Path, line: int, key: str) -> str:
    """A JSON scalar as text; integral floats lose their ``.0``.

    >>> _scalar(3, Path("x"), 1, "level"), _scalar(2.5, Path("x"), 1, "a"), _scalar(60.0, Path("x"), 1, "id")
    ('3', '2.5', '60')
    """
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise DatasetError(f"{file}: line {line}: {key!r} must be text or a number")
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return str(int(value))
    return str(value).strip()


# ---- shared ------------------------------------------------------------------------------------------------


def _problem(file: Path, line: int, problem_id: str, text: str, answer: str | None, meta: dict[str, str],
             seen: dict[str, int]) -> Problem:
    if not problem_id:
        raise DatasetError(f"{file}: line {line}: empty id")
    if not text.strip():
        raise DatasetError(f"{file}: line {line}: empty problem text (id {problem_id})")
    if problem_id in seen:
        raise DatasetError(f"{file}: line {line}: duplicate id {problem_id!r} (first on line {seen[problem_id]})")
    seen[problem_id] = line
    meta = {"subset": file.stem, **meta}  # a set's name, so merged runs can be reported per set
    return Problem(id=problem_id, text=text.strip(), answer=answer, meta=meta)

