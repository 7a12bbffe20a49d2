"""The rows of a report: plain data, the snapshot of the live tally.

The recorder keeps one live :class:`~xferaudit.runtime.counted.recorder.SiteTally`
per wrapped site, updated under its lock; :meth:`SiteTally.snapshot` turns it
into a :class:`Row`, the type the report, ``diff``, ``merge``, budgets and the
plot read (and what a saved report's ``rows`` hold).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

#: Directions a call can take: up host->device, down device->host, d2d
#: device->device, none (crossed nothing).
DIRECTIONS = ("up", "down", "d2d", "none")
#: The cells of a row's ``by_direction`` entry, in order.
CELLS = ("calls", "bytes", "copies", "pageable", "seconds")
#: Distinct chains of user frames an unwrapped line keeps (in a run, and merged).
MAX_CHAINS = 4


def _seconds(x: float) -> float:
    """Seconds as written to JSON: to the nanosecond the clock gives."""
    return round(float(x), 9)


def direction_of(by_direction: dict) -> str:
    """A row's direction: the directions it took, comma-joined, or ``none``."""
    taken = [d for d in DIRECTIONS if d in by_direction and d != "none"]
    return ",".join(taken) if taken else "none"


@dataclass
class Row:
    """One wrapped site: what the wrapper saw over the counted interval.

    ``crossings`` counts calls that moved data (``calls - crossings`` crossed
    nothing); ``copies`` the copies on the wire they made (a module moved in
    one call is one crossing and a copy per tensor that crossed); ``bytes``
    their exact total; ``pageable`` the ``non_blocking`` host<->device copies
    whose host side was pageable (they ran synchronously); ``seconds`` the host
    (wall) time spent inside the calls, from ``time.perf_counter_ns`` (0.0 for
    calls recorded inside a compiled graph, and in reports written before it
    was measured). ``by_direction`` splits them by the direction taken
    (``{"up": {"calls": 3, "bytes": 96, "copies": 3, "pageable": 0,
    "seconds": 0.00012}}``).
    """

    site: str
    kind: str
    direction: str
    calls: int = 0
    crossings: int = 0
    bytes: int = 0
    by_direction: dict = field(default_factory=dict)
    copies: Optional[int] = None  # None: one per crossing (a row written without it)
    pageable: int = 0
    seconds: float = 0.0

    def __post_init__(self) -> None:
        if self.copies is None:
            self.copies = self.crossings
        for d, cell in self.by_direction.items():
            if isinstance(cell, dict):
                cell.setdefault("copies", cell.get("calls", 0) if d != "none" else 0)
                cell.setdefault("pageable", 0)
                cell.setdefault("seconds", 0.0)

    def to_dict(self) -> dict:
        return {
            "site": self.site, "kind": self.kind, "direction": self.direction,
            "calls": self.calls, "crossings": self.crossings, "copies": self.copies,
            "bytes": self.bytes, "pageable": self.pageable, "seconds": _seconds(self.seconds),
            "by_direction": {d: dict(c, seconds=_seconds(c.get("seconds", 0.0)))
                             for d, c in self.by_direction.items()},
        }

    def add(self, other: "Row") -> None:
        """Add `other`'s counts to this row (merging ranks or runs)."""
        self.calls += other.calls
        self.crossings += other.crossings
        self.copies += other.copies
        self.bytes += other.bytes
        self.pageable += other.pageable
        self.seconds += other.seconds
        for d, v in other.by_direction.items():
            cell = self.by_direction.setdefault(d, dict.fromkeys(CELLS, 0))
            for k in CELLS:
                cell[k] = cell.get(k, 0) + v.get(k, 0)
        self.direction = direction_of(self.by_direction)


@dataclass
class Launch:
    site: str
    launches: int = 0
    nodes: Optional[int] = None  # nodes of the last graph launched, where known


@dataclass
class Unwrapped:
    """A crossing the guard saw outside every wrapper, at the user's line;
    `via` is the library frame it happened in ("path:line"), if not the user's.

    ``count`` is its calls (events), ``copies`` the copies on the wire,
    ``pageable`` the ``non_blocking`` copies among them with a pageable host
    side, ``seconds`` the host time the crossings blocked (wall time around
    the op). ``function`` and ``text`` key the line against later edits (the
    enclosing function's qualified name, the source text whitespace-normalised:
    :mod:`xferaudit.runkeys`); ``frames`` is the chain of user frames that
    reached it, innermost first (``frames[0]`` is this line), and ``chains``,
    when several chains reached it, each of them (the first is ``frames``).
    ``name`` is the crossing's name, ``path:function:expression``
    (``train.py:train_step:loss.item``): no line number, so an edit that does
    not touch the crossing leaves it (``line`` still says where it was).
    """

    path: str
    line: int
    op: str
    direction: str
    count: int = 0
    bytes: int = 0
    via: str = ""
    copies: Optional[int] = None  # copies on the wire; None: one per event
    pageable: int = 0
    seconds: float = 0.0
    function: str = ""
    text: str = ""
    frames: list = field(default_factory=list)  # [{"path", "line", "function", "text"}]
    chains: list = field(default_factory=list)  # [frames, ...] when more than one
    name: str = ""  # path:function:expression, what budgets hold ("": a run file from before names)

    def __post_init__(self) -> None:
        if self.copies is None:
            self.copies = self.count

    @property
    def key(self) -> str:
        """The crossing's name as a budget holds it: :attr:`name`, or
        ``path:line`` for an entry written before names had no line number."""
        return self.name or f"{self.path}:{self.line}"

    def to_dict(self) -> dict:
        out = {"path": self.path, "line": self.line, "function": self.function, "text": self.text,
               "op": self.op, "direction": self.direction, "count": self.count,
               "copies": self.copies, "bytes": self.bytes, "pageable": self.pageable,
               "seconds": self.seconds, "via": self.via,
               "frames": [dict(f) for f in self.frames]}
        if self.name:
            out["name"] = self.name
        if self.chains:
            out["chains"] = [[dict(f) for f in c] for c in self.chains]
        return out

    def add(self, other: "Unwrapped") -> None:
        """Add `other`'s counts (merging ranks or runs): chains not seen yet are
        kept, up to :data:`MAX_CHAINS`."""
        self.count += other.count
        self.bytes += other.bytes
        self.copies += other.copies
        self.pageable += other.pageable
        self.seconds += other.seconds
        mine = self.chains or ([self.frames] if self.frames else [])
        for c in other.chains or ([other.frames] if other.frames else []):
            if c not in mine and len(mine) < MAX_CHAINS:
                mine.append(c)
        if mine:
            self.frames = mine[0]
            self.chains = mine if len(mine) > 1 else []
        if not self.function and not self.text:
            self.function, self.text = other.function, other.text
        if not self.via:
            self.via = other.via
        if not self.name:
            self.name = other.name
