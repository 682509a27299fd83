"""The bundled replay corpus as a run whose repetitions call the python tool, so a replay runs every recorded
program in the real sandbox and votes with what the sandbox prints.

The corpus (``benchmarks/data/pot_aqua_dev.jsonl.gz``, see its README) holds, per AQuA-RAT question, 30 programs
written by code-davinci-002 in the Program-of-Thoughts style: plain Python that leaves its result in ``ans``, using
``math``, sympy's names and a ``solve_it`` helper the original harness provided, and an answer mapped to the
nearest of the question's five options (``predicted_answer``, 1-5, null when the program failed or no option was
near). Each sample becomes a two-turn repetition in the ``fences`` dialect:

- turn 0: a ```` ```python ```` block holding the recorded program and one added line,
  ``print(nearest_option(ans, [options]))``, that ended at the fence (the loop runs it);
- turn 1: empty; the model ends there, so the repetition's answer is the one the sandbox printed.

``PREAMBLE`` gives the sandbox the environment the programs were written for (sympy's names, ``solve_it``) and
``nearest_option``; ``solver/demo/run.py`` adds it to the replay's sandbox preamble. Each repetition also records
the corpus's own answer, which ``solver tune`` and ``solver simulate`` read. Run through the sandbox, every one of
the 2,640 programs gives the corpus's answer: the same option for the 1,170 that have one, none for the 1,470
without (replayed with stopping off, 2026-11-25; ``tests/test_demo.py`` checks the first questions' programs).
Four programs of aqua-90 are only a comment, ``# Answer: 2`` or the like: the answer reader takes that phrase as it
would from any model's text, so they vote (with the option's value, not its number) where the corpus has nothing.
"""

from __future__ import annotations

import gzip
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from solver.config import Config
from solver.core.answers import normalise
from solver.files import staged_dir
from solver.recordings import Sample, SampleFields, group_samples, parse_line
from solver.runlog import LOG_NAME, RunLog, encode_line
from solver.types import Answer, Problem, Repetition, Turn

CORPUS = Path(__file__).parents[2] / "benchmarks" / "data" / "pot_aqua_dev.jsonl.gz"
CORPUS_NAME = "88 AQuA questions x 30 programs by code-davinci-002 (Program of Thoughts, MIT)"
OPTION_TOLERANCE = 0.05  # an option farther than 5 % from the program's value is no match (the corpus's rule)

PREAMBLE = '''
from sympy import *


def solve_it(equations, variables):
    """The first solution sympy finds, as {variable: value}; every variable None when there is none."""
    found = solve(equations, variables, dict=True)
    if found:
        return found[0]
    return dict.fromkeys(variables if isinstance(variables, (list, tuple)) else [variables])


def nearest_option(ans, options, within=%r):
    """The number (1-5) of the option nearest to ans (the later one on a tie); the first value of a dict, tuple
    or list counts. ValueError when ans is no number or no option lies within the fraction ``within``."""
    if isinstance(ans, dict):
        ans = next(iter(ans.values()), None)
    elif isinstance(ans, (list, tuple)):
        ans = ans[0] if ans else None
    value = float(ans)
    best = None
    for number, option in enumerate(options, start=1):
        if option is not None and (best is None or abs(option - value) <= abs(options[best - 1] - value)):
            best = number
    if best is None or abs(options[best - 1] - value) > within * abs(options[best - 1]):
        raise ValueError(f"no option within {within:.0%%} of {value}")
    return best
''' % OPTION_TOLERANCE

_OPTION = re.compile(r"(?:^|\s)([A-E])\)")
_NUMBER = re.compile(r"-?(?:\d[\d,]*(?:\.\d+)?|\.\d+)")


def option_values(problem: str) -> tuple[float | None, ...]:
    """The value of each option after the question's last ``Options:``: its one number (thousands commas,
    currency and units dropped), None when it holds no number or several.

    >>> option_values("How much?\\nOptions: A)Rs. 697.50 B)$1,200 C)12km D)9 2 0 0 E)None of these")
    (697.5, 1200.0, 12.0, None, None)
    >>> option_values("No options here")
    ()
    """
    head, found, tail = problem.rpartition("Options:")
    if not found:
        return ()
    parts = _OPTION.split(tail)
    values: list[float | None] = []
    for text in parts[2::2]:
        numbers = _NUMBER.findall(text)
        values.append(float(numbers[0].replace(",", "")) if len(numbers) == 1 else None)
    return tuple(values)


def program_block(program: str, options: tuple[float | None, ...]) -> str:
    """Turn 0's text: the recorded program in a python fence with the line that prints the option it picks
    (the fence's closing ```` ``` ```` is the stop string, which the log keeps in ``Turn.appended``).

    >>> print(program_block("\\nans = 6 * 7", (42.0, None)), end="")
    ```python
    ans = 6 * 7
    print(nearest_option(ans, [42.0, None]))
    """
    return f"```python\n{program.strip(chr(10))}\nprint(nearest_option(ans, {list(options)!r}))\n"


def to_repetition(sample: Sample, index: int, options: tuple[float | None, ...], config: Config) -> Repetition:
    """The sample as a two-turn repetition (see the module's docstring); its answer is the corpus's own. The
    corpus has no timings or token counts: they are recorded as 0, so replay costs only what the sandbox takes."""
    code = Turn(text=program_block(sample.text, options), prompt_tokens=0, generated_tokens=0,
                finish_reason="stop", duration_s=0.0, appended="```\n")
    end = Turn(text="", prompt_tokens=0, generated_tokens=0, finish_reason="stop", duration_s=0.0)
    value = normalise(sample.answer, config.answers) if sample.answer is not None else None
    answers = () if value is None else (Answer(value, sample.answer or "", "code"),)
    return Repetition(problem_id=sample.problem_id, index=index, seed=index, status="done", turns=(code, end),
                      answers=answers, started_at=0.0, duration_s=0.0)


@dataclass(frozen=True)
class CorpusRun:
    run_dir: Path
    problems: int
    samples: int
    with_answer: int  # samples the corpus maps to an option


def read_corpus(path: Path = CORPUS) -> list[Sample]:
    """Every sample of the gzipped corpus, read through the sample importer's field rules."""
    samples: list[Sample] = []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                samples.extend(parse_line(json.loads(line), SampleFields(), f"{path} line {number}"))
    return samples


def write_corpus_run(out: Path, config: Config, path: Path = CORPUS, problems: int | None = None) -> CorpusRun:
    """Write ``out`` (which must not exist) as a run of the corpus, the first ``problems`` questions or all.

    Built in a temporary directory beside ``out`` and renamed into place, so it appears whole or not at all; the
    log's lines go down in one write and one fsync (the run log's per-record fsync costs ~6 ms a line on a
    shared disk, 17 s for the 2,728 lines here), as the same records ``RunLog`` writes."""
    groups = group_samples(read_corpus(path), path)
    chosen = list(groups.items())[:problems]
    lines: list[bytes] = []
    samples = with_answer = 0
    for pid, group in chosen:
        text = next((s.problem for s in group if s.problem), "")
        problem = Problem(pid, text, group[0].reference, {"imported_from": path.name})
        lines.append(encode_line("problem", problem))
        options = option_values(text)
        for index, sample in enumerate(group):
            rep = to_repetition(sample, index, options, config)
            lines.append(encode_line("repetition", rep))
            samples += 1
            with_answer += bool(rep.answers)
    with staged_dir(out) as run:  # the run appears whole or not at all
        RunLog.create(run, config).close()  # config.yaml, meta.json and an empty log
        with open(run / LOG_NAME, "ab") as handle:
            handle.write(b"".join(lines))
            handle.flush()
            os.fsync(handle.fileno())
    return CorpusRun(out, len(chosen), samples, with_answer)
