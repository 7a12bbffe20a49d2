"""The tally behind every wrapper, the launch counter and the guard.

Normal, for a training step with every site wrapped: one upload per batch
tensor, one download per logged scalar every k steps, and one launch per graph
replay or compiled call. More than that is a copy nobody asked for; the report
shows which named site made it.

Counting is off by default; when it is off a wrapper reads one flag
(:data:`STATE.on`) and calls straight through. Launches are always counted:
they are cheap and a graph that is launched more or less often than expected is
a bug worth seeing without asking.

Thread safety: no count from pin-memory threads or autograd's threads is lost
or counted twice, with or without the GIL. A call like the site's last one
(same direction, one copy, not pageable), and a guard's event at a user's
instruction seen before, is appended to the tally's pending lists without a
lock (an append is atomic); every other update, and folding the pending lists
in (at a snapshot, and every 4,096 of them), takes one lock
(:mod:`.tallies`).

Time: while counting is on, a wrapper reads ``time.perf_counter_ns()`` just
before and just after the bare call and records the difference with the call,
so each row holds the host (wall) time spent inside its calls: for a sync
(``item``, ``float``, ``.cpu()`` of a fresh result) that is the stall. The
clock is read only while counting is on; calls recorded from inside a
compiled graph carry no time (the graph's own time is the launch's).

Ranges (off by default, ``xfer.count(True, ranges=True)`` or
``XFERAUDIT_RANGES=1``): each counted call also runs inside a
``torch.profiler`` range and an NVTX range named by its site
(:mod:`xferaudit.runtime.counted.ranges`), so a profiler attributes the memcpys and
syncs inside to the site.

The live tally is one cell per site and direction (:class:`SiteTally`, a dict
of ``direction -> [calls, ns, bytes, copies, pageable]``, and its pending
lists); a row's totals are summed from its cells when it is read.

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
kept equal to ``STATE.timeline``); while it is on, every update takes the lock.
"""

from __future__ import annotations

import os
import threading
import time
from collections import deque
from typing import Any, Callable, Optional

from . import fastpath as _fastpath
from . import frames as _frames
from . import ranges as _ranges
from . import statements as _statements
from . import tallies as _tallies
from .kinds import KINDS
from .sitenames import _BY_OBJECT, full_name, unnamed
from .tallies import LaunchTally, SiteTally, UnwrappedTally  # noqa: F401 - where they were


class _Depth(threading.local):
    """Per thread: how many wrapper calls are in progress (a class default, so
    reading it on a thread that never set it is a plain lookup, not a caught
    AttributeError: the guard reads it on every event)."""

    depth = 0


class _Switch:
    """A switch of :class:`_State`, kept in the slot of its name with a leading
    underscore; setting it brings the derived flags up to date."""

    def __init__(self, doc: str) -> None:
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, obj: Any, owner: Optional[type] = None) -> Any:
        return self if obj is None else getattr(obj, self.slot)

    def __set__(self, obj: Any, value: Any) -> None:
        setattr(obj, self.slot, bool(value))
        obj._derive()


class _State:
    """Process-wide switches and tallies.

    ``on`` (counting), ``guard`` (the dispatcher-level guard), ``full`` (one
    of the guards is in the full mode) and ``ranges`` (profiler ranges named
    by site) are switches that keep three derived flags up to date, so a
    wrapper decides with single attribute reads:

    * ``active = on or guard``: ``if not STATE.active: return bare_call()``;
    * ``plain = on and not guard and not ranges``: counting with nothing else
      to do around the call, so the wrapper times the bare call itself and
      records (no "inside a wrapper" mark, no range);
    * ``unmarked = on and not ranges and not full``: counting without ranges,
      and no guard in the full mode anywhere (``full``): only the cheap
      guard's hooks could see a wrapper's call, so a bare call that cannot
      reach them (the original C method of a plain ``torch.Tensor``, called
      directly) needs no "inside a wrapper" mark either.
    """

    __slots__ = ("_on", "_guard", "_ranges", "_full", "active", "plain", "unmarked", "lock", "sites",
                 "launches", "unwrapped", "local", "_timeline", "steps", "start_ns", "step_ns", "root")

    def __init__(self) -> None:
        self._on = False
        self._guard = False
        self._ranges = False
        self._full = False
        self.active = False
        self.plain = False
        self.unmarked = False
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
        self.unmarked = self._on and not self._ranges and not self._full
        _fastpath.set_flags(self.active, self.plain and _timeline is None)  # (the C wrappers' switches)

    on = _Switch("Counting wrapped sites (``xfer.count(True)``).")
    guard = _Switch("The runtime guard is watching the dispatcher: wrappers mark their depth.")
    full = _Switch("A guard in the full mode (the dispatch mode) is active on some thread.")
    ranges = _Switch("Counted calls run inside ranges named by their site (see :func:`set_ranges`).")

    @property
    def timeline(self) -> Optional["Timeline"]:
        """The event timeline (a :class:`Timeline`) while it is on, else None."""
        return self._timeline

    @timeline.setter
    def timeline(self, value: Optional["Timeline"]) -> None:
        global _timeline
        self._timeline = _timeline = value
        self._derive()


_timeline: Optional["Timeline"] = None  # STATE.timeline, as a global: record() reads it on every call
STATE = _State()
_tallies.root_of = lambda: STATE.root


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
_unwrapped = STATE.unwrapped
# id(site object) -> (the object, direction, host times, bytes, tally): the pending
# lists record() appends the next call with that site object to without the lock,
# if it takes that direction (see record()); the object is kept, so its id is not
# reused. A full name is also a key (name -> the same entry), so a name built at run
# time (f"inf:stat{i}.item", a new object each call) finds its lists too; a short
# literal (":f:x.cpu") never is: it names a site of its caller's file.
_pending: dict = {}
_MAX_PENDING = 4096
# The frames' cache of code objects (never rebound: cleared in place) and the
# kind of the user's own code: record_at() places an event with one lookup.
_codes = _frames.CODES
_USER = _frames.USER
_generation = 0  # resets so far: a tally kept from before the last one is not used


def _rebind() -> None:
    """Look STATE's lock and dicts up again (after any was replaced)."""
    global _acquire, _release, _sites, _unwrapped
    _acquire, _release, _sites = STATE.lock.acquire, STATE.lock.release, STATE.sites
    _unwrapped = STATE.unwrapped
    _pending.clear()


def record(site: str, key: str, direction: str, nbytes: int, copies: int = 1,
           pageable: int = 0, ns: int = 0) -> None:
    """One call of a wrapped site that took `direction` and moved `nbytes` in
    `copies` copies (`pageable` of them non-blocking from or to pageable host
    memory), having spent `ns` nanoseconds of host time in the bare call.

    `key` names the wrapper (and, for the generic ones, the method or
    function): the site's kind is looked up from the rule table once, when the
    site is first seen (see :mod:`xferaudit.runtime.counted.kinds`). A short literal
    (``":f:x.cpu"``) is named after the caller's file (:mod:`.sitenames`).

    Cost: a call of one copy, not pageable, in the direction the last call
    of the same site took (the same object, for a short literal), is two
    appends to the site's pending lists for that direction
    (:class:`.tallies.SiteTally`), without the lock, and without naming a
    short literal again; any other call takes the lock,
    updates the cell and makes its own the site's pending lists. A reset that
    lands between the bare call and the appends forgets the call, as one that
    came just after the call would.
    """
    hit = _pending.get(id(site))
    if hit is None and site.__class__ is str:
        hit = _pending.get(site)  # (a name made at run time: a new object, an equal name)
    if hit is not None and hit[1] is direction and copies == 1 and not pageable and _timeline is None:
        times = hit[2]
        times.append(ns)
        if hit[3] is not None:
            hit[3].append(nbytes)
        if len(times) >= _FOLD_AT:  # (memory stays bounded between snapshots)
            _acquire()
            try:
                hit[4].fold()
            finally:
                _release()
        return
    if site.__class__ is not str:  # no site= (`xfer.item(loss)` by hand): named by its line
        site = unnamed(site)
    literal = site
    if site and site[0] == ":":
        site = full_name(site)
    _acquire()
    try:
        t = _sites.get(site)
        c = t.get(direction) if t is not None else None
        if c is None:
            c = _new_cell(site, key, direction)
            t = _sites[site]
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
        elif copies == 1 and not pageable and (literal is site or _BY_OBJECT):
            # the lists the next such calls with this site object append to (a short literal
            # names one file's site only where a literal is not shared between files)
            lists = t.pending.get(direction)
            if lists is None:
                lists = t.pending[direction] = [[], None if direction == "none" else []]
            if len(_pending) >= _MAX_PENDING:  # (site names made at run time: a new object each)
                _pending.clear()
            entry = (literal, direction, lists[0], lists[1], t)
            _pending[id(literal)] = entry
            if literal is site:  # (a full name: f"inf:stat{i}.item" finds it too; a short literal never)
                _pending[site] = entry
    finally:
        _release()


def _new_cell(site: str, key: str, direction: str) -> list:
    """The cell of a site and direction seen for the first time (under the lock)."""
    t = _sites.get(site)
    if t is None:
        t = _sites[site] = SiteTally(site, KINDS[key])
    c = t[direction] = [0, 0, 0, 0, 0]
    return c


def record_launch(site: str, nodes: Optional[int] = None, count: int = 1) -> None:
    """`count` launches at `site` (a compiled call's: the graphs it ran); ``nodes``: the node count, where known."""
    if site.__class__ is not str:
        site = unnamed(site)
    if site and site[0] == ":":
        site = full_name(site)
    _acquire()
    try:
        t = STATE.launches.get(site)
        if t is None:
            t = STATE.launches[site] = LaunchTally(site)
        t.launches += count
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
    (:func:`xferaudit.runtime.counted.frames.locate`'s answer; the frames on it are
    still running). No string is made and no path looked at, except the first
    time a line is seen.

    A crossing made inside a library that is not the standard library
    (:func:`.frames.library_frame`) is kept apart per library function and
    named by it and the user's line (:func:`library_site`); one on a user's
    statement that carries a site comment is named by it
    (:mod:`.statements`)."""
    user, f, first, first_f = place
    lib = None
    if user is not None:
        entry, line = user, _frames.line(user, f)
        label = _frames.label(user, f)
        if first_f is not f:
            lib = _frames.library_frame(place)
    elif first is not None:
        entry, line = first, _frames.line(first, first_f)
        label = _frames.label(first, first_f)
        lib = _frames.library_frame(place)
    else:
        entry, line, label = None, 0, ""
    path = entry[2] if entry is not None else "<unknown>"
    key = (path, line, op, direction, label) if lib is None else (path, line, op, direction, label, id(lib[0][0]))
    _acquire()
    try:
        t = STATE.unwrapped.get(key)
        if t is None:
            via = _frames.where(place)[2]
            t = STATE.unwrapped[key] = UnwrappedTally(
                key[0], line, op, direction, via=via, code=entry[0] if entry is not None else None)
            if entry is not None:
                t.name = f"{line_path(entry[3], entry[2])}:{label}"
            if lib is not None:
                t.site, t.kind = library_site(lib, user, line, t.name), "library"
                t.lib = lib[0][0]
            elif user is not None:
                _name_statement(t, entry[3], line)
        _add_unwrapped(t, nbytes, copies, pageable, ns)
        if t.samples and user is not None:
            _sample(t, f)
    finally:
        _release()


def library_site(lib: tuple, user: Optional[tuple], line: int, called: str = "") -> str:
    """The name of a crossing made in library frame `lib` (``(entry, frame)``), called
    from `line` of the user's code `user` (None: none): ``module:function <- called``,
    `called` the name of the user's call (``train.py:training_step:self.log``), or
    the site comment's name where the user's statement carries one."""
    fn = _frames.library_function(*lib)
    if user is None:
        return fn
    named = _statements.site_at(user[3], line)
    if named is not None:
        return f"{fn} <- {named}"
    return f"{fn} <- {called or line_path(user[3], user[2]) + ':' + str(line)}"


def line_path(filename: str, shown: str = "") -> str:
    """A user's file as a run names it in site names and budgets: relative to
    the run's root (``xferaudit run``), else as the static half names it
    (relative to the project root: :func:`.sitenames.file_name`)."""
    if not filename or filename.startswith("<"):
        return shown or filename
    root = STATE.root
    if root is not None:
        from ...runkeys import relative_path

        return relative_path(filename, root)
    from .sitenames import file_name

    return file_name(filename)


def _name_statement(t: UnwrappedTally, filename: str, line: int) -> None:
    """Name `t` after the site comment of its statement, if it carries one."""
    site = _statements.site_at(filename, line)
    if site is not None:
        t.site, t.kind = site, "statement"


def record_at(f: Any, op: str, direction: str, nbytes: int, ns: int = 0,
              copies: int = 1) -> Optional[UnwrappedTally]:
    """:func:`record_event` of a crossing made by the code running in frame
    `f` when that code is the user's own (the common case: ``float(loss)``
    in a training script), placed without a walk, once the crossing ran.
    Returns the line's tally; None, having recorded nothing, when `f` is not
    a user frame (the caller then walks outwards: :func:`.frames.locate`).

    Cost: the code object's entry (:mod:`.frames`) keeps, per instruction,
    the tally its last event went to (with the reset it belongs to, its op,
    direction, bytes and copies, and the tally's list of pending host times
    for such events), so an event from the same instruction again, once the
    line's chains are sampled, is one append to that list, without the lock
    (see :class:`UnwrappedTally`). A reset that lands between the crossing
    and the append forgets it, as one that came just after the crossing would.
    """
    code = f.f_code
    e = _codes.get(id(code))
    if e is None or e[0] is not code:
        e = _frames.entry(code)
    i = f.f_lasti
    hit = e[5].get(i)  # (kept for a user's code alone)
    if (hit is not None and hit[0] == _generation and hit[1] is op and hit[2] is direction
            and hit[3] == nbytes and hit[4] == copies and _timeline is None):
        t, pend = hit[5], hit[6]
        if not t.samples:
            pend.append(ns)
            if len(pend) >= _FOLD_AT:  # (memory stays bounded between snapshots)
                _acquire()
                try:
                    t.fold()
                finally:
                    _release()
            return t
    elif e[1] != _USER:
        return None
    _acquire()
    try:
        t = _tally_at(e, f, i, op, direction, nbytes, copies)
        _add_unwrapped(t, nbytes, copies, 0, ns)
        if t.samples:
            _sample(t, f)
    finally:
        _release()
    return t


def _sample(t: UnwrappedTally, f: Any) -> None:
    """One of a line's first events, from user frame `f`: its chain of user
    frames kept, if new (under the lock)."""
    t.samples -= 1
    c = _frames.chain(f)
    if len(t.chains) < _frames.MAX_CHAINS and c not in t.chains:
        t.chains.append(c)


#: Pending events an instruction's list holds before they are folded in.
_FOLD_AT = 4096


def _tally_at(e: tuple, f: Any, i: int, op: str, direction: str, nbytes: int,
              copies: int) -> UnwrappedTally:
    """The tally of `op` and `direction` at frame `f`'s line (`e`: its code's
    entry, `i` its instruction), made if new, and kept in the entry for `i`
    with its pending list for events of `nbytes` in `copies` (under the lock:
    a reset cannot come between)."""
    hit = e[5].get(i)
    if hit is not None and hit[0] == _generation and hit[1] is op and hit[2] is direction:
        t = hit[5]
    else:
        line = _frames.line(e, f)
        label = _frames.label(e, f)
        key = (e[2], line, op, direction, label)
        t = _unwrapped.get(key)
        if t is None:
            t = _unwrapped[key] = UnwrappedTally(e[2], line, op, direction, code=e[0])
            t.name = f"{line_path(e[3], e[2])}:{label}"
            _name_statement(t, e[3], line)
    pend = t.pending.get((nbytes, copies))
    if pend is None:
        pend = t.pending[(nbytes, copies)] = []
    e[5][i] = (_generation, op, direction, nbytes, copies, t, pend)
    return t


def _add_unwrapped(t: UnwrappedTally, nbytes: int, copies: int, pageable: int, ns: int) -> None:
    t._count += 1
    t._bytes += nbytes
    t._copies += copies
    t.pageable += pageable
    t._ns += ns
    if _timeline is not None:
        _timeline.seen += 1
        _timeline.events.append((time.time_ns(), "unwrapped", f"{t.path}:{t.line} {t.op}", t.direction,
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


def call_marked(site: Optional[str], fn, args: tuple, kwargs: dict):
    """``fn(*args, **kwargs)`` as :func:`timed_call` makes it (marked as inside a
    wrapper, inside the ranges named `site` while counting with ranges), for a
    call that times the bare call inside itself (so no clock read of this
    function's surrounds the work around it)."""
    loc = STATE.local
    d = loc.depth
    loc.depth = d + 1
    try:
        if not (STATE._on and STATE._ranges):
            return fn(*args, **kwargs)
        r = _ranges.enter(site)
        try:
            return fn(*args, **kwargs)
        finally:
            _ranges.exit(r)
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
    global _generation
    _generation += 1  # (the tallies record_at() keeps per instruction are of the last reset)
    _pending.clear()
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
