"""Recordings: other tools' samples and real attempts (harmony token traces) brought into the run-log format, turn
by turn through the loop's own repetition code, with their tool calls' seconds re-measured in our sandbox.

- ``importer``: ``solver import-samples`` (sample files and trace files, plain or compressed);
- ``traces``: a token trace cut into its requests (``Attempt``);
- ``trace_import``: an attempt replayed through the loop's repetition code, checked token for token;
- ``tool_times``: every recorded call run again in the preset's sandbox, its seconds logged;
- ``attempts``: recorded attempts as a replay plan, replayed on a real engine (``replay_on_engine``) with their
  calls answered from the recording (``RecordedCalls``): the day rehearsal's and the benchmarks' workload.

Outsiders import from here; the modules behind it are this package's own.
"""

from solver.recordings.attempts import (DEFAULT_ATTEMPTS_FILE, STARTER_CELL, TOOL_TIME_MODES, AttemptsOnEngine,
                                        Caps, HarmonyEndings, PlanError, RecordedCalls, Replay, carried_tool_times,
                                        choose, fixed_tool_times, key_of, measure_tool_times, plan, plan_summary,
                                        preset_engine,
                                        read_tool_seconds, recorded_code, replay_on_engine, tool_time_mode,
                                        tool_time_seconds, warm_up, with_tool_times)
from solver.recordings.importer import (Sample, SampleFields, SampleImportError, group_samples, holds_traces,
                                        import_samples, parse_line)
from solver.recordings.tool_times import measure_calls
from solver.recordings.trace_import import turn_seconds
from solver.recordings.traces import CALL, END, MESSAGE, RETURN, START, Attempt, TraceError, json_lines, read_attempts

__all__ = ["DEFAULT_ATTEMPTS_FILE", "STARTER_CELL", "TOOL_TIME_MODES", "AttemptsOnEngine", "Caps", "HarmonyEndings",
           "PlanError", "RecordedCalls", "Replay", "carried_tool_times", "choose", "fixed_tool_times", "key_of",
           "measure_tool_times", "plan", "plan_summary", "preset_engine", "read_tool_seconds", "recorded_code", "replay_on_engine",
           "tool_time_mode", "tool_time_seconds", "warm_up", "with_tool_times",
           "CALL", "END", "MESSAGE", "RETURN", "START", "Attempt", "Sample", "SampleFields", "SampleImportError",
           "TraceError", "group_samples", "holds_traces", "import_samples", "json_lines", "measure_calls",
           "parse_line", "read_attempts", "turn_seconds"]
