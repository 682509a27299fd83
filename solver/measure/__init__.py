"""The measurement wing: what rehearses and measures the solver on real engines, beside the submission
(``solver.kaggle``) and the offline analysis (``solver.offline``). Only the commands and the benchmark and evaluation
scripts import it.

Rooms: ``kaggle_day`` (a Kaggle day rehearsed on recorded attempts: ``solver day``; its flags typed and checked
once in ``day_options``, its problems on the time model in ``day_model``, a device call in ``day_call``, its records
in ``day_table``, its processes in ``day_processes``) and ``day_held_out`` (a day's file played again in the
simulator); ``rehearsal`` (the submission behind a competition's gateway: ``solver kaggle-local``);
``workload`` (recorded attempts as replay plans, forced onto a real engine, their calls answered from the
recording) and ``tool_seconds`` (the seconds their calls run: carried, measured again or fixed); ``traced`` (drawn
plans the real engine follows) on ``wrapped`` (an engine around another); ``request_timeline`` (requests and
engine metrics over time); ``vllm_probes`` (single-purpose requests to vLLM); ``sim_fidelity`` (``check_replay``:
the running pipeline on the replay engine against the simulator's prediction of the same draws).
The benchmarks' drivers: ``shape`` (the real shape's options, typed and checked once, its plan and run:
``engine.py --workload real``) over ``contenders`` (its four ways to replay the attempts); ``saturation``
(``engine.py``'s raw engine, pipeline and rounds); ``scaling`` (``layouts.py``: the layouts by name, each layout's
run, the seed's probes) over ``fleet`` (its engine actors, servers, processes and GPUs).
"""

from solver.measure.day_held_out import add_answers as add_day_answers
from solver.measure.day_held_out import check_day
from solver.measure.day_options import DayOptions, day_options
from solver.measure.sim_fidelity import check_replay
from solver.measure.fleet import child_env, gpus_here, load_requests, on_actors, seed_env, served, with_package
from solver.measure.kaggle_day import rehearse_day
from solver.measure.vllm_probes import cache_tokens, decode, generate, random_ids, resent, turns
from solver.measure.rehearsal import rehearse, report_markdown, run_gateway
from solver.measure.saturation import PIPELINE_CONTENDERS, run_pipelines, run_raw
from solver.measure.scaling import (layout_config, layouts_of, planned_tokens, prediction, probe_rows, probe_settings,
                                    run_layout, scaling_rows, seed_engine, whole_numbers)
from solver.measure.shape import (SHAPE_DESCRIPTION, SHAPE_PROG, ShapeOptions, ShapeWorkload, add_shape_arguments,
                                  read_tool_times, real_shape, shape_options, shape_options_of, shape_tool_times,
                                  shape_workload)
from solver.measure.request_timeline import (RequestRecord, RequestTimeline, Sampler, ServerMetrics, TimedEngine,
                                     in_process_reader)
from solver.measure.traced import Profile, RepetitionPlan, TracedEngine, code_floor, make_plans, make_script
from solver.measure.workload import (STARTER_CELL, AttemptsOnEngine, Caps, HarmonyEndings, PlanError, Replay, choose,
                                     key_of, plan, plan_summary, preset_engine, recorded_calls, recorded_code,
                                     replay_on_engine, warm_up)
from solver.measure.tool_seconds import (TOOL_TIME_MODES, carried_tool_times, fixed_tool_times, measure_tool_times,
                                         tool_time_mode, tool_time_seconds, with_tool_times)

__all__ = ["STARTER_CELL", "TOOL_TIME_MODES", "AttemptsOnEngine", "Caps", "DayOptions",
           "HarmonyEndings", "PlanError", "Profile", "Replay", "RepetitionPlan",
           "RequestRecord", "RequestTimeline", "Sampler", "ServerMetrics", "TimedEngine", "TracedEngine",
           "add_day_answers", "cache_tokens", "carried_tool_times", "check_day", "check_replay", "choose", "code_floor",
           "day_options",
           "decode", "fixed_tool_times", "generate", "in_process_reader",
           "key_of", "make_plans", "make_script", "measure_tool_times", "plan", "plan_summary",
           "preset_engine", "random_ids", "recorded_calls", "recorded_code", "rehearse",
           "rehearse_day",
           "replay_on_engine", "report_markdown", "resent", "run_gateway", "tool_time_mode", "tool_time_seconds",
           "turns", "warm_up", "with_tool_times",
           "PIPELINE_CONTENDERS", "child_env", "gpus_here", "layout_config", "layouts_of", "load_requests",
           "on_actors", "planned_tokens", "prediction", "probe_rows", "probe_settings", "read_tool_times", "real_shape",
           "run_layout", "run_pipelines", "run_raw", "scaling_rows", "seed_engine", "seed_env", "served",
           "shape_tool_times", "shape_workload", "whole_numbers", "with_package",
           "SHAPE_DESCRIPTION", "SHAPE_PROG", "ShapeOptions", "ShapeWorkload", "add_shape_arguments", "shape_options",
           "shape_options_of"]
