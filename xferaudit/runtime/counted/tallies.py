"""The live tallies the recorder keeps, and their report rows.

One :class:`SiteTally` per wrapped site (a cell per direction), one
:class:`LaunchTally` per graph site, one :class:`UnwrappedTally` per line, op
and direction the guard saw crossing outside every wrapper. Plain data: the
recorder (:mod:`.recorder`) updates them under its lock, or, for an event it
has seen at the same place before, appends to their pending lists without the
lock; :meth:`snapshot` folds those in and gives the report's row.

Pending lists: an append is one C call, atomic with or without the GIL; a
list loses its start only in :meth:`fold` (under the recorder's lock), and an
append made meanwhile lands past the part folded, so no event is lost or
counted twice. The properties (``calls``, ``count``, ...) add the pending
events in without folding them, so they can be read anywhere.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Optional

from ...runkeys import relative_path
from . import frames as _frames
from .sitenames import file_name
from .rows import Launch, Row, Unwrapped, direction_of

__all__ = ["LaunchTally", "SiteTally", "UnwrappedTally", "named_rows"]

#: The root unwrapped paths are written relative to (the recorder's
#: ``STATE.root``, which it gives here).
root_of: Callable[[], Optional[str]] = lambda: None  # noqa: E731


class SiteTally(dict):
    """The live counts of one wrapped site: ``direction -> cell``, a cell being
    ``[calls, ns, bytes, copies, pageable]`` (a call that crossed nothing is
    counted in the ``"none"`` cell, which keeps calls and ns alone).
    The row's totals are sums over its cells; :meth:`snapshot` is its report Row.

    ``pending``: ``direction -> [host times, bytes]``, two lists of the calls
    of one copy, none of it pageable, the recorder appended without the lock
    (host time first; ``bytes`` is None for ``"none"``): a call is counted
    once its last list holds it."""

    __slots__ = ("site", "kind", "pending")

    def __init__(self, site: str, kind: str) -> None:
        super().__init__()
        self.site = site
        self.kind = kind
        self.pending: dict = {}

    def cells(self) -> dict:
        """``direction -> cell``, the pending calls added in (nothing folded)."""
        if not self.pending:
            return self
        out = {d: list(c) for d, c in self.items()}
        for d, (times, sizes) in self.pending.items():
            c = out[d]
            n = len(times) if sizes is None else len(sizes)
            c[0] += n
            c[1] += sum(times[:n])
            if sizes is not None:
                c[2] += sum(sizes[:n])
                c[3] += n
        return out

    def fold(self) -> None:
        """Fold the pending calls into the cells (under the recorder's lock)."""
        for d, (times, sizes) in self.pending.items():
            c = self[d]
            n = len(times) if sizes is None else len(sizes)  # (a call's time is appended first)
            if n:
                done = times[:n]
                del times[:n]
                c[0] += n
                c[1] += sum(done)
                if sizes is not None:
                    done = sizes[:n]
                    del sizes[:n]
                    c[2] += sum(done)
                    c[3] += n

    def _crossed(self, i: int) -> int:
        return sum(c[i] for d, c in self.cells().items() if d != "none")

    @property
    def calls(self) -> int:
        return sum(c[0] for c in self.cells().values())

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
        return sum(c[1] for c in self.cells().values())

    @property
    def by_direction(self) -> dict:
        return {d: {"calls": c[0], "bytes": c[2], "copies": c[3], "pageable": c[4],
                    "seconds": c[1] / 1e9}
                for d, c in self.cells().items()}

    @property
    def direction(self) -> str:
        return direction_of(self)

    def snapshot(self) -> Row:
        if self.pending:
            self.fold()
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


class UnwrappedTally:
    """The live counts of one line's unwrapped crossings of one op and direction.

    ``code`` is the code object running the line (None for an event recorded by
    path); ``chains`` the distinct chains of user frames that reached it (flat
    ``(code, line, code, line, ...)`` tuples, innermost first), walked for its
    first ``samples`` events. Names and texts are read at :meth:`snapshot`.

    ``count``, ``bytes``, ``copies`` and ``ns`` are what is folded in plus the
    events :func:`record_at` recorded without the lock: ``pending`` maps the
    ``(bytes, copies)`` of one event to the list of such events' host times,
    a list that only grows at its end (an append: one C call, atomic with or
    without the GIL) and loses its start only under the lock (:meth:`fold`),
    so no event is lost or counted twice.
    """

    __slots__ = ("path", "line", "op", "direction", "via", "pageable", "code", "chains", "samples",
                 "_count", "_bytes", "_copies", "_ns", "pending", "site", "kind", "lib", "name")

    def __init__(self, path: str, line: int, op: str, direction: str, count: int = 0,
                 bytes: int = 0, via: str = "", copies: int = 0, pageable: int = 0,  # noqa: A002
                 ns: int = 0, code: Any = None, chains: Optional[list] = None,
                 samples: int = _frames.CHAIN_SAMPLES) -> None:
        self.path, self.line, self.op, self.direction = path, line, op, direction
        self.via = via  # the library frame below the user's line (the first seen)
        self.pageable = pageable  # non_blocking copies with a pageable host side (they ran synchronously)
        self.code = code
        self.chains = [] if chains is None else chains
        self.samples = samples
        self._count, self._bytes = count, bytes
        self._copies = copies  # copies on the wire (a print makes several)
        self._ns = ns  # host time the crossings blocked, in nanoseconds
        self.pending: dict = {}
        # A name, where the crossing has one without a wrapper: a library function and
        # the user's line ("library"), or the site comment of the statement ("statement").
        self.site: Optional[str] = None
        self.kind = ""
        self.lib: Any = None  # the library function's code object (kept: its id is in the tally's key)
        # The name of the crossing at the user's line: path:function:expression (no line number;
        # :func:`xferaudit.runtime.counted.frames.label`), "" where the guard placed it by path alone.
        self.name = ""

    @property
    def count(self) -> int:
        return self._count + sum(len(p) for p in self.pending.values())

    @property
    def bytes(self) -> int:
        return self._bytes + sum(k[0] * len(p) for k, p in self.pending.items())

    @property
    def copies(self) -> int:
        return self._copies + sum(k[1] * len(p) for k, p in self.pending.items())

    @property
    def ns(self) -> int:
        return self._ns + sum(sum(p) for p in self.pending.values())

    def fold(self) -> None:
        """Fold the pending events into the counts (under the lock)."""
        for (nbytes, copies), p in self.pending.items():
            n = len(p)
            if n:
                done = p[:n]
                del p[:n]  # (appends made meanwhile are past n: they stay)
                self._count += n
                self._bytes += n * nbytes
                self._copies += n * copies
                self._ns += sum(done)

    def cell(self) -> tuple:
        """``(direction, count, bytes, copies, pageable, seconds)``, the pending
        events folded in: a named crossing's share of its site's row."""
        self.fold()
        return self.direction, self._count, self._bytes, self._copies, self.pageable, self._ns / 1e9

    def snapshot(self) -> Unwrapped:
        self.fold()
        root = root_of()
        function = text = ""
        path = self.path
        chains = [[_frames.describe(c[i], c[i + 1], root) for i in range(0, len(c), 2)]
                  for c in self.chains]
        if self.code is not None:
            own = _frames.describe(self.code, self.line, root)
            path, function, text = own["path"], own["function"], own["text"]
        return Unwrapped(path, self.line, self.op, self.direction, self._count, self._bytes,
                         self.via, self._copies, self.pageable, self._ns / 1e9, function, text,
                         chains[0] if chains else [], chains if len(chains) > 1 else [], self.name)




def named_rows(tallies: Any, rows: list) -> list:
    """The named crossings among `tallies` (:class:`UnwrappedTally` with a
    ``site``) as report rows, one per name, added to `rows` (a row of the same
    name there takes their counts too); returns the unnamed tallies."""
    by_site = {r.site: r for r in rows}
    unnamed = []
    for t in tallies:
        if t.site is None:
            unnamed.append(t)
            continue
        d, n, nbytes, copies, pageable, seconds = t.cell()
        row = Row(t.site, t.kind, d, n, n, nbytes,
                  {d: {"calls": n, "bytes": nbytes, "copies": copies, "pageable": pageable, "seconds": seconds}},
                  copies, pageable, seconds)
        had = by_site.get(t.site)
        if had is None:
            by_site[t.site] = row
            rows.append(row)
        else:
            had.add(row)
    return unnamed


def named_lines(tallies: Any) -> dict:
    """Where each crossing named without a wrapper (a library function's, a
    statement's) was made: ``{site: [[path, line], ...]}``, the user's lines
    (relative to the run's root), first seen first. A run file keeps it
    (``meta.lines``): the names hold no line number, so the editor and a
    budget written with the old names (``... <- train.py:28``) find the line here."""
    root = root_of()
    out: dict = {}
    for t in tallies:
        if t.site is None or t.code is None:
            continue
        fn = t.code.co_filename
        if fn.startswith("<"):
            path = _frames.shown(t.code)
        else:  # (as the recorder's line_path names a user's file)
            path = relative_path(fn, root) if root is not None else file_name(fn)
        at = [path, int(t.line)]
        seen = out.setdefault(t.site, [])
        if at not in seen:
            seen.append(at)
    return out
