"""The run log: one append-only JSON-lines file per run (``log.jsonl``), written so a killed run can resume
without loss, beside the run's ``config.yaml`` and ``meta.json``.

Each line is one record ``{"type": "problem" | "repetition" | "result", "schema": 1, ...}``. The concerns live in
their own modules: ``codec`` (records <-> JSON, one codec for every record), ``reading`` (parsing, torn lines,
what a run needs of its records), ``files`` (the run directory's config and meta), ``appending`` (``RunLog``:
durable appends and resume) and ``report`` (a run's accuracy report as markdown, and the markdown table every
written report uses). A resumed run learns from the log how long its earlier sessions ran
(``spent_seconds``), so its time budget goes on from there.
"""

from solver.runlog.appending import RunLog
from solver.runlog.codec import (SCHEMA, RecordType, decode, encode, encode_line, problem_from_json, problem_to_json,
                                 repetition_from_json, repetition_to_json, result_from_json, result_to_json)
from solver.runlog.files import CONFIG_NAME, LOG_NAME, META_NAME, LogError, environment_meta
from solver.runlog.reading import RunRecords, finished_by_problem, read_log, spent_seconds
from solver.runlog.report import load_summary, markdown_table, render_report, summarise_records, write_report

__all__ = ["CONFIG_NAME", "LOG_NAME", "META_NAME", "SCHEMA", "LogError", "RecordType", "RunLog", "RunRecords",
           "decode", "encode", "encode_line", "environment_meta", "finished_by_problem", "load_summary",
           "markdown_table", "problem_from_json", "problem_to_json", "read_log", "render_report",
           "repetition_from_json", "repetition_to_json", "result_from_json", "result_to_json", "spent_seconds",
           "summarise_records", "write_report"]
