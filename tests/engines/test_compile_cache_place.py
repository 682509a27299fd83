"""Where a shipped compile cache and its model link go on the machine that uses it: the cache back to the root it
was built in (vLLM's artefacts keep absolute paths into it), one link per model (config and weights), a live link
never moved, two processes placing either at once both served, and an engine that fails to start with a cache
started again without it, once."""

from __future__ import annotations

import asyncio
import dataclasses
import multiprocessing
import os
import shutil
from pathlib import Path

import pytest

from solver.engines.compile_cache import placement
from solver.engines.compile_cache import shipped as shipped_room
from solver.engines.compile_cache import (CACHE_ENV, MANIFEST, Fingerprint, model_link, pack, place_cache,
                                          place_model, read_manifest, use_cache, weights_identity)

HERE = Fingerprint("0.26.0", "2.11.0", "config.json 44d62c1ea062", "NVIDIA H200", {"kv_cache_dtype": "fp8"})


def model(path: Path, config: bytes = b'{"hidden_size": 2880}', weights: bytes | None = None) -> Path:
    path.mkdir(parents=True)
    (path / "config.json").write_bytes(config)
    if weights is not None:
        (path / "model-00001-of-00001.safetensors").write_bytes(weights)
    return path


def shipped(tmp_path: Path, fingerprint: Fingerprint = HERE, link: Path | None = None) -> Path:
    """A cache as the build writes it: its root (removed after packing) under ``tmp_path / "build"``."""
    root = tmp_path / "build" / "5f0c9e2a7b1d"
    (root / "vllm" / "torch_compile_cache" / "abc" / "rank_0_0" / "backbone").mkdir(parents=True)
    (root / "vllm" / "torch_compile_cache" / "abc" / "rank_0_0" / "backbone" / "artifact_compile_range_1_2048"
     ).write_bytes(b"graph")
    (root / "vllm" / "triton_cache" / "K1").mkdir(parents=True)
    (root / "vllm" / "triton_cache" / "K1" / "k.cubin").write_bytes(b"kernel")
    pack(root / "vllm", tmp_path / "cache", fingerprint, "2026-12-06T00:00:00+00:00",
         model_path=str(link or tmp_path / "links" / "none"))
    shutil.rmtree(root)
    return tmp_path / "cache"


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in CACHE_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(shipped_room, "_FAILED", {})


def test_the_cache_goes_back_to_the_root_it_was_built_in_and_a_second_start_reuses_that_copy(tmp_path: Path) -> None:
    cache = shipped(tmp_path)
    root = Path(read_manifest(cache).cache_root)
    assert root == tmp_path / "build" / "5f0c9e2a7b1d" / "vllm" and not root.exists()
    verdict = use_cache(cache, HERE)
    assert verdict.usable and os.environ["VLLM_CACHE_ROOT"] == str(root)
    assert (root / "torch_compile_cache" / "abc" / "rank_0_0" / "backbone" / "artifact_compile_range_1_2048").is_file()
    (root / "added-by-the-engine").write_text("x")  # the engine adds to its copy; a rebuilt engine keeps it
    assert use_cache(cache, HERE).usable and (root / "added-by-the-engine").is_file()


def _place(cache: str, root: str, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    queue.put(place_cache(Path(cache), read_manifest(Path(cache)), Path(root)))


def at_once(target, args: tuple[str, ...], processes: int) -> list[object]:
    """``target(*args, queue)`` in ``processes`` spawned processes started together; what each put, in any order."""
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=target, args=(*args, queue)) for _ in range(processes)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    return results


def test_two_processes_placing_one_cache_at_once_both_get_one_whole_copy(tmp_path: Path) -> None:
    cache = shipped(tmp_path)
    root = Path(read_manifest(cache).cache_root).parent
    assert at_once(_place, (str(cache), str(root)), 2) == [None, None]
    assert read_manifest(root).digest == read_manifest(cache).digest
    assert not [p for p in root.parent.iterdir() if p.name.startswith(".")]  # no staged copy left behind


def test_a_root_holding_something_else_is_refused_in_one_line_and_left_alone(tmp_path: Path) -> None:
    cache = shipped(tmp_path)
    root = Path(read_manifest(cache).cache_root).parent
    (root / "vllm").mkdir(parents=True)
    (root / "vllm" / "mine.txt").write_text("the user's")
    verdict = use_cache(cache, HERE)
    assert not verdict.usable and verdict.line.endswith(f"refused: {root} exists and is not this cache; the engine "
                                                        "starts cold")
    assert (root / "vllm" / "mine.txt").read_text() == "the user's" and "VLLM_CACHE_ROOT" not in os.environ


def test_weights_are_known_by_their_bytes_not_their_folder(tmp_path: Path) -> None:
    base = model(tmp_path / "base", weights=b"\0" * 100 + b"A" * 3_000_000)
    copy = model(tmp_path / "kaggle" / "input" / "gpt-oss-120b", weights=b"\0" * 100 + b"A" * 3_000_000)
    tuned = model(tmp_path / "tuned", weights=b"\0" * 100 + b"B" * 3_000_000)  # same shapes and sizes
    assert weights_identity(str(base)) == weights_identity(str(copy)) != weights_identity(str(tuned))
    assert weights_identity(str(model(tmp_path / "dummy"))) == ""  # no weight file: dummy weights
    assert model_link("config.json 44d62c1ea062", weights_identity(str(base))) != \
        model_link("config.json 44d62c1ea062", weights_identity(str(tuned)))


def test_a_live_link_is_never_moved_and_a_dangling_one_of_ours_is(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(placement, "LINK_ROOT", tmp_path / "links")
    first = model(tmp_path / "first", weights=b"W" * 1000)
    link = model_link("config.json 44d62c1ea062", weights_identity(str(first)), tmp_path / "links")
    assert place_model(str(first), link) == str(link) and link.resolve() == first.resolve()
    # a copy of the same weights elsewhere: the live link stays on the first folder, and serves the copy
    copy = model(tmp_path / "copy", weights=b"W" * 1000)
    assert place_model(str(copy), link) == str(link) and link.resolve() == first.resolve()
    # other weights at the same name (by hand): left alone, the model loads from its own path
    other = model(tmp_path / "other", weights=b"V" * 1000)
    assert place_model(str(other), link) == str(other) and link.resolve() == first.resolve()
    # the first folder gone: the link of ours is dangling, and is re-pointed
    shutil.rmtree(first)
    assert place_model(str(copy), link) == str(link) and link.resolve() == copy.resolve()


def _link(model_path: str, link: str, queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    queue.put(place_model(model_path, Path(link)))


def test_two_processes_placing_one_link_at_once_both_get_it(tmp_path: Path) -> None:
    mine = model(tmp_path / "gpt-oss-120b")
    link = tmp_path / "links" / "44d62c1ea062"
    assert at_once(_link, (str(mine), str(link)), 4) == [str(link)] * 4 and link.resolve() == mine.resolve()


def test_other_weights_than_the_builds_load_from_their_own_path(tmp_path: Path) -> None:
    base = model(tmp_path / "base", weights=b"A" * 1000)
    here = dataclasses.replace(HERE, weights=weights_identity(str(base)))
    link = model_link(HERE.model, here.weights, tmp_path / "links")
    cache = shipped(tmp_path, here, link)
    tuned = model(tmp_path / "tuned", weights=b"B" * 1000)
    verdict = use_cache(cache, dataclasses.replace(here, weights=weights_identity(str(tuned))), model_path=str(tuned))
    assert verdict.usable and verdict.model_path == str(tuned) and not link.exists()
    assert "the model's weights are not the build's" in verdict.line and "compile again" in verdict.line


def test_differences_in_vllms_compile_hash_are_named_as_graphs_that_compile_again(tmp_path: Path) -> None:
    built = dataclasses.replace(HERE, transformers="4.57.1", vllm_env={"VLLM_USE_FLASHINFER_SAMPLER": "0"},
                                engine_args={"kv_cache_dtype": "fp8", "moe_backend": "marlin", "max_num_seqs": 64})
    cache = shipped(tmp_path, built)
    here = dataclasses.replace(built, transformers="4.58.0", vllm_env={},
                               engine_args={"kv_cache_dtype": "fp8", "moe_backend": "triton", "max_num_seqs": 32})
    line = use_cache(cache, here).line
    assert ("vLLM's compiled graphs compile again: moe_backend marlin, here triton; transformers 4.57.1, here "
            "4.58.0; VLLM_USE_FLASHINFER_SAMPLER 0, here unset") in line
    assert "other engine arguments (max_num_seqs 64, here 32)" in line  # neutral for the graphs: new shapes only


def test_an_engine_that_fails_with_the_cache_starts_again_without_it_once(tmp_path: Path, monkeypatch) -> None:
    """The start's control flow (the engine itself replaced): the cached start fails, the cold one is made with the
    cache variables put back, and the cache is refused from then on in this process, in one line."""
    pytest.importorskip("vllm")
    from solver.config import load_config
    from solver.engines import vllm_async

    cache = shipped(tmp_path)
    monkeypatch.setattr(vllm_async, "apply_compile_cache",
                        lambda config, model: use_cache(Path(config.engine.compile_cache), HERE))
    starts: list[tuple[str | None, bool]] = []

    class Started:
        compile_cache = None
        started = None

    async def start(config, model, verdict):
        starts.append((os.environ.get("VLLM_CACHE_ROOT"), verdict.usable if verdict is not None else None))
        if len(starts) == 1:
            raise RuntimeError("FileNotFoundError: /tmp/solver-cache-build-x/torch_compile_cache/de26/rank_0_0\nmore")
        engine = Started()
        engine.compile_cache = verdict
        return engine

    monkeypatch.setattr(vllm_async, "_start_engine", start)
    monkeypatch.setattr(vllm_async, "start_mark", lambda begin: None)
    config = load_config("tiny", overrides={"engine.compile_cache": str(cache)})
    engine = asyncio.run(vllm_async.open_vllm_engine(config))
    assert starts == [(read_manifest(cache).cache_root, True), (None, False)]
    assert engine.compile_cache.line == (f"the compile cache {cache}: the engine failed to start with it "
                                         "(FileNotFoundError: /tmp/solver-cache-build-x/torch_compile_cache/de26/"
                                         "rank_0_0); started again without it")
    again = use_cache(cache, HERE)
    assert not again.usable and "an engine failed to start with it here" in again.line
    assert (cache / MANIFEST).is_file()  # the shipped folder is only read
