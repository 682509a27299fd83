"""A cache packed from an engine's root (:func:`pack`), checked against this machine (:func:`check_cache`) and
used (:func:`use_cache`): copied back to the root it was built in, vLLM and Triton pointed there, the model placed
where the building engine loaded it from. The shipped folder is only read (copied to a writable place the engine
then adds to).

An engine that fails to start with a cache is started again without it, once (``vllm_async.open_vllm_engine``), and
that cache is not tried again in this process (:func:`mark_failed`): a cache is never worse than starting cold.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from solver.engines.compile_cache.fingerprint import CacheError, CacheVerdict, Fingerprint, check_fingerprint
from solver.engines.compile_cache.manifest import (MANIFEST, CacheManifest, check_contents, content_digest,
                                                   read_manifest)
from solver.engines.compile_cache.placement import place_cache, place_model
from solver.files import staged_dir

# Environment variables a used cache sets before the engine starts: vLLM's root (its compiled graphs, and the
# Inductor/Triton folders it redirects into it) and Triton's own (kernels compiled outside a torch.compile region,
# such as the MoE's, before vLLM redirects it).
CACHE_ENV = ("VLLM_CACHE_ROOT", "TRITON_CACHE_DIR")


def cache_verdict_line(verdict: CacheVerdict, manifest: CacheManifest, vllm_here: str, work: Path) -> str:
    """The used cache's line: what it holds and where it went, and what will compile again anyway.

    >>> m = CacheManifest(Fingerprint("0.26.0", "2.11.0", "config.json 1a2b", "NVIDIA H200"), "t", 3, 2**21, "d",
    ...                   "/tmp/solver-models/1a2b", "gpt-oss-120b", "/usr/lib/vllm")
    >>> line = cache_verdict_line(CacheVerdict(True, "X: used (...)"), m, "/opt/v/vllm", Path("/w"))
    >>> for part in line.split("; "): print(part)
    X: used (...)
    3 files, 2 MiB, built from gpt-oss-120b, copied to /w
    vLLM is installed at /opt/v/vllm, not /usr/lib/vllm as at build: its compiled graphs compile again
    """
    line = (f"{verdict.line}; {manifest.files} files, {manifest.bytes / 2**20:.0f} MiB, built from "
            f"{manifest.model_name or manifest.model_path}, copied to {work}")
    if manifest.vllm_path and vllm_here and manifest.vllm_path != vllm_here:
        line += (f"; vLLM is installed at {vllm_here}, not {manifest.vllm_path} as at build: its compiled graphs "
                 "compile again")
    return line


# ---- I/O at the edges ----------------------------------------------------------------------------------------


def merge_triton(root: Path, into: Path) -> int:
    """Copy every Triton kernel directory under ``root`` (the ``triton_cache`` folders vLLM made, one per compiled
    model hash) into ``into``: Triton names each by its content hash, so merging never overwrites a different
    kernel. Returns the kernels merged."""
    into.mkdir(parents=True, exist_ok=True)
    merged = 0
    for cache in root.rglob("triton_cache"):
        for kernel in (p for p in cache.iterdir() if p.is_dir()):
            if not (into / kernel.name).exists():
                shutil.copytree(kernel, into / kernel.name)
                merged += 1
    return merged


def pack(cache_root: Path, out: Path, fingerprint: Fingerprint, built_at: str, model_path: str,
         warmup_shapes: int = 0, model_name: str = "", vllm_path: str = "") -> CacheManifest:
    """Make ``out`` a shippable cache from an engine's ``VLLM_CACHE_ROOT`` (``cache_root``, recorded: its artefacts
    keep absolute paths into it, and :func:`use_cache` puts the copy back there): its files, the Triton kernels
    merged, and the manifest (``model_path``: the path that engine loaded the model through), built beside ``out``
    and renamed into place, so ``out`` appears whole or not at all."""
    if not cache_root.is_dir() or not any(cache_root.iterdir()):
        raise CacheError(f"{cache_root} holds no compile cache (start an engine with VLLM_CACHE_ROOT set to it)")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CacheError(f"{out} exists and is not empty; pack into a new folder")
    if out.exists():
        out.rmdir()  # empty: the staged folder takes its place
    with staged_dir(out) as staging:
        shutil.copytree(cache_root, staging / "vllm", symlinks=True)
        merge_triton(staging / "vllm", staging / "triton")
        files, size, digest = content_digest(staging)
        manifest = CacheManifest(fingerprint, built_at, files, size, digest, model_path,
                                 model_name=model_name or Path(model_path).name, vllm_path=vllm_path,
                                 warmup_shapes=warmup_shapes, cache_root=str(cache_root.absolute()))
        (staging / MANIFEST).write_text(manifest.to_json() + "\n")
    return manifest


# Caches that failed to start an engine in this process (folder -> why): never tried again here.
_FAILED: dict[str, str] = {}


def mark_failed(folder: Path | str, reason: str) -> None:
    """Remember that ``folder`` failed to start an engine here: :func:`check_cache` refuses it from now on."""
    _FAILED[str(Path(folder).absolute())] = reason


def check_cache(folder: Path, here: Fingerprint) -> tuple[CacheVerdict, CacheManifest | None]:
    """Whether ``folder`` may be used here: its manifest read, built for this machine, its files whole, and no
    engine started with it has failed in this process. Reads only."""
    where = f"the compile cache {folder}"
    failed = _FAILED.get(str(Path(folder).absolute()))
    if failed is not None:
        return CacheVerdict(False, f"{where}: refused: an engine failed to start with it here ({failed}); "
                                   "the engine starts cold"), None
    try:
        manifest = read_manifest(folder)
    except CacheError as exc:
        return CacheVerdict(False, f"{where}: refused: {exc}; the engine starts cold"), None
    verdict = check_fingerprint(manifest.fingerprint, here, where=where)
    if not verdict.usable:
        return verdict, manifest
    broken = check_contents(folder, manifest)
    if broken:
        return CacheVerdict(False, f"{where}: refused: {broken}; the engine starts cold"), manifest
    return verdict, manifest


def use_cache(folder: Path, here: Fingerprint, model_path: str | None = None, vllm_here: str = "") -> CacheVerdict:
    """Check ``folder`` against this machine and, if it is usable, copy it back to the root it was built in (a
    writable place: the engine adds to its cache, and a Kaggle dataset is read-only), point vLLM and Triton there
    and place the model (``model_path``, a folder) where the building engine loaded it from. Never raises for a bad
    cache: the verdict says why it was refused, and the engine starts cold. ``folder`` is only read."""
    verdict, manifest = check_cache(folder, here)
    if not verdict.usable or manifest is None:
        return verdict
    if not manifest.cache_root:
        return CacheVerdict(False, f"the compile cache {folder}: refused: its manifest names no build root; "
                                   "build the cache again; the engine starts cold")
    work = Path(manifest.cache_root).parent
    why = place_cache(folder, manifest, work)
    if why is not None:
        return CacheVerdict(False, f"the compile cache {folder}: refused: {why}; the engine starts cold")
    os.environ["VLLM_CACHE_ROOT"] = manifest.cache_root
    os.environ["TRITON_CACHE_DIR"] = str(work / "triton")
    placed = None
    if model_path is not None and Path(model_path).is_dir() and manifest.model_path:
        if here.weights != manifest.fingerprint.weights:
            line = cache_verdict_line(verdict, manifest, vllm_here, work)
            return CacheVerdict(True, f"{line}; the model's weights are not the build's "
                                      f"({manifest.fingerprint.weights or 'none'}, here {here.weights or 'none'}): "
                                      "it is loaded from its own path and vLLM's compiled graphs compile again",
                                model_path)
        placed = place_model(model_path, Path(manifest.model_path))
    line = cache_verdict_line(verdict, manifest, vllm_here, work)
    if placed is not None:
        line += f"; the model loaded through {placed}" + ("" if placed == manifest.model_path else
                                                           f", not {manifest.model_path}: vLLM's compiled graphs "
                                                           "compile again")
    return CacheVerdict(True, line, placed)


def cold_environment(environ: dict[str, str], before: Mapping[str, str | None]) -> None:
    """Put back the cache variables as they were before a cache was applied (``before``: name -> value or None)."""
    for name in CACHE_ENV:
        if before.get(name) is None:
            environ.pop(name, None)
        else:
            environ[name] = before[name]  # type: ignore[assignment]
