"""The former home of a run's accuracy report, kept so that ``from solver.report import ...`` goes on working: the
grading and the statistics live in ``solver.core.grading``, the markdown in ``solver.runlog`` (``report``). Nothing
is defined here; new code imports from those homes."""

from solver.core.grading import (Grader, GradedRepetition, ProblemSummary, RunSummary, grade_repetitions,
                                 group_by_meta, pass_at_k, summarise, wilson_interval)
from solver.runlog import load_summary, markdown_table, render_report, summarise_records, write_report

__all__ = ["GradedRepetition", "Grader", "ProblemSummary", "RunSummary", "grade_repetitions", "group_by_meta",
           "load_summary", "markdown_table", "pass_at_k", "render_report", "summarise", "summarise_records",
           "wilson_interval", "write_report"]
