"""A Kaggle day rehearsed at full length on one engine (``solver day``, ``benchmarks/day.py``): recorded attempts
through the Kaggle path, problem after problem, one device call after another.

Each problem of the slice goes through the real ``KagglePredictor``, called once per problem as the gateway calls
it: its ``BudgetManager`` hands the problem its deadline, its ``EngineSupervisor`` builds the engine on the first
call and rebuilds it after a death. The engine is the preset's, made to follow recorded gpt-oss-120b attempts
(``solver.measure.replay_on_engine``: each request decodes the recorded number of tokens, then a scripted call or
answer); each tool call answers with the recorded output after the seconds it was measured to take (carried with the
extract: ``benchmarks/extract_attempts.py --measure-tools``; ``solver.measure.recorded_calls``); the config's own
limits end an attempt where they end a live one (``Caps.at_limit`` "length": 60k tokens per attempt, 32k per
request, 65k context in ``h100-gptoss``). ``--rules`` says what acts:

  kaggle  the preset's rules as on Kaggle: the first-answer cut, the stopper (``agree:4``) cancelling the rest, and
          the budget's clamp with each problem's deadline. The day is the preset's scaled to the slice (total,
          reserve and cutoff times N / ``budget.problems``; the per-problem floor and cap as they are);
  stop    the same without deadlines (a 5-hour day for the slice): the preset variants' comparison;
  none    every attempt to its end.

One device call is one command, the same for every call of a slice:

- one engine start; problems play in order while the time model says the next one ends before ``--until`` seconds
  after the process started (its prediction with the rules and its deadline, and an engine start where one is
  due, times ``--safety``); ``--max-problems`` caps a call;
- each finished problem goes to ``--json`` as it finishes (atomically); ``--resume`` continues that file with the
  same plan and seeds (the day's clock goes on from where the last call stopped; a problem interrupted mid-way is
  played again whole); past ``--hard-stop`` the problem in flight is abandoned, its partial timeline kept, every
  process of the run killed, exit 3;
- ``--kill-engine-at P:S`` kills vLLM's engine core process (V1 runs it in a child process) S seconds into problem
  P (an id, or its position in the slice): the supervisor rebuilds the engine at the next problem, and the JSON
  says how the problem in flight was answered, whether the run log lost anything, and the rebuild's seconds;
- ``--label L --table T``: the run's row, labelled, goes into one table JSON (a variant per row, printed together);
- ``--estimate``: the time model's prediction per problem and how the slice splits into calls; starts nothing.

Per problem the JSON and the printed table give the seconds and decoded tokens, attempts finished and cancelled,
the prefix-cache hit rate, preemptions and KV peak (the engine's metrics, polled), whether the deadline cut it,
the stop reason and the answer; with each problem's request timeline and metrics series
(``solver.measure.request_timeline``).

    solver day --attempts-file X --problems 2 --attempts 4 --attempt-tokens 300 --json /tmp/day.json --resume
    solver day --gpu --model M --attempts-file X --problems 6 --until 520 --json .gpu/day/slice.json --resume

Its parts: ``day_options`` (the flags as a typed ``DayOptions``, checked once; the slice's config and plan),
``day_model`` (each problem on the engine time model: what fits a call, ``--estimate``), ``day_call`` (one device
call: the predictor, its engine and the state file), ``day_table`` (the records and tables), ``day_processes``
(the engine killed, what is left running).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from solver.errors import BadInput
from solver.measure.day.call import DayCall
from solver.measure.day.model import estimate, time_model
from solver.measure.day.options import DayOptions, day_config, load_plan
from solver.measure.day.processes import kill_descendants, log_engine, still_running
from solver.measure.day.table import COLUMNS, print_table, table_row, upsert_row

if TYPE_CHECKING:
    from solver.dryrun import DryRun


def dry_run(options: DayOptions, dry: DryRun) -> int:
    """``--dry-run``: the slice planned (where the attempts file is here, its calls not measured), the config of the
    day, the model; nothing started. With ``--estimate`` (the time model's play: no engine starts) the engine's
    arguments are checked, not its model or GPUs."""
    if options.estimate:
        dry.engine_args(options.base, BadInput)
    else:
        dry.engine(options.base, BadInput)
    selection = options.selection
    if selection.attempts_here:
        problems, mode = load_plan(options, measure=False)
        config = day_config(options, len(problems))
        ids = ", ".join(rs[0].problem.id for rs in problems)
        dry.add(f"slice: {len(problems)} problems x {selection.attempts} attempts ({ids}), "
                f"tool time {mode}{' (not measured in a dry run)' if mode == 'measure' else ''}")
    else:
        config = day_config(options, selection.caps().problems)
        named = ",".join(selection.problem_ids) or f"the first {selection.problems} problems"
        dry.add(f"slice: {named} x {selection.attempts} attempts (the attempts file is not here: not planned)")
    if config.engine.warmup:
        dry.add("engine warm-up: every step shape before the first problem (solver/engines/warmup.py)")
    if config.engine.compile_cache and dry.present(config.engine.compile_cache, "engine.compile_cache", BadInput):
        from solver.engines.compile_cache import CacheError, read_manifest

        try:
            built = read_manifest(Path(config.engine.compile_cache)).fingerprint
        except CacheError as exc:
            raise BadInput(f"engine.compile_cache: {exc}") from exc
        dry.add(f"compile cache built for vLLM {built.vllm}, {built.model}, {built.device}")
    total = config.budget.total_s
    dry.add(f"rules {options.rules}; budget {'none' if total is None else f'{total:.0f} s'}; engine args "
            f"{json.dumps(config.engine.args, sort_keys=True)}"
            + ("; --estimate: the time model's play" if options.estimate else ""))
    return dry.print()


def rehearse_day(options: DayOptions, dry: DryRun | None = None) -> int:
    """``solver day``'s work once its flags are checked (``day_options``): the dry run (``dry``, the command's
    ``DryRun``), the estimate, or one device call of the slice, printed as it goes."""
    if dry is not None:
        return dry_run(options, dry)
    if not options.gpu:
        for key, value in options.base.engine.env.items():
            os.environ.setdefault(key, str(value))
    if options.log_engine:
        log_engine()
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    problems, tool_mode = load_plan(options)
    if options.estimate:
        config = day_config(options, len(problems))
        return estimate(options, problems, config, time_model(options, config))
    run = DayCall(options, problems, tool_mode)
    left = [i for i in run.ids if i not in run.done]
    steps = [s for rs in problems for r in rs for s in r.steps]
    print(f"day slice: {len(problems)} problems x {options.selection.attempts} attempts from "
          f"{options.selection.attempts_file} "
          f"({sum(s.tokens for s in steps)} decoded tokens, {len(steps)} requests, tool time {tool_mode}); rules "
          f"{options.rules}; call {run.call}, {len(left)} problems left; engine {run.config.engine.model}, "
          f"{json.dumps(run.config.engine.args, sort_keys=True)}", file=sys.stderr)
    if not left:
        print("the slice is complete: nothing to play", file=sys.stderr)
        run.state["calls"].pop()
    else:
        print(COLUMNS)
        ended = asyncio.run(run.play())
        run.call_record["ended"] = ended
        run.call_record["left_running"] = still_running()
        if run.call_record["left_running"]:
            print(f"left running after the close: {run.call_record['left_running']}; killed", file=sys.stderr)
            kill_descendants()
        run.save()
        log = run.call_record["log"]
        print(f"call {run.call}: {ended}; run log {'complete' if log and log['ok'] else 'INCOMPLETE'} "
              f"({run.run_dir}); left running: {len(run.call_record['left_running'])}", file=sys.stderr)
    done = run.state["problems"]
    if done:
        total = sum(r["seconds"] for r in done)
        tokens = sum(r["decoded_tokens"] for r in done)
        print(f"slice so far: {len(done)}/{len(run.ids)} problems, {total:.1f} s, {tokens} tokens "
              f"({tokens / total if total else 0:.0f} tok/s), {sum(r['cancelled'] for r in done)} attempts cancelled, "
              f"{sum(r['deadline_cut'] for r in done)} cut by the deadline, {sum(bool(r['correct']) for r in done)} "
              f"right; the day's clock at {done[-1]['day_end_s']:.0f} s")
    run.save()
    if options.table is not None:
        try:
            print_table(upsert_row(options.table, table_row(run.state, options.label, options.json)))
        except (OSError, ValueError) as exc:
            print(f"solver day: error: --table {options.table}: {str(exc).splitlines()[0]} (the run's --json is "
                  "written)", file=sys.stderr)
            return 1
    return 0
