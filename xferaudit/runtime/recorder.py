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

Time: while counting is on, a wrapper reads ``time.perf_counter_ns()`` just
before and just after the bare call and records the difference with the call,
so each row holds the host (wall) time spent inside its calls: for a sync
(``item``, ``float``, ``.cpu()`` of a fresh result) that is the stall. The
clock is read only while counting is on; calls recorded from inside a
compiled graph carry no time (the graph's own time is the launch's).

Ranges (off by default, ``xfer.count(True, ranges=True)`` or
``XFERAUDIT_RANGES=1``): each counted call also runs inside a
``torch.profiler`` range and an NVTX range named by its site
(:mod:`xferaudit.runtime.ranges`), so a profiler attributes the memcpys and
syncs inside to the site.

The live tally is one cell per site and direction (:class:`SiteTally`, a dict
of ``direction -> [calls, ns, bytes, copies, pageable]``); a row's totals are
summed from its cells when it is read, so a recorded call updates one cell
(two numbers of it for a call that crossed nothing).

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
timeline is off, each update reads one more global (``_timeline is None``,
kept equal to ``STATE.timeline``), under the lock it already holds.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from . import frames as _frames
from . import ranges as _ranges
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

    ``on`` (counting), ``guard`` (the dispatcher-level guard) and ``ranges``
    (profiler ranges named by site) are properties that keep two derived flags
    up to date, so a wrapper decides with single attribute reads:

    * ``active = on or guard``: ``if not STATE.active: return bare_call()``;
    * ``plain = on and not guard and not ranges``: counting with nothing else
      to do around the call, so the wrapper times the bare call itself and
      records (no "inside a wrapper" mark, no range).
    """

    __slots__ = ("_on", "_guard", "_ranges", "active", "plain", "lock", "sites", "launches",
                 "unwrapped", "local", "_timeline", "steps", "start_ns", "step_ns", "root")

    def __init__(self) -> None:
        self._on = False
        self._guard = False
        self._ranges = False
        self.active = False
        self.plain = False
        self.lock = threading.Lock()
        self.sites: dict[str, "SiteTally"] = {}
        self.launches: dict[str, "LaunchTally"] = {}
        self.unwrapped: dict[tuple, "UnwrappedTally"] = {}
        # Per-thread depth of wrapper calls in progress: the guard does not
        # count a crossing made inside a wrapper a second time.
        self.local = _Depth()
        self._timeline: Optional["Timeline"] = None
        # Steps marked with xfer.step() (or counting()'s handle) while counting:
        # the report carries them, so a budget made from it is per step.
        self.steps = 0
        # perf_counter_ns() when the tally was last reset and at the last step
        # mark: the wall time of the steps counted, for each site's share.
        self.start_ns = time.perf_counter_ns()
        self.step_ns = 0
        # The project root unwrapped paths are written relative to (``xferaudit
        # run`` sets it); None: as shown, relative to the working directory.
        self.root: Optional[str] = None

    def _derive(self) -> None:
        self.active = self._on or self._guard
        self.plain = self._on and not self._guard and not self._ranges

    @property
    def on(self) -> bool:
        """Counting wrapped sites (``xfer.count(True)``)."""
        return self._on

    @on.setter
    def on(self, value: bool) -> None:
        self._on = bool(value)
        self._derive()

    @property
    def guard(self) -> bool:
        """The runtime guard is watching the dispatcher: wrappers mark their depth."""
        return self._guard

    @guard.setter
    def guard(self, value: bool) -> None:
        self._guard = bool(value)
        self._derive()

    @property
    def timeline(self) -> Optional["Timeline"]:
        """The event timeline (a :class:`Timeline`) while it is on, else None."""
        return self._timeline

    @timeline.setter
    def timeline(self, value: Optional["Timeline"]) -> None:
        global _timeline
        self._timeline = _timeline = value

    @property
    def ranges(self) -> bool:
        """Counted calls run inside ranges named by their site (see :func:`set_ranges`)."""
        return self._ranges

    @ranges.setter
    def ranges(self, value: bool) -> None:
        self._ranges = bool(value)
        self._derive()


_timeline: Optional["Timeline"] = None  # STATE.timeline, as a global: record() reads it on every call
STATE = _State()


class SiteTally(dict):
    """The live counts of one wrapped site: ``direction -> cell``, a cell being
    ``[calls, ns, bytes, copies, pageable]`` (a call that crossed nothing is
    counted in the ``"none"`` cell, which keeps calls and ns alone).
    The row's totals are sums over its cells; :meth:`snapshot` is its report Row."""

    __slots__ = ("site", "kind")

    def __init__(self, site: str, kind: str) -> None:
        super().__init__()
        self.site = site
        self.kind = kind

    def _crossed(self, i: int) -> int:
        return sum(c[i] for d, c in self.items() if d != "none")

    @property
    def calls(self) -> int:
        return sum(c[0] for c in self.values())

    @property
    def crossings(self) -> int:
        return self._crossed(0)

    @property
    def bytes(self) -> int:
        return self._crossed(2)

    @property
    def copies(self) -> int:
        return self._crossed(3)

    @property
    def pageable(self) -> int:
        return self._crossed(4)

    @property
    def ns(self) -> int:
        """Host time inside the site's calls, in nanoseconds."""
        return sum(c[1] for c in self.values())

    @property
    def by_direction(self) -> dict:
        return {d: {"calls": c[0], "bytes": c[2], "copies": c[3], "pageable": c[4],
                    "seconds": c[1] / 1e9}
                for d, c in self.items()}

    @property
    def direction(self) -> str:
        return direction_of(self)

    def snapshot(self) -> Row:
        calls = crossings = nbytes = copies = pageable = ns = 0
        by = {}
        for d, (n, t, b, k, p) in self.items():  # one pass: a report may hold a million sites
            calls += n
            ns += t
            if d != "none":
                crossings += n
                nbytes += b
                copies += k
                pageable += p
            by[d] = {"calls": n, "bytes": b, "copies": k, "pageable": p, "seconds": t / 1e9}
        return Row(self.site, self.kind, direction_of(self), calls, crossings, nbytes, by, copies,
                   pageable, ns / 1e9)


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


# The lock's bound methods and the sites' dict, looked up once: ``acquire();
# try: ... finally: release()`` costs about half of ``with STATE.lock:`` on
# CPython 3.11, and record() runs on every wrapped call while counting.
# reset() clears the dict in place; code that gives STATE a new lock or a new
# dict (a forked child: see new_lock_after_fork) calls _rebind() after.
_acquire = STATE.lock.acquire
_release = STATE.lock.release
_sites = STATE.sites


def _rebind() -> None:
    """Look STATE's lock and sites up again (after either was replaced)."""
    global _acquire, _release, _sites
    _acquire, _release, _sites = STATE.lock.acquire, STATE.lock.release, STATE.sites


def record(site: str, key: str, direction: str, nbytes: int, copies: int = 1,
           pageable: int = 0, ns: int = 0) -> None:
    """One call of a wrapped site that took `direction` and moved `nbytes` in
    `copies` copies (`pageable` of them non-blocking from or to pageable host
    memory), having spent `ns` nanoseconds of host time in the bare call.

    `key` names the wrapper (and, for the generic ones, the method or
    function): the site's kind is looked up from the rule table once, when the
    site is first seen (see :mod:`xferaudit.runtime.kinds`). A short literal
    (``":f:x.cpu"``) is named after the caller's file (:mod:`.sitenames`).
    """
    if site and site[0] == ":":
        site = full_name(site)
    _acquire()
    try:
        try:
            c = _sites[site][direction]
        except KeyError:
            c = _new_cell(site, key, direction)
        c[0] += 1
        c[1] += ns
        if direction != "none":
            c[2] += nbytes
            c[3] += copies
            if pageable:
                c[4] += pageable
        if _timeline is not None:
            _timeline.seen += 1
            _timeline.events.append((time.time_ns(), "site", site, direction, nbytes))
    finally:
        _release()


def _new_cell(site: str, key: str, direction: str) -> list:
    """The cell of a site and direction seen for the first time (under the lock)."""
    t = _sites.get(site)
    if t is None:
        t = _sites[site] = SiteTally(site, KINDS[key])
    c = t[direction] = [0, 0, 0, 0, 0]
    return c


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


_clock = time.perf_counter_ns


def timed_call(site: Optional[str], fn, args: tuple, kwargs: dict) -> tuple:
    """``(fn(*args, **kwargs), ns)`` as a wrapper makes the bare call when it is
    not :attr:`_State.plain`: marked as inside a wrapper (for the guard), inside
    the ranges named `site` while counting with ranges, and timed (`ns`, the
    host time of the call) while counting; ``ns`` is 0 when counting is off."""
    loc = STATE.local
    d = loc.depth
    loc.depth = d + 1
    try:
        if not STATE._on:
            return fn(*args, **kwargs), 0
        if STATE._ranges:
            r = _ranges.enter(site)
            try:
                t0 = _clock()
                out = fn(*args, **kwargs)
                return out, _clock() - t0
            finally:
                _ranges.exit(r)
        t0 = _clock()
        out = fn(*args, **kwargs)
        return out, _clock() - t0
    finally:
        loc.depth = d


def mark_step() -> None:
    """One step ended (``xfer.step()``): counted, with the time of the mark."""
    now = _clock()
    with STATE.lock:
        STATE.steps += 1
        STATE.step_ns = now


def steps_seconds() -> float:
    """Wall time of the steps marked since the last reset (0.0 when none was)."""
    return (STATE.step_ns - STATE.start_ns) / 1e9 if STATE.steps else 0.0


def reset() -> None:
    """Forget every count (transfers, launches and unwrapped events) and timeline event."""
    with STATE.lock:
        _forget()


def _forget() -> None:
    STATE.sites.clear()
    STATE.launches.clear()
    STATE.unwrapped.clear()
    STATE.steps = 0
    STATE.start_ns = _clock()
    STATE.step_ns = 0
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
    _rebind()
    _forget()


new_lock_after_fork(STATE, "lock", then=_after_fork_in_child)


def set_ranges(on: bool) -> bool:
    """Run counted calls inside ranges named by their site (or stop); returns
    whether they were on. RuntimeError, turning them on where torch is not
    installed (:mod:`.ranges`; torch is not imported here)."""
    prev = STATE.ranges
    if on:
        _ranges.available()
    STATE.ranges = on
    return prev


def set_timeline(on: bool, maxlen: int = 100_000) -> bool:
    """Start (empty) or stop the event timeline; returns whether it was on."""
    with STATE.lock:
        prev = STATE.timeline is not None
        STATE.timeline = Timeline(maxlen) if on else None
    return prev
