"""One way to replace a file: never half-written, never lost.

Every writer of the project (wrap/unwrap, --add-noqa, the findings cache,
Report.save, the budget command) goes through :func:`atomic_write`: the new
content goes to a temporary file in the same folder, is flushed to disk, takes
the old file's owner, group and permissions (the owner and group where the
process may set them: as root, or a group the user belongs to), and is renamed
over the old name in one step. An interrupted run leaves either the old file or
the new one.

Hard links: a rename gives the name a new file, so the other names of a
hard-linked file would keep the old content. Writing through them in place
could leave every name half-written if the run is killed, so the source
rewriters (wrap, unwrap) refuse such a file instead (``hard_links="refuse"``:
:class:`HardLinkError`, reported and skipped). Other writers (the cache, saved
reports, budgets) replace the name and leave the other names as they were.
"""

from __future__ import annotations

import os
import stat
import tempfile
from typing import Iterable, Union


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class HardLinkError(OSError):
    """The file has other names (hard links) and the caller asked not to split them."""


def _keep_owner(tmp: str, st: os.stat_result) -> None:
    """Give `tmp` the owner and group of `st` where this process may (root may
    set both; a user may set a group of their own); otherwise leave them."""
    uid, gid = st.st_uid, st.st_gid
    if (uid, gid) == (os.geteuid(), os.getegid()):
        return
    for owner in ((uid, gid), (-1, gid)):
        try:
            os.chown(tmp, *owner)
            return
        except (PermissionError, OSError):
            continue


def atomic_write(path: Union[str, "os.PathLike[str]"], data: Union[bytes, str, Iterable[Union[bytes, str]]],
                 encoding: str = "utf-8", *, hard_links: str = "split") -> None:
    """Replace (or create) `path` with `data` atomically (`data` may also be
    an iterable of pieces, written as they come: a large report is never
    whole in memory).

    A symlink is written through to its target; an existing file keeps its
    mode, and its owner and group where the process may set them; a new one
    gets the usual ``0o666 & ~umask``. Text is encoded with `encoding`. A file
    with other hard links: ``hard_links="split"`` (default) gives this name the
    new content and leaves the others; ``"refuse"`` raises :class:`HardLinkError`
    and writes nothing.
    """
    if hard_links not in ("split", "refuse"):
        raise ValueError(f"hard_links must be 'split' or 'refuse', not {hard_links!r}")
    if isinstance(data, str):
        data = data.encode(encoding)
    real = os.path.realpath(os.fspath(path))
    try:
        st = os.stat(real)
        mode = stat.S_IMODE(st.st_mode)
    except FileNotFoundError:
        st = None
        mode = 0o666 & ~_umask()
    if st is not None and hard_links == "refuse" and st.st_nlink > 1:
        raise HardLinkError(f"hard link: {st.st_nlink} names share the file; not rewritten, since a "
                            "rewrite would split the names; copy it to break the link first")
    folder = os.path.dirname(real) or "."
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(real) + ".", suffix=".xferaudit-tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            for piece in (data,) if isinstance(data, bytes) else data:
                f.write(piece.encode(encoding) if isinstance(piece, str) else piece)
            f.flush()
            os.fsync(f.fileno())
        if st is not None and hasattr(os, "chown"):
            _keep_owner(tmp, st)
        os.chmod(tmp, mode)  # after chown, which may clear set-id bits
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
