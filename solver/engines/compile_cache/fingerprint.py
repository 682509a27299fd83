"""What a compile cache depends on, as vLLM's compile hash holds it (:class:`Fingerprint`), and how the build's
fingerprint and this machine's compare (:func:`check_fingerprint`).

A cache is only good for the vLLM (and torch) it was built with, the model's architecture and the GPU: anything
else is refused with one line and the engine starts cold. The model is known by its ``config.json`` (architecture,
shapes, quantization, dtype), never by its folder: a Kaggle dataset mounts the model wherever it mounts it. Other
engine arguments (the capture sizes, the token budget per step) change which kernels exist, not whether the cache
is safe: a difference is named in the line and the missing kernels compile as they would cold.
"""

from __future__ import annotations

import dataclasses  # the doctests' dataclasses.replace
import hashlib
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from solver.errors import BadInput

if TYPE_CHECKING:
    from solver.engines.compile_cache.outcome import CacheOutcome  # CacheVerdict's annotation only

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


# Here, under every other room of the package: the config's identity raises it, and they all read or raise it.
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
