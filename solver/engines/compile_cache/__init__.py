"""The engine's compile cache, built once and shipped: a folder with vLLM's cache root and a manifest of what it
was built for.

vLLM keeps its torch.compile artefacts under ``VLLM_CACHE_ROOT`` and points Inductor and Triton there too
(0.26 ``compilation/compiler_interface.py``: ``inductor_cache/`` and ``triton_cache/`` beside the compiled
graphs), so the Triton kernels a warm-up compiled travel with it. A Kaggle submission starts on a fresh machine
every time; with the cache attached as a dataset the engine loads what it would otherwise compile.

A cache is only good for the vLLM (and torch) it was built with, the model's architecture and the GPU: anything
else is refused with one line and the engine starts cold. vLLM's own key for its compiled graphs holds the model's
path and its artefacts keep absolute paths into the root they were built under, so the engine loads the model
through a link named by its config and weights, and a cache is built and used at one fixed root. An engine that
fails to start with a cache is started again without it, once, and that cache is not tried again in this process:
a cache is never worse than starting cold. A cache is checked whole (its files' count, bytes and sha256) before it
is used, and the shipped folder is only read.

Which room holds what:

- ``fingerprint``: what vLLM's compile hash holds (:class:`Fingerprint`, :func:`fingerprint_here`) and how the
  build's and this machine's compare (:func:`check_fingerprint`, :class:`CacheVerdict`);
- ``manifest``: what a shipped folder records of its build (:class:`CacheManifest`) and whether its files are still
  those (:func:`content_digest`);
- ``placement``: where a cache and the model's link live on the machine (:func:`build_root`, :func:`place_cache`,
  :func:`model_link`, :func:`place_model`), and why both are fixed paths (vLLM's key, its artefacts' own paths);
- ``outcome``: what a start did, read from the cache root's files (:func:`cache_outcome`);
- ``shipped``: pack, check and use (:func:`pack`, :func:`check_cache`, :func:`use_cache`), and a cache that failed
  to start an engine here (:func:`mark_failed`).

Outsiders import from here; the modules behind it are this package's own.

Layout::

    DIR/manifest.json   what it was built for (:class:`CacheManifest`), written last
    DIR/vllm/           VLLM_CACHE_ROOT as the building engine left it
    DIR/triton/         every Triton kernel directory found under it, merged (the path Triton is pointed at)
"""

from solver.engines.compile_cache.fingerprint import (CacheError, CacheVerdict, Fingerprint, check_fingerprint,
                                                      config_identity, fingerprint_here, model_identity,
                                                      vllm_location, weights_identity)
from solver.engines.compile_cache.manifest import MANIFEST, CacheManifest, content_digest, read_manifest
from solver.engines.compile_cache.outcome import cache_outcome, kernel_names, root_files
from solver.engines.compile_cache.placement import ROOT_BASE, build_root, model_link, place_cache, place_model
from solver.engines.compile_cache.shipped import (CACHE_ENV, check_cache, cold_environment, mark_failed, pack,
                                                  use_cache)

__all__ = ["CACHE_ENV", "MANIFEST", "ROOT_BASE", "CacheError", "CacheManifest", "CacheVerdict", "Fingerprint",
           "build_root", "cache_outcome", "check_cache", "check_fingerprint", "cold_environment", "config_identity",
           "content_digest", "fingerprint_here", "kernel_names", "mark_failed", "model_identity", "model_link",
           "pack", "place_cache", "place_model", "read_manifest", "root_files", "use_cache", "vllm_location",
           "weights_identity"]
