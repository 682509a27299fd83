"""Replaying recorded work: the replay engine (recorded completions served again, timed as recorded, by a rate or
by an engine time model), the one sandbox that answers calls from a recording, the token traces of recorded
attempts, and the check of the simulator against the pipeline replaying the same draws.

Rooms: ``replay_engine`` (``ReplayEngine``, its timing, its parts for a run: ``recorded_parts``), ``calls``
(``RecordedCalls``: each call answered as recorded, by the turn served last or by the call's code, timed on the loop
or in a real sandbox), ``traces`` (a recorded attempt cut into its requests: ``Attempt``, ``read_attempts``; where
the recorded attempts are: ``attempts_path``), ``check`` (``check_replay``: the running pipeline on the replay
engine against the simulator's prediction). Outsiders import from here, what they use.
"""

from solver.replay.calls import Key, RecordedCalls, mark_served
from solver.replay.check import check_replay
from solver.replay.replay_engine import problems_from_log, recorded_deltas, recorded_parts
from solver.replay.traces import Attempt, TraceError, attempts_path, is_trace, json_lines, read_attempts

__all__ = ["Attempt", "Key", "RecordedCalls", "TraceError", "attempts_path", "check_replay", "is_trace",
           "json_lines", "mark_served", "problems_from_log", "read_attempts", "recorded_deltas", "recorded_parts"]
