"""Replaying recorded work: the replay engine (recorded completions served again, timed as recorded, by a rate or
by an engine time model) with the sandbox that answers its calls from the recording, and the token traces of
recorded attempts.

Rooms: ``engine`` (``ReplayEngine``, its timing, the recorded outputs), ``traces`` (a recorded attempt cut into
its requests: ``Attempt``, ``read_attempts``). Outsiders import from here.
"""

from solver.replay.engine import (EngineTime, Key, RecordedOutputs, ReplayEngine, mark_served, problems_from_log,
                                  recorded_deltas, recorded_parts)
from solver.replay.traces import (CALL, END, MESSAGE, RETURN, START, Attempt, TraceError, is_trace, json_lines,
                                  read_attempts)

__all__ = ["CALL", "END", "MESSAGE", "RETURN", "START", "Attempt", "EngineTime", "Key", "RecordedOutputs",
           "ReplayEngine", "TraceError", "is_trace", "json_lines", "mark_served", "problems_from_log",
           "read_attempts", "recorded_deltas", "recorded_parts"]
