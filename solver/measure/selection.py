"""The recorded attempts a measurement plays: which file, which problems, how many attempts each, the token cap and
where the calls' seconds come from. ``solver day`` and the real shape (``engine.py --workload real``, ``layouts.py
scaling``) take them by the same flags; ``attempt_selection`` checks them once, with the one default attempts file
(``solver.replay.attempts_path``), into an ``AttemptSelection``, which plans them (``plan_selection``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from solver.errors import BadInput
from solver.measure.tool_seconds import TOOL_TIME_MODES, ToolTimeMode, tool_time_mode, tool_time_seconds
from solver.measure.workload import Caps, Replay, plan

if TYPE_CHECKING:
    from solver.config import Config
    from solver.dryrun import DryRun


@dataclass(frozen=True)
class AttemptSelection:
    """The attempts a measurement plays, checked (``attempt_selection``). Tokens are decoded tokens.

    >>> s = AttemptSelection(Path("x.jsonl.xz"), 3, (), 8, 6000, "0.5", 0.5, True)
    >>> s.caps().line()
    '3 problems x 8 attempts; per attempt: tokens <= 6000, requests uncapped'
    >>> AttemptSelection(Path("x"), 3, ("b", "a"), 2, None, "auto", None, True).caps(at_limit="length").problems
    2
    """

    attempts_file: Path  # the recorded attempts (the default file where the flag was left out)
    problems: int  # the first N problems with at least ``attempts`` attempts, one after another (>= 1)
    problem_ids: tuple[str, ...]  # these problems, in order (empty: the first ``problems``)
    attempts: int  # per problem, all at once (>= 1)
    attempt_tokens: int | None  # cap: tokens decoded per attempt (None: only the config's limits)
    tool_time: ToolTimeMode | str  # as given: a mode, or seconds per call
    tool_s: float | None  # seconds per call where ``tool_time`` gives them, else None
    attempts_here: bool  # the file is on this machine (a dry run of a GPU machine's command may lack it)

    def caps(self, attempt_requests: int | None = None,
             at_limit: Literal["answer", "length"] = "answer") -> Caps:
        """The plan's caps: the problems (the given ids, else the first ``problems``), attempts and tokens, with the
        measurement's own ``attempt_requests`` cap and where the config's limits end an attempt (``Caps``)."""
        only = self.problem_ids
        return Caps(len(only) or self.problems, self.attempts, self.attempt_tokens, attempt_requests, only,
                    at_limit=at_limit)


def attempt_selection(*, attempts_file: Path | None, problems: int, problem_ids: str, attempts: int,
                      attempt_tokens: int | None, tool_time: str, dry: DryRun | None) -> AttemptSelection:
    """The flags (as both commands name them) checked and completed: counts >= 1, ``--tool-time`` a mode or seconds,
    the default attempts file, the file there; ``BadInput`` (one line) before anything heavy starts. ``dry``: the
    command's ``DryRun``, which skips a file only the GPU machine has (``attempts_here`` False), or None.

    >>> attempt_selection(attempts_file=Path("x"), problems=0, problem_ids="", attempts=8, attempt_tokens=None,
    ...                   tool_time="auto", dry=None)
    Traceback (most recent call last):
    ...
    solver.errors.BadInput: --problems must be >= 1
    """
    for name, value in (("problems", problems), ("attempts", attempts), ("attempt_tokens", attempt_tokens)):
        if value is not None and value < 1:
            raise BadInput(f"--{name.replace('_', '-')} must be >= 1")
    tool_s = None if tool_time in TOOL_TIME_MODES else tool_time_seconds(tool_time, BadInput)
    if attempts_file is None:
        from solver.replay import attempts_path

        attempts_file = attempts_path()
    attempts_here = dry.present(attempts_file, "--attempts-file", BadInput) if dry else True
    if attempts_here and not attempts_file.is_file():
        raise BadInput(f"--attempts-file: no file {attempts_file}")
    ids = tuple(p.strip() for p in problem_ids.split(",") if p.strip())
    return AttemptSelection(attempts_file, problems, ids, attempts, attempt_tokens, tool_time, tool_s, attempts_here)


def plan_selection(selection: AttemptSelection, caps: Caps, config: Config) -> tuple[list[list[Replay]], str]:
    """The selection's replays under ``caps`` and ``config``'s limits, and ``--tool-time`` resolved (``auto``: the
    file's carried seconds when it has them, else ``measure``); the replays keep the carried seconds when those are
    the ones used. Bad input (``TraceError``, ``PlanError``, a mode the file cannot give) raises."""
    from solver.replay import read_attempts

    recorded = read_attempts(selection.attempts_file)
    carried = [attempt.tool_seconds for attempt in recorded]
    mode = tool_time_mode(selection.tool_time, carried, selection.attempts_file, BadInput)
    return plan(recorded, caps, config, carried=mode == "carried"), mode
