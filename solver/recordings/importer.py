"""Import other tools' sample files (JSON lines, plain or ``.gz`` / ``.xz`` / ``.bz2``) as a run directory in this
solver's log format, so their samples can be replayed and simulated like our own.

Two kinds of file, told apart by their first record:

- Samples: one input line is one sample (or several, when its text / answer fields hold lists, as Qwen2.5-Math's
  evaluation output does), imported as a one-turn repetition. Field names are looked up from a list of common
  spellings unless given explicitly.
- Token traces (records with ``prompt_ids`` and ``completion_ids``: real attempts in the harmony format,
  ``solver.replay.traces``): each attempt becomes a repetition turn by turn, as the loop logs one
  (``solver.recordings.trace_import``).

Any fault in the file is a ``SampleImportError`` with one line naming the file and line; nothing is left behind
(the run is built in a temporary directory beside the target and renamed into place at the end).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from solver.core.answers import extract_answers, normalise
from solver.config import AnswerConfig, Config
from solver.errors import BadInput
from solver.files import staged_dir
from solver.replay import TraceError, is_trace, json_lines
from solver.runlog import META_NAME, RunLog
from solver.types import Answer, Problem, Repetition, Turn


class SampleImportError(BadInput, ValueError):
    """A sample file that cannot be imported; the message is one line naming the file (and line)."""


@dataclass(frozen=True)
class SampleFields:
    """Where each value lives in an input line: the first name present wins. A one-name tuple makes it strict."""

    problem_id: tuple[str, ...] = ("problem_id", "id", "idx", "question_id", "unique_id")
    problem: tuple[str, ...] = ("problem", "question")
    text: tuple[str, ...] = ("generation", "text", "response", "output", "completion", "code")
    answer: tuple[str, ...] = ("predicted_answer", "pred", "prediction", "extracted_answer", "final_answer")
    reference: tuple[str, ...] = ("expected_answer", "reference", "gt", "gold", "ground_truth", "answer")
    tokens: tuple[str, ...] = ("num_generated_tokens", "generated_tokens", "num_tokens", "tokens")
    duration: tuple[str, ...] = ("duration_s", "generation_time", "latency_s")

    @classmethod
    def with_overrides(cls, **names: str | None) -> SampleFields:
        """Defaults, with the given fields pinned to one name each (None leaves the default list).

        >>> SampleFields.with_overrides(text="sample", answer=None).text
        ('sample',)
        """
        base = cls()
        pinned = {k: (v,) for k, v in names.items() if v is not None}
        return cls(**{**{k: getattr(base, k) for k in base.__dataclass_fields__}, **pinned})


@dataclass(frozen=True)
class Sample:
    problem_id: str
    problem: str | None
    text: str
    answer: str | None  # the sample's final answer as the tool gave it, before normalising
    reference: str | None
    tokens: int | None
    duration_s: float | None


def _first(record: dict[str, Any], names: Sequence[str]) -> Any:
    for name in names:
        if name in record and record[name] is not None:
            return record[name]
    return None


def _as_list(value: Any, n: int | None) -> list[Any]:
    if isinstance(value, list):
        return value
    return [value] * (n or 1)


def _scalar_text(value: Any, what: str, where: str) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise SampleImportError(f"{where}: {what} must be text or a number")
    if isinstance(value, float) and value.is_integer():
        return str(int(value))  # 27.0 -> "27": references stored as floats (AMC files) are integers
    return str(value)


def parse_line(record: dict[str, Any], fields: SampleFields, where: str) -> list[Sample]:
    """The samples one input record holds (one, or one per list element).

    >>> f = SampleFields()
    >>> [(s.problem_id, s.answer, s.reference) for s in parse_line({"idx": 3, "pred": ["5", "6"], "gt": 5}, f, "x")]
    [('3', '5', '5'), ('3', '6', '5')]
    >>> parse_line({"id": "a"}, f, "file line 1")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    solver.recordings.importer.SampleImportError: file line 1: no sample text or answer (looked for generation, text, ...)
    """
    pid = _scalar_text(_first(record, fields.problem_id), "the problem id", where)
    if pid is None:
        raise SampleImportError(f"{where}: no problem id (looked for {', '.join(fields.problem_id)})")
    texts, answers = _first(record, fields.text), _first(record, fields.answer)
    if texts is None and answers is None:
        raise SampleImportError(f"{where}: no sample text or answer (looked for "
                                f"{', '.join(fields.text + fields.answer)})")
    lengths = {len(v) for v in (texts, answers) if isinstance(v, list)}
    if len(lengths) > 1:
        raise SampleImportError(f"{where}: sample text and answer lists differ in length")
    n = lengths.pop() if lengths else None
    tokens = _first(record, fields.tokens)
    text_list = _as_list(texts, n)
    answer_list = _as_list(answers, n)
    token_list = _as_list(tokens, n) if not isinstance(tokens, list) or len(tokens) == (n or 1) else None
    if token_list is None:
        raise SampleImportError(f"{where}: token counts do not match the samples")
    problem = _first(record, fields.problem)
    reference = _scalar_text(_first(record, fields.reference), "the reference answer", where)
    duration = _first(record, fields.duration)
    out = []
    for text, answer, count in zip(text_list, answer_list, token_list):
        if text is not None and not isinstance(text, str):
            raise SampleImportError(f"{where}: sample text must be text")
        if count is not None and (isinstance(count, bool) or not isinstance(count, (int, float)) or count < 0):
            raise SampleImportError(f"{where}: token count must be a non-negative number")
        if duration is not None and (isinstance(duration, bool) or not isinstance(duration, (int, float))):
            raise SampleImportError(f"{where}: duration must be a number of seconds")
        out.append(Sample(pid, problem if isinstance(problem, str) else None, text or "",
                          _scalar_text(answer, "the sample answer", where), reference,
                          None if count is None else int(count), None if duration is None else float(duration)))
    return out


def sample_answers(sample: Sample, rules: AnswerConfig) -> tuple[Answer, ...]:
    """The sample's given final answer when it has one (normalised), else the candidates found in its text.

    >>> rules = AnswerConfig()
    >>> sample_answers(Sample("p", None, "so \\\\boxed{12}", "012", None, None, None), rules)
    (Answer(value='12', raw='012', source='boxed'),)
    >>> [a.value for a in sample_answers(Sample("p", None, "so \\\\boxed{12}", None, None, None, None), rules)]
    ['12']
    """
    if sample.answer is not None:
        value = normalise(sample.answer, rules)
        return () if value is None else (Answer(value, sample.answer, "boxed"),)
    return extract_answers(sample.text, rules)


def to_repetition(sample: Sample, index: int, rules: AnswerConfig) -> Repetition:
    """A one-turn repetition; unknown token counts and durations are recorded as 0."""
    tokens = sample.tokens or 0
    duration = sample.duration_s or 0.0
    turn = Turn(text=sample.text, prompt_tokens=0, generated_tokens=tokens, finish_reason="stop",
                duration_s=duration)
    return Repetition(problem_id=sample.problem_id, index=index, seed=index, status="done", turns=(turn,),
                      answers=sample_answers(sample, rules), started_at=0.0, duration_s=duration)


def read_samples(path: Path, fields: SampleFields) -> list[Sample]:
    samples: list[Sample] = []
    for where, record in json_lines(path):
        if is_trace(record):
            raise SampleImportError(f"{where}: a token trace among samples (a file holds one kind)")
        samples.extend(parse_line(record, fields, where))
    if not samples:
        raise SampleImportError(f"{path}: no samples")
    return samples


def group_samples(samples: Sequence[Sample], path: Path) -> dict[str, list[Sample]]:
    """Samples per problem in file order; the reference answer must agree within a problem."""
    groups: dict[str, list[Sample]] = {}
    for s in samples:
        group = groups.setdefault(s.problem_id, [])
        if group and s.reference != group[0].reference:
            raise SampleImportError(f"{path}: problem {s.problem_id!r} has two reference answers "
                                    f"({group[0].reference!r} and {s.reference!r})")
        group.append(s)
    return groups


@dataclass(frozen=True)
class ImportSummary:
    run_dir: Path
    problems: int
    samples: int
    without_answer: int  # samples that gave no usable answer under the answer rules
    kind: str = "samples"  # samples | attempts (token traces)
    turns: int = 0  # engine requests over all repetitions
    shortened: int = 0  # attempts the dialogue ended before the recording did (an answer the harness missed)


def holds_traces(path: Path) -> bool:
    """Whether the file's first record is a token trace (False for an empty file: it has no samples either)."""
    for _where, record in json_lines(path):
        return is_trace(record)
    return False


def _sample_run(path: Path, config: Config, fields: SampleFields) -> tuple[list[Problem], list[Repetition]]:
    groups = group_samples(read_samples(path, fields), path)
    problems = [Problem(pid, next((s.problem for s in group if s.problem), ""), group[0].reference,
                        {"imported_from": path.name}) for pid, group in groups.items()]
    reps = [to_repetition(sample, index, config.answers) for group in groups.values()
            for index, sample in enumerate(group)]
    return problems, reps


def _trace_run(path: Path, config: Config, tokens_per_s: float | None) -> tuple[list[Problem], list[Repetition], int]:
    from solver.recordings.trace_import import TraceImportError, import_attempts
    from solver.replay import read_attempts

    if config.prompt.dialect != "harmony":
        raise SampleImportError(f"{path}: token traces are read with the harmony dialect, not "
                                f"{config.prompt.dialect} (use the preset the attempts were recorded with, e.g. "
                                "--preset h100-gptoss)")
    attempts = read_attempts(path)
    problems: dict[str, Problem] = {}
    for attempt in attempts:
        known = problems.setdefault(attempt.problem_id, Problem(attempt.problem_id, attempt.problem, attempt.answer,
                                                                {"imported_from": path.name}))
        if known.answer != attempt.answer:
            raise SampleImportError(f"{path}: problem {attempt.problem_id!r} has two reference answers "
                                    f"({known.answer!r} and {attempt.answer!r})")
    located = [(f"{path} attempt {i} (problem {a.problem_id})", a) for i, a in enumerate(attempts, start=1)]
    try:
        imported = import_attempts(located, config, tokens_per_s)
    except TraceImportError as exc:
        raise SampleImportError(str(exc)) from exc
    return list(problems.values()), [i.repetition for i in imported], sum(i.left_out > 0 for i in imported)


def import_samples(path: Path, out: Path, config: Config, fields: SampleFields = SampleFields(),
                   tokens_per_s: float | None = None, measure_tools: bool = False,
                   on_measured: Callable[[int], None] | None = None) -> ImportSummary:
    """Write ``out`` as a run of the samples or token traces in ``path``; ``out`` must not exist yet.
    ``tokens_per_s`` times imported attempts' turns (``trace_import.turn_seconds``); ``measure_tools`` runs every
    imported call's code again in the config's sandbox and records its seconds (``tool_times``), calling
    ``on_measured(i)`` as attempt ``i`` is done."""
    path, out = Path(path), Path(out)
    if out.exists():
        raise SampleImportError(f"{out} already exists; choose a new directory")
    if tokens_per_s is not None and not tokens_per_s > 0:
        raise SampleImportError(f"tokens per second must be > 0, got {tokens_per_s}")
    try:
        traces = holds_traces(path)
        if measure_tools and not traces:
            raise SampleImportError(f"{path}: --measure-tools needs token traces (samples record no tool calls)")
        problems, reps, shortened = _trace_run(path, config, tokens_per_s) if traces else \
            (*_sample_run(path, config, fields), 0)
    except TraceError as exc:
        raise SampleImportError(str(exc)) from exc
    if measure_tools:
        from solver.recordings.tool_times import measure_repetitions

        reps = measure_repetitions(reps, config.sandbox, on_attempt=on_measured)
    by_problem: dict[str, list[Repetition]] = {}
    for rep in reps:
        by_problem.setdefault(rep.problem_id, []).append(rep)
    with staged_dir(out) as run:  # the run appears whole or not at all
        with RunLog.create(run, config) as log:
            for problem in problems:
                log.append_problem(problem)
                for rep in by_problem.get(problem.id, []):
                    log.append(rep)
        meta_path = run / META_NAME
        meta = json.loads(meta_path.read_text())
        meta["imported_from"] = str(path.resolve())
        meta_path.write_text(json.dumps(meta, indent=2) + "\n")
    return ImportSummary(out, len(problems), len(reps), sum(not r.answers for r in reps),
                         "attempts" if traces else "samples", sum(len(r.turns) for r in reps), shortened)
