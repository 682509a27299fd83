"""The engine's compile cache, built once and shipped: a folder with vLLM's cache root and a manifest of what it
was built for.

vLLM keeps its torch.compile artefacts under ``VLLM_CACHE_ROOT`` and points Inductor and Triton there too
(0.26 ``compilation/compiler_interface.py``: ``inductor_cache/`` and ``triton_cache/`` beside the compiled
graphs), so the Triton kernels a warm-up compiled travel with it. A Kaggle submission starts on a fresh machine
every time; with the cache attached as a dataset the engine loads what it would otherwise compile.

A cache is only good for the vLLM (and torch) it was built with, the model's architecture and the GPU: anything
else is refused with one line and the engine starts cold. Other engine arguments (the capture sizes, the token
budget per step) change which kernels exist, not whether the cache is safe: a difference is named in the line and
the missing kernels compile as they would cold.

Layout::

    DIR/manifest.json   what it was built for (:class:`CacheManifest`)
    DIR/vllm/           VLLM_CACHE_ROOT as the building engine left it
    DIR/triton/         every Triton kernel directory found under it, merged (the path Triton is pointed at)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from solver.errors import BadInput
from solver.files import staged_dir

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
FORMAT = 1
# Environment variables a used cache sets before the engine starts: vLLM's root (its compiled graphs, and the
# Inductor/Triton folders it redirects into it) and Triton's own (kernels compiled outside a torch.compile region,
# such as the MoE's, before vLLM redirects it).
CACHE_ENV = ("VLLM_CACHE_ROOT", "TRITON_CACHE_DIR")


class CacheError(BadInput, ValueError):
    """A compile cache that cannot be built or read; one line for the user."""


@dataclass(frozen=True)
class Fingerprint:
    """What a compile cache depends on. ``engine_args``: the engine arguments as the config passes them."""

    vllm: str
    torch: str
    model: str  # the model folder's name and a hash of its config.json (architecture and shapes, not weights)
    device: str  # the GPU's name (``cpu`` without one)
    engine_args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CacheManifest:
    fingerprint: Fingerprint
    built_at: str  # ISO time
    files: int
    bytes: int
    format: int = FORMAT
    warmup_shapes: int = 0  # step shapes the building engine's warm-up ran (0: none)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> CacheManifest:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise CacheError(f"manifest format {data.get('format') if isinstance(data, dict) else '?'}, "
                             f"this solver reads format {FORMAT}")
        try:
            return cls(**{**data, "fingerprint": Fingerprint(**data["fingerprint"])})
        except (KeyError, TypeError) as exc:
            raise CacheError(f"manifest is not a compile-cache manifest: {exc}") from exc


@dataclass(frozen=True)
class CacheVerdict:
    """Whether a cache may be used here, and the one line the start-up log shows either way."""

    usable: bool
    line: str


def check_fingerprint(built: Fingerprint, here: Fingerprint, where: str = "the compile cache") -> CacheVerdict:
    """Refuse a cache built for another vLLM or torch, model or GPU; name differing engine arguments.

    >>> a = Fingerprint("0.26.0", "2.11.0", "gpt-oss-120b:1a2b", "NVIDIA H200", {"max_num_seqs": 64})
    >>> check_fingerprint(a, a).line
    'the compile cache: used (built for vLLM 0.26.0, torch 2.11.0, gpt-oss-120b:1a2b, NVIDIA H200)'
    >>> v = check_fingerprint(a, dataclasses.replace(a, device="NVIDIA H100 80GB HBM3"))
    >>> v.usable, v.line
    (False, 'the compile cache: refused: built for NVIDIA H200, not NVIDIA H100 80GB HBM3; the engine starts cold')
    >>> check_fingerprint(a, dataclasses.replace(a, engine_args={"max_num_seqs": 32})).line.split("; ")[1]
    'built with other engine arguments (max_num_seqs 64, here 32): kernels for new shapes compile at start'
    """
    for name, label in (("vllm", "vLLM "), ("torch", "torch "), ("model", ""), ("device", "")):
        was, now = getattr(built, name), getattr(here, name)
        if was != now:
            return CacheVerdict(False, f"{where}: refused: built for {label}{was}, not {label}{now}; "
                                       "the engine starts cold")
    line = f"{where}: used (built for vLLM {built.vllm}, torch {built.torch}, {built.model}, {built.device})"
    keys = sorted(set(built.engine_args) | set(here.engine_args))
    differ = [k for k in keys if built.engine_args.get(k) != here.engine_args.get(k)]
    if differ:
        pairs = ", ".join(f"{k} {built.engine_args.get(k)}, here {here.engine_args.get(k)}" for k in differ)
        line += f"; built with other engine arguments ({pairs}): kernels for new shapes compile at start"
    return CacheVerdict(True, line)


# ---- I/O at the edges ----------------------------------------------------------------------------------------


def model_identity(model_path: str) -> str:
    """The model folder's name and the first 12 hex digits of its config.json's sha256 (the hub id as given when
    the path is no folder)."""
    path = Path(model_path)
    config = path / "config.json"
    if not config.is_file():
        return model_path
    return f"{path.name}:{hashlib.sha256(config.read_bytes()).hexdigest()[:12]}"


def device_name() -> str:
    """The first visible GPU's name, ``cpu`` without one (torch's view, the one vLLM compiles for)."""
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"


def fingerprint_here(model_path: str, engine_args: Mapping[str, Any]) -> Fingerprint:
    import torch
    import vllm

    return Fingerprint(vllm.__version__, torch.__version__.split("+")[0], model_identity(model_path), device_name(),
                       {k: engine_args[k] for k in sorted(engine_args)})


def _size(folder: Path) -> tuple[int, int]:
    files = [p for p in folder.rglob("*") if p.is_file()]
    return len(files), sum(p.stat().st_size for p in files)


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


def pack(cache_root: Path, out: Path, fingerprint: Fingerprint, built_at: str, warmup_shapes: int = 0) -> CacheManifest:
    """Make ``out`` a shippable cache from an engine's ``VLLM_CACHE_ROOT`` (``cache_root``): its files, the Triton
    kernels merged, and the manifest, built beside ``out`` and renamed into place, so ``out`` appears whole or not
    at all."""
    if not cache_root.is_dir() or not any(cache_root.iterdir()):
        raise CacheError(f"{cache_root} holds no compile cache (start an engine with VLLM_CACHE_ROOT set to it)")
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise CacheError(f"{out} exists and is not empty; pack into a new folder")
    if out.exists():
        out.rmdir()  # empty: the staged folder takes its place
    with staged_dir(out) as staging:
        shutil.copytree(cache_root, staging / "vllm", symlinks=True)
        merge_triton(staging / "vllm", staging / "triton")
        files, size = _size(staging)
        manifest = CacheManifest(fingerprint, built_at, files, size, warmup_shapes=warmup_shapes)
        (staging / MANIFEST).write_text(manifest.to_json() + "\n")
    return manifest


def read_manifest(folder: Path) -> CacheManifest:
    path = folder / MANIFEST
    if not path.is_file():
        raise CacheError(f"{folder} is not a compile cache: no {MANIFEST}")
    try:
        return CacheManifest.from_json(path.read_text())
    except json.JSONDecodeError as exc:
        raise CacheError(f"{path}: not JSON ({exc.msg})") from exc


def use_cache(folder: Path, here: Fingerprint, work: Path) -> CacheVerdict:
    """Check ``folder`` against this machine and, if it is usable, copy it to ``work`` (a writable place: the
    engine adds to its cache, and a Kaggle dataset is read-only) and point vLLM and Triton there. Never raises for a
    bad cache: the verdict says why it was refused, and the engine starts cold."""
    try:
        manifest = read_manifest(folder)
    except CacheError as exc:
        return CacheVerdict(False, f"the compile cache: refused: {exc}; the engine starts cold")
    verdict = check_fingerprint(manifest.fingerprint, here, where=f"the compile cache {folder}")
    if not verdict.usable:
        return verdict
    if os.environ.get("VLLM_CACHE_ROOT") != str(work / "vllm") or not work.is_dir():  # a rebuild reuses its copy
        if work.exists():
            shutil.rmtree(work)
        shutil.copytree(folder, work, symlinks=True)
    os.environ["VLLM_CACHE_ROOT"] = str(work / "vllm")
    os.environ["TRITON_CACHE_DIR"] = str(work / "triton")
    return CacheVerdict(True, f"{verdict.line}; {manifest.files} files, {manifest.bytes / 2**20:.0f} MiB, "
                              f"copied to {work}")
