"""The after-step report: per-site transfers, launches, and the guard's finds.

Why per site: a total can stay the same while its causes change (one copy
removed here, another added there); only per-site counts show that. Normal,
for a training step with every site wrapped: one upload per batch tensor,
one download per logged scalar, one launch per compiled call or graph replay.
Anything above that is a copy nobody asked for, and the row names its site.

A Report is plain data (no torch needed): ``xfer.report()`` builds one from the
live tally; ``Report.load(path)`` reads one saved with ``.save(path)``;
``xferaudit report RUN.json`` and ``xferaudit diff A.json B.json`` render them.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any, ClassVar, Iterable, Optional, Union

from .rows import DIRECTIONS, Launch, Row, Unwrapped

__all__ = ["FORMAT", "Launch", "Report", "ReportError", "Row", "Unwrapped", "diff", "format_diff"]

FORMAT = "xferaudit.report"
VERSION = 1
NORMAL = (
    "normal: one upload per batch tensor per step, one download per logged scalar,\n"
    "        one launch per compiled call or graph replay; more is a copy nobody asked for"
)


class ReportError(ValueError):
    """A file is not a saved report; the message says what is wrong."""


def _mb(n: int) -> str:
    return f"{n / 1e6:.6f}"


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


def _once(seen: dict, site: str, i: int, where: str, key: str) -> None:
    """A site has one row in a report: the recorder keeps one tally per site, so
    a second row means the file was edited or pasted together, and adding the
    two (or keeping either) could be wrong. Every reader of reports (report,
    budget, diff, merge) loads through here and refuses it alike."""
    first = seen.setdefault(site, i)
    if first != i:
        raise ReportError(f"{where}: {key}[{i}]: site {site!r} is there twice (also {key}[{first}]); "
                          "a report has one row per site")


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
        with state.lock:
            rows = [t.snapshot() for t in state.sites.values()]
            launches = [t.snapshot() for t in state.launches.values()]
            unwrapped = [t.snapshot() for t in state.unwrapped.values()]
            meta = {"counting": bool(state.on)}
            if getattr(state, "steps", 0):
                meta["steps"] = int(state.steps)
            tl = getattr(state, "timeline", None)
            timeline = tl.to_dict() if tl is not None else None
        return cls(rows, launches, unwrapped, meta, timeline).sorted()

    def sorted(self) -> "Report":
        self.rows.sort(key=lambda r: (-r.crossings, -r.bytes, -r.calls, r.site or ""))
        self.launches.sort(key=lambda x: (-x.launches, x.site or ""))
        self.unwrapped.sort(key=lambda u: (-u.count, -u.bytes, u.path, u.line))
        return self

    # --- figures --------------------------------------------------------------
    def totals(self) -> dict:
        """Crossings, copies, bytes and pageable copies per direction, and for
        all directions together (``copies`` per direction is what a profiler
        counts as memcpys of that kind)."""
        out = {d: {"crossings": 0, "copies": 0, "bytes": 0, "pageable": 0}
               for d in DIRECTIONS if d != "none"}
        for r in self.rows:
            for d, v in r.by_direction.items():
                if d in out:
                    o = out[d]
                    o["crossings"] += v["calls"]
                    o["copies"] += v.get("copies", v["calls"])
                    o["bytes"] += v["bytes"]
                    o["pageable"] += v.get("pageable", 0)
        out["all"] = {
            "crossings": sum(r.crossings for r in self.rows),
            "copies": sum(r.copies for r in self.rows),
            "bytes": sum(r.bytes for r in self.rows),
            "pageable": sum(r.pageable for r in self.rows),
        }
        return out

    def launch_counts(self) -> dict:
        return {x.site: x.launches for x in self.launches}

    # --- JSON -----------------------------------------------------------------
    def to_dict(self, top: Optional[int] = None) -> dict:
        """The JSON form; with `top`, only the first `top` rows, ``rows_hidden``
        saying how many were left out, and the totals still the whole run's."""
        out = {
            "format": FORMAT,
            "version": VERSION,
            "meta": dict(self.meta),
            "rows": [r.to_dict() for r in self.rows[:top]],
            "totals": self.totals(),
            "launches": [asdict(x) for x in self.launches],
            "unwrapped": [asdict(u) for u in self.unwrapped],
        }
        if top is not None:
            out["rows_hidden"] = len(self.rows[top:])
        if self.timeline is not None:
            out["timeline"] = self.timeline
        return out

    def save(self, path: Union[str, "os.PathLike[str]"]) -> Path:
        """Write the JSON form; atomic (a temporary file renamed into place)."""
        p = Path(path)
        text = json.dumps(self.to_dict(), indent=2, sort_keys=False) + "\n"
        from .._atomic import atomic_write

        atomic_write(p, text)
        return p

    @classmethod
    def from_dict(cls, data: Any, where: str = "report") -> "Report":
        if not isinstance(data, dict) or "rows" not in data:
            raise ReportError(f"{where}: not an xferaudit report (no \"rows\")")
        if data.get("format", FORMAT) != FORMAT:
            raise ReportError(f"{where}: format is {data.get('format')!r}, not {FORMAT!r}")
        if not isinstance(data["rows"], list):
            raise ReportError(f"{where}: \"rows\" must be a list")
        rows = []
        seen: dict = {}
        for i, r in enumerate(data["rows"]):
            w = f"{where}: rows[{i}]"
            if not isinstance(r, dict):
                raise ReportError(f"{w}: must be an object")
            site = _field(r, "site", str, w)
            _once(seen, site, i, where, "rows")
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
            rows.append(Row(site, _field(r, "kind", str, w, "move"), direction,
                            calls, crossings, nbytes, by, copies, pageable))
        launches = []
        raw_l = data.get("launches", [])
        if isinstance(raw_l, dict):  # {site: count} is accepted too
            raw_l = [{"site": k, "launches": v} for k, v in raw_l.items()]
        seen = {}
        for i, x in enumerate(raw_l or []):
            w = f"{where}: launches[{i}]"
            if not isinstance(x, dict):
                raise ReportError(f"{w}: must be an object")
            _once(seen, _field(x, "site", str, w), i, where, "launches")
            nodes = x.get("nodes")
            if nodes is not None and (isinstance(nodes, bool) or not isinstance(nodes, int)):
                raise ReportError(f"{w}: 'nodes' must be an integer or null")
            launches.append(Launch(_field(x, "site", str, w), _field(x, "launches", int, w), nodes))
        unwrapped = []
        for i, u in enumerate(data.get("unwrapped", []) or []):
            w = f"{where}: unwrapped[{i}]"
            if not isinstance(u, dict):
                raise ReportError(f"{w}: must be an object")
            unwrapped.append(Unwrapped(
                _field(u, "path", str, w), _field(u, "line", int, w), _field(u, "op", str, w),
                _field(u, "direction", str, w), _field(u, "count", int, w, 0),
                _field(u, "bytes", int, w, 0), _field(u, "via", str, w, ""),
                _field(u, "copies", int, w, None),
            ))
        meta = data.get("meta") if isinstance(data.get("meta"), dict) else {}
        timeline = _check_timeline(data.get("timeline"), where)
        if cls is Report:
            for key, shape in Report.shapes.items():
                if key in data:  # e.g. a multi-rank report (xferaudit merge)
                    return shape.from_dict(data, where)
        return cls(rows, launches, unwrapped, dict(meta), timeline).sorted()

    @classmethod
    def load(cls, path: Union[str, "os.PathLike[str]"]) -> "Report":
        """Read a report saved with :meth:`save`; ReportError if it is not one."""
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ReportError(f"{p}: no such file") from None
        except (OSError, UnicodeDecodeError) as e:
            raise ReportError(f"{p}: cannot read: {e}") from None
        from .._validate import check_report, parse_json  # counts in range, or exit 2

        data = parse_json(text, str(p), ReportError)
        check_report(data, str(p), ReportError)
        return cls.from_dict(data, str(p))

    # --- text -----------------------------------------------------------------
    def format(self, top: Optional[int] = None) -> str:
        """The printed table (what ``print(report)`` and ``xfer.report()`` show);
        with `top`, only the first `top` site rows, the totals still the run's."""
        lines = ["xferaudit: host<->device transfers per wrapped site", NORMAL]
        if not self.rows and not self.launches and not self.unwrapped:
            hint = "" if self.meta.get("counting", True) else (
                " (counting is off: call xfer.count(True) or use `with xfer.counting():`)"
            )
            lines.append("nothing counted" + hint)
            return "\n".join(lines) + "\n"
        if self.rows:
            lines.append(f"{'direction':<10} {'calls':>8} {'crossings':>10} {'copies':>8} "
                         f"{'MB':>14}  site")
            for r in self.rows[:top]:
                pg = f"  [pageable {r.pageable}]" if r.pageable else ""
                lines.append(f"{r.direction:<10} {r.calls:>8} {r.crossings:>10} {r.copies:>8} "
                             f"{_mb(r.bytes):>14}  {r.site}{pg}")
            hidden = len(self.rows[top:]) if top is not None else 0
            if hidden:
                lines.append(f"({hidden} more site{'s' if hidden != 1 else ''} not shown; "
                             "the totals are the whole run's)")
            tot = self.totals()
            calls = sum(r.calls for r in self.rows)
            for label, key, c in (("up", "up", ""), ("down", "down", ""), ("all", "all", calls)):
                if key == "all" and tot["d2d"]["copies"]:
                    # device-to-device copies apart: not host<->device traffic
                    t = tot["d2d"]
                    lines.append(f"{'total d2d':<10} {'':>8} {t['crossings']:>10} {t['copies']:>8} "
                                 f"{_mb(t['bytes']):>14}")
                t = tot[key]
                lines.append(f"{'total ' + label:<10} {c!s:>8} {t['crossings']:>10} {t['copies']:>8} "
                             f"{_mb(t['bytes']):>14}")
            if tot["all"]["pageable"]:
                lines.append(f"pageable: {tot['all']['pageable']} non_blocking copies had a pageable "
                             "host side, so they ran synchronously (pin the host memory)")
        else:
            lines.append("no wrapped transfer counted")
        if self.launches:
            lines.append("")
            lines.append("graph launches (counted always)")
            lines.append(f"{'launches':>8} {'nodes':>7}  site")
            for x in self.launches:
                nodes = "-" if x.nodes is None else str(x.nodes)
                lines.append(f"{x.launches:>8} {nodes:>7}  {x.site}")
        if self.unwrapped:
            lines.append("")
            lines.append("unwrapped transfers (seen by the guard outside every wrapper)")
            lines.append(f"{'direction':<10} {'count':>8} {'copies':>8} {'MB':>14}  {'op':<28} where")
            for u in self.unwrapped:
                via = f"  (via {u.via})" if u.via else ""
                lines.append(f"{u.direction:<10} {u.count:>8} {u.copies:>8} {_mb(u.bytes):>14}  "
                             f"{u.op:<28} {u.path}:{u.line}{via}")
        return "\n".join(lines) + "\n"

    __str__ = format

    def print(self, file: Optional[IO[str]] = None) -> None:
        (file if file is not None else sys.stdout).write(self.format())


# --- diff ----------------------------------------------------------------------


@dataclass
class SiteChange:
    site: str
    status: str  # "added" | "removed" | "changed" | "same"
    calls: tuple = (0, 0)
    crossings: tuple = (0, 0)
    bytes: tuple = (0, 0)
    direction: tuple = ("", "")
    copies: tuple = (0, 0)


def _signed(n: int) -> str:
    return f"{n:+d}" if n else "0"


def _signed_mb(n: int) -> str:
    return f"{n / 1e6:+.6f}" if n else "0"


def diff(a: Report, b: Report) -> dict:
    """Per-site changes from `a` to `b`: rows, launches and unwrapped events."""
    ra = {r.site: r for r in a.rows}
    rb = {r.site: r for r in b.rows}
    changes = []
    for site in list(ra) + [s for s in rb if s not in ra]:
        x, y = ra.get(site), rb.get(site)
        status = "added" if x is None else "removed" if y is None else "same"
        z = Row(site, "", "")
        x, y = x or z, y or z
        ch = SiteChange(site, status, (x.calls, y.calls), (x.crossings, y.crossings),
                        (x.bytes, y.bytes), (x.direction, y.direction), (x.copies, y.copies))
        if status == "same" and (ch.calls[0] != ch.calls[1] or ch.crossings[0] != ch.crossings[1]
                                 or ch.bytes[0] != ch.bytes[1] or ch.direction[0] != ch.direction[1]
                                 or ch.copies[0] != ch.copies[1]):
            ch.status = "changed"
        changes.append(ch)
    order = {"added": 0, "removed": 1, "changed": 2, "same": 3}
    changes.sort(key=lambda c: (order[c.status], -abs(c.crossings[1] - c.crossings[0]),
                                -abs(c.bytes[1] - c.bytes[0]), c.site))
    la, lb = a.launch_counts(), b.launch_counts()
    launches = []
    for site in list(la) + [s for s in lb if s not in la]:
        before, after = la.get(site), lb.get(site)
        status = ("added" if before is None else "removed" if after is None
                  else "same" if before == after else "changed")
        launches.append({"site": site, "status": status, "launches": [before or 0, after or 0]})
    launches.sort(key=lambda c: (order[c["status"]], c["site"]))
    ua = {(u.path, u.line, u.op, u.direction): u.count for u in a.unwrapped}
    ub = {(u.path, u.line, u.op, u.direction): u.count for u in b.unwrapped}
    unwrapped = []
    for key in list(ua) + [k for k in ub if k not in ua]:
        before, after = ua.get(key, 0), ub.get(key, 0)
        if before != after:
            unwrapped.append({"path": key[0], "line": key[1], "op": key[2], "direction": key[3],
                              "count": [before, after]})
    return {
        "sites": changes,
        "launches": launches,
        "unwrapped": unwrapped,
        "totals": [a.totals(), b.totals()],
    }


def format_diff(d: dict, a_name: str = "A", b_name: str = "B", show_same: bool = False) -> str:
    lines = [f"xferaudit diff: {a_name} -> {b_name} (per site; a total can hide a swap of causes)"]
    changes: Iterable[SiteChange] = d["sites"]
    shown = [c for c in changes if show_same or c.status != "same"]
    same = sum(1 for c in changes if c.status == "same")
    if shown:
        lines.append(f"{'status':<8} {'calls':>14} {'crossings':>14} {'copies':>14} {'MB':>17}  site")
        for c in shown:
            calls = f"{c.calls[0]}->{c.calls[1]}"
            cr = f"{c.crossings[0]}->{c.crossings[1]}"
            cp = f"{c.copies[0]}->{c.copies[1]}"
            mb = _signed_mb(c.bytes[1] - c.bytes[0])
            extra = ""
            if c.status == "changed" and c.direction[0] != c.direction[1]:
                extra = f"  (direction {c.direction[0]} -> {c.direction[1]})"
            lines.append(f"{c.status:<8} {calls:>14} {cr:>14} {cp:>14} {mb:>17}  {c.site}{extra}")
    else:
        lines.append("no per-site change")
    if same and not show_same:
        lines.append(f"({same} site(s) unchanged)")
    ta, tb = d["totals"]
    for key in ("up", "down", "d2d", "all"):
        a, b = ta.get(key, {}), tb.get(key, {})
        if key == "d2d" and not (a.get("copies") or b.get("copies")):
            continue  # shown apart, and only when there were any
        dc = b.get("crossings", 0) - a.get("crossings", 0)
        dk = b.get("copies", 0) - a.get("copies", 0)
        db = b.get("bytes", 0) - a.get("bytes", 0)
        lines.append(f"total {key:<5} crossings {a.get('crossings', 0)} -> {b.get('crossings', 0)} "
                     f"({_signed(dc)}), copies {a.get('copies', 0)} -> {b.get('copies', 0)} "
                     f"({_signed(dk)}), MB {_mb(a.get('bytes', 0))} -> {_mb(b.get('bytes', 0))} "
                     f"({_signed_mb(db)})")
    moved = [x for x in d["launches"] if x["status"] != "same"]
    if moved:
        lines.append("launches:")
        for x in moved:
            lines.append(f"  {x['status']:<8} {x['launches'][0]} -> {x['launches'][1]}  {x['site']}")
    if d["unwrapped"]:
        lines.append("unwrapped transfers:")
        for u in d["unwrapped"]:
            lines.append(f"  {u['count'][0]} -> {u['count'][1]}  {u['direction']} {u['op']} "
                         f"{u['path']}:{u['line']}")
    return "\n".join(lines) + "\n"


def diff_to_dict(d: dict) -> dict:
    return {
        "sites": [
            {
                "site": c.site,
                "status": c.status,
                "calls": list(c.calls),
                "crossings": list(c.crossings),
                "copies": list(c.copies),
                "bytes": list(c.bytes),
                "direction": list(c.direction),
                "delta": {
                    "calls": c.calls[1] - c.calls[0],
                    "crossings": c.crossings[1] - c.crossings[0],
                    "copies": c.copies[1] - c.copies[0],
                    "bytes": c.bytes[1] - c.bytes[0],
                },
            }
            for c in d["sites"]
        ],
        "launches": d["launches"],
        "unwrapped": d["unwrapped"],
        "totals": d["totals"],
    }
