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

Fork safety: a thread may hold the lock when another thread forks, and the
child would then wait for it forever (a fork DataLoader with metric threads
counting). A forked child gets a new lock, and its tallies start empty:
counting, the guard and the timeline stay as they were, and what the child
counts is its own. A child's counts are not sent back to the parent; a worker
that wants them kept saves a report of its own (``xfer.snapshot().save(...)``).

Timeline (off by default, ``xfer.timeline(True)``): a bounded ring buffer of
timestamped events, one per wrapped call, launch and unwrapped crossing, for
``xferaudit report RUN.json --trace``. Its clock is ``time.time_ns()`` (the
wall clock, CLOCK_REALTIME), the clock torch.profiler's Chrome trace ``ts``
values are taken from (they are that time minus the trace's
``baseTimeNanoseconds``, in microseconds), so the two traces line up. When the
timeline is off, each update reads one more attribute (``STATE.timeline is
None``), under the lock it already holds; wrappers' fast paths are unchanged.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from . import frames as _frames
from .kinds import KINDS
from .rows import Launch, Row, Unwrapped, direction_of
from .sitenames import full_name


class _Depth(threading.local):
    """Per thread: how many wrapper calls are in progress (a class default, so
    reading it on a thread that never set it is a plain lookup, not a caught
    AttributeError: the guard reads it on every event)."""

    depth = 0


class _State:
    """Process-wide switches and tallies.

    ``on`` (counting) and ``guard`` (the dispatcher-level guard) are properties
    that keep ``active = on or guard`` up to date, so a wrapper's fast path is a
    single attribute read: ``if not STATE.active: return bare_call()``.
    """

    __slots__ = ("_on", "_guard", "active", "lock", "sites", "launches", "unwrapped", "local",
                 "timeline", "steps", "root")

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
        self.local = _Depth()
        # The event timeline (a Timeline) while it is on, else None.
        self.timeline: Optional["Timeline"] = None
        # Steps marked with xfer.step() (or counting()'s handle) while counting:
        # the report carries them, so a budget made from it is per step.
        self.steps = 0
        # The project root unwrapped paths are written relative to (``xferaudit
        # run`` sets it); None: as shown, relative to the working directory.
        self.root: Optional[str] = None

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
    """The live counts of one wrapped site; :meth:`snapshot` is its report Row."""

    site: str
    kind: str
    calls: int = 0
    crossings: int = 0
    copies: int = 0
    bytes: int = 0
    pageable: int = 0
    # direction -> [calls, bytes, copies, pageable]; "none" counts calls that crossed nothing
    by_direction: dict = field(default_factory=dict)

    @property
    def direction(self) -> str:
        return direction_of(self.by_direction)

    def snapshot(self) -> Row:
        by = {d: {"calls": v[0], "bytes": v[1], "copies": v[2], "pageable": v[3]}
              for d, v in self.by_direction.items()}
        return Row(self.site, self.kind, self.direction, self.calls, self.crossings, self.bytes,
                   by, self.copies, self.pageable)


@dataclass
class LaunchTally:
    site: str
    launches: int = 0
    nodes: Optional[int] = None  # node count of the last graph launched, where known

    def snapshot(self) -> Launch:
        return Launch(self.site, self.launches, self.nodes)


@dataclass
class UnwrappedTally:
    """The live counts of one line's unwrapped crossings of one op and direction.

    ``code`` is the code object running the line (None for an event recorded by
    path); ``chains`` the distinct chains of user frames that reached it (flat
    ``(code, line, code, line, ...)`` tuples, innermost first), walked for its
    first ``samples`` events. Names and texts are read at :meth:`snapshot`.
    """

    path: str
    line: int
    op: str
    direction: str
    count: int = 0
    bytes: int = 0
    via: str = ""  # the library frame below the user's line (the first seen)
    copies: int = 0  # copies on the wire (a print makes several)
    pageable: int = 0  # non_blocking copies with a pageable host side (they ran synchronously)
    ns: int = 0  # host time the crossings blocked, in nanoseconds
    code: Any = None
    chains: list = field(default_factory=list)
    samples: int = _frames.CHAIN_SAMPLES

    def snapshot(self) -> Unwrapped:
        root = STATE.root
        function = text = ""
        path = self.path
        chains = [[_frames.describe(c[i], c[i + 1], root) for i in range(0, len(c), 2)]
                  for c in self.chains]
        if self.code is not None:
            own = _frames.describe(self.code, self.line, root)
            path, function, text = own["path"], own["function"], own["text"]
        return Unwrapped(path, self.line, self.op, self.direction, self.count, self.bytes,
                         self.via, self.copies, self.pageable, self.ns / 1e9, function, text,
                         chains[0] if chains else [], chains if len(chains) > 1 else [])


class Timeline:
    """Timestamped events, newest kept: a ring buffer of at most `maxlen`.

    Each event is ``(time_ns, what, name, direction, n)``: `what` is "site"
    (a wrapped call: `name` the site, `n` its bytes; direction "none" when it
    crossed nothing), "launch" (`name` the graph site, direction "launch", `n`
    its node count or -1) or "unwrapped" (`name` "path:line op", `n` bytes).
    `time_ns` is ``time.time_ns()``. `seen` counts every event offered, so
    ``seen - len(events)`` were dropped from the front when the buffer filled.
    """

    __slots__ = ("events", "seen", "start_ns", "maxlen")

    def __init__(self, maxlen: int = 100_000) -> None:
        if maxlen < 1:
            raise ValueError("timeline maxlen must be at least 1")
        self.maxlen = int(maxlen)
        self.events: deque = deque(maxlen=self.maxlen)
        self.seen = 0
        self.start_ns = time.time_ns()

    def clear(self) -> None:
        self.events.clear()
        self.seen = 0
        self.start_ns = time.time_ns()

    def to_dict(self) -> dict:
        """The JSON form kept in a report under "timeline" (see Report.timeline).

        Times are integer nanoseconds after ``t0_ns`` (``time.time_ns()`` when
        the timeline started or was last reset), so they stay exact in JSON.
        """
        t0 = self.start_ns
        return {
            "clock": "time.time_ns",
            "t0_ns": t0,
            "end_ns": time.time_ns() - t0,
            "pid": os.getpid(),
            "maxlen": self.maxlen,
            "seen": self.seen,
            "dropped": self.seen - len(self.events),
            "events": [[t - t0, what, name, d, n] for t, what, name, d, n in self.events],
        }


# The lock's bound methods, looked up once: ``acquire(); try: ... finally:
# release()`` costs about half of ``with STATE.lock:`` on CPython 3.11, and
# record() runs on every wrapped call while counting. A forked child binds
# them to its new lock (see new_lock_after_fork).
_acquire = STATE.lock.acquire
_release = STATE.lock.release


def record(site: str, key: str, direction: str, nbytes: int, copies: int = 1,
           pageable: int = 0) -> None:
    """One call of a wrapped site that took `direction` and moved `nbytes` in
    `copies` copies (`pageable` of them non-blocking from or to pageable host memory).

    `key` names the wrapper (and, for the generic ones, the method or
    function): the site's kind is looked up from the rule table once, when the
    site is first seen (see :mod:`xferaudit.runtime.kinds`). A short literal
    (``":f:x.cpu"``) is named after the caller's file (:mod:`.sitenames`).
    """
    if site and site[0] == ":":
        site = full_name(site)
    _acquire()
    try:
        t = STATE.sites.get(site)
        if t is None:
            t = STATE.sites[site] = SiteTally(site, KINDS[key])
        t.calls += 1
        d = t.by_direction.get(direction)
        if d is None:
            d = t.by_direction[direction] = [0, 0, 0, 0]
        d[0] += 1
        if direction != "none":
            t.crossings += 1
            t.bytes += nbytes
            t.copies += copies
            d[1] += nbytes
            d[2] += copies
            if pageable:
                t.pageable += pageable
                d[3] += pageable
        tl = STATE.timeline
        if tl is not None:
            tl.seen += 1
            tl.events.append((time.time_ns(), "site", site, direction, nbytes))
    finally:
        _release()


def record_launch(site: str, nodes: Optional[int] = None) -> None:
    """One launch of a graph at `site` (``nodes``: its node count, where known)."""
    if site and site[0] == ":":
        site = full_name(site)
    _acquire()
    try:
        t = STATE.launches.get(site)
        if t is None:
            t = STATE.launches[site] = LaunchTally(site)
        t.launches += 1
        if nodes is not None:
            t.nodes = nodes
        tl = STATE.timeline
        if tl is not None:
            tl.seen += 1
            tl.events.append((time.time_ns(), "launch", site, "launch",
                              -1 if nodes is None else nodes))
    finally:
        _release()


def record_unwrapped(path: str, line: int, op: str, direction: str, nbytes: int,
                     via: str = "", copies: int = 1, pageable: int = 0, ns: int = 0) -> None:
    """A crossing outside every wrapper at `path`:`line` (`via`: the library
    frame it happened in, if not the user's), `ns` nanoseconds of host time.
    The guard records through :func:`record_event`, which also keeps the code
    object and the chain of user frames."""
    key = (path, line, op, direction)
    _acquire()
    try:
        t = STATE.unwrapped.get(key)
        if t is None:
            t = STATE.unwrapped[key] = UnwrappedTally(path, line, op, direction, via=via)
        _add_unwrapped(t, nbytes, copies, pageable, ns)
    finally:
        _release()


def record_event(place: tuple, op: str, direction: str, nbytes: int, copies: int = 1,
                 pageable: int = 0, ns: int = 0) -> None:
    """One crossing the guard saw outside every wrapper, at `place`
    (:func:`xferaudit.runtime.frames.locate`'s answer; the frames on it are
    still running). No string is made and no path looked at, except the first
    time a line is seen."""
    user, f, first, first_f = place
    if user is not None:
        entry, line = user, _frames.line(user, f)
    elif first is not None:
        entry, line = first, _frames.line(first, first_f)
    else:
        entry, line = None, 0
    key = (entry[2] if entry is not None else "<unknown>", line, op, direction)
    _acquire()
    try:
        t = STATE.unwrapped.get(key)
        if t is None:
            via = _frames.where(place)[2]
            t = STATE.unwrapped[key] = UnwrappedTally(
                key[0], line, op, direction, via=via, code=entry[0] if entry is not None else None)
        _add_unwrapped(t, nbytes, copies, pageable, ns)
        if t.samples and user is not None:
            t.samples -= 1
            c = _frames.chain(f)
            if len(t.chains) < _frames.MAX_CHAINS and c not in t.chains:
                t.chains.append(c)
    finally:
        _release()


def _add_unwrapped(t: UnwrappedTally, nbytes: int, copies: int, pageable: int, ns: int) -> None:
    t.count += 1
    t.bytes += nbytes
    t.copies += copies
    t.pageable += pageable
    t.ns += ns
    tl = STATE.timeline
    if tl is not None:
        tl.seen += 1
        tl.events.append((time.time_ns(), "unwrapped", f"{t.path}:{t.line} {t.op}", t.direction,
                          nbytes))


def in_wrapper() -> bool:
    """True while the current thread is inside a counting wrapper."""
    return STATE.local.depth > 0


def call_inside(fn, args: tuple, kwargs: dict):
    """``fn(*args, **kwargs)`` with this thread marked as inside a wrapper, so
    the guard (:func:`in_wrapper`) does not count the wrapper's own crossing
    a second time."""
    loc = STATE.local
    d = loc.depth
    loc.depth = d + 1
    try:
        return fn(*args, **kwargs)
    finally:
        loc.depth = d


def reset() -> None:
    """Forget every count (transfers, launches and unwrapped events) and timeline event."""
    with STATE.lock:
        _forget()


def _forget() -> None:
    STATE.sites.clear()
    STATE.launches.clear()
    STATE.unwrapped.clear()
    STATE.steps = 0
    if STATE.timeline is not None:
        STATE.timeline.clear()


def new_lock_after_fork(owner: Any, name: str, then: Optional[Callable[[], None]] = None) -> None:
    """In every forked child, give ``owner.<name>`` a new ``threading.Lock``,
    then call `then`. Registered once per lock, at import.

    Freeing the old lock is not enough: a thread that was woken to take it
    may own it without having marked it taken yet (``locked()`` says False,
    ``acquire()`` waits forever). So code must look such a lock up where it
    lives (``STATE.lock``, a module global), never keep its own reference.
    """
    def child() -> None:
        setattr(owner, name, threading.Lock())
        if then is not None:
            then()

    if hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=child)


def _after_fork_in_child() -> None:
    """The child's tally is its own: the parent's counts stay in the parent."""
    global _acquire, _release
    _acquire, _release = STATE.lock.acquire, STATE.lock.release
    _forget()


new_lock_after_fork(STATE, "lock", then=_after_fork_in_child)


def set_timeline(on: bool, maxlen: int = 100_000) -> bool:
    """Start (empty) or stop the event timeline; returns whether it was on."""
    with STATE.lock:
        prev = STATE.timeline is not None
        STATE.timeline = Timeline(maxlen) if on else None
    return prev
