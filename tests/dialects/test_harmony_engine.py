"""The harmony dialect on the real vLLM engine, with a tiny random-weight model that has the harmony vocabulary
(built at set-up from a fixed seed; no tokenizer: the dialect renders and parses ids). Its output is noise, so
this proves the plumbing: token-id prompts in, stop token ids out and kept in the ids, parsing that survives
garbage, no crash, no process left. The tool loop itself is proven with real token sequences in
test_harmony.py."""

from __future__ import annotations

import contextlib
import os
import time

import psutil
import pytest
from fidelity import Recording, key

from solver.types import Problem

pytestmark = pytest.mark.engine


def command_line(process: psutil.Process) -> str:
    """Its command line; empty for a zombie or a process already gone (an earlier test's, being reaped)."""
    try:
        return " ".join(process.cmdline())
    except (psutil.ZombieProcess, psutil.NoSuchProcess, psutil.AccessDenied):
        return ""


def test_real_engine_runs_the_tiny_harmony_model_through_the_harmony_dialect(tiny_config):
    from solver.dialects import make_dialect
    from solver.engines.vllm_async import open_vllm_engine
    from solver.loop.problem import ProblemSolver
    from solver.kaggle.thread import LoopThread
    from solver.sandbox.pool import create_sandbox
    from solver.models import ensure_tiny_harmony_model

    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    # The random model's logits are nearly flat over 201,088 ids: a bias of ~ln(201088) - 3 on the two stop
    # tokens makes turns end on them after a few dozen tokens, some by <|call|>, some by <|return|>, some by
    # the length limit.
    config = tiny_config.replace({
        "engine.model": str(ensure_tiny_harmony_model()), "engine.args.skip_tokenizer_init": True,
        "prompt.dialect": "harmony", "sandbox.code_mode": "stateful", "solve.reps": 8, "solve.workers": 8,
        "sampling.max_tokens": 32, "sampling.max_total_tokens": 96, "sampling.max_turns": 3,
        "sampling.extra": {"logit_bias": {200012: 9.0, 200002: 8.0}}})
    before = {p.pid for p in psutil.Process().children(recursive=True)}
    loop = LoopThread("harmony-engine")
    started = loop.run(open_vllm_engine(config), timeout_s=600)
    assert started.ok, started.error
    engine = started.value
    assert engine.tokenizer is None
    # multiprocessing's resource tracker lives as long as this test process by design; it is no engine process.
    family = {p.pid for p in psutil.Process().children(recursive=True)
              if "multiprocessing.resource_tracker" not in command_line(p)} - before
    recording = Recording(engine)
    logged = []

    async def scenario():
        sandbox = create_sandbox(config.sandbox)
        try:
            solver = ProblemSolver(config, recording, sandbox, on_repetition=logged.append)
            return await solver.solve(Problem("h", "What is 6 times 7?"))
        finally:
            await sandbox.close()

    try:
        outcome = loop.run(scenario(), timeout_s=600)
        assert outcome.ok, outcome.error
        assert engine.running_requests() == 0
    finally:
        loop.run(engine.close(), timeout_s=60)
        loop.close()
    result = outcome.value
    assert result.repetitions == 8
    assert all(r.status in ("done", "length") for r in logged), [(r.status, r.error) for r in logged]
    encoding = make_dialect(config, None).encoding
    stopped = {200002: 0, 200012: 0}
    for request in recording.requests:
        assert request.stop == () and request.stop_token_ids == (200002, 200012)
        assert encoding.decode(list(request.prompt_token_ids)) == request.prompt
        ending = recording.endings[key(request)]
        if ending.stop_token is not None:
            stopped[ending.stop_token] += 1
            assert recording.generated[key(request)][-1] == ending.stop_token  # kept in the ids
    assert stopped[200002] >= 1 and stopped[200012] >= 1, stopped
    # No process of the engine is left (they get a few seconds to exit).
    deadline = time.monotonic() + 15
    while True:
        alive = []
        for pid in family:
            with contextlib.suppress(psutil.NoSuchProcess):
                process = psutil.Process(pid)
                if process.status() != psutil.STATUS_ZOMBIE:
                    alive.append((pid, command_line(process)[:120]))
        if not alive or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert family and alive == []
