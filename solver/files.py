"""Writing a file so that a crash leaves the old one or the new one, never a part: the one atomic write."""

from __future__ import annotations

import os
import tempfile
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
