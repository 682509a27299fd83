"""The run log's records <-> JSON, through one codec driven by the records' own fields and types
(``solver.types``): every field of a ``Problem``, a ``Repetition`` (its ``Turn``s, ``Execution``s and ``Answer``s)
and a ``ProblemResult`` is written, and read back with its type; a field missing from an older line takes its
default, a key the record does not have is ignored. Pure: no file is touched here.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, TypeVar

from solver.types import Problem, ProblemResult, Repetition

SCHEMA = 1  # the line format; a reader refuses another
RecordType = Literal["problem", "repetition", "result"]
RECORDS: dict[RecordType, type] = {"problem": Problem, "repetition": Repetition, "result": ProblemResult}

T = TypeVar("T")
Reader = Callable[[Any], Any]


def encode(record: Any) -> dict[str, Any]:
    """A record as plain JSON data: every field, nested records as objects, tuples as lists.

    >>> from solver.types import Execution
    >>> encode(Execution("print(1)", "ok", "1\\n", "", 0.5, state_lost=True))["state_lost"]
    True
    """
    return {f.name: _plain(getattr(record, f.name)) for f in dataclasses.fields(record)}


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return encode(value)
    if isinstance(value, (tuple, list)):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    return value


def decode(cls: type[T], data: Any) -> T:
    """The record of type ``cls`` that ``data`` (JSON data) holds; ``KeyError``, ``TypeError`` or ``ValueError``
    when it is not one.

    >>> decode(Problem, {"id": 7, "text": "1+1?", "answer": "2", "extra": "ignored"})
    Problem(id='7', text='1+1?', answer='2', meta={})
    """
    return _record_reader(cls)(data)  # type: ignore[no-any-return]


@functools.cache
def _record_reader(cls: type) -> Reader:
    hints = typing.get_type_hints(cls)
    parts = [(f.name, _reader(hints[f.name]),
              f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
             for f in dataclasses.fields(cls)]

    def read(data: Any) -> Any:
        if not isinstance(data, Mapping):
            raise TypeError(f"a {cls.__name__} must be an object, not {type(data).__name__}")
        values = {}
        for name, reader, required in parts:
            if name in data:
                values[name] = reader(data[name])
            elif required:
                raise KeyError(f"{cls.__name__}.{name}")
        return cls(**values)

    return read


def _reader(hint: Any) -> Reader:
    """How to read one field's JSON value back into ``hint``'s type (numbers and ids coerced as the log always
    read them; a literal must be one of its values)."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"the run log cannot hold {hint}")
        read = _reader(inner[0])
        return lambda v: None if v is None else read(v)
    if origin is tuple:
        item = _reader(args[0])
        return lambda v: tuple(item(x) for x in _sequence(v))
    if origin in (dict, Mapping) or hint is dict:
        key, value = (_reader(args[0]), _reader(args[1])) if args else (str, lambda v: v)
        return lambda v: {key(k): value(x) for k, x in _mapping(v).items()}
    if origin is Literal:
        allowed = frozenset(args)
        return lambda v: _one_of(v, allowed)
    if dataclasses.is_dataclass(hint):
        return _record_reader(hint)
    if hint is bool:
        return _boolean
    if hint in (int, float):
        return lambda v: hint(_number(v))
    if hint is str:
        return str
    if hint is Any:
        return lambda v: v
    raise TypeError(f"the run log cannot hold {hint}")


def _sequence(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise TypeError(f"expected a list, got {type(value).__name__}")
    return value


def _mapping(value: Any) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise TypeError(f"expected an object, got {type(value).__name__}")
    return value


def _number(value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"expected a number, got {value!r}")
    return value


def _boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"expected true or false, got {value!r}")
    return value


def _one_of(value: Any, allowed: frozenset[Any]) -> Any:
    if value not in allowed:
        raise ValueError(f"{value!r} is not one of {sorted(allowed)}")
    return value


def encode_line(kind: RecordType, record: Any) -> bytes:
    """One log line for ``record``, newline-terminated (json escapes newlines inside strings, so a line is a
    record).

    >>> encode_line("problem", Problem("p1", "x\\ny"))
    b'{"type": "problem", "schema": 1, "id": "p1", "text": "x\\\\ny", "answer": null, "meta": {}}\\n'
    """
    body = {"type": kind, "schema": SCHEMA, **encode(record)}
    return (json.dumps(body, ensure_ascii=False) + "\n").encode("utf-8")


# The names the record types had before this codec, for callers and scripts that use them.
problem_to_json = repetition_to_json = result_to_json = encode


def problem_from_json(data: Mapping[str, Any]) -> Problem:
    return decode(Problem, data)


def repetition_from_json(data: Mapping[str, Any]) -> Repetition:
    return decode(Repetition, data)


def result_from_json(data: Mapping[str, Any]) -> ProblemResult:
    return decode(ProblemResult, data)
