"""``solver import-samples FILE --out RUN_DIR``: turn another tool's JSONL samples, or real attempts recorded as
harmony token traces, into a replayable run."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

EXIT_BAD_INPUT = 2


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    from solver.commands.common import preset_list

    parser = subparsers.add_parser(
        "import-samples", help="import a JSONL file of samples or token traces as a run directory",
        description="Read one sample per line (problem id, sample text and/or final answer, reference answer, "
                    "optional token count) and write RUN_DIR in the solver's log format, for replay and "
                    "simulate. Field names default to common spellings; pin them with the --*-field flags. "
                    "A file of harmony token traces (records with prompt_ids and completion_ids: real gpt-oss "
                    "attempts) imports each attempt turn by turn, read by the preset's harmony dialect.")
    parser.add_argument("file", type=Path, help="JSON-lines file, plain or .gz/.xz/.bz2")
    parser.add_argument("--out", type=Path, required=True, help="run directory to create (must not exist)")
    parser.add_argument("--preset", default=None,
                        help=f"config preset whose answer rules grade the samples and whose dialect reads the traces: "
                             f"{preset_list()} (default: tiny for samples, h100-gptoss for token traces)")
    parser.add_argument("--tokens-per-s", type=float, default=None, metavar="RATE",
                        help="token traces: log each turn as taking its generated tokens at this rate (default 0 s)")
    parser.add_argument("--measure-tools", action="store_true",
                        help="token traces: run every recorded call's code again in the preset's sandbox (a stateful "
                             "session per attempt, its time limit) and record each call's seconds; the recorded "
                             "outputs stay what the model saw (a few minutes to an hour: the calls that reach the "
                             "limit take it)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a config key, e.g. --set answers.modulus=1000")
    for name, example in (("id", "problem_id"), ("problem", "problem"), ("text", "generation"),
                          ("answer", "predicted_answer"), ("reference", "expected_answer"),
                          ("tokens", "num_generated_tokens"), ("duration", "duration_s")):
        parser.add_argument(f"--{name}-field", default=None, help=f"field holding the {name} (e.g. {example})")
    parser.set_defaults(func=run)


def measured_progress() -> Callable[[int], None]:
    """A line on stderr every 25 attempts measured (the measurement can take an hour)."""
    done = 0

    def note(_index: int) -> None:
        nonlocal done
        done += 1
        if done % 25 == 0:
            print(f"tool times: {done} attempts measured", file=sys.stderr, flush=True)

    return note


def run(args: argparse.Namespace) -> int:
    import yaml

    from solver.config import ConfigError, gpu_preset, load_config, parse_overrides
    from solver.recordings import SampleFields, SampleImportError, holds_traces, import_samples
    from solver.replay import TraceError
    from solver.runlog import LogError

    try:
        overrides = parse_overrides(args.overrides)
        if args.tokens_per_s is not None and not args.tokens_per_s > 0:
            raise ConfigError(f"--tokens-per-s must be > 0, got {args.tokens_per_s}")
        preset = gpu_preset(args.preset, holds_traces(args.file))  # token traces: gpt-oss's, read by its preset
        config = load_config(preset, overrides={"engine.name": "replay", **overrides})
        fields = SampleFields.with_overrides(problem_id=args.id_field, problem=args.problem_field,
                                             text=args.text_field, answer=args.answer_field,
                                             reference=args.reference_field, tokens=args.tokens_field,
                                             duration=args.duration_field)
        summary = import_samples(args.file, args.out, config, fields, args.tokens_per_s, args.measure_tools,
                                 measured_progress() if args.measure_tools else None)
    except (ConfigError, SampleImportError, TraceError, LogError, yaml.YAMLError) as exc:
        print(f"solver: error: {str(exc).splitlines()[0]}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if summary.kind == "attempts":
        notes = [f"{summary.without_answer} without an answer"] if summary.without_answer else []
        if summary.shortened:
            notes.append(f"{summary.shortened} ended at an answer before the recording did")
        print(f"imported {summary.samples} attempts ({summary.turns} turns) of {summary.problems} problems into "
              f"{summary.run_dir}" + (f" ({'; '.join(notes)})" if notes else ""))
    else:
        print(f"imported {summary.samples} samples of {summary.problems} problems into {summary.run_dir}"
              + (f" ({summary.without_answer} without a usable answer)" if summary.without_answer else ""))
    return 0
