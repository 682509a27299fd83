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

The compiled artefacts keep absolute paths into the cache root they were built under: the Inductor standalone
adaptor's handle is ``(key, path)`` with ``path`` under ``VLLM_CACHE_ROOT`` (0.26 ``compiler_interface.py``
380-414, loaded from that path at 416-430), and the AOT-compiled model serialises those handles. A copy of the
root anywhere else fails to load them, and the path that compiles again still reads them (an H200 engine failed in
``_initialize_kv_caches`` with FileNotFoundError, three times). So a cache is built and used at one fixed path:
the build's root is ``/tmp/solver-compile-cache/<build id>/vllm`` (:func:`build_root`), recorded in the manifest,
and :func:`use_cache` copies the shipped folder back to exactly that path. Two caches never share a root (the build
id is random); two engines using one cache on one machine share its copy, as vLLM's default root is shared.

An engine that fails to start with a cache is started again without it, once (:func:`start_with_fallback`), and
that cache is not tried again in this process (:func:`mark_failed`): a cache is never worse than starting cold.

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
FORMAT = 3  # 3: the fixed cache root, the weights' identity, transformers and vLLM's environment recorded
# Environment variables a used cache sets before the engine starts: vLLM's root (its compiled graphs, and the
# Inductor/Triton folders it redirects into it) and Triton's own (kernels compiled outside a torch.compile region,
# such as the MoE's, before vLLM redirects it).
CACHE_ENV = ("VLLM_CACHE_ROOT", "TRITON_CACHE_DIR")
# Where the engine's model links live (:func:`model_link`): the temporary folder of Linux, fixed rather than
# ``TMPDIR`` so that a build and a Kaggle notebook name the same path.
LINK_ROOT = Path("/tmp/solver-models")
# Where a cache is built and used (:func:`build_root`): fixed for the same reason, one folder per build.
ROOT_BASE = Path("/tmp/solver-compile-cache")
# The files that make a model folder's weights (their names, sizes, first and last MiB: :func:`weights_identity`).
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")
WEIGHT_SAMPLE = 1 << 20  # bytes read at each end of a weight file: past its header, into the tensors
# Engine arguments that vLLM's own compile hash does not take (0.26 ``config/cache.py`` 203-222 ignores the memory
# and prefix-caching fields): a difference in any other argument makes vLLM compile its graphs again.
GRAPH_NEUTRAL_ARGS = frozenset({"gpu_memory_utilization", "kv_cache_memory_bytes", "num_gpu_blocks_override",
                                "enable_prefix_caching", "disable_log_stats", "served_model_name", "seed",
                                "max_num_seqs", "scheduling_policy", "enable_logging_iteration_details",
                                "skip_tokenizer_init", "tokenizer", "max_logprobs", "load_format"})
# vLLM variables that do not enter its compile hash (0.26 ``envs.compile_factors`` ignores them, among others):
# every other ``VLLM_*`` variable set differently at use than at build makes vLLM compile its graphs again.
ENV_NEUTRAL = frozenset({"VLLM_CACHE_ROOT", "VLLM_PORT", "VLLM_HOST_IP", "VLLM_RPC_BASE_PATH", "VLLM_NO_USAGE_STATS",
                         "VLLM_DO_NOT_TRACK", "VLLM_FORCE_AOT_LOAD", "VLLM_LOGGING_LEVEL", "VLLM_LOGGING_PREFIX",
                         "VLLM_LOGGING_STREAM", "VLLM_LOGGING_CONFIG_PATH", "VLLM_LOGGING_COLOR",
                         "VLLM_LOG_STATS_INTERVAL", "VLLM_ENGINE_ITERATION_TIMEOUT_S", "VLLM_USAGE_STATS_SERVER",
                         "VLLM_KEEP_ALIVE_ON_ENGINE_DEATH", "VLLM_WORKER_SHUTDOWN_TIMEOUT_SECONDS"})
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
    transformers: str = ""  # its version goes into the hashed config (``transformers_version``)
    vllm_env: Mapping[str, str] = field(default_factory=dict)  # ``VLLM_*`` variables in vLLM's compile hash
    weights: str = ""  # :func:`weights_identity` of the model folder ("" for a hub id)


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
    cache_root: str = ""  # the VLLM_CACHE_ROOT the building engine wrote (its artefacts' absolute paths lead there)

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
    outcome: CacheOutcome | None = None  # what the start did with it (set once the engine started)


def check_fingerprint(built: Fingerprint, here: Fingerprint, where: str = "the compile cache") -> CacheVerdict:
    """Refuse a cache built for another vLLM or torch, model config or GPU; name what makes vLLM compile its graphs
    again (an engine argument, transformers or a ``VLLM_*`` variable in its compile hash) and other engine
    arguments (kernels for new shapes).

    >>> a = Fingerprint("0.26.0", "2.11.0", "config.json 1a2b3c4d5e6f", "NVIDIA H200", {"max_num_seqs": 64})
    >>> check_fingerprint(a, a).line
    'the compile cache: used (built for vLLM 0.26.0, torch 2.11.0, config.json 1a2b3c4d5e6f, NVIDIA H200)'
    >>> v = check_fingerprint(a, dataclasses.replace(a, device="NVIDIA H100 80GB HBM3"))
    >>> v.usable, v.line
    (False, 'the compile cache: refused: built for NVIDIA H200, not NVIDIA H100 80GB HBM3; the engine starts cold')
    >>> check_fingerprint(a, dataclasses.replace(a, engine_args={"max_num_seqs": 32})).line.split("; ")[1]
    'built with other engine arguments (max_num_seqs 64, here 32): kernels for new shapes compile at start'
    >>> b = dataclasses.replace(a, engine_args={"max_num_seqs": 64, "kv_cache_dtype": "auto"}, transformers="4.57.1")
    >>> check_fingerprint(dataclasses.replace(a, transformers="4.56.2"), b).line.split("; ", 1)[1]
    "vLLM's compiled graphs compile again: kv_cache_dtype None, here auto; transformers 4.56.2, here 4.57.1"
    """
    for name, label in (("vllm", "vLLM "), ("torch", "torch "), ("model", ""), ("device", "")):
        was, now = getattr(built, name), getattr(here, name)
        if was != now:
            return CacheVerdict(False, f"{where}: refused: built for {label}{was}, not {label}{now}; "
                                       "the engine starts cold")
    line = f"{where}: used (built for vLLM {built.vllm}, torch {built.torch}, {built.model}, {built.device})"
    graphs = graph_differences(built, here)
    if graphs:
        line += "; vLLM's compiled graphs compile again: " + "; ".join(graphs)
    keys = sorted(set(built.engine_args) | set(here.engine_args))
    differ = [k for k in keys if k in GRAPH_NEUTRAL_ARGS and built.engine_args.get(k) != here.engine_args.get(k)]
    if differ:
        pairs = ", ".join(f"{k} {built.engine_args.get(k)}, here {here.engine_args.get(k)}" for k in differ)
        line += f"; built with other engine arguments ({pairs}): kernels for new shapes compile at start"
    return CacheVerdict(True, line)


def graph_differences(built: Fingerprint, here: Fingerprint) -> list[str]:
    """What differs between build and here that vLLM's compile hash takes: engine arguments other than
    :data:`GRAPH_NEUTRAL_ARGS`, the transformers version, ``VLLM_*`` variables other than :data:`ENV_NEUTRAL`.

    >>> a = Fingerprint("v", "t", "m", "d", {"moe_backend": "marlin"}, "4.57.1", {"VLLM_USE_FLASHINFER_SAMPLER": "0"})
    >>> graph_differences(a, dataclasses.replace(a, vllm_env={"VLLM_USE_FLASHINFER_SAMPLER": "0",
    ...                                                         "VLLM_CACHE_ROOT": "/x"}))
    []
    >>> graph_differences(a, dataclasses.replace(a, engine_args={}, vllm_env={}))
    ['moe_backend marlin, here None', 'VLLM_USE_FLASHINFER_SAMPLER 0, here unset']
    """
    out = []
    for key in sorted(set(built.engine_args) | set(here.engine_args)):
        was, now = built.engine_args.get(key), here.engine_args.get(key)
        if key not in GRAPH_NEUTRAL_ARGS and was != now:
            out.append(f"{key} {was}, here {now}")
    if built.transformers != here.transformers:
        out.append(f"transformers {built.transformers}, here {here.transformers}")
    for key in sorted((set(built.vllm_env) | set(here.vllm_env)) - ENV_NEUTRAL):
        was, now = built.vllm_env.get(key, "unset"), here.vllm_env.get(key, "unset")
        if was != now:
            out.append(f"{key} {was}, here {now}")
    return out


def vllm_env(environ: Mapping[str, str]) -> dict[str, str]:
    """The ``VLLM_*`` variables of ``environ`` that vLLM's compile hash takes (those not in :data:`ENV_NEUTRAL`).

    >>> vllm_env({"VLLM_CACHE_ROOT": "/x", "VLLM_USE_FLASHINFER_SAMPLER": "0", "HOME": "/root"})
    {'VLLM_USE_FLASHINFER_SAMPLER': '0'}
    """
    return {k: environ[k] for k in sorted(environ) if k.startswith("VLLM_") and k not in ENV_NEUTRAL}


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


def model_link(identity: str, weights: str = "", root: Path = LINK_ROOT) -> Path:
    """The path the engine loads a model through when a compile cache is built or used: named by the model's
    config and its weights (:func:`weights_identity`), so the build and every later start hand vLLM the same
    string, and two models (a fine-tune beside its base) never share one (a hub id has no link).

    >>> str(model_link("config.json 1a100624c3e5"))
    '/tmp/solver-models/1a100624c3e5'
    >>> str(model_link("config.json 1a100624c3e5", "weights 0f3c2b1a9d8e"))
    '/tmp/solver-models/1a100624c3e5-0f3c2b1a9d8e'
    """
    name = identity.removeprefix("config.json ")
    return root / (f"{name}-{weights.removeprefix('weights ')}" if weights else name)


def build_root(build_id: str, base: Path = ROOT_BASE) -> Path:
    """The folder a cache is built in and used from: ``vllm/`` in it is VLLM_CACHE_ROOT at build and at use, so the
    absolute paths vLLM's artefacts keep lead to the same files.

    >>> str(build_root("5f0c9e2a7b1d"))
    '/tmp/solver-compile-cache/5f0c9e2a7b1d'
    """
    return base / build_id


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


def weights_identity(model_path: str) -> str:
    """The model folder's weights as a compile cache's link knows them: a sha256 (first 12 hex digits) over each
    weight file's name, size and first and last MiB, in name order (a fine-tune of the same shapes differs in its
    tensors' bytes, which the samples read past the header); "" when the folder holds no weight file (a hub id, or
    a checkpoint loaded with dummy weights). Reads 2 MiB a file, not the weights."""
    folder = Path(model_path)
    if not folder.is_dir():
        return ""
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in WEIGHT_SUFFIXES)
    if not files:
        return ""
    digest = hashlib.sha256()
    for path in files:
        size = path.stat().st_size
        digest.update(f"{path.relative_to(folder).as_posix()}\0{size}\0".encode())
        with path.open("rb") as handle:
            digest.update(handle.read(WEIGHT_SAMPLE))
            if size > 2 * WEIGHT_SAMPLE:
                handle.seek(size - WEIGHT_SAMPLE)
                digest.update(handle.read(WEIGHT_SAMPLE))
    return f"weights {digest.hexdigest()[:12]}"


def same_model(folder: Path, model_path: str) -> bool:
    """Whether ``folder`` holds the model ``model_path`` holds: the same config and the same weights."""
    return (model_identity(str(folder)) == model_identity(model_path)
            and weights_identity(str(folder)) == weights_identity(model_path))


def place_model(model_path: str, link: Path) -> str:
    """Make ``link`` (the path the building engine loaded the model through) lead to the model folder
    ``model_path``, and return the path the engine should load the model through: ``link``, or the model's own path
    where the link cannot be had (the cache's Triton kernels still apply; vLLM's compiled graphs then compile).

    A live link (its folder exists) is never moved: it is used when that folder holds the same config and weights,
    else left to whoever made it. Only a dangling link of ours (under :data:`LINK_ROOT`) is re-pointed, and a link
    is made by renaming a new one into place, so two processes placing it at once both get a whole link. Anything
    else at the path is the user's."""
    target = Path(model_path).resolve()
    if link.resolve() == target:
        return str(link)
    try:
        if link.exists():  # a live link, or the user's own folder
            if link.is_symlink() and same_model(link, model_path):
                return str(link)  # another copy of these very weights
            log.warning("%s is not this model: it is loaded from %s, and vLLM's compiled graphs compile again",
                        link, model_path)
            return model_path
        if link.is_symlink() and link.parent != LINK_ROOT:
            log.warning("%s is a link of somebody else's: the model is loaded from %s", link, model_path)
            return model_path
        link.parent.mkdir(parents=True, exist_ok=True)
        fresh = link.with_name(f".{link.name}.{os.getpid()}")
        fresh.unlink(missing_ok=True)
        fresh.symlink_to(target, target_is_directory=True)
        os.replace(fresh, link)  # atomic: a dangling link of ours, or none, becomes this one whole
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


def fingerprint_here(model_path: str, engine_args: Mapping[str, Any],
                     environ: Mapping[str, str] | None = None) -> Fingerprint:
    """This machine's fingerprint for ``model_path`` started with ``engine_args`` under ``environ`` (default this
    process's environment, with the config's ``engine.env`` already applied)."""
    import torch
    import transformers
    import vllm

    return Fingerprint(vllm.__version__, torch.__version__.split("+")[0], model_identity(model_path), device_name(),
                       {k: engine_args[k] for k in sorted(engine_args)}, transformers=transformers.__version__,
                       vllm_env=vllm_env(os.environ if environ is None else environ),
                       weights=weights_identity(model_path))


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


def place_cache(folder: Path, manifest: CacheManifest, root: Path) -> str | None:
    """Copy ``folder`` to ``root`` (the build's root, where its artefacts' paths lead) unless a whole copy of this
    cache is there already (another engine on this machine, or a rebuilt one, placed it; the engine may have added
    to it since, which does no harm). The copy is staged beside ``root`` and renamed into place: of two processes
    placing it at once, one copy wins and both use it. None when placed, else why not."""
    try:
        if (root / MANIFEST).is_file():
            if read_manifest(root).digest == manifest.digest:
                return None
            if root.parent != ROOT_BASE:
                return f"{root} holds another cache"
            shutil.rmtree(root)  # ours, left by another build of the same id: gone
        elif root.exists():
            if root.parent != ROOT_BASE:
                return f"{root} exists and is not this cache"
            shutil.rmtree(root)  # ours, a copy that never finished
        staged = root.with_name(f".{root.name}.{os.getpid()}")
        shutil.rmtree(staged, ignore_errors=True)
        root.parent.mkdir(parents=True, exist_ok=True)
        copy_writable(folder, staged)
        try:
            staged.rename(root)
        except OSError:  # another process placed it first
            shutil.rmtree(staged, ignore_errors=True)
            if not (root / MANIFEST).is_file() or read_manifest(root).digest != manifest.digest:
                return f"{root} was taken by another cache"
    except (OSError, CacheError) as exc:
        return f"cannot copy it to {root} ({getattr(exc, 'strerror', None) or exc})"
    return None


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


@dataclass(frozen=True)
class CacheOutcome:
    """What a start with a cache did, read from the cache root's files before and after it: the compiled graphs
    vLLM saved (none when it loaded them: a load saves nothing) and the Triton kernels it compiled."""

    graphs_saved: int  # new compiled-graph artefacts (``artifact_compile_range_*``, the AOT ``model``)
    kernels_shipped: int
    kernels_compiled: int
    seconds: float

    def describe(self) -> str:
        """
        >>> CacheOutcome(0, 266, 0, 58.3).describe()
        'at start: graphs loaded, 0 Triton kernels compiled (266 shipped), 58.3 s'
        >>> CacheOutcome(3, 266, 11, 150.0).describe()
        'at start: graphs compiled again (3 saved), 11 Triton kernels compiled (266 shipped), 150.0 s'
        """
        graphs = "graphs loaded" if self.graphs_saved == 0 else f"graphs compiled again ({self.graphs_saved} saved)"
        return (f"at start: {graphs}, {self.kernels_compiled} Triton kernels compiled ({self.kernels_shipped} "
                f"shipped), {self.seconds:.1f} s")


def is_graph_artefact(relative: str) -> bool:
    """A file vLLM writes when it compiles a graph rather than loads it (0.26: the standalone adaptor saves
    ``<cache>/<hash>/rank_R/<prefix>/artifact_compile_range_*``; the AOT path saves ``torch_aot_compile/<hash>/model``).

    >>> is_graph_artefact("vllm/torch_compile_cache/de26054562/rank_0_0/backbone/artifact_compile_range_1_2048_subgraph_0")
    True
    >>> is_graph_artefact("vllm/torch_compile_cache/torch_aot_compile/0a1b/model")
    True
    >>> is_graph_artefact("vllm/torch_compile_cache/de26054562/rank_0_0/inductor_cache/ab/cabc.py")
    False
    """
    parts = relative.split("/")
    return parts[-1].startswith("artifact_compile_range") or (parts[-1] == "model" and "torch_aot_compile" in parts)


def kernel_names(root: Path) -> set[str]:
    """The Triton kernels (directories named by their hash) under ``root``'s ``triton/`` and every ``triton_cache``."""
    folders = [root / "triton", *root.rglob("triton_cache")]
    return {k.name for f in folders if f.is_dir() for k in f.iterdir() if k.is_dir()}


def root_files(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()} if root.is_dir() else set()


def cache_outcome(root: Path, files_before: set[str], kernels_before: set[str], seconds: float) -> CacheOutcome:
    """:class:`CacheOutcome` of a start from the cache copy at ``root``, given its files and kernels before it."""
    new = root_files(root) - files_before
    kernels = kernel_names(root)
    return CacheOutcome(sum(is_graph_artefact(f) for f in new), len(kernels_before), len(kernels - kernels_before),
                        seconds)
