"""The tally behind every wrapper, the launch counter and the guard.

Normal, for a training step with every site wrapped: one upload per batch
tensor, one download per logged scalar every k steps, and one launch per graph
replay or compiled call. More than that is a copy nobody asked for; the report
shows which named site made it.

Counting is off by default; when it is off a wrapper reads one flag
(:data:`STATE.on`) and calls straight through. Launches are always counted:
they are cheap and a graph that is launched more or less often than expected is
a bug worth seeing without asking.

Thread safety: one lock around every update, so counts from pin-memory threads
and autograd's threads are not lost.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Optional

DIRECTIONS = ("up", "down", "d2d", "none")


class _State:
    """Process-wide switches and tallies.

    ``on`` (counting) and ``guard`` (the dispatcher-level guard) are properties
    that keep ``active = on or guard`` up to date, so a wrapper's fast path is a
    single attribute read: ``if not STATE.active: return bare_call()``.
    """

    __slots__ = ("_on", "_guard", "active", "lock", "sites", "launches", "unwrapped", "local")

    def __init__(self) -> None:
        self._on = False
        self._guard = False
        self.active = False
        self.lock = threading.Lock()
        self.sites: dict[str, "SiteTally"] = {}
        self.launches: dict[str, "LaunchTally"] = {}
        self.unwrapped: dict[tuple, "UnwrappedTally"] = {}
        # Per-thread depth of wrapper calls in progress: the guard does not
        # count a crossing made inside a wrapper a second time.
        self.local = threading.local()

    @property
    def on(self) -> bool:
        """Counting wrapped sites (``xfer.count(True)``)."""
        return self._on

    @on.setter
    def on(self, value: bool) -> None:
        self._on = bool(value)
        self.active = self._on or self._guard

    @property
    def guard(self) -> bool:
        """The runtime guard is watching the dispatcher: wrappers mark their depth."""
        return self._guard

    @guard.setter
    def guard(self, value: bool) -> None:
        self._guard = bool(value)
        self.active = self._on or self._guard


STATE = _State()


@dataclass
class SiteTally:
    site: str
    kind: str
    calls: int = 0
    crossings: int = 0
    bytes: int = 0
    # direction -> [crossings-or-calls, bytes]; "none" counts calls that crossed nothing
    by_direction: dict = field(default_factory=dict)

    @property
    def direction(self) -> str:
        taken = [d for d in DIRECTIONS if d in self.by_direction and d != "none"]
        if not taken:
            return "none"
        return ",".join(taken)


@dataclass
class LaunchTally:
    site: str
    launches: int = 0
    nodes: Optional[int] = None  # node count of the last graph launched, where known


@dataclass
class UnwrappedTally:
    path: str
    line: int
    op: str
    direction: str
    count: int = 0
    bytes: int = 0


def record(site: str, kind: str, direction: str, nbytes: int) -> None:
    """One call of a wrapped site that took `direction` and moved `nbytes`."""
    with STATE.lock:
        t = STATE.sites.get(site)
        if t is None:
            t = STATE.sites[site] = SiteTally(site, kind)
        t.calls += 1
        d = t.by_direction.get(direction)
        if d is None:
            d = t.by_direction[direction] = [0, 0]
        d[0] += 1
        if direction != "none":
            t.crossings += 1
            t.bytes += nbytes
            d[1] += nbytes


def record_launch(site: str, nodes: Optional[int] = None) -> None:
    with STATE.lock:
        t = STATE.launches.get(site)
        if t is None:
            t = STATE.launches[site] = LaunchTally(site)
        t.launches += 1
        if nodes is not None:
            t.nodes = nodes


def record_unwrapped(path: str, line: int, op: str, direction: str, nbytes: int) -> None:
    """A crossing the guard saw outside every wrapper, at the user's source line."""
    key = (path, line, op, direction)
    with STATE.lock:
        t = STATE.unwrapped.get(key)
        if t is None:
            t = STATE.unwrapped[key] = UnwrappedTally(path, line, op, direction)
        t.count += 1
        t.bytes += nbytes


def in_wrapper() -> bool:
    """True while the current thread is inside a counting wrapper."""
    return getattr(STATE.local, "depth", 0) > 0


def reset() -> None:
    """Forget every count (transfers, launches and unwrapped events)."""
    with STATE.lock:
        STATE.sites.clear()
        STATE.launches.clear()
        STATE.unwrapped.clear()
