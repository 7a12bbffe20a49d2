"""The guard's state on each thread (its levels, its mode, whether a hook or
a print is under way), apart from the guard so that its layers share it
without importing each other."""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["ThreadState", "sync", "tls"]


class ThreadState(threading.local):
    """Per thread. ``down``: the "down" level the scalar reads' hooks act on,
    None where they step aside (no guard on this thread, or ``hooked``): one
    read on their path instead of three; kept by :func:`sync` after every
    change of ``stack`` or ``hooked``."""

    def __init__(self) -> None:
        self.stack: list = []  # level dicts; [-1] is in force
        self.mode: Any = None  # the dispatch mode pushed on this thread (outermost guard)
        self.quiet = 0  # > 0 while a print is being handled: its inner reads are not new events
        self.print_acc: Any = None  # [copies, bytes] of the print being handled, counted inside
        self.hooked = 0  # > 0 inside a hooked call, or while the full mode is pushed here
        self.pushed: list = []  # per active guard on this thread: (pushed the full mode, is lite)
        self.lite_mode: Any = None  # the mode a hooked call runs under (the cheap layer)
        self.down: Any = None


tls = ThreadState()


def sync() -> None:
    """Bring ``tls.down`` up to date (after ``tls.stack`` or ``tls.hooked`` changed)."""
    tls.down = tls.stack[-1]["down"] if tls.stack and not tls.hooked else None
