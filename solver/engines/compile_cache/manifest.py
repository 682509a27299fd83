"""What a shipped cache records of its build (:class:`CacheManifest`, the folder's ``manifest.json``, written
last), and whether the folder's files are still the ones it describes: their count, bytes and one sha256 over them
all are in the manifest, so a truncated or corrupted copy is refused in one line (:func:`check_contents`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from solver.engines.compile_cache.fingerprint import CacheError, Fingerprint

MANIFEST = "manifest.json"
FORMAT = 3  # 3: the fixed cache root, the weights' identity, transformers and vLLM's environment recorded


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


# ---- I/O at the edges ----------------------------------------------------------------------------------------


def read_manifest(folder: Path) -> CacheManifest:
    path = folder / MANIFEST
    if not path.is_file():
        raise CacheError(f"{folder} is not a compile cache: no {MANIFEST}")
    try:
        return CacheManifest.from_json(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CacheError(f"{path}: not JSON ({exc})") from exc


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
