"""The engine's compile cache, built once and shipped: a folder with vLLM's cache root and a manifest of what it
was built for.

vLLM keeps its torch.compile artefacts under ``VLLM_CACHE_ROOT`` and points Inductor and Triton there too
(0.26 ``compilation/compiler_interface.py``: ``inductor_cache/`` and ``triton_cache/`` beside the compiled
graphs), so the Triton kernels a warm-up compiled travel with it. A Kaggle submission starts on a fresh machine
every time; with the cache attached as a dataset the engine loads what it would otherwise compile.

A cache is only good for the vLLM (and torch) it was built with, the model's architecture and the GPU: anything
else is refused with one line and the engine starts cold. The model is known by its ``config.json`` (architecture,
shapes, quantization, dtype), never by its folder: a Kaggle dataset mounts the model wherever it mounts it. Other
engine arguments (the capture sizes, the token budget per step) change which kernels exist, not whether the cache
is safe: a difference is named in the line and the missing kernels compile as they would cold.

vLLM's own key for its compiled graphs holds the model's path: 0.26 ``vllm/config/model.py`` hashes every
``ModelConfig`` field not in its ignored set (``compute_hash``, lines 378-435, through ``get_hash_factors`` in
``config/utils.py`` 344-362): ``model`` (line 112, the path as given) and ``hf_config`` (line 165, its JSON with
``_name_or_path``, the path again); ``VllmConfig.compute_hash`` (``config/vllm.py`` 403-423) takes that hash, and
it names the folder of the compiled graphs (``compilation/backends.py`` 1058-1070, ``torch_compile_cache/<key>``)
and of the AOT-compiled model (``compilation/decorators.py`` 525-548 with ``caching.py`` 565-581). The same model in
a folder of another name would miss them and compile again (150 s cold against 54-61 s warm with the Marlin MoE
backend on an H200, which compiles no Triton kernel at all). So the engine loads the model through a link whose path
depends on the config only (:func:`model_link`), made at build and made again where the cache is used
(:func:`place_model`), and the manifest records that path. vLLM's key also holds the paths of its own traced source
files (``backends.py`` 1042-1055; the AOT load checks them, ``decorators.py`` 265-281): a vLLM installed elsewhere
than where the cache was built recompiles its graphs, which the line names.

A cache is checked whole before it is used: its files' count, bytes and one sha256 over them all are in the
manifest; a truncated or corrupted copy is refused in one line. The shipped folder is only read (copied to a
writable place the engine then adds to).

Layout::

    DIR/manifest.json   what it was built for (:class:`CacheManifest`), written last
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
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from solver.errors import BadInput
from solver.files import staged_dir

log = logging.getLogger(__name__)

MANIFEST = "manifest.json"
FORMAT = 2  # 2: the model known by its config.json alone, the model's link path and the files' digest recorded
# Environment variables a used cache sets before the engine starts: vLLM's root (its compiled graphs, and the
# Inductor/Triton folders it redirects into it) and Triton's own (kernels compiled outside a torch.compile region,
# such as the MoE's, before vLLM redirects it).
CACHE_ENV = ("VLLM_CACHE_ROOT", "TRITON_CACHE_DIR")
# Where the engine's model links live (:func:`model_link`): the temporary folder of Linux, fixed rather than
# ``TMPDIR`` so that a build and a Kaggle notebook name the same path.
LINK_ROOT = Path("/tmp/solver-models")
# config.json keys that name where the model was saved from, not what it is
PATH_KEYS = ("_name_or_path",)


class CacheError(BadInput, ValueError):
    """A compile cache that cannot be built or read; one line for the user."""


@dataclass(frozen=True)
class Fingerprint:
    """What a compile cache depends on. ``engine_args``: the engine arguments as the config passes them."""

    vllm: str
    torch: str
    model: str  # ``config.json <sha256[:12]>`` of the model's config (architecture, shapes, quantization, dtype)
    device: str  # the GPU's name (``cpu`` without one)
    engine_args: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CacheManifest:
    fingerprint: Fingerprint
    built_at: str  # ISO time
    files: int  # under vllm/ and triton/
    bytes: int
    digest: str  # sha256 over every file's relative path and bytes (:func:`content_digest`)
    model_path: str  # the path the building engine loaded the model through (vLLM's key holds it)
    model_name: str = ""  # the model folder's name at build (shown, never compared)
    vllm_path: str = ""  # where the building vLLM was installed (vLLM's key holds its sources' paths)
    format: int = FORMAT
    warmup_shapes: int = 0  # step shapes the building engine's warm-up ran (0: none)

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> CacheManifest:
        data = json.loads(text)
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise CacheError(f"manifest format {data.get('format') if isinstance(data, dict) else '?'}, "
                             f"this solver reads format {FORMAT}; build the cache again")
        try:
            return cls(**{**data, "fingerprint": Fingerprint(**data["fingerprint"])})
        except (KeyError, TypeError) as exc:
            raise CacheError(f"manifest is not a compile-cache manifest: {exc}") from exc


@dataclass(frozen=True)
class CacheVerdict:
    """Whether a cache may be used here, and the one line the start-up log shows either way. ``model_path``: the
    path the engine must load the model through for vLLM's compiled graphs to be found (None: the model's own)."""

    usable: bool
    line: str
    model_path: str | None = None


def check_fingerprint(built: Fingerprint, here: Fingerprint, where: str = "the compile cache") -> CacheVerdict:
    """Refuse a cache built for another vLLM or torch, model config or GPU; name differing engine arguments.

    >>> a = Fingerprint("0.26.0", "2.11.0", "config.json 1a2b3c4d5e6f", "NVIDIA H200", {"max_num_seqs": 64})
    >>> check_fingerprint(a, a).line
    'the compile cache: used (built for vLLM 0.26.0, torch 2.11.0, config.json 1a2b3c4d5e6f, NVIDIA H200)'
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


def config_identity(config_json: bytes) -> str:
    """The model as a compile cache knows it: the sha256 (first 12 hex digits) of its config.json read as JSON,
    keys sorted, without the keys that only say where it was saved from: the same model in any folder, saved with
    any indentation, is the same; another architecture, size, quantization or dtype is not.

    >>> config_identity(b'{"hidden_size": 2880, "num_local_experts": 128}')
    'config.json 1a100624c3e5'
    >>> config_identity(b'{"num_local_experts": 128,\\n  "hidden_size": 2880, "_name_or_path": "/models/x"}')
    'config.json 1a100624c3e5'
    >>> config_identity(b'{"hidden_size": 2880, "num_local_experts": 32}') == config_identity(b'{"hidden_size": 2880}')
    False
    """
    try:
        data = json.loads(config_json)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CacheError(f"the model's config.json is not JSON ({exc})") from exc
    if isinstance(data, dict):
        data = {k: v for k, v in data.items() if k not in PATH_KEYS}
    canonical = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return f"config.json {hashlib.sha256(canonical).hexdigest()[:12]}"


def model_link(identity: str, root: Path = LINK_ROOT) -> Path:
    """The path the engine loads a model through when a compile cache is built or used: named by the model's
    config only, so the build and every later start hand vLLM the same string (a hub id has no link).

    >>> str(model_link("config.json 1a100624c3e5"))
    '/tmp/solver-models/1a100624c3e5'
    """
    return root / identity.removeprefix("config.json ")


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


def model_identity(model_path: str) -> str:
    """:func:`config_identity` of the model folder's config.json (the hub id as given when the path is no
    folder)."""
    config = Path(model_path) / "config.json"
    if not config.is_file():
        return model_path
    return config_identity(config.read_bytes())


def place_model(model_path: str, link: Path) -> str:
    """Make ``link`` (the path the building engine loaded the model through) lead to the model folder
    ``model_path``, and return the path the engine should load the model through: ``link``, or the model's own path
    where the link cannot be made (the cache's Triton kernels still apply; vLLM's compiled graphs then compile).
    Only a missing path is made, and only a link of ours (under :data:`LINK_ROOT`) is moved: anything else there
    is the user's, and may hold other weights."""
    target = Path(model_path).resolve()
    if link.resolve() == target:
        return str(link)
    try:
        if link.is_symlink() and link.parent == LINK_ROOT:
            link.unlink()  # ours, left for a folder the model is no longer in
        elif link.exists() or link.is_symlink():
            log.warning("%s is not this model: it is loaded from %s, and vLLM's compiled graphs compile again",
                        link, model_path)
            return model_path
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(target, target_is_directory=True)
    except OSError as exc:
        log.warning("cannot link %s to %s (%s): the model is loaded from its own path", link, target, exc)
        return model_path
    return str(link)


def device_name() -> str:
    """The first visible GPU's name, ``cpu`` without one (torch's view, the one vLLM compiles for)."""
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"


def vllm_location() -> str:
    """The folder the installed vLLM's sources are in."""
    import vllm

    return str(Path(vllm.__file__).resolve().parent)


def fingerprint_here(model_path: str, engine_args: Mapping[str, Any]) -> Fingerprint:
    import torch
    import vllm

    return Fingerprint(vllm.__version__, torch.__version__.split("+")[0], model_identity(model_path), device_name(),
                       {k: engine_args[k] for k in sorted(engine_args)})


def _files(folder: Path) -> list[Path]:
    """The cache's files under ``vllm/`` and ``triton/``, in a fixed order (the manifest is not one of them)."""
    return sorted((p for sub in ("vllm", "triton") if (folder / sub).is_dir()
                   for p in (folder / sub).rglob("*") if p.is_file()), key=lambda p: p.relative_to(folder).as_posix())


def content_digest(folder: Path) -> tuple[int, int, str]:
    """(files, bytes, sha256) of the cache's files: each file's relative path and bytes, in path order."""
    digest, files, size = hashlib.sha256(), 0, 0
    for path in _files(folder):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        with path.open("rb") as handle:
            while chunk := handle.read(1 << 20):
                digest.update(chunk)
                size += len(chunk)
        digest.update(b"\0")
        files += 1
    return files, size, digest.hexdigest()


def check_contents(folder: Path, manifest: CacheManifest) -> str | None:
    """Why ``folder``'s files are not the ones its manifest describes (truncated, corrupted, added to), or None."""
    files = _files(folder)
    size = sum(p.stat().st_size for p in files)
    if (len(files), size) != (manifest.files, manifest.bytes):
        return (f"it holds {len(files)} files, {size} bytes, its manifest says {manifest.files} files, "
                f"{manifest.bytes} bytes (truncated or changed)")
    if content_digest(folder)[2] != manifest.digest:
        return "its files' sha256 differs from its manifest's (corrupted)"
    return None


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
    """Make ``out`` a shippable cache from an engine's ``VLLM_CACHE_ROOT`` (``cache_root``): its files, the Triton
    kernels merged, and the manifest (``model_path``: the path that engine loaded the model through), built beside
    ``out`` and renamed into place, so ``out`` appears whole or not at all."""
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
                                 warmup_shapes=warmup_shapes)
        (staging / MANIFEST).write_text(manifest.to_json() + "\n")
    return manifest


def read_manifest(folder: Path) -> CacheManifest:
    path = folder / MANIFEST
    if not path.is_file():
        raise CacheError(f"{folder} is not a compile cache: no {MANIFEST}")
    try:
        return CacheManifest.from_json(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CacheError(f"{path}: not JSON ({exc})") from exc


def copy_writable(folder: Path, work: Path) -> None:
    """Copy ``folder`` to ``work`` with every file and folder writable by this user: a Kaggle dataset's files are
    read-only, and the engine adds its new kernels beside the shipped ones."""
    shutil.copytree(folder, work, symlinks=True, copy_function=shutil.copyfile)  # files: this user's default mode
    for sub in (work, *(p for p in work.rglob("*") if p.is_dir() and not p.is_symlink())):
        sub.chmod(sub.stat().st_mode | stat.S_IRWXU)  # copytree copied the folders' read-only modes


def check_cache(folder: Path, here: Fingerprint) -> tuple[CacheVerdict, CacheManifest | None]:
    """Whether ``folder`` may be used here: its manifest read, built for this machine, its files whole. Reads only."""
    where = f"the compile cache {folder}"
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


def use_cache(folder: Path, here: Fingerprint, work: Path, model_path: str | None = None,
              vllm_here: str = "") -> CacheVerdict:
    """Check ``folder`` against this machine and, if it is usable, copy it to ``work`` (a writable place: the
    engine adds to its cache, and a Kaggle dataset is read-only), point vLLM and Triton there and place the model
    (``model_path``, a folder) where the building engine loaded it from. Never raises for a bad cache: the verdict
    says why it was refused, and the engine starts cold. ``folder`` is only read."""
    verdict, manifest = check_cache(folder, here)
    if not verdict.usable or manifest is None:
        return verdict
    if os.environ.get("VLLM_CACHE_ROOT") != str(work / "vllm") or not work.is_dir():  # a rebuild reuses its copy
        if work.exists():
            shutil.rmtree(work)
        try:
            copy_writable(folder, work)
        except OSError as exc:
            shutil.rmtree(work, ignore_errors=True)
            return CacheVerdict(False, f"the compile cache {folder}: refused: cannot copy it to {work} "
                                       f"({exc.strerror or exc}); the engine starts cold")
    os.environ["VLLM_CACHE_ROOT"] = str(work / "vllm")
    os.environ["TRITON_CACHE_DIR"] = str(work / "triton")
    placed = None
    if model_path is not None and Path(model_path).is_dir() and manifest.model_path:
        placed = place_model(model_path, Path(manifest.model_path))
    line = cache_verdict_line(verdict, manifest, vllm_here, work)
    if placed is not None:
        line += f"; the model loaded through {placed}" + ("" if placed == manifest.model_path else
                                                           f", not {manifest.model_path}: vLLM's compiled graphs "
                                                           "compile again")
    return CacheVerdict(True, line, placed)
