"""A report's rows and their figures as JSON: one line each, their totals, read back.

Shared by the report (save and load, :mod:`._report`) and the merge
(:mod:`.merging`), which writes every rank's rows as the same lines: a row's
line is what ``Row.to_dict()`` holds, made straight from its fields for the
usual row (a million of them in a large save); the totals are summed on the
same pass; a saved row is read back straight through when it is as a save
writes it. Depends on the row types and the JSON helpers alone.
"""

from __future__ import annotations

import json
import math
from dataclasses import fields
from operator import attrgetter
from typing import Any, Iterable, Iterator, Optional

from .report_json import encode, escape
from ..counted.rows import DIRECTIONS, Launch, Row, Unwrapped


class ReportError(ValueError):
    """A file is not a saved report; the message says what is wrong."""


def _field(obj: Any, key: str, typ: Any, where: str, default: Any = ...) -> Any:
    if key not in obj:
        if default is not ...:
            return default
        raise ReportError(f"{where}: missing key {key!r}")
    v = obj[key]
    if typ is int and (isinstance(v, bool) or not isinstance(v, int)):
        raise ReportError(f"{where}: {key!r} must be an integer, not {v!r}")
    if typ is str and not isinstance(v, str):
        raise ReportError(f"{where}: {key!r} must be a string, not {v!r}")
    return v


def _seconds_field(obj: dict, where: str) -> float:
    """A row's ``seconds`` (0.0 when absent: reports written before time was measured)."""
    v = obj.get("seconds", 0.0)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v < 0:
        raise ReportError(f"{where}: 'seconds' must be a number >= 0, not {v!r}")
    return float(v)


def twice(site: str, i: int, first: int, where: str, key: str = "rows") -> ReportError:
    """A site has one row in a report: the recorder keeps one tally per site, so
    a second row means the file was edited or pasted together, and adding the
    two (or keeping either) could be wrong. Every reader of reports (report,
    budget, diff, merge) refuses it alike, with this message."""
    return ReportError(f"{where}: {key}[{i}]: site {site!r} is there twice (also {key}[{first}]); "
                       "a report has one row per site")


def _once(seen: dict, site: str, i: int, where: str, key: str) -> None:
    first = seen.setdefault(site, i)
    if first != i:
        raise twice(site, i, first, where, key)


#: The figures of each entry of :meth:`Report.totals`, in order.
_TOTAL_KEYS = ("crossings", "copies", "bytes", "pageable", "seconds")


def new_sums() -> dict:
    """Running sums for :meth:`Report.totals`: per direction (and "all"), a
    list in the order of :data:`_TOTAL_KEYS`."""
    return {d: [0, 0, 0, 0, 0.0] for d in (*(d for d in DIRECTIONS if d != "none"), "all")}


def _add_figures(a: Optional[list], crossings: int, copies: int, nbytes: int, pageable: int,
                 seconds: float) -> None:
    if a is not None:
        a[0] += crossings
        a[1] += copies
        a[2] += nbytes
        a[3] += pageable
        a[4] += seconds


def add_cells(sums: dict, r: Row) -> None:
    """Add one row's cells to the per-direction sums (in row order: the float
    sums come out as a plain loop over the rows gives them)."""
    for d, v in r.by_direction.items():
        n = v.get("calls", 0)  # (absent: 0, as the checks read it: `{"up": {}}` holds nothing)
        _add_figures(sums.get(d) if d != "all" else None, n, v.get("copies", n), v.get("bytes", 0),
                     v.get("pageable", 0), v.get("seconds", 0.0))


def add_row(sums: dict, r: Row) -> None:
    """Add one row to the sums, its cells and its own figures (for "all")."""
    add_cells(sums, r)
    _add_figures(sums["all"], r.crossings, r.copies, r.bytes, r.pageable, r.seconds)


def totals_of(sums: dict, rows: Optional[list] = None) -> dict:
    """:meth:`Report.totals`' figures from the sums, seconds to the nanosecond;
    with `rows`, "all" summed from them (each figure one C-level pass)."""
    if rows is not None:
        sums["all"] = [sum(map(attrgetter(k), rows)) for k in _TOTAL_KEYS]
    return {d: dict(zip(_TOTAL_KEYS, (*a[:4], round(a[4], 9)))) for d, a in sums.items()}


#: The kinds of rows named without a wrapper (a library function's crossing, a statement's site comment).
NAMED_KINDS = ("library", "statement")


def heading(rows: Iterable[Row], unwrapped: list) -> str:
    """The table's first line, saying what it holds: how many wrapped sites,
    crossings named without a wrapper, and lines nothing names."""
    wrapped = named = 0
    for r in rows:
        if r.kind in NAMED_KINDS:
            named += 1
        else:
            wrapped += 1
    if not (wrapped or named or unwrapped):
        return "xferaudit: host<->device transfers"
    parts = [f"{wrapped} wrapped site{'' if wrapped == 1 else 's'}"]
    if named:
        parts.append(f"{named} named without a wrapper")
    if unwrapped:
        parts.append(f"{len(unwrapped)} line{'' if len(unwrapped) == 1 else 's'} nothing names")
    return "xferaudit: host<->device transfers per site: " + ", ".join(parts)


def with_lines(totals: dict, unwrapped: Iterable[Unwrapped]) -> dict:
    """`totals` (:func:`totals_of`' figures of the rows) with the crossings at
    lines nothing names added, each to its direction and to "all": the
    report's totals count every crossing, wrapped or not, with its bytes."""
    out = {d: dict(v) for d, v in totals.items()}
    for u in unwrapped:
        for d in (u.direction, "all"):
            t = out.get(d)
            if t is None:
                continue
            t["crossings"] += u.count
            t["copies"] += u.copies if u.copies is not None else u.count
            t["bytes"] += u.bytes
            t["pageable"] += u.pageable
            t["seconds"] = round(t["seconds"] + u.seconds, 9)
    return out


#: A row as Row.to_dict() gives it, in its order; each cell of its by_direction likewise.
_ROW_KEYS = ("site", "kind", "direction", "calls", "crossings", "copies", "bytes", "pageable", "seconds",
             "by_direction")
_CELL_KEYS = ["calls", "bytes", "copies", "pageable", "seconds"]
_ROW_LINE = "{" + ", ".join(f'"{k}": %s' for k in _ROW_KEYS) + "}"
_CELL = '%s: {"calls": %d, "bytes": %d, "copies": %d, "pageable": %d, "seconds": %s}'


def _row_line_direct(r: Row, sums: Optional[dict] = None) -> Optional[str]:
    """The JSON of ``r.to_dict()`` made straight from the fields, for a row of
    the usual shape (a Row, whole counts, finite float seconds, cells with the
    usual keys in the usual order): the same values (seconds written to the 9
    places to_dict rounds them to, ``0.000004936``), in half the time, for the
    million rows of a large save or merge; its cells added to `sums`
    (:func:`new_sums`) on the way. None for any other row (nothing added)."""
    sums = sums if sums is not None else {}
    if not (type(r) is Row and type(r.site) is str and type(r.kind) is str and type(r.direction) is str
            and type(r.calls) is int and type(r.crossings) is int and type(r.copies) is int
            and type(r.bytes) is int and type(r.pageable) is int and type(r.seconds) is float):
        return None
    seconds = r.seconds
    if not 0.0 <= seconds < math.inf:
        return None
    text = "%.9f" % seconds  # the value to_dict rounds to (9 places), written as such: cheaper
    cells = []
    for d, c in r.by_direction.items():
        if type(d) is not str or type(c) is not dict or list(c) != _CELL_KEYS:
            return None
        n, b, k, p, t = c.values()
        if not (type(n) is int and type(b) is int and type(k) is int and type(p) is int and type(t) is float
                and 0.0 <= t < math.inf):
            return None
        cells.append((d, n, b, k, p, t))
    crossings, copies, nbytes, pageable = r.crossings, r.copies, r.bytes, r.pageable
    for d, n, b, k, p, t in cells:  # (summed once the whole row is known to be of the shape)
        _add_figures(sums.get(d) if d != "all" else None, n, k, b, p, t)
    _add_figures(sums.get("all"), crossings, copies, nbytes, pageable, seconds)
    return _ROW_LINE % (escape(r.site), escape(r.kind), escape(r.direction), r.calls, crossings,
                        copies, nbytes, pageable, text, "{" + ", ".join(
                            [_CELL % (escape(d), n, b, k, p, text if t == seconds else "%.9f" % t)
                             for d, n, b, k, p, t in cells]) + "}")


def _direct_is_exact() -> bool:
    """Whether the direct line is what ``to_dict`` gives, on rows that test
    each field (awkward floats, two directions, a name to escape), and Row
    has no field the line leaves out: else every line goes through ``to_dict``
    (a field added to Row is never left out of a file)."""
    if [f.name for f in fields(Row)] != ["site", "kind", "direction", "calls", "crossings", "bytes",
                                         "by_direction", "copies", "pageable", "seconds"]:
        return False
    cell = {"calls": 2, "bytes": 10, "copies": 3, "pageable": 1, "seconds": 2 / 3}
    probes = [Row("s\x1b\u00e9\udcff\"", "k", "up,down", 7, 5, 13, {"up": dict(cell), "down\n": dict(cell)},
                  4, 2, 1 / 3),
              Row("s", "k", "none", 1, 0, 0, {"none": dict(cell, seconds=1e-12)}, 0, 0, 123456.000000000123)]
    return all(json.loads(_row_line_direct(r)) == r.to_dict() for r in probes)


_DIRECT = _direct_is_exact()


def row_line(r: Row) -> str:
    """A row's JSON line, as the file holds it: what ``r.to_dict()`` holds."""
    line = _row_line_direct(r) if _DIRECT else None
    return line if line is not None else encode(r.to_dict())


def _lines_summing(rows: Iterable[Row], sums: dict) -> Iterator[str]:
    """Each row's line, its cells added to `sums` as it goes (a save's rows
    and their totals in one pass)."""
    for r in rows:
        line = _row_line_direct(r, sums) if _DIRECT else None
        if line is None:
            line = encode(r.to_dict())
            add_row(sums, r)
        yield line


def row_order(r: Row) -> tuple:
    """The order of a report's rows: busiest first, then by site."""
    return (-r.crossings, -r.bytes, -r.calls, r.site or "")


def launch_order(x: Launch) -> tuple:
    return (-x.launches, x.site or "")


def unwrapped_order(u: Unwrapped) -> tuple:
    return (-u.count, -u.bytes, u.path, u.line)


def row_from_dict(r: Any, w: str) -> Row:
    """One saved row (`w` names it in errors: ``file: rows[3]``)."""
    try:  # the row as save() writes it: straight through (a million of them)
        site, kind, direction = r["site"], r["kind"], r["direction"]
        calls, crossings, nbytes, copies, pageable, seconds, by = (
            r["calls"], r["crossings"], r["bytes"], r["copies"], r["pageable"], r["seconds"], r["by_direction"])
        if (type(site) is str and type(kind) is str and type(direction) is str and type(calls) is int
                and type(crossings) is int and type(nbytes) is int and type(copies) is int
                and type(pageable) is int and type(seconds) is float and 0 <= seconds < math.inf
                and type(by) is dict):
            return Row(site, kind, direction, calls, crossings, nbytes, by, copies, pageable, seconds)
    except (KeyError, TypeError):
        pass
    if not isinstance(r, dict):
        raise ReportError(f"{w}: must be an object")
    site = _field(r, "site", str, w)
    calls = _field(r, "calls", int, w)
    crossings = _field(r, "crossings", int, w)
    nbytes = _field(r, "bytes", int, w)
    direction = _field(r, "direction", str, w)
    by = r.get("by_direction")
    if not isinstance(by, dict):
        # A hand-written or older row: one direction, all its crossings.
        by = {direction: {"calls": crossings, "bytes": nbytes}} if crossings else {}
    copies = _field(r, "copies", int, w, None)  # absent: one per crossing
    pageable = _field(r, "pageable", int, w, 0)
    seconds = _seconds_field(r, w)
    return Row(site, _field(r, "kind", str, w, "move"), direction, calls, crossings, nbytes, by, copies,
               pageable, seconds)
