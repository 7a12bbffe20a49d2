"""One pause of Python's cycle collector, for bursts of allocation that make
no cyclic garbage: a parse of a large file (the static half), a million rows
of a report saved, read or merged (the runtime). Each young collection during
such a burst moves thousands of live objects on, and the full collections
that follow walk every object the process holds; with it paused, a save of
1,000,000 rows takes half the CPU. Nothing is lost: the next collection after
the pause runs as usual. Standard library only (both halves import it).
"""

from __future__ import annotations

import contextlib
import gc
from typing import Iterator


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """The cycle collector off for the block (as it was after)."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()
