"""The after-step report: per-site transfers, launches, and the guard's finds.

Why per site: a total can stay the same while its causes change (one copy
removed here, another added there); only per-site counts show that. Normal,
for a training step with every site wrapped: one upload per batch tensor,
one download per logged scalar, one launch per compiled call or graph replay.
Anything above that is a copy nobody asked for, and the row names its site.

A Report is plain data (no torch needed): ``xfer.report()`` builds one from the
live tally; ``Report.load(path)`` reads one saved with ``.save(path)``;
``xferaudit report RUN.json`` and ``xferaudit diff A.json B.json`` render them.

Time: each row holds the host time spent inside its calls (``seconds``; the
table's ``ms``). When steps were marked (``xfer.step()``), the report knows
how many (``meta.steps``) and how long they took (``meta.steps_seconds``), and
the table shows each site's share of that time (``%step``). The table prints
readable units (``6.14 kB``, milliseconds); the JSON keeps exact integer
bytes and seconds to the nanosecond.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict, dataclass, field
from itertools import islice
from pathlib import Path
from typing import IO, Any, Callable, ClassVar, Iterable, Iterator, Optional, Union

from ..._gc import collector_paused
from ..._units import human_bytes, ms, share
from .report_json import Items, chunks, plain, read_pairs
from .report_rows import (
    ReportError, _field, _lines_summing, _once, add_cells, launch_order, new_sums, row_from_dict, row_line,
    heading, row_order, totals_of, unwrapped_order, with_lines,
)
from ..counted import compiled as _compiled
from ..counted.rows import Launch, Row, Unwrapped
from .compiled_text import compiled_section
from ..counted.tallies import named_lines, named_rows

__all__ = ["FORMAT", "SORTS", "Launch", "Report", "ReportError", "Row", "Unwrapped", "diff",
           "format_diff"]

FORMAT = "xferaudit.report"
VERSION = 1
#: What a d2d row is, said under the table wherever one is shown.
D2D = ("d2d: a same-device copy made at that line (`dst.copy_(src)` with both on the device, `x.to(copy=True)`;\n"
       "     or one between two devices); copies made inside other ops (`clone`, `contiguous`) or compiled regions\n"
       "     are not attributed (in a fresh process most of a profiler's DtoD memcpys are those)")
NORMAL = (
    "normal: one upload per batch tensor per step, one download per logged scalar,\n"
    "        one launch per compiled call or graph replay; more is a copy nobody asked for"
)


#: Row orders of :meth:`Report.sorted` (``xferaudit report --sort``): the
#: first key, then the others as ties are broken.
SORTS = {
    "crossings": row_order,
    "bytes": lambda r: (-r.bytes, -r.crossings, -r.calls, r.site or ""),
    "time": lambda r: (-r.seconds, -r.crossings, -r.bytes, r.site or ""),
}


def _check_timeline(tl: Any, where: str) -> Optional[dict]:
    """A saved "timeline" (see recorder.Timeline.to_dict), checked; None if absent."""
    if tl is None:
        return None
    w = f"{where}: timeline"
    if not isinstance(tl, dict):
        raise ReportError(f"{w}: must be an object")
    _field(tl, "t0_ns", int, w)
    events = tl.get("events")
    if not isinstance(events, list):
        raise ReportError(f"{w}: \"events\" must be a list")
    for i, e in enumerate(events):
        if not (isinstance(e, list) and len(e) == 5 and isinstance(e[0], int)
                and not isinstance(e[0], bool) and all(isinstance(v, str) for v in e[1:4])
                and isinstance(e[4], int)):
            raise ReportError(f"{w}: events[{i}] must be [time_ns, what, name, direction, n]")
    return tl


def _frames_of(raw: Any, w: str) -> list:
    """A saved chain of user frames: ``[{"path", "line", "function", "text"}]``."""
    if not isinstance(raw, list):
        raise ReportError(f"{w}: must be a list of frames")
    out = []
    for j, f in enumerate(raw):
        fw = f"{w}[{j}]"
        if not isinstance(f, dict):
            raise ReportError(f"{fw}: must be an object")
        out.append({"path": _field(f, "path", str, fw), "line": _field(f, "line", int, fw),
                    "function": _field(f, "function", str, fw, ""),
                    "text": _field(f, "text", str, fw, "")})
    return out


def _unwrapped_of(u: Any, w: str) -> Unwrapped:
    """One saved unwrapped entry (a run file's fields are optional: older
    reports have none of them)."""
    if not isinstance(u, dict):
        raise ReportError(f"{w}: must be an object")
    seconds = u.get("seconds", 0.0)
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise ReportError(f"{w}: 'seconds' must be a number, not {seconds!r}")
    chains = u.get("chains", [])
    if not isinstance(chains, list):
        raise ReportError(f"{w}: 'chains' must be a list of frame lists")
    path = _field(u, "path", str, w)
    if "\0" in path:
        raise ReportError(f"{w}: 'path' holds a NUL character: not a file name")
    return Unwrapped(
        path, _field(u, "line", int, w), _field(u, "op", str, w),
        _field(u, "direction", str, w), _field(u, "count", int, w, 0),
        _field(u, "bytes", int, w, 0), _field(u, "via", str, w, ""),
        _field(u, "copies", int, w, None), _field(u, "pageable", int, w, 0), float(seconds),
        _field(u, "function", str, w, ""), _field(u, "text", str, w, ""),
        _frames_of(u.get("frames", []), f"{w}: frames"),
        [_frames_of(c, f"{w}: chains[{k}]") for k, c in enumerate(chains)],
        _field(u, "name", str, w, ""),
    )


@dataclass
class Report:
    rows: list = field(default_factory=list)  # list[Row], sorted by crossings (desc)
    launches: list = field(default_factory=list)  # list[Launch]
    unwrapped: list = field(default_factory=list)  # list[Unwrapped]
    meta: dict = field(default_factory=dict)
    # The event timeline (recorder.Timeline.to_dict()) when xfer.timeline(True) was on.
    timeline: Optional[dict] = None
    #: Other report shapes, registered by their modules: a saved report holding
    #: the key (e.g. "ranks") is read by that class.
    shapes: ClassVar[dict] = {}

    # --- building -------------------------------------------------------------
    @classmethod
    def from_state(cls, state: Any) -> "Report":
        """A snapshot of the live tally (taken under its lock)."""
        with state.lock, collector_paused():
            rows = [t.snapshot() for t in state.sites.values()]
            launches = [t.snapshot() for t in state.launches.values()]
            # crossings named without a wrapper (a library's, a statement's) are rows of their name
            unwrapped = [t.snapshot() for t in named_rows(state.unwrapped.values(), rows)]
            meta = {"counting": bool(state.on)}
            lines = named_lines(state.unwrapped.values())
            if lines:  # (where the rows named without a wrapper were made: their names hold no line)
                meta["lines"] = lines
            regions = _compiled.snapshot()
            if regions:  # (compiled sites' graphs, breaks and CUDA-graph skips: counted.compiled)
                meta["compiled"] = regions
            if getattr(state, "steps", 0):
                meta["steps"] = int(state.steps)
                meta["steps_seconds"] = round((state.step_ns - state.start_ns) / 1e9, 9)
            tl = getattr(state, "timeline", None)
            timeline = tl.to_dict() if tl is not None else None
        return cls(rows, launches, unwrapped, meta, timeline).sorted()

    def sorted(self, by: str = "crossings") -> "Report":
        """Order the rows (in place) by `by`, one of :data:`SORTS`: crossings
        (the default), bytes or time; the unwrapped entries by count, or by
        time when `by` is time."""
        self.rows.sort(key=SORTS[by])
        self.launches.sort(key=launch_order)
        if by == "time":
            self.unwrapped.sort(key=lambda u: (-u.seconds, -u.count, -u.bytes, u.path, u.line))
        else:
            self.unwrapped.sort(key=unwrapped_order)
        return self

    # --- figures --------------------------------------------------------------
    def totals(self) -> dict:
        """Crossings, copies, bytes, pageable copies and host seconds per
        direction, and for all directions together, of every crossing: the
        rows' and the unwrapped lines' (``copies`` per direction is what a
        profiler counts as memcpys of that kind; ``seconds`` of ``all``
        includes the calls that crossed nothing)."""
        known = getattr(self.rows, "totals", None)  # a merged rank's rows, kept on disk, know theirs
        if known is not None:
            return with_lines(known, self.unwrapped)
        sums = new_sums()
        for r in self.rows:
            add_cells(sums, r)
        return with_lines(totals_of(sums, list(self.rows)), self.unwrapped)

    def timed(self) -> bool:
        """Whether the rows carry host time (reports written before it was
        measured, and rows counted only inside compiled graphs, have none)."""
        return any(r.seconds for r in self.rows)

    def steps_seconds(self) -> float:
        """Wall time of the steps counted (``meta.steps_seconds``), else 0.0."""
        v = self.meta.get("steps_seconds")
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0

    def launch_counts(self) -> dict:
        return {x.site: x.launches for x in self.launches}

    # --- JSON -----------------------------------------------------------------
    def fields(self, top: Optional[int] = None) -> Iterator[tuple[str, Any]]:
        """The JSON form as ``(key, value)`` pairs, big arrays given item by item
        (:mod:`.report_json`): what :meth:`to_dict` holds and :meth:`save` writes."""
        yield "format", FORMAT
        yield "version", VERSION
        yield "meta", dict(self.meta)
        rows = self.rows
        if top is None and hasattr(rows, "json_lines"):  # a merged rank's rows, kept on disk
            yield "rows", Items(rows.json_lines(), encoded=True)
            yield "totals", self.totals()
        elif top is None:  # the rows and their totals in one pass (written before the totals)
            sums = new_sums()
            yield "rows", Items(_lines_summing(rows, sums), encoded=True)
            yield "totals", with_lines(totals_of(sums), self.unwrapped)
        else:
            yield "rows", Items(map(row_line, islice(rows, top)), encoded=True)
            yield "totals", self.totals()
        yield "launches", Items(asdict(x) for x in self.launches)
        yield "unwrapped", Items(u.to_dict() for u in islice(self.unwrapped, top))
        if top is not None:
            yield "rows_hidden", max(len(rows) - top, 0)
            yield "unwrapped_hidden", max(len(self.unwrapped) - top, 0)
        if self.timeline is not None:
            yield "timeline", self.timeline

    def to_dict(self, top: Optional[int] = None) -> dict:
        """The JSON form; with `top`, only the first `top` rows and unwrapped
        lines, ``rows_hidden`` and ``unwrapped_hidden`` saying how many were
        left out, and the totals still the whole run's."""
        return plain(self.fields(top))

    def json_chunks(self, top: Optional[int] = None) -> Iterator[str]:
        """The JSON text, piece by piece: each key on a line, each row on a line."""
        yield from chunks(self.fields(top))
        yield "\n"

    def save(self, path: Union[str, "os.PathLike[str]"]) -> Path:
        """Write the JSON form; atomic (a temporary file renamed into place),
        streamed (a row at a time, never the whole text in memory)."""
        p = Path(path)
        from ..._atomic import atomic_write

        with collector_paused():
            atomic_write(p, self.json_chunks())
        return p

    @classmethod
    def from_dict(cls, data: Any, where: str = "report") -> "Report":
        """A report from its JSON form (read by the same reader as :meth:`load`)."""
        pairs = iter(data.items()) if isinstance(data, dict) else iter(())
        return read_report(pairs, where, spill=False, skip_rows=False)

    @classmethod
    def load(cls, path: Union[str, "os.PathLike[str]"], missing: Optional[str] = None) -> "Report":
        """Read a report saved with :meth:`save`; ReportError if it is not one
        (`missing`: the message for a path that does not exist).

        The file is streamed (:mod:`.report_json`): memory holds the report's
        rows, never the file's text or its whole JSON; a multi-rank file keeps
        each rank's rows in a temporary file. Every reader of reports (report,
        budget, diff, merge) comes through here."""
        try:
            return read_file(path, missing=missing)
        except Reshape:  # it said "several ranks" before its rows, then had none
            return read_file(path, skip_rows=False, missing=missing)

    # --- text -----------------------------------------------------------------
    def format(self, top: Optional[int] = None) -> str:
        """The printed table (what ``print(report)`` and ``xfer.report()`` show);
        with `top`, only the first `top` site rows and unwrapped lines, the
        totals still the run's."""
        lines = [heading(self.rows, self.unwrapped), NORMAL]
        if not self.rows and not self.launches and not self.unwrapped:
            hint = "" if self.meta.get("counting", True) else (
                " (counting is off: call xfer.count(True) or use `with xfer.counting():`)"
            )
            lines.append("nothing counted" + hint)
            return "\n".join(lines) + "\n"
        timed, whole = self.timed(), self.steps_seconds()
        steps = self.meta.get("steps")
        if isinstance(steps, int) and not isinstance(steps, bool) and steps > 0:
            lines.append(self._steps_line(steps, whole if timed else 0.0))

        def cols(rows_time: float) -> str:  # the time columns, where there is time
            if not timed:
                return ""
            return f" {ms(rows_time):>10}" + (f" {share(rows_time, whole):>6}" if whole else "")

        if self.rows:
            head = f" {'ms':>10}" + (f" {'%step':>6}" if whole else "") if timed else ""
            lines.append(f"{'direction':<10} {'calls':>8} {'crossings':>10} {'copies':>8} "
                         f"{'bytes':>10}{head}  site")
            for r in self.rows[:top]:
                pg = f"  [pageable {r.pageable}]" if r.pageable else ""
                lines.append(f"{r.direction:<10} {r.calls:>8} {r.crossings:>10} {r.copies:>8} "
                             f"{human_bytes(r.bytes):>10}{cols(r.seconds)}  {r.site}{pg}")
            hidden = len(self.rows[top:]) if top is not None else 0
            if hidden:
                lines.append(f"({hidden} more site{'s' if hidden != 1 else ''} not shown; "
                             "the totals are the whole run's)")
        elif self.unwrapped:
            lines.append("no site crossed: every crossing is at a line nothing names (below)")
        else:
            lines.append("no transfer counted")
        if self.rows or self.unwrapped:
            tot = self.totals()
            if self.unwrapped:
                lines.append(f"totals: every crossing, wrapped or not (the {len(self.unwrapped)} "
                             "unwrapped line(s) below included)")
            calls = sum(r.calls for r in self.rows) + sum(u.count for u in self.unwrapped)
            for label, key, c in (("up", "up", ""), ("down", "down", ""), ("all", "all", calls)):
                if key == "all" and tot["d2d"]["copies"]:
                    # device-to-device copies apart: not host<->device traffic
                    t = tot["d2d"]
                    lines.append(f"{'total d2d':<10} {'':>8} {t['crossings']:>10} {t['copies']:>8} "
                                 f"{human_bytes(t['bytes']):>10}{cols(t['seconds'])}")
                t = tot[key]
                lines.append(f"{'total ' + label:<10} {c!s:>8} {t['crossings']:>10} {t['copies']:>8} "
                             f"{human_bytes(t['bytes']):>10}{cols(t['seconds'])}")
            if tot["all"]["pageable"]:
                lines.append(f"pageable: {tot['all']['pageable']} non_blocking copies had a pageable "
                             "host side, so they ran synchronously (pin the host memory)")
        if self.launches:
            lines.append("")
            lines.append("graph launches (counted always)")
            lines.append(f"{'launches':>8} {'nodes':>7}  site")
            for x in self.launches:
                nodes = "-" if x.nodes is None else str(x.nodes)
                lines.append(f"{x.launches:>8} {nodes:>7}  {x.site}")
        lines.extend(compiled_section(self.meta.get("compiled"), self.meta.get("steps")))
        if self.unwrapped:
            lines.append("")
            lines.append("unwrapped transfers (seen by the guard outside every wrapper)")
            lines.append(f"{'direction':<10} {'count':>8} {'copies':>8} {'bytes':>10} {'ms':>10}  "
                         f"{'op':<28} where")
            for u in self.unwrapped[:top]:
                via = f"  (via {u.via})" if u.via else ""
                pg = f"  [pageable {u.pageable}]" if u.pageable else ""
                outer = u.frames[-1] if len(u.frames) > 1 else None  # the chain's outermost user line
                called = f"  <- {outer['path']}:{outer['line']}" if outer else ""
                named = f"  [{u.name}]" if u.name else ""  # (the name budgets hold: no line number)
                lines.append(f"{u.direction:<10} {u.count:>8} {u.copies:>8} {human_bytes(u.bytes):>10} "
                             f"{ms(u.seconds):>10}  {u.op:<28} {u.path}:{u.line}{named}{via}{called}{pg}")
            hidden = len(self.unwrapped[top:]) if top is not None else 0
            if hidden:
                lines.append(f"({hidden} more unwrapped line{'s' if hidden != 1 else ''} not shown)")
        if any("d2d" in r.by_direction for r in self.rows[:top]) or any(u.direction == "d2d"
                                                                          for u in self.unwrapped):
            lines.append(D2D)
        return "\n".join(lines) + "\n"

    def format_lines(self, top: Optional[int] = None) -> Iterator[str]:
        """The table in pieces (:meth:`format` joined); a merged report's come
        as they are made."""
        yield self.format(top)

    def _steps_line(self, steps: int, whole: float) -> str:
        """``steps: 3 counted, 2.410 ms each; wrapped calls 0.350 ms of it (14.5%)``."""
        text = f"steps: {steps} counted"
        if whole > 0:
            inside = sum(r.seconds for r in self.rows)
            text += (f", {ms(whole / steps)} ms each; wrapped calls {ms(inside / steps)} ms of it "
                     f"({share(inside, whole)})")
        return text

    def __str__(self) -> str:
        """The table, control characters in names escaped (see :mod:`.printable`);
        :meth:`format` gives the names as recorded."""
        from .printable import printable_report

        return printable_report(self).format()

    def print(self, file: Optional[IO[str]] = None) -> None:
        (file if file is not None else sys.stdout).write(str(self))


# --- reading: one reader for files and dicts ----------------------------------------

#: The arrays a saved report's reader takes an element at a time.
STREAMED = ("rows", "launches", "unwrapped", "ranks")


class Reshape(Exception):
    """A file turned out to be of the other shape than its reading assumed:
    ``ranked`` says which it is, for the next reading."""

    def __init__(self, ranked: bool) -> None:
        super().__init__("ranked" if ranked else "plain")
        self.ranked = ranked


def _array(value: Any, where: str, key: str) -> Iterable:
    if isinstance(value, list) or (value is not None and hasattr(value, "__next__")):
        return value
    raise ReportError(f"{where}: \"{key}\" must be a list")


def read_parts(pairs: Iterable[tuple[str, Any]], where: str, on_row: Optional[Callable[[Row], None]],
               top: bool = False) -> dict:
    """Read one report object's pairs in the order they come, checking each part
    as it comes (:mod:`xferaudit._validate`): each row goes to `on_row` (None:
    checked and dropped); the rest comes back in a dict ("launches",
    "unwrapped", "meta", "timeline", and any other key as it was; "rows" says
    whether there were rows). `top`: the document's own object (its
    ``world_size`` and ``steps`` are checked too)."""
    from ... import _validate as v

    out: dict = {}
    for key, value in pairs:
        if key == "rows":
            out["rows"] = True
            seen: dict = {}
            for i, r in enumerate(_array(value, where, "rows")):
                w = f"{where}: rows[{i}]"
                v.check_row(r, w, ReportError)
                row = row_from_dict(r, w)
                _once(seen, row.site, i, where, "rows")
                if on_row is not None:
                    on_row(row)
        elif key == "launches":
            if value is not None and not isinstance(value, dict):
                value = _array(value, where, "launches")
            elif value is not None:  # {site: count} is accepted too
                value = [{"site": k, "launches": n} for k, n in value.items()]
            launches, seen = [], {}
            for i, x in enumerate(value or ()):
                w = f"{where}: launches[{i}]"
                v.check_launch(x, w, ReportError)
                if not isinstance(x, dict):
                    raise ReportError(f"{w}: must be an object")
                nodes = x.get("nodes")
                if nodes is not None and (isinstance(nodes, bool) or not isinstance(nodes, int)):
                    raise ReportError(f"{w}: 'nodes' must be an integer or null")
                _once(seen, _field(x, "site", str, w), i, where, "launches")
                launches.append(Launch(x["site"], _field(x, "launches", int, w), nodes))
            out["launches"] = launches
        elif key == "unwrapped":
            unwrapped = []
            for i, u in enumerate(_array(value, where, "unwrapped") if value is not None else ()):
                w = f"{where}: unwrapped[{i}]"
                v.check_unwrapped(u, w, ReportError)
                unwrapped.append(_unwrapped_of(u, w))
            out["unwrapped"] = unwrapped
        elif key == "meta":
            if isinstance(value, dict):
                v.check_meta(value, where, ReportError)
            out["meta"] = value
        elif key == "timeline":
            v.check_timeline(value, where, ReportError)
            out["timeline"] = _check_timeline(value, where)
        else:
            if top and key in ("world_size", "steps") and value is not None:
                v.count(value, where, key, ReportError)
            out[key] = value
    if "rows" not in out:
        raise ReportError(f"{where}: not an xferaudit report (no \"rows\")")
    if out.get("format", FORMAT) != FORMAT:
        raise ReportError(f"{where}: format is {out.get('format')!r}, not {FORMAT!r}")
    return out


def read_report(pairs: Iterator[tuple[str, Any]], where: str, spill: bool,
                skip_rows: Optional[bool] = None, into: Any = None) -> Optional["Report"]:
    """The one reader of saved reports, for a file's pairs (streamed, see
    :meth:`Report.load`) and a dict's items (:meth:`Report.from_dict`) alike.

    A report holding another shape's key (``ranks``: a merged report, see
    distributed.py) is read by that shape: its per-rank reports go through
    :func:`read_parts` one by one into a merger (each rank's rows kept on disk
    when `spill`). Its own top-level rows are totals derived from the ranks:
    checked, and not kept once the file said what it is (``world_size`` before
    its rows; `skip_rows`: True it is known to be merged, False known not).

    `into`: a merger (distributed.py) to feed instead of building a report: a
    plain report becomes one rank of it, a merged one gives it its ranks;
    returns None. A file that turns out the other shape than read so far
    raises :class:`Reshape`, to be read again.
    """
    rows: list = []
    shape: Any = None
    merger = into
    marked = False
    dropped = 0
    begun = False

    def keep(row: Row) -> None:
        nonlocal dropped, begun
        if skip_rows if skip_rows is not None else marked:
            dropped += 1
        elif into is not None:
            if not begun:
                into.begin(where)
                begun = True
            into.add_row(row)
        else:
            rows.append(row)

    def parts_in_order() -> Iterator[tuple[str, Any]]:
        nonlocal shape, marked, merger
        for key, value in pairs:
            if key == "world_size":
                marked = True
            handler = Report.shapes.get(key)
            if handler is None:
                yield key, value
                continue
            if begun:
                raise Reshape(ranked=True)  # its rows went in as a rank's
            shape = handler
            merger = merger if merger is not None else handler.merger(spill)
            handler.read_ranks(_array(value, where, key), where, merger)

    parts = read_parts(parts_in_order(), where, keep, top=True)
    if shape is not None:
        return shape.finish(merger, parts, where, own=into is None)
    if dropped:
        raise Reshape(ranked=False)
    meta = dict(parts["meta"]) if isinstance(parts.get("meta"), dict) else {}
    if parts.get("steps") is not None:  # the run's steps, at the top level of hand-made files
        meta.setdefault("steps", parts["steps"])
    launches, unwrapped = parts.get("launches", []), parts.get("unwrapped", [])
    if into is not None:
        if not begun:
            into.begin(where)
        into.end(meta, launches, unwrapped, parts.get("timeline"))
        return None
    return Report(rows, launches, unwrapped, meta, parts.get("timeline")).sorted()


def read_file(path: Union[str, "os.PathLike[str]"], skip_rows: Optional[bool] = None,
              into: Any = None, missing: Optional[str] = None) -> Optional["Report"]:
    """:func:`read_report` of a saved file, streamed (:mod:`.report_json`);
    only a regular file is opened, and read to :data:`~xferaudit._readfile.MAX_BYTES`."""
    from ..._readfile import open_text

    p = Path(path)
    try:  # (a regular file only, of bounded size: a FIFO or /dev/zero is refused unread)
        with open_text(p, str(p), ReportError, missing) as f, collector_paused():
            pairs = read_pairs(f, str(p), ReportError, STREAMED, ("ranks",))
            return read_report(pairs, str(p), True, skip_rows, into)
    except OSError as e:
        raise ReportError(f"{p}: cannot read: {e.strerror or e}") from None


# The diff lives in report_diff (re-exported: every reader imports it from here).
from .report_diff import SiteChange, diff, diff_to_dict, format_diff  # noqa: E402,F401
