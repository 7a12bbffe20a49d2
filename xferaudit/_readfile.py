"""Opening a file the tool was handed to read: a run file, a report, a budget,
a baseline, the config.

Why: such a file may be committed by anyone. A FIFO named ``run.json`` would
hang the reader on ``open()`` (no writer ever comes), a link to ``/dev/zero``
would be read until memory runs out, a socket or a terminal has no end.
:func:`open_binary` refuses all of that before reading a byte: it opens with
``O_NONBLOCK`` (an open that would wait for a FIFO's writer returns at once;
on a regular file the flag changes nothing), asks ``fstat`` what was opened,
and reads only a regular file, and at most :data:`MAX_BYTES` of it (a file
that grows while it is read is cut off there too). Each refusal is the
caller's error class naming the file, one line.
"""

from __future__ import annotations

import io
import os
import stat
from typing import IO, Callable, Optional

__all__ = ["MAX_BYTES", "open_binary", "open_text", "read_text"]

#: The most bytes read from one file: 4 GiB (a report of some ten million sites).
MAX_BYTES = 4 << 30

Err = Callable[[str], Exception]

_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


class _Bounded(io.RawIOBase):
    """A file descriptor read through ``readinto``, `limit` bytes at most."""

    def __init__(self, fd: int, where: str, error: Err, limit: int) -> None:
        super().__init__()
        self._f = io.FileIO(fd, "rb", closefd=True)
        self._left = limit
        self._where, self._error, self._limit = where, error, limit

    def readable(self) -> bool:
        return True

    def readinto(self, b: bytearray) -> Optional[int]:  # type: ignore[override]
        n = self._f.readinto(b)
        if n:
            self._left -= n
            if self._left < 0:
                raise self._error(f"{self._where}: larger than {self._limit} bytes: refused")
        return n

    def close(self) -> None:
        try:
            self._f.close()
        finally:
            super().close()


def open_binary(path: "str | os.PathLike[str]", where: Optional[str] = None, error: Err = ValueError,
                missing: Optional[str] = None, limit: int = MAX_BYTES) -> IO[bytes]:
    """`path` opened for reading as bytes, when it is a regular file of at most
    `limit` bytes; else `error` naming `where` (`missing`: the message for a
    path that does not exist)."""
    where = str(path) if where is None else where
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise error(missing or f"{where}: no such file") from None
    except ValueError:  # a NUL in the name
        raise error(f"{where}: not a usable file name") from None
    except OSError as e:
        raise error(f"{where}: cannot read: {e.strerror or e}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            what = next((name for test, name in _KINDS if test(st.st_mode)), "not a regular file")
            raise error(f"{where}: {what}, not a regular file: refused")
        if st.st_size > limit:
            raise error(f"{where}: larger than {limit} bytes: refused")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)  # (a regular file: the flag is moot; leave nothing odd behind)
        return io.BufferedReader(_Bounded(fd, where, error, limit))
    except BaseException:
        os.close(fd)
        raise


def open_text(path: "str | os.PathLike[str]", where: Optional[str] = None, error: Err = ValueError,
              missing: Optional[str] = None, limit: int = MAX_BYTES) -> IO[str]:
    """:func:`open_binary`, decoded as UTF-8 (a decoding error surfaces on reading)."""
    return io.TextIOWrapper(open_binary(path, where, error, missing, limit), encoding="utf-8")


def read_text(path: "str | os.PathLike[str]", where: Optional[str] = None, error: Err = ValueError,
              missing: Optional[str] = None, limit: int = MAX_BYTES) -> str:
    """The whole text of `path` (UTF-8), read as :func:`open_binary` allows;
    `error` for anything that cannot be read or decoded."""
    where = str(path) if where is None else where
    with open_binary(path, where, error, missing, limit) as f:
        try:
            data = f.read()
        except OSError as e:
            raise error(f"{where}: cannot read: {e.strerror or e}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error(f"{where}: cannot read: {e}") from None
