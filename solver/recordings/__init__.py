"""Recordings: other tools' samples and real attempts (harmony token traces) brought into the run-log format, turn
by turn through the loop's own repetition code.

- ``importer``: ``solver import-samples`` (sample files and trace files, plain or compressed);
- ``trace_import``: an attempt replayed through the loop's repetition code, checked token for token;
- ``tool_times``: every recorded call run again in the preset's sandbox, its seconds logged.

The traces themselves (``Attempt``, ``read_attempts``) are the replay room's (``solver.replay``); recorded attempts
as a workload on a real engine are the measurement wing's (``solver.measure``).
Outsiders import from here, what they use; the modules behind it are this package's own.
"""

from solver.recordings.importer import (Sample, SampleFields, SampleImportError, group_samples, holds_traces,
                                        import_samples, parse_line)
from solver.recordings.tool_times import measure_calls

__all__ = ["Sample", "SampleFields", "SampleImportError", "group_samples", "holds_traces", "import_samples",
           "measure_calls", "parse_line"]
