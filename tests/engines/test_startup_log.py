"""Start-up phases from vLLM's log lines, as both ends of the supported range word them, and the GPU presets'
start-up settings passing through to vLLM's engine arguments."""

from __future__ import annotations

import dataclasses

import pytest

from solver.config import load_config
from solver.engines.startup_log import StartupLog, parse_startup_log

# Verbatim shapes from vLLM 0.26.0's sources (format strings filled in), as one GPU worker logs them.
LOG_0_26 = """\
(EngineCore_DP0 pid=311) INFO 11-23 10:01:02 [default_loader.py:431] Loading weights took 3.21 seconds
(EngineCore_DP0 pid=311) INFO 11-23 10:01:03 [gpu_model_runner.py:5348] Model loading took 61.38 GiB memory and 9.512345 seconds
(EngineCore_DP0 pid=311) INFO 11-23 10:01:20 [backends.py:1156] Dynamo bytecode transform time: 14.02 s
(EngineCore_DP0 pid=311) INFO 11-23 10:01:40 [backends.py:394] Compiling a graph for compile range (1, 8192) takes 18.70 s
(EngineCore_DP0 pid=311) INFO 11-23 10:01:45 [monitor.py:20] torch.compile took 38.55 s in total
(EngineCore_DP0 pid=311) INFO 11-23 10:01:47 [monitor.py:82] Initial profiling/warmup run took 1.90 s
(EngineCore_DP0 pid=311) INFO 11-23 10:01:48 [gpu_worker.py:561] Available KV cache memory: 7.95 GiB
(EngineCore_DP0 pid=311) INFO 11-23 10:01:48 [kv_cache_utils.py:2177] GPU KV cache size: 217,088 tokens
(EngineCore_DP0 pid=311) INFO 11-23 10:03:18 [gpu_model_runner.py:6845] Graph capturing finished in 90 secs, took 1.21 GiB
(EngineCore_DP0 pid=311) INFO 11-23 10:03:18 [core.py:348] init engine (profile, create kv cache, warmup model) took 135.40 s (compilation: 38.55 s)
"""

# vLLM 0.32: a rank prefix (empty on one GPU), the KV cache line named by device, the cache hit line.
LOG_0_32 = """\
(EngineCore pid=9) INFO 11-23 10:01:02 [default_loader.py:502] Loading weights took 3.00 seconds
(EngineCore pid=9) INFO 11-23 10:01:20 [backends.py:296] Directly load the compiled graph(s) for compile range (1, 8192) from the cache, took 2.10 s
(EngineCore pid=9) INFO 11-23 10:01:20 [backends.py:1167] Dynamo bytecode transform time: 7.50 s
(EngineCore pid=9) INFO 11-23 10:01:21 [monitor.py:20] torch.compile took 9.80 s in total
(EngineCore pid=9) INFO 11-23 10:01:22 [kv_cache_utils.py:2328] GPU KV cache size: 1,234,560 tokens, Maximum concurrency for 65,536 tokens per request: 18.84x
(EngineCore pid=9) INFO 11-23 10:02:00 [gpu_model_runner.py:6582] Graph capturing finished in 38 secs, took 0.70 GiB
(EngineCore pid=9) INFO 11-23 10:02:00 [core.py:396] init engine (profile, create kv cache, warmup model) took 58.00 s (compilation: 9.80 s)
"""


@pytest.mark.parametrize(("text", "expected"), [
    (LOG_0_26, StartupLog(weights_s=3.21, model_load_s=9.512345, dynamo_s=14.02, compile_s=38.55, profile_s=1.9,
                          graph_capture_s=90.0, init_engine_s=135.4, kv_cache_tokens=217088,
                          compile_cache_hit=False)),
    (LOG_0_32, StartupLog(weights_s=3.0, dynamo_s=7.5, compile_s=9.8, graph_capture_s=38.0, init_engine_s=58.0,
                          kv_cache_tokens=1234560, compile_cache_hit=True)),
    ("an eager CPU engine logs none of them", StartupLog()),
    # the whole model loaded from the AOT cache (0.26 wording; 0.32 adds a prefix, empty on one GPU)
    ("(Worker pid=3) INFO [decorators.py:312] Directly load AOT compilation from path /c/torch_aot_compile/ab",
     StartupLog(compile_cache_hit=True)),
])
def test_phases_from_both_versions_log_lines(text: str, expected: StartupLog) -> None:
    assert parse_startup_log(text) == expected


def test_the_parsed_lines_are_worded_so_in_the_installed_vllm() -> None:
    pytest.importorskip("vllm")  # reads the installed vLLM's source
    import inspect

    from vllm.compilation import backends, monitor
    from vllm.model_executor.model_loader import default_loader
    from vllm.v1.core import kv_cache_utils
    from vllm.v1.engine import core
    from vllm.v1.worker import gpu_model_runner

    wording = {
        default_loader: "Loading weights took %.2f seconds",
        gpu_model_runner: "Graph capturing finished in %.0f secs",
        backends: "Dynamo bytecode transform time: %.2f s",
        monitor: "torch.compile took %.2f s in total",
        core: "init engine (profile, create kv cache, warmup model) took",
        kv_cache_utils: "KV cache size: %s tokens",
    }
    for module, text in wording.items():
        assert text in inspect.getsource(module), (module.__name__, text)
    assert "Directly load the compiled graph(s)" in inspect.getsource(backends)
    from vllm.compilation import decorators

    assert "Directly load AOT compilation from path" in inspect.getsource(decorators)


@pytest.mark.parametrize("preset", ["h100-gptoss", "h100"])
def test_gpu_presets_capture_cuda_graphs_only_up_to_max_num_seqs(preset: str) -> None:
    pytest.importorskip("vllm")  # the arguments are vLLM's own AsyncEngineArgs
    from solver.engines.vllm_async import engine_args
    from solver.models import resolve_model

    config = load_config(preset)
    assert config.engine.args["max_cudagraph_capture_size"] == config.engine.args["max_num_seqs"]
    # The argument passes through to vLLM's AsyncEngineArgs unchanged (a top-level field since 0.26).
    args = engine_args(config, resolve_model(None))
    assert args.max_cudagraph_capture_size == config.engine.args["max_num_seqs"]
    assert "max_cudagraph_capture_size" in {f.name for f in dataclasses.fields(type(args))}

