"""Replaying recorded work: the replay engine (recorded completions served again, timed as recorded, by a rate or
by an engine time model), the one sandbox that answers calls from a recording, and the token traces of recorded
attempts. It runs no loop: a run on the replay engine is the loop's, and the check of the simulator against it the
measurement wing's (``solver.measure.check_replay``).

Rooms: ``replay_engine`` (``ReplayEngine``, its timing, its parts for a run: ``recorded_parts``), ``calls``
(``RecordedCalls``: each call answered as recorded, by the turn served last or by the call's code, timed on the loop
or in a real sandbox), ``traces`` (a recorded attempt cut into its requests: ``Attempt``, ``read_attempts``; where
the recorded attempts are: ``attempts_path``). Outsiders import from here, what they use.
"""

from solver.replay.calls import Key, RecordedCalls, mark_served
from solver.replay.replay_engine import EngineTime, ReplayEngine, problems_from_log, recorded_deltas, recorded_parts
from solver.replay.traces import Attempt, TraceError, attempts_path, is_trace, json_lines, read_attempts

__all__ = ["Attempt", "EngineTime", "Key", "RecordedCalls", "ReplayEngine", "TraceError", "attempts_path", "is_trace",
           "json_lines", "mark_served", "problems_from_log", "read_attempts", "recorded_deltas", "recorded_parts"]
