"""One way to replace a file: never half-written, never lost.

Every writer of the project (wrap/unwrap, --add-noqa, the findings cache,
Report.save, the budget command) goes through :func:`atomic_write`: the new
content goes to a temporary file in the same folder, is flushed to disk, takes
the old file's owner, group and permissions (the owner and group where the
process may set them: as root, or a group the user belongs to), and is renamed
over the old name in one step. An interrupted run leaves either the old file or
the new one. The old file's extended attributes (Linux: a download's origin,
an SELinux label, POSIX ACLs) are copied to the new one, each where the process
may set it.

Targets that are not regular files: a rename would put a regular file in
place of a device node, a FIFO or a socket (as root, ``-o /dev/null`` would
replace the system's null device). So an existing target that is not a regular
file (nor a link to one) is never renamed over: a character device
(``/dev/null``, a terminal) or a FIFO is written through, in place; a name that
goes through an open descriptor (``/dev/stdout``, ``/dev/fd/1``,
``/proc/self/fd/1``) is appended to, so output redirected to a file keeps what
was printed before it; a folder, a socket or a block device is refused
(:class:`NotARegularFile`, an :class:`OSError`), and nothing is written.
``special="refuse"`` refuses every such target (the findings cache and the
source rewriters: a FIFO there is no output anyone asked for).

Hard links: a rename gives the name a new file, so the other names of a
hard-linked file would keep the old content. Writing through them in place
could leave every name half-written if the run is killed, so the source
rewriters (wrap, unwrap) refuse such a file instead (``hard_links="refuse"``:
:class:`HardLinkError`, reported and skipped). Other writers (the cache, saved
reports, budgets) replace the name and leave the other names as they were.
"""

from __future__ import annotations

import errno
import os
import re
import stat
import sys
import tempfile
from typing import Iterable, Union


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


class HardLinkError(OSError):
    """The file has other names (hard links) and the caller asked not to split them."""


class NotARegularFile(OSError):
    """The target exists and is neither a regular file nor one this writer may write through."""


_KINDS = ((stat.S_ISCHR, "a character device"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISBLK, "a block device"))
# The folder of open descriptors: /proc/self/fd, /proc/<pid>/fd, a thread's.
_FD_FOLDER = re.compile(r"/proc/(?:self|thread-self|\d+)(?:/task/\d+)?/fd")


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "an open descriptor's file"
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def _names_a_descriptor(path: str) -> bool:
    """Whether `path` reaches its file through an open descriptor's link
    (``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``), whose target may be a
    pipe or an already-open file that a rename would not reach."""
    cur = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit of links followed
        if _FD_FOLDER.fullmatch(os.path.realpath(os.path.dirname(cur))):
            return True
        if not os.path.islink(cur):
            return False
        cur = os.path.join(os.path.dirname(cur), os.readlink(cur))
    return False


def _write_through(path: str, data: Iterable[bytes]) -> None:
    """Write into an existing stream in place: no create, no truncate, no rename."""
    for stream in (sys.stdout, sys.stderr):  # what was printed first stays first
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_NOCTTY", 0))
    with os.fdopen(fd, "wb") as f:
        for piece in data:
            f.write(piece)


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


def _keep_xattrs(real: str, tmp: str) -> None:
    """Copy the old file's extended attributes (a download's origin, an SELinux
    label, POSIX ACLs) to `tmp`, each where the process may set it."""
    if not hasattr(os, "listxattr"):
        return
    try:
        names = os.listxattr(real)
    except OSError:  # a file system without them
        return
    for name in names:
        try:
            os.setxattr(tmp, name, os.getxattr(real, name))
        except OSError:  # (trusted.* needs root; a name the new file's system refuses)
            continue


def atomic_write(path: Union[str, "os.PathLike[str]"], data: Union[bytes, str, Iterable[Union[bytes, str]]],
                 encoding: str = "utf-8", *, hard_links: str = "split", special: str = "write") -> None:
    """Replace (or create) `path` with `data` atomically (`data` may also be
    an iterable of pieces, written as they come: a large report is never
    whole in memory).

    A symlink is written through to its target; an existing file keeps its
    mode, and its owner and group where the process may set them; a new one
    gets the usual ``0o666 & ~umask``. Text is encoded with `encoding`. A file
    with other hard links: ``hard_links="split"`` (default) gives this name the
    new content and leaves the others; ``"refuse"`` raises :class:`HardLinkError`
    and writes nothing. A target that exists and is no regular file: see the
    module's docstring; ``special="refuse"`` refuses them all.
    """
    if hard_links not in ("split", "refuse"):
        raise ValueError(f"hard_links must be 'split' or 'refuse', not {hard_links!r}")
    if special not in ("write", "refuse"):
        raise ValueError(f"special must be 'write' or 'refuse', not {special!r}")
    if isinstance(data, str):
        data = data.encode(encoding)
    pieces = (data,) if isinstance(data, bytes) else (
        p.encode(encoding) if isinstance(p, str) else p for p in data)
    name = os.fspath(path)
    try:
        target = os.stat(name)  # through every link, a descriptor's included
    except (FileNotFoundError, NotADirectoryError):
        target = None
    if target is not None and stat.S_ISDIR(target.st_mode):
        raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", name)
    through = target is not None and (not stat.S_ISREG(target.st_mode) or _names_a_descriptor(name))
    if through:
        streams = stat.S_ISCHR(target.st_mode) or stat.S_ISFIFO(target.st_mode) or stat.S_ISREG(target.st_mode)
        if special == "refuse" or not streams:
            raise NotARegularFile(errno.EINVAL, f"is {_kind(target.st_mode)}: not written, "
                                  "since a rename would replace it; give a regular file", name)
        _write_through(name, pieces)
        return
    real = os.path.realpath(name)
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
            for piece in pieces:
                f.write(piece)
            f.flush()
            os.fsync(f.fileno())
        if st is not None and hasattr(os, "chown"):
            _keep_owner(tmp, st)
        if st is not None:
            _keep_xattrs(real, tmp)
        os.chmod(tmp, mode)  # after chown, which may clear set-id bits
        os.replace(tmp, real)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
