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
import shutil
from pathlib import Path

import pytest

from solver.engines.compile_cache import (CACHE_ENV, MANIFEST, CacheManifest, Fingerprint, check_cache,
                                          check_fingerprint, content_digest, model_identity, model_link, pack,
                                          read_manifest, use_cache)
from solver.engines.engine_log import EPOCH_FORMAT, parse_engine_log
from solver.engines.startup_log import parse_startup_log
from solver.engines.vllm_metrics import StartMark
from solver.measure.request_timeline import MetricsSample
from solver.engines.vllm_metrics import UsageReading
from solver.engines.warmup import warmup_shapes
from solver.measure.day.table import hit_rate
from solver.types import GenerationRequest

HERE = Fingerprint("0.26.0", "2.11.0", "config.json 44d62c1ea062", "NVIDIA H200",
                   {"kv_cache_dtype": "fp8", "max_num_seqs": 64})
BUILT = "2026-11-28T00:00:00+00:00"
# the dummy gpt-oss-120b's config as the GPU kit ships it (../shared beside the checkout)
GPTOSS_CONFIG = Path(__file__).resolve().parents[2].parent / "shared" / "gpu" / "models" / "dummy-gptoss-120b" \
    / "config.json"


def fake_root(path: Path) -> Path:
    """A VLLM_CACHE_ROOT as vLLM leaves it: compiled graphs, and Triton kernels under a ``triton_cache`` folder."""
    (path / "torch_compile_cache" / "abc" / "rank_0_0" / "triton_cache" / "KERNELHASH").mkdir(parents=True)
    (path / "torch_compile_cache" / "abc" / "rank_0_0" / "triton_cache" / "KERNELHASH" / "k.cubin").write_bytes(b"1")
    (path / "torch_compile_cache" / "abc" / "graph.py").write_text("# compiled\n")
    return path


def built(tmp_path: Path, out: Path, fingerprint: Fingerprint = HERE, **kw: object) -> Path:
    """A cache as ``solver compile-cache build`` writes one to ``out``: built in a root of its own under
    ``tmp_path / "build"`` (removed after packing, as the build removes it), its model loaded through a link under
    ``tmp_path / "links"``."""
    root = tmp_path / "build" / out.name
    kw.setdefault("model_path", str(model_link(fingerprint.model, root=tmp_path / "links")))
    pack(fake_root(root / "vllm"), out, fingerprint, BUILT, model_name="dummy-gptoss-120b", **kw)  # type: ignore[arg-type]
    shutil.rmtree(root)
    return out


def packed(tmp_path: Path, fingerprint: Fingerprint = HERE) -> Path:
    return built(tmp_path, tmp_path / "cache", fingerprint)


def work_of(cache: Path) -> Path:
    """Where a start puts the cache's copy: the root it was built in."""
    return Path(read_manifest(cache).cache_root).parent


def model_folder(path: Path, config: bytes) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_bytes(config)
    return path


def snapshot(folder: Path) -> dict[str, tuple[int, int, int]]:
    """Every path under ``folder`` with its size, mode and modification time (ns): what a write would change."""
    return {p.relative_to(folder).as_posix(): (p.lstat().st_size, p.lstat().st_mode, p.lstat().st_mtime_ns)
            for p in [folder, *folder.rglob("*")]}


def read_only(folder: Path) -> None:
    """As a Kaggle dataset mounts it."""
    for p in sorted([folder, *folder.rglob("*")], key=lambda p: -len(p.parts)):
        p.chmod(p.stat().st_mode & ~0o222)


@pytest.fixture
def clean_cache_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in CACHE_ENV:
        monkeypatch.delenv(name, raising=False)


def test_a_packed_cache_holds_the_root_the_triton_kernels_and_its_manifest_last(tmp_path: Path) -> None:
    cache = packed(tmp_path)
    manifest = read_manifest(cache)
    assert (cache / "triton" / "KERNELHASH" / "k.cubin").read_bytes() == b"1"
    assert (cache / "vllm" / "torch_compile_cache" / "abc" / "graph.py").is_file()
    assert manifest.files == 3 and manifest.fingerprint == HERE  # the root's two files and the kernel merged
    assert (manifest.files, manifest.bytes, manifest.digest) == content_digest(cache)
    assert manifest.model_path == str(tmp_path / "links" / "44d62c1ea062")


@pytest.mark.parametrize("field, value, says", [
    ("vllm", "0.32.0", "built for vLLM 0.26.0, not vLLM 0.32.0"),
    ("torch", "2.13.0", "built for torch 2.11.0, not torch 2.13.0"),
    ("model", "config.json 0123456789ab", "built for config.json 44d62c1ea062, not config.json 0123456789ab"),
    ("device", "NVIDIA H100 80GB HBM3", "built for NVIDIA H200, not NVIDIA H100 80GB HBM3"),
])
def test_a_cache_built_elsewhere_is_refused_in_one_line_and_nothing_changes(
        tmp_path: Path, clean_cache_env: None, field: str, value: str, says: str) -> None:
    cache = packed(tmp_path)
    verdict = use_cache(cache, dataclasses.replace(HERE, **{field: value}))
    assert not verdict.usable and "\n" not in verdict.line and verdict.model_path is None
    assert f"refused: {says}; the engine starts cold" in verdict.line
    assert not work_of(cache).exists() and not any(name in os.environ for name in CACHE_ENV)


def test_the_model_is_its_config_not_its_folder() -> None:
    """The issue's case: the same config.json under another folder name (and re-saved, its keys in another order,
    with the path it came from) is the same model; another size is another."""
    if not GPTOSS_CONFIG.is_file():
        pytest.skip(f"no dummy gpt-oss config at {GPTOSS_CONFIG} (../shared is not beside this checkout)")
    text = GPTOSS_CONFIG.read_bytes()
    data = json.loads(text)
    resaved = json.dumps({"_name_or_path": "/kaggle/input/gpt-oss-120b", **dict(reversed(data.items()))}, indent=4)
    smaller = json.dumps({**data, "num_hidden_layers": data["num_hidden_layers"] // 2})
    from solver.engines.compile_cache import config_identity

    assert config_identity(text) == config_identity(resaved.encode()) == HERE.model
    assert config_identity(smaller.encode()) != HERE.model


def test_a_renamed_folder_is_used_through_the_link_the_build_loaded_it_by_and_a_changed_config_is_refused(
        tmp_path: Path, clean_cache_env: None) -> None:
    config = json.dumps({"architectures": ["GptOssForCausalLM"], "hidden_size": 2880, "num_local_experts": 128})
    built = model_identity(str(model_folder(tmp_path / "build" / "dummy-gptoss-120b", config.encode())))
    cache = packed(tmp_path, dataclasses.replace(HERE, model=built))
    renamed = model_folder(tmp_path / "kaggle" / "input" / "gpt-oss-120b", config.encode())
    verdict = use_cache(cache, dataclasses.replace(HERE, model=model_identity(str(renamed))),
                        model_path=str(renamed))
    link = Path(read_manifest(cache).model_path)
    assert verdict.usable and verdict.model_path == str(link), verdict.line
    assert link.is_symlink() and link.resolve() == renamed.resolve()
    assert f"the model loaded through {link}" in verdict.line and "compile again" not in verdict.line
    # a second start (a rebuilt engine) finds the link in place
    assert use_cache(cache, dataclasses.replace(HERE, model=built), model_path=str(renamed)).model_path == str(link)

    changed = model_folder(tmp_path / "other" / "gpt-oss-120b",
                           json.dumps({**json.loads(config), "num_local_experts": 32}).encode())
    shutil.rmtree(work_of(cache))
    refused = use_cache(cache, dataclasses.replace(HERE, model=model_identity(str(changed))),
                        model_path=str(changed))
    assert not refused.usable and f"refused: built for {built}, not config.json " in refused.line
    assert not work_of(cache).exists()


def test_a_path_the_build_loaded_from_that_holds_something_else_is_left_alone(
        tmp_path: Path, clean_cache_env: None) -> None:
    cache = packed(tmp_path)
    link = Path(read_manifest(cache).model_path)
    other = model_folder(link, b'{"hidden_size": 8}')  # the user's own folder at that path (other weights)
    mine = model_folder(tmp_path / "kaggle" / "gpt-oss-120b", b'{"hidden_size": 2880}')
    verdict = use_cache(cache, HERE, model_path=str(mine))
    assert verdict.usable and verdict.model_path == str(mine)
    assert verdict.line.endswith(f"the model loaded through {mine}, not {link}: vLLM's compiled graphs compile again")
    assert not other.is_symlink() and (other / "config.json").read_bytes() == b'{"hidden_size": 8}'


@pytest.mark.parametrize("damage, says", [
    ("truncate", "it holds 3 files, 12 bytes, its manifest says 3 files, 13 bytes (truncated or changed)"),
    ("remove", "it holds 2 files, 12 bytes, its manifest says 3 files, 13 bytes (truncated or changed)"),
    ("flip", "its files' sha256 differs from its manifest's (corrupted)"),
])
def test_a_truncated_or_corrupted_cache_is_refused_in_one_line_and_nothing_changes(
        tmp_path: Path, clean_cache_env: None, damage: str, says: str) -> None:
    cache = packed(tmp_path)
    graph = cache / "vllm" / "torch_compile_cache" / "abc" / "graph.py"
    if damage == "truncate":
        graph.write_bytes(graph.read_bytes()[:-1])
    elif damage == "remove":
        (cache / "triton" / "KERNELHASH" / "k.cubin").unlink()
    else:
        graph.write_bytes(graph.read_bytes().upper())
    verdict = use_cache(cache, HERE)
    assert verdict.line == f"the compile cache {cache}: refused: {says}; the engine starts cold"
    assert not verdict.usable and check_cache(cache, HERE)[0] == verdict
    assert not work_of(cache).exists() and not any(name in os.environ for name in CACHE_ENV)


def test_a_folder_that_is_no_cache_is_refused_not_raised(tmp_path: Path, clean_cache_env: None) -> None:
    (tmp_path / "empty").mkdir()
    assert "no manifest.json" in use_cache(tmp_path / "empty", HERE).line
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / MANIFEST).write_text("{not json")
    assert "not JSON" in use_cache(tmp_path / "bad", HERE).line
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / MANIFEST).write_text(json.dumps({"format": 1}))
    assert "manifest format 1, this solver reads format 3" in use_cache(tmp_path / "old", HERE).line
    assert not any(name in os.environ for name in CACHE_ENV)


def test_a_matching_cache_is_copied_where_the_engine_may_write_and_the_shipped_folder_is_only_read(
        tmp_path: Path, clean_cache_env: None) -> None:
    cache = packed(tmp_path)
    read_only(cache)
    before = snapshot(cache)
    other_args = dataclasses.replace(HERE, engine_args={"kv_cache_dtype": "fp8", "max_num_seqs": 32})
    verdict = use_cache(cache, other_args)
    assert verdict.usable and "used (built for vLLM 0.26.0" in verdict.line
    assert "other engine arguments (max_num_seqs 64, here 32)" in verdict.line
    # put back where it was built: vLLM's artefacts keep absolute paths into that root
    work = work_of(cache)
    assert os.environ["VLLM_CACHE_ROOT"] == read_manifest(cache).cache_root == str(work / "vllm")
    assert os.environ["TRITON_CACHE_DIR"] == str(work / "triton")
    assert (work / "triton" / "KERNELHASH" / "k.cubin").is_file()
    # the engine adds to its copy: every folder of it is writable, though the shipped ones were not
    assert all(p.stat().st_mode & 0o200 for p in [work, *work.rglob("*")])
    assert snapshot(cache) == before


def test_the_manifest_round_trips_and_a_stranger_is_refused() -> None:
    manifest = CacheManifest(HERE, BUILT, 3, 10, "ab" * 32, "/tmp/solver-models/44d62c1ea062", "dummy-gptoss-120b",
                             warmup_shapes=312)
    assert CacheManifest.from_json(manifest.to_json()) == manifest
    assert check_fingerprint(HERE, HERE).usable


def test_a_problems_prefix_hit_rate_leaves_out_the_engine_start_within_it() -> None:
    """The day's first problem opens the engine: its warm-up's 264k random tokens (every lookup a miss) fall
    between the problem's first samples; the figure is the problem's own."""
    reading = UsageReading(0.0, 0, 0, 0)
    samples = [MetricsSample(0.0, reading, 0, 0), MetricsSample(40.0, reading, 150_000, 0),
               MetricsSample(98.5, reading, 264_000, 0), MetricsSample(99.0, reading, 264_400, 300),
               MetricsSample(150.0, reading, 300_000, 35_000)]
    start = StartMark(1.0, 98.7, 264_000, 0)
    assert hit_rate(samples, [start]) == pytest.approx(35_000 / 36_000)
    assert hit_rate(samples) == pytest.approx(35_000 / 300_000)  # what it read with the warm-up in it
    # a rebuilt engine (counters from zero) within a later problem: its start is left out the same way
    rebuilt = [MetricsSample(0.0, reading, 300_000, 35_000), MetricsSample(10.0, reading, 301_000, 35_900),
               MetricsSample(12.0, reading, 1_000, 0), MetricsSample(30.0, reading, 2_000, 0),
               MetricsSample(60.0, reading, 4_000, 1_800)]
    assert hit_rate(rebuilt, [StartMark(11.0, 31.0, 2_000, 0)]) == pytest.approx((900 + 1_800) / (1_000 + 2_000))


# ---- the real engine -------------------------------------------------------------------------------------------

WARM_TOKENS = 256  # the scheduler's step budget here: 33 shapes, a few seconds on 2 cores


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory: pytest.TempPathFactory, tiny_config) -> Path:
    """A cache packed for this machine and the tiny engine as ``solver compile-cache pack`` writes one, on a machine
    where the model's folder had another name (its config.json the same), and mounted read-only."""
    pytest.importorskip("vllm")  # the fingerprint reads the installed vLLM
    from solver.engines.compile_cache import fingerprint_here, vllm_location
    from solver.models import resolve_model

    root = tmp_path_factory.mktemp("cache-build")
    model = Path(resolve_model(tiny_config.engine.model))
    built_from = model_folder(root / "models" / "smollm2-renamed", (model / "config.json").read_bytes())
    for weights in model.glob("*.safetensors"):  # the same weights, in a folder of another name
        (built_from / weights.name).symlink_to(weights)
    out = root / "cache"
    # the environment the engine will start in: the preset's variables under this process's
    environ = {**{k: str(v) for k, v in tiny_config.engine.env.items()}, **os.environ}
    here = fingerprint_here(str(built_from), engine_args(), environ=environ)
    assert here.weights.startswith("weights ")
    build = root / "build" / "b1"
    pack(fake_root(build / "vllm"), out, here, BUILT, vllm_path=vllm_location(),
         model_path=str(model_link(model_identity(str(built_from)), here.weights, root / "links")))
    shutil.rmtree(build)
    read_only(out)
    return out


def engine_args() -> dict[str, object]:
    from solver.config import load_config

    return {**load_config("tiny").engine.args, "max_num_batched_tokens": WARM_TOKENS,
            "enable_logging_iteration_details": True, "scheduling_policy": "priority", "max_num_seqs": 1}


@pytest.fixture(scope="module")
def engine_config(tiny_config, cache_dir: Path, tmp_path_factory: pytest.TempPathFactory):
    """The tiny engine with its warm-up on, vLLM's step log on, the packed cache, priority scheduling and one
    sequence slot."""
    engine = dataclasses.replace(tiny_config.engine, warmup=True, compile_cache=str(cache_dir), args=engine_args())
    yield dataclasses.replace(tiny_config, engine=engine)


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
def test_the_warm_up_runs_each_shape_alone_and_the_cache_is_used(engine_log, engine_loop, cache_dir: Path) -> None:
    shipped = snapshot(cache_dir)
    loop, engine = engine_loop  # started after engine_log began to read: the start's lines are all in it
    lines = engine_log()
    report = engine.warmup
    assert report.shapes == warmup_shapes(WARM_TOKENS, 0) and report.failed == 0  # the CPU engine captures no graphs
    log = parse_engine_log("\n".join(lines))
    warm = [s for s in log.steps if s.prefill_requests == 1 and s.decode_requests == 0][:len(report.shapes)]
    # vLLM's own step log: each warm-up step held exactly one shape, in order
    assert [s.prefill_tokens for s in warm] == list(report.shapes)
    assert parse_startup_log("\n".join(lines)).warmup_s == pytest.approx(report.seconds, abs=0.05)
    # the cache, built where the model's folder had another name, is used; vLLM got the model through the link
    # the build loaded it by (its compiled graphs' key holds that path); the shipped folder was only read
    link = read_manifest(cache_dir).model_path
    assert engine.compile_cache is not None and engine.compile_cache.usable, engine.compile_cache
    assert engine.compile_cache.model_path == link and engine._llm.model_config.model == link
    assert os.environ["VLLM_CACHE_ROOT"] == read_manifest(cache_dir).cache_root
    assert any("the compile cache" in line and ": used (built for vLLM" in line for line in lines)
    # the start line says what the start did with it: the CPU engine runs eager, so it saved no compiled graph and
    # compiled no Triton kernel; the one kernel shipped is counted
    assert "; at start: graphs loaded, 0 Triton kernels compiled (1 shipped), " in engine.compile_cache.line
    assert engine.compile_cache.outcome is not None and engine.compile_cache.outcome.graphs_saved == 0
    assert snapshot(cache_dir) == shipped

    # The warm-up's prompts are in vLLM's counters (each looked up once, none found) and in none of a problem's
    # figures: a problem whose samples span the start (the day's first) reads its own requests' hit rate.
    mark = engine.started
    assert mark is not None and mark.prefix_queries >= report.tokens and mark.prefix_hits == 0
    from solver.engines.vllm_metrics import in_process_sample

    ids = tuple(range(1000, 1064))  # 64 tokens no warm-up prompt starts with: two blocks of 32

    async def twice() -> list[int]:
        cached = []
        for name in ("first", "again"):
            req = GenerationRequest(name, "", ids, max_tokens=1, temperature=0.0, top_p=1.0, seed=1, stop=())
            async for delta in engine.stream(req):
                if delta.cached_tokens is not None:
                    cached.append(delta.cached_tokens)
        await asyncio.sleep(0.3)  # the last step's counters recorded
        return cached

    outcome = loop.run(twice(), timeout_s=120)
    assert outcome.ok, outcome.error
    reading, queries, hits = in_process_sample()
    before = MetricsSample(mark.begin - 1.0, reading, 0.0, 0.0)  # the problem's first sample: no engine yet
    after = MetricsSample(mark.end + 1.0, reading, queries, hits)
    cached = outcome.value
    assert cached[0] == 0 and cached[1] > 0  # the second found the first's full block(s)
    assert hit_rate([before, after], [mark]) == pytest.approx(sum(cached) / (2 * len(ids)))
    assert hit_rate([before, after]) < sum(cached) / (2 * len(ids) + report.tokens) + 1e-9  # with the warm-up in


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
    from solver.engines.compile_cache import ROOT_BASE, build_root

    # a root anywhere else is refused: its artefacts' absolute paths could not be put back
    assert main(["compile-cache", "pack", str(fake_root(tmp_path / "elsewhere")), "--out", str(tmp_path / "o")]) == 2
    assert f"built at {ROOT_BASE}/<id>/vllm and used there again" in capsys.readouterr().err
    base = build_root(f"test-{os.getpid()}-{tmp_path.name}")
    root, cache = fake_root(base / "vllm"), tmp_path / "cache"
    try:
        assert main(["compile-cache", "pack", str(root), "--out", str(cache)]) == 0
    finally:
        shutil.rmtree(base, ignore_errors=True)
    assert "compile cache written to" in capsys.readouterr().out
    assert main(["compile-cache", "check", str(cache)]) == 0
    assert ": used (built for vLLM" in capsys.readouterr().out
    assert main(["compile-cache", "pack", str(root), "--out", str(cache)]) == 2  # never over a cache
    assert "exists and is not empty" in capsys.readouterr().err
    graph = cache / "vllm" / "torch_compile_cache" / "abc" / "graph.py"
    graph.write_text(graph.read_text().upper())
    assert main(["compile-cache", "check", str(cache)]) == 1
    out = capsys.readouterr().out
    assert "refused: its files' sha256 differs from its manifest's (corrupted)" in out and len(out.splitlines()) == 1
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
