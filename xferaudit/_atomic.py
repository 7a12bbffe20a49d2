"""One way to replace a file: never half-written, never lost.

Every writer of the project (wrap/unwrap, --add-noqa, the findings cache,
Report.save, the budget command) goes through :func:`atomic_write`: the new
content goes to a temporary file in the same folder, is flushed to disk, takes
the old file's permissions, and is renamed over the old name in one step. An
interrupted run leaves either the old file or the new one.
"""

from __future__ import annotations

import os
import stat
import tempfile
from typing import Union


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write(path: Union[str, "os.PathLike[str]"], data: Union[bytes, str], encoding: str = "utf-8") -> None:
    """Replace (or create) `path` with `data` atomically.

    A symlink is written through to its target; an existing file keeps its mode,
    a new one gets the usual ``0o666 & ~umask``. Text is encoded with `encoding`.
    """
    if isinstance(data, str):
        data = data.encode(encoding)
    real = os.path.realpath(os.fspath(path))
    try:
        mode = stat.S_IMODE(os.stat(real).st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    folder = os.path.dirname(real) or "."
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(real) + ".", suffix=".xferaudit-tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
