"""Where a cache and the model's link live on the machine that builds or uses them.

vLLM's own key for its compiled graphs holds the model's path: 0.26 ``vllm/config/model.py`` hashes every
``ModelConfig`` field not in its ignored set (``compute_hash``, lines 378-435, through ``get_hash_factors`` in
``config/utils.py`` 344-362): ``model`` (line 112, the path as given) and ``hf_config`` (line 165, its JSON with
``_name_or_path``, the path again); ``VllmConfig.compute_hash`` (``config/vllm.py`` 403-423) takes that hash, and
it names the folder of the compiled graphs (``compilation/backends.py`` 1058-1070, ``torch_compile_cache/<key>``)
and of the AOT-compiled model (``compilation/decorators.py`` 525-548 with ``caching.py`` 565-581). The same model in
a folder of another name would miss them and compile again (150 s cold against 54-61 s warm with the Marlin MoE
backend on an H200, which compiles no Triton kernel at all). So the engine loads the model through a link whose path
depends on the model's config and weights only (:func:`model_link`), made at build and made again where the cache is
used (:func:`place_model`), and the manifest records that path. vLLM's key also holds the paths of its own traced
source files (``backends.py`` 1042-1055; the AOT load checks them, ``decorators.py`` 265-281): a vLLM installed
elsewhere than where the cache was built recompiles its graphs, which the line names.

The compiled artefacts keep absolute paths into the cache root they were built under: the Inductor standalone
adaptor's handle is ``(key, path)`` with ``path`` under ``VLLM_CACHE_ROOT`` (0.26 ``compiler_interface.py``
380-414, loaded from that path at 416-430), and the AOT-compiled model serialises those handles. A copy of the
root anywhere else fails to load them, and the path that compiles again still reads them (an H200 engine failed in
``_initialize_kv_caches`` with FileNotFoundError, three times). So a cache is built and used at one fixed path:
the build's root is ``/tmp/solver-compile-cache/<build id>/vllm`` (:func:`build_root`), recorded in the manifest,
and :func:`place_cache` copies the shipped folder back to exactly that path. Two caches never share a root (the
build id is random); two engines using one cache on one machine share its copy, as vLLM's default root is shared.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from pathlib import Path

from solver.engines.compile_cache.fingerprint import CacheError, model_identity, weights_identity
from solver.engines.compile_cache.manifest import MANIFEST, CacheManifest, read_manifest

log = logging.getLogger(__name__)

# Where the engine's model links live (:func:`model_link`): the temporary folder of Linux, fixed rather than
# ``TMPDIR`` so that a build and a Kaggle notebook name the same path.
LINK_ROOT = Path("/tmp/solver-models")
# Where a cache is built and used (:func:`build_root`): fixed for the same reason, one folder per build.
ROOT_BASE = Path("/tmp/solver-compile-cache")


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


# ---- I/O at the edges ----------------------------------------------------------------------------------------


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


def copy_writable(folder: Path, work: Path) -> None:
    """Copy ``folder`` to ``work`` with every file and folder writable by this user: a Kaggle dataset's files are
    read-only, and the engine adds its new kernels beside the shipped ones."""
    shutil.copytree(folder, work, symlinks=True, copy_function=shutil.copyfile)  # files: this user's default mode
    for sub in (work, *(p for p in work.rglob("*") if p.is_dir() and not p.is_symlink())):
        sub.chmod(sub.stat().st_mode | stat.S_IRWXU)  # copytree copied the folders' read-only modes


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
