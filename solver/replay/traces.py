"""Real attempts recorded as harmony token ids, cut into the engine requests that made them.

A recorded attempt is a prompt (``prompt_ids``, the harmony render of the problem) and one completion
(``completion_ids``) that interleaves what the model generated with what its harness appended between requests:

    model tokens ... <|call|>                                  one request, ended by a stop token
    <|start|>python to=assistant<|channel|>analysis<|message|>OUTPUT<|end|><|start|>assistant
                                                               appended: the python tool's message, the next header
    model tokens ... <|return|>                                a request that ended without a tool call
    <|start|>user<|message|>FOLLOW-UP<|end|><|start|>assistant appended: the harness's follow-up
    model tokens ... \\boxed{42}                               the last request, cut by the harness (no stop token)

So request ``k`` was sent ``prompt_ids`` followed by every generated and appended id before it, and generated
``generated``. This module only cuts and labels; what a request means (its tool call's code, its answer) is the
dialect's reading (``solver.dialects.harmony``), as for a live repetition.

Files are JSON lines, plain or compressed (``.gz``, ``.xz``, ``.bz2``), one attempt a line with ``problem_id``,
``problem``, ``answer`` (the reference), ``prompt_ids``, ``completion_ids``, and optionally ``trace_answer`` (the
harness's own extraction), ``correct``, ``model``, ``source`` and ``tool_seconds`` (per request, the seconds its call
ran when measured for the extract). A fault is a ``TraceError`` naming the file and line. A file read again in the
same process, unchanged, is not parsed again (the dev extract takes about 8 s to read on 2 cores).

The recorded attempts a command reads by default (``attempts_path``): ``$SOLVER_ATTEMPTS``, else the dev extract of
recorded gpt-oss-120b attempts beside the checkout (``ATTEMPTS_FILE``, read from the checkout's root: the GPU
machine's shared data, never copied into the repository).
"""

from __future__ import annotations

import bisect
import bz2
import functools
import gzip
import io
import json
import lzma
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

from solver.errors import BadInput, first_line

RequestEnd = Literal["call", "return", "cut"]
"""call: ended on ``<|call|>``; return: ended on ``<|return|>``; cut: the record ends inside it (the harness
stopped the stream, at an answer or a limit)."""

# harmony's special tokens (o200k_harmony); fixed by the format, checked against openai_harmony in the tests.
START, END, MESSAGE, RETURN, CALL = 200006, 200007, 200008, 200002, 200012
STOPS = (CALL, RETURN)

_OPENERS = {".gz": gzip.open, ".xz": lzma.open, ".bz2": bz2.open}
ATTEMPTS_FILE = Path("../shared/data/replay/gptoss120b_aimo3_dev.jsonl.xz")  # the recorded attempts beside the checkout, not shipped


def attempts_path() -> Path:
    """The recorded attempts a command reads when it is given none: ``$SOLVER_ATTEMPTS`` when set (and not empty),
    else ``ATTEMPTS_FILE``: the recorded gpt-oss-120b attempts beside the checkout, where a machine that has them keeps
    them; the repository does not ship them. Nothing is read or checked here (the command says what is missing).

    >>> import os
    >>> before = os.environ.pop("SOLVER_ATTEMPTS", None)
    >>> attempts_path()
    PosixPath('../shared/data/replay/gptoss120b_aimo3_dev.jsonl.xz')
    >>> os.environ["SOLVER_ATTEMPTS"] = "~/data/slice.jsonl.xz"
    >>> attempts_path() == Path.home() / "data" / "slice.jsonl.xz"
    True
    >>> del os.environ["SOLVER_ATTEMPTS"]
    >>> if before is not None: os.environ["SOLVER_ATTEMPTS"] = before
    """
    value = os.environ.get("SOLVER_ATTEMPTS")
    return Path(value).expanduser() if value else ATTEMPTS_FILE


class TraceError(BadInput, ValueError):
    """A trace file that cannot be read; the message is one line naming the file (and line)."""


@dataclass(frozen=True)
class TraceRequest:
    """One engine request of a recorded attempt and what was appended after it."""

    generated: tuple[int, ...]  # the model's tokens, the stop token included
    end: RequestEnd
    appended: tuple[int, ...] = ()  # sent after it before the next request; empty after the last
    tool_output: str | None = None  # the python tool's message text, when the appended part holds one
    follow_up: str | None = None  # the user message text, when the appended part holds one


@dataclass(frozen=True)
class Attempt:
    """One recorded attempt at a problem."""

    problem_id: str
    problem: str
    answer: str | None  # the reference answer
    prompt_ids: tuple[int, ...]
    requests: tuple[TraceRequest, ...]
    trace_answer: str | None = None  # what the recording harness extracted
    correct: bool | None = None  # the recording harness's verdict
    model: str = ""
    source: str = ""
    tool_seconds: tuple[float, ...] | None = None  # per request, its call's measured seconds (0: no call); None: none

    @property
    def generated_tokens(self) -> int:
        return sum(len(r.generated) for r in self.requests)

    @property
    def context_tokens(self) -> int:
        """Prompt plus everything generated and appended: the context the attempt ended with."""
        return len(self.prompt_ids) + sum(len(r.generated) + len(r.appended) for r in self.requests)

    def prompt_of(self, index: int) -> tuple[int, ...]:
        """The token ids request ``index`` was sent."""
        ids = list(self.prompt_ids)
        for request in self.requests[:index]:
            ids += request.generated + request.appended
        return tuple(ids)


def _stop_positions(ids: Sequence[int]) -> list[int]:
    """Where the stop tokens are, in order: searched by ``index`` (a C loop; a Python loop over the dev file's
    completions took 1.3 s of its 8 s read).

    >>> _stop_positions((5, CALL, 7, RETURN, CALL))
    [1, 3, 4]
    """
    found = []
    for token in STOPS:
        at = -1
        while True:
            try:
                at = ids.index(token, at + 1)
            except ValueError:
                break
            found.append(at)
    return sorted(found)


def _header_end(ids: Sequence[int], at: int, assistant: int) -> int | None:
    """Where ``<|start|>assistant`` ends, searching from ``at`` (the index after it), or None."""
    for i in range(at, len(ids) - 1):
        if ids[i] == START and ids[i + 1] == assistant:
            return i + 2
    return None


def _messages(ids: Sequence[int], decode: Any) -> dict[str, str]:
    """The text of each message in an appended part, by its author's role: ``python`` or ``user``."""
    found: dict[str, str] = {}
    i = 0
    while i < len(ids):
        if ids[i] != START:
            i += 1
            continue
        try:
            body = ids.index(MESSAGE, i)
            end = ids.index(END, body)
        except ValueError:
            break
        header = decode(list(ids[i + 1 : body]))
        role = header.split(" ", 1)[0].split("<|", 1)[0]
        found[role] = decode(list(ids[body + 1 : end]))
        i = end + 1
    return found


def split_completion(ids: Sequence[int], decode: Any, assistant: int) -> tuple[TraceRequest, ...]:
    """Cut a completion into requests. ``decode`` turns ids into text (the harmony encoding's); ``assistant``
    is the id of the word ``assistant`` after ``<|start|>``.

    >>> from solver.dialects import load_encoding
    >>> enc = load_encoding()
    >>> ids = enc.encode("<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>analysis to=python "
    ...                  "code<|message|>1+1<|call|><|start|>python to=assistant<|channel|>analysis<|message|>2\\n"
    ...                  "<|end|><|start|>assistant<|channel|>final<|message|>\\\\boxed{2}", allowed_special="all")
    >>> [(r.end, r.tool_output, len(r.appended) > 0) for r in split_completion(ids, enc.decode, enc.encode("assistant")[0])]
    [('call', '2\\n', True), ('cut', None, False)]
    """
    out: list[TraceRequest] = []
    i, n = 0, len(ids)
    stops = _stop_positions(ids)
    while i < n:
        k = bisect.bisect_left(stops, i)
        stop = stops[k] if k < len(stops) else None
        if stop is None:
            out.append(TraceRequest(tuple(ids[i:]), "cut"))
            break
        end: RequestEnd = "call" if ids[stop] == CALL else "return"
        resume = _header_end(ids, stop + 1, assistant)
        if resume is None:  # the record ends after the stop token (nothing, or an unfinished appended part)
            out.append(TraceRequest(tuple(ids[i : stop + 1]), end, tuple(ids[stop + 1 :])))
            break
        appended = ids[stop + 1 : resume]
        messages = _messages(appended, decode)
        out.append(TraceRequest(tuple(ids[i : stop + 1]), end, tuple(appended), messages.get("python"),
                                messages.get("user")))
        i = resume
    return tuple(out)


def open_text(path: Path) -> IO[str]:
    """A text stream over a plain or compressed file (chosen by its suffix)."""
    opener = _OPENERS.get(path.suffix)
    if opener is None:
        return open(path, encoding="utf-8")  # noqa: SIM115 - the caller closes it
    return io.TextIOWrapper(opener(path, "rb"), encoding="utf-8")


def json_lines(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(where, record)`` for each non-empty line of a JSON-lines file, plain or compressed; a fault is a
    ``TraceError`` naming the file and line."""
    path = Path(path)
    try:
        with open_text(path) as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                where = f"{path} line {number}"
                try:
                    record = json.loads(line)
                except ValueError as exc:
                    raise TraceError(f"{where}: not valid JSON ({exc})") from exc
                if not isinstance(record, dict):
                    raise TraceError(f"{where}: expected a JSON object")
                yield where, record
    except (OSError, EOFError, UnicodeDecodeError, lzma.LZMAError) as exc:
        raise TraceError(f"{path}: cannot read: {first_line(exc)}") from exc


def is_trace(record: dict[str, Any]) -> bool:
    """Whether a record is a token trace (it has ``prompt_ids`` and ``completion_ids``)."""
    return "prompt_ids" in record and "completion_ids" in record


def _ids(record: dict[str, Any], key: str, where: str) -> tuple[int, ...]:
    """The record's ``key`` as token ids: a list of non-negative ints (not bools); else a ``TraceError``. Checked
    with ``map(type)`` and ``min`` (C loops: the dev file's 13 million ids in about 0.5 s, not 6).

    >>> _ids({"a": [3, 0]}, "a", "x"), _ids({"a": []}, "a", "x")
    ((3, 0), ())
    >>> for bad in ([1, True], [1, -2], [1.0], "12"):
    ...     try:
    ...         _ids({"a": bad}, "a", "x")
    ...     except TraceError as exc:
    ...         print(bad, exc)
    [1, True] x: a must be a list of token ids
    [1, -2] x: a must be a list of token ids
    [1.0] x: a must be a list of token ids
    12 x: a must be a list of token ids
    """
    value = record.get(key)
    if not isinstance(value, list) or (value and (set(map(type, value)) != {int} or min(value) < 0)):
        raise TraceError(f"{where}: {key} must be a list of token ids")
    return tuple(value)


def _text(value: Any) -> str | None:
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def attempt_from_record(record: dict[str, Any], where: str, decode: Any, assistant: int) -> Attempt:
    pid = _text(record.get("problem_id", record.get("id")))
    if pid is None:
        raise TraceError(f"{where}: no problem_id")
    problem = record.get("problem")
    if not isinstance(problem, str) or not problem.strip():
        raise TraceError(f"{where}: no problem text")
    correct = record.get("correct")
    seconds = record.get("tool_seconds")
    if seconds is not None and not (isinstance(seconds, list) and all(
            isinstance(x, (int, float)) and not isinstance(x, bool) and x >= 0 for x in seconds)):
        raise TraceError(f"{where}: tool_seconds must be a list of seconds >= 0")
    return Attempt(pid, problem, _text(record.get("answer")), _ids(record, "prompt_ids", where),
                   split_completion(_ids(record, "completion_ids", where), decode, assistant),
                   _text(record.get("trace_answer")), correct if isinstance(correct, bool) else None,
                   str(record.get("model") or ""), str(record.get("source") or ""),
                   None if seconds is None else tuple(float(x) for x in seconds))


def read_attempts(path: Path) -> list[Attempt]:
    """Every attempt in a trace file, in file order (the same attempts again while the file is unchanged)."""
    path = Path(path)
    try:
        stat = path.stat()
    except OSError as exc:
        raise TraceError(f"{path}: cannot read: {first_line(exc)}") from exc
    return list(_read_attempts(path.resolve(), stat.st_mtime_ns, stat.st_size))


@functools.lru_cache(maxsize=2)  # the attempts are frozen; the key holds the file's change time and size
def _read_attempts(path: Path, _mtime_ns: int, _size: int) -> tuple[Attempt, ...]:
    from solver.dialects import load_encoding

    enc = load_encoding()
    assistant = enc.encode("assistant", allowed_special="all")[0]
    attempts = []
    for where, record in json_lines(path):
        if not is_trace(record):
            raise TraceError(f"{where}: not a token trace (no prompt_ids and completion_ids)")
        attempts.append(attempt_from_record(record, where, enc.decode, assistant))
    if not attempts:
        raise TraceError(f"{path}: no attempts")
    return tuple(attempts)
