"""Progress of a long run over many files (``wrap``, ``unwrap``, ``check``), on stderr.

On a terminal: one line redrawn in place, a bar with files done, sites and
elapsed time, cleared at the end. Anywhere else (a CI log, a pipe): nothing
for short runs; after ``every`` seconds, and every ``every`` seconds after that,
one plain line such as ``xferaudit wrap: 120/993 files, 45 sites, 12 s``, so a
long run is never silent in a log. Each command prints its own summary after.
"""

from __future__ import annotations

import time
from typing import Callable, Optional, TextIO

#: Seconds between two plain lines when stderr is not a terminal.
EVERY_S = 5.0
#: Seconds between two redraws of the bar on a terminal.
REDRAW_S = 0.1


def isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


def _elapsed(s: float) -> str:
    s = int(s)
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60:02d} s"


class Progress:
    """Files done out of `total`, sites seen so far, elapsed time.

    ``step(sites=n)`` after each file; ``close()`` at the end (it clears the bar
    on a terminal; plain lines stay). `total` may be set after construction,
    before the first step. A run of one file, or `enabled=False`
    (``--quiet``), shows nothing. `clock` is for tests.
    """

    def __init__(
        self,
        total: int,
        stream: TextIO,
        enabled: bool = True,
        label: str = "",
        every: Optional[float] = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.total = total
        self.stream = stream
        self.tty = isatty(stream)
        self.enabled = enabled
        self.label = label
        self.every = EVERY_S if every is None else every
        self.clock = clock
        self.done = 0
        self.sites = 0
        self.start = clock()
        self.last = self.start if not self.tty else 0.0
        self.drawn = False

    def _counts(self, now: float) -> str:
        sites = f", {self.sites} site{'' if self.sites == 1 else 's'}" if self.sites else ""
        return f"{self.done}/{self.total} files{sites}, {_elapsed(now - self.start)}"

    def step(self, sites: int = 0) -> None:
        self.done += 1
        self.sites += sites
        if not self.enabled or self.total < 2:
            return
        now = self.clock()
        if self.tty:
            if now - self.last < REDRAW_S and self.done < self.total:
                return
            self.last = now
            width = 30
            filled = int(width * self.done / max(self.total, 1))
            line = f"[{'#' * filled}{'.' * (width - filled)}] {self._counts(now)}"
            self.stream.write("\r" + line.ljust(72))
            self.drawn = True
        else:
            if now - self.last < self.every:
                return
            self.last = now
            prefix = f"{self.label}: " if self.label else ""
            self.stream.write(f"{prefix}{self._counts(now)}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.tty and self.drawn:
            self.stream.write("\r" + " " * 72 + "\r")
            self.stream.flush()
