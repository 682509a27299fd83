"""The engine's warm-up and its shipped compile cache, on the real CPU engine: the warm-up's steps are the shapes
it means (vLLM's own step log says so), its seconds are the start-up log's line, and a cache is used only when
its manifest was built for this vLLM, model and machine, else refused in one line without touching anything.

The same engine, started once, also schedules by priority with one sequence slot, so the order in which waiting
requests are admitted is observable: a started repetition's next turn goes before work not yet begun."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import os
from pathlib import Path

import pytest

from solver.engines.compile_cache import (CACHE_ENV, MANIFEST, CacheManifest, Fingerprint, check_fingerprint, pack,
                                          read_manifest, use_cache)
from solver.engines.engine_log import EPOCH_FORMAT, parse_engine_log
from solver.engines.startup_log import parse_startup_log
from solver.engines.warmup import warmup_shapes
from solver.types import GenerationRequest

HERE = Fingerprint("0.26.0", "2.11.0", "dummy-gptoss-120b:933aeb666a3f", "NVIDIA H200",
                   {"kv_cache_dtype": "fp8", "max_num_seqs": 64})


def fake_root(path: Path) -> Path:
    """A VLLM_CACHE_ROOT as vLLM leaves it: compiled graphs, and Triton kernels under a ``triton_cache`` folder."""
    (path / "torch_compile_cache" / "abc" / "rank_0_0" / "triton_cache" / "KERNELHASH").mkdir(parents=True)
    (path / "torch_compile_cache" / "abc" / "rank_0_0" / "triton_cache" / "KERNELHASH" / "k.cubin").write_bytes(b"1")
    (path / "torch_compile_cache" / "abc" / "graph.py").write_text("# compiled\n")
    return path


@pytest.fixture
def clean_cache_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in CACHE_ENV:
        monkeypatch.delenv(name, raising=False)


def test_a_packed_cache_holds_the_root_the_triton_kernels_and_its_manifest_last(tmp_path: Path) -> None:
    manifest = pack(fake_root(tmp_path / "root"), tmp_path / "out", HERE, "2026-11-28T00:00:00+00:00")
    assert read_manifest(tmp_path / "out") == manifest
    assert (tmp_path / "out" / "triton" / "KERNELHASH" / "k.cubin").read_bytes() == b"1"
    assert (tmp_path / "out" / "vllm" / "torch_compile_cache" / "abc" / "graph.py").is_file()
    assert manifest.files == 3 and manifest.fingerprint == HERE  # the root's two files and the kernel merged


@pytest.mark.parametrize("field, value, says", [
    ("vllm", "0.32.0", "built for vLLM 0.26.0, not vLLM 0.32.0"),
    ("torch", "2.13.0", "built for torch 2.11.0, not torch 2.13.0"),
    ("model", "gpt-oss-20b:0000", "built for dummy-gptoss-120b:933aeb666a3f, not gpt-oss-20b:0000"),
    ("device", "NVIDIA H100 80GB HBM3", "built for NVIDIA H200, not NVIDIA H100 80GB HBM3"),
])
def test_a_cache_built_elsewhere_is_refused_in_one_line_and_nothing_changes(
        tmp_path: Path, clean_cache_env: None, field: str, value: str, says: str) -> None:
    pack(fake_root(tmp_path / "root"), tmp_path / "cache", HERE, "2026-11-28T00:00:00+00:00")
    verdict = use_cache(tmp_path / "cache", dataclasses.replace(HERE, **{field: value}), tmp_path / "work")
    assert not verdict.usable and "\n" not in verdict.line
    assert f"refused: {says}; the engine starts cold" in verdict.line
    assert not (tmp_path / "work").exists() and not any(name in os.environ for name in CACHE_ENV)


def test_a_folder_that_is_no_cache_is_refused_not_raised(tmp_path: Path, clean_cache_env: None) -> None:
    (tmp_path / "empty").mkdir()
    assert "no manifest.json" in use_cache(tmp_path / "empty", HERE, tmp_path / "work").line
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / MANIFEST).write_text("{not json")
    assert "not JSON" in use_cache(tmp_path / "bad", HERE, tmp_path / "work").line
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / MANIFEST).write_text(json.dumps({"format": 0}))
    assert "format 0" in use_cache(tmp_path / "old", HERE, tmp_path / "work").line
    assert not any(name in os.environ for name in CACHE_ENV)


def test_a_matching_cache_is_copied_where_the_engine_may_write_and_vllm_and_triton_pointed_at_it(
        tmp_path: Path, clean_cache_env: None) -> None:
    pack(fake_root(tmp_path / "root"), tmp_path / "cache", HERE, "2026-11-28T00:00:00+00:00")
    other_args = dataclasses.replace(HERE, engine_args={"kv_cache_dtype": "fp8", "max_num_seqs": 32})
    verdict = use_cache(tmp_path / "cache", other_args, tmp_path / "work")
    assert verdict.usable and "used (built for vLLM 0.26.0" in verdict.line
    assert "other engine arguments (max_num_seqs 64, here 32)" in verdict.line
    assert os.environ["VLLM_CACHE_ROOT"] == str(tmp_path / "work" / "vllm")
    assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "work" / "triton")
    assert (tmp_path / "work" / "triton" / "KERNELHASH" / "k.cubin").is_file()


def test_the_manifest_round_trips_and_a_stranger_is_refused() -> None:
    manifest = CacheManifest(HERE, "2026-11-28T00:00:00+00:00", 3, 10, warmup_shapes=312)
    assert CacheManifest.from_json(manifest.to_json()) == manifest
    assert check_fingerprint(HERE, HERE).usable


# ---- the real engine -------------------------------------------------------------------------------------------

WARM_TOKENS = 256  # the scheduler's step budget here: 33 shapes, a few seconds on 2 cores


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory, tiny_config) -> Path:
    """A cache packed for this machine and the tiny engine (as ``solver compile-cache pack`` writes one)."""
    pytest.importorskip("vllm")  # the fingerprint reads the installed vLLM
    from solver.engines.compile_cache import fingerprint_here
    from solver.models import resolve_model

    root = tmp_path_factory.mktemp("cache-build")
    out = root / "cache"
    pack(fake_root(root / "root"), out, fingerprint_here(resolve_model(tiny_config.engine.model), engine_args()),
         "2026-11-28T00:00:00+00:00")
    return out


def engine_args() -> dict[str, object]:
    from solver.config import load_config

    return {**load_config("tiny").engine.args, "max_num_batched_tokens": WARM_TOKENS,
            "enable_logging_iteration_details": True, "scheduling_policy": "priority", "max_num_seqs": 1}


@pytest.fixture(scope="module")
def engine_config(tiny_config, cache_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """The tiny engine with its warm-up on, vLLM's step log on, the packed cache, priority scheduling and one
    sequence slot."""
    os.environ["SOLVER_COMPILE_CACHE_WORK"] = str(tmp_path_factory.mktemp("cache-work") / "work")
    engine = dataclasses.replace(tiny_config.engine, warmup=True, compile_cache=str(cache_dir), args=engine_args())
    yield dataclasses.replace(tiny_config, engine=engine)
    os.environ.pop("SOLVER_COMPILE_CACHE_WORK", None)


@pytest.fixture
def engine_log(capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):
    """The engine's start-up lines of this test: vLLM's (its stat logger writes each step's line on this process's
    stdout; vLLM re-applies its own logging config as an engine starts, so they are read there) and the solver's.
    Where vLLM's handler writes to a stream bound before this test (vLLM imported under an earlier test's capture,
    as on a test worker), its lines are taken from its logger instead."""
    pytest.importorskip("vllm")
    monkeypatch.setenv("VLLM_LOGGING_LEVEL", "INFO")
    for handler in logging.getLogger("vllm").handlers:
        handler.setLevel(logging.INFO)
    logging.getLogger("vllm").setLevel(logging.INFO)
    class Keep(logging.Handler):
        """Each record, formatted with its epoch seconds, kept in ``lines``."""

        def __init__(self) -> None:
            super().__init__()
            self.lines: list[str] = []
            self.setFormatter(logging.Formatter(EPOCH_FORMAT))

        def emit(self, record: logging.LogRecord) -> None:
            self.lines.append(self.format(record))

    handler = Keep()
    solver_lines = handler.lines
    solver_log = logging.getLogger("solver.engines")
    level = solver_log.level
    solver_log.addHandler(handler)
    solver_log.setLevel(logging.INFO)
    vllm_handler = Keep()
    vllm_lines = vllm_handler.lines
    logging.getLogger("vllm").addHandler(vllm_handler)
    saved = {name: os.environ.get(name) for name in CACHE_ENV}

    def lines() -> list[str]:
        out = capfd.readouterr().out.splitlines()
        stepped = any("Iteration(" in line for line in out)
        return out + solver_lines + ([] if stepped else vllm_lines)

    yield lines
    logging.getLogger("vllm").removeHandler(vllm_handler)
    solver_log.removeHandler(handler)
    solver_log.setLevel(level)
    for name, value in saved.items():  # the cache's copy is this module's: later engines start without it
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.mark.engine
def test_the_warm_up_runs_each_shape_alone_and_the_cache_is_used(engine_log, engine_loop) -> None:
    _, engine = engine_loop  # started after engine_log began to read: the start's lines are all in it
    lines = engine_log()
    report = engine.warmup
    assert report.shapes == warmup_shapes(WARM_TOKENS, 0) and report.failed == 0  # the CPU engine captures no graphs
    log = parse_engine_log("\n".join(lines))
    warm = [s for s in log.steps if s.prefill_requests == 1 and s.decode_requests == 0][:len(report.shapes)]
    # vLLM's own step log: each warm-up step held exactly one shape, in order
    assert [s.prefill_tokens for s in warm] == list(report.shapes)
    assert parse_startup_log("\n".join(lines)).warmup_s == pytest.approx(report.seconds, abs=0.05)
    assert engine.compile_cache is not None and engine.compile_cache.usable
    assert os.environ["VLLM_CACHE_ROOT"].endswith(os.path.join("work", "vllm"))
    assert any("the compile cache" in line and ": used (built for vLLM" in line for line in lines)


@pytest.mark.engine
def test_real_engine_admits_waiting_requests_in_priority_order(engine_loop) -> None:
    loop, engine = engine_loop
    ids = tuple(engine.tokenizer.encode("Count from one to fifty.", add_special_tokens=False))
    finished: list[str] = []

    async def one(name: str, priority: int, tokens: int) -> None:
        req = GenerationRequest(name, "", ids, max_tokens=tokens, temperature=0.8, top_p=1.0, seed=1, stop=(),
                                extra={"ignore_eos": True}, priority=priority)
        async for delta in engine.stream(req):
            if delta.finish_reason is not None:
                assert delta.finish_reason == "length", delta.error
        finished.append(name)

    async def scenario() -> None:
        first = asyncio.create_task(one("running", 0, 96))  # holds the only slot
        await asyncio.sleep(0.3)
        assert not first.done()
        # Submitted while the slot is busy, lowest priority first: admission must follow priority, not arrival.
        rest = [asyncio.create_task(one(name, prio, 4)) for name, prio in (("late", 9), ("mid", 5), ("soon", 1))]
        await asyncio.gather(first, *rest)

    outcome = loop.run(scenario(), timeout_s=300)
    assert outcome.ok, outcome.error
    assert finished == ["running", "soon", "mid", "late"]


# ---- solver compile-cache, in process -------------------------------------------------------------------------


def test_the_command_packs_checks_and_refuses_as_its_exit_codes_say(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], clean_cache_env: None) -> None:
    pytest.importorskip("vllm")  # the fingerprint reads the installed vLLM and torch
    from solver.cli import main

    root, cache = fake_root(tmp_path / "root"), tmp_path / "cache"
    assert main(["compile-cache", "pack", str(root), "--out", str(cache)]) == 0
    assert "compile cache written to" in capsys.readouterr().out
    assert main(["compile-cache", "check", str(cache)]) == 0
    assert ": used (built for vLLM" in capsys.readouterr().out
    assert main(["compile-cache", "pack", str(root), "--out", str(cache)]) == 2  # never over a cache
    assert "exists and is not empty" in capsys.readouterr().err
    manifest = json.loads((cache / MANIFEST).read_text())
    manifest["fingerprint"]["device"] = "NVIDIA H100 80GB HBM3"
    (cache / MANIFEST).write_text(json.dumps(manifest))
    assert main(["compile-cache", "check", str(cache)]) == 1
    out = capsys.readouterr().out
    assert "refused: built for NVIDIA H100 80GB HBM3, not " in out and len(out.splitlines()) == 1
    assert main(["compile-cache", "check", str(tmp_path)]) == 2
    assert "no manifest.json" in capsys.readouterr().err
    assert main(["compile-cache", "pack", str(tmp_path / "nothing"), "--out", str(tmp_path / "o")]) == 2
    assert not (tmp_path / "o").exists() or not any((tmp_path / "o").iterdir())  # nothing half-written
