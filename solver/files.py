"""Writing so that a crash leaves the old state or the new one, never a part: the one atomic write of a file, and
the one staged build of a directory."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def atomic_write(path: Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to a temporary file beside ``path``, make it durable (fsync), rename it into
    place and make the rename durable (fsync of the directory). Raises ``OSError``; the temporary file is
    removed whatever happens.

    >>> import tempfile
    >>> target = Path(tempfile.mkdtemp()) / "answers.csv"
    >>> atomic_write(target, "id,answer\\n"); target.read_text(), [p.name for p in target.parent.iterdir()]
    ('id,answer\\n', ['answers.csv'])
    """
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (a new or renamed file) durable (POSIX; a no-op where directories cannot be
    opened or synced: the files' own fsyncs still hold)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some file systems refuse fsync on directories
    finally:
        os.close(fd)


@contextmanager
def staged_dir(target: Path, *, replace: bool = False) -> Iterator[Path]:
    """Build a directory at the path this yields (beside ``target``, not yet created), then rename it into place
    when the block ends without an error: ``target`` appears whole or not at all, and the staging is removed
    whatever happens. ``replace``: an existing ``target`` is removed first (a rebuilt cache); otherwise an existing
    one makes the rename fail with ``OSError``.

    >>> import tempfile
    >>> root = Path(tempfile.mkdtemp())
    >>> with staged_dir(root / "model") as staging:
    ...     staging.mkdir(); _ = (staging / "config.json").write_text("{}")
    >>> sorted(p.name for p in root.iterdir()), (root / "model" / "config.json").is_file()
    (['model'], True)
    """
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{target.name}.") as tmp:
        staging = Path(tmp) / target.name
        yield staging
        if replace and target.exists():
            shutil.rmtree(target)
        os.rename(staging, target)
    fsync_dir(target.parent)
