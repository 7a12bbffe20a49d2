"""``xferaudit diff``: what changed per site between two reports, and the totals.

A total can stay the same while its causes change (a copy removed at one
site, another added elsewhere); only per-site counts show that. The totals
are :meth:`Report.totals`: every crossing, wrapped or not (a line nothing
names is in them with its bytes), so the same program before and after
``xferaudit wrap --from`` shows the same totals, its crossings moved from
the unwrapped lines to the rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from ..._units import human_bytes, ms, signed_bytes, signed_ms
from ..counted.rows import Row

__all__ = ["SiteChange", "diff", "diff_to_dict", "format_diff"]


@dataclass
class SiteChange:
    site: str
    status: str  # "added" | "removed" | "changed" | "same"
    calls: tuple = (0, 0)
    crossings: tuple = (0, 0)
    bytes: tuple = (0, 0)
    direction: tuple = ("", "")
    copies: tuple = (0, 0)
    seconds: tuple = (0.0, 0.0)  # host time; a change of time alone leaves the status "same"


def _signed(n: int) -> str:
    return f"{n:+d}" if n else "0"


def diff(a: Any, b: Any) -> dict:
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
                        (x.bytes, y.bytes), (x.direction, y.direction), (x.copies, y.copies),
                        (x.seconds, y.seconds))
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
    ua, ub = _unwrapped_by_key(a), _unwrapped_by_key(b)
    unwrapped = []
    for key in list(ua) + [k for k in ub if k not in ua]:
        x, y = ua.get(key), ub.get(key)
        before, after = x.count if x else 0, y.count if y else 0
        if before != after:
            u = y or x
            unwrapped.append({"path": u.path, "line": u.line, "op": u.op, "direction": u.direction,
                              "count": [before, after]})
    return {
        "sites": changes,
        "launches": launches,
        "unwrapped": unwrapped,
        "totals": [a.totals(), b.totals()],
        "timed": a.timed() or b.timed(),
    }


def _unwrapped_by_key(rep: Any) -> dict:
    """A report's unwrapped entries by the line they name: its path, function
    and text where the entry has them (a run's: the line is found again after
    edits above it), else its path and line number."""
    out: dict = {}
    for u in rep.unwrapped:
        key = ((u.path, u.function, u.text, u.op, u.direction) if u.text
               else (u.path, u.line, u.op, u.direction))
        if key in out:  # (the same text twice in a function: kept apart by line)
            key = (u.path, u.line, u.op, u.direction)
        out[key] = u
    return out


def format_diff(d: dict, a_name: str = "A", b_name: str = "B", show_same: bool = False) -> str:
    lines = [f"xferaudit diff: {a_name} -> {b_name} (per site; a total can hide a swap of causes)"]
    changes: Iterable[SiteChange] = d["sites"]
    shown = [c for c in changes if show_same or c.status != "same"]
    same = sum(1 for c in changes if c.status == "same")
    timed = d.get("timed", False)
    if shown:
        head = f" {'ms':>17}" if timed else ""
        lines.append(f"{'status':<8} {'calls':>14} {'crossings':>14} {'copies':>14} {'bytes':>11}"
                     f"{head}  site")
        for c in shown:
            calls = f"{c.calls[0]}->{c.calls[1]}"
            cr = f"{c.crossings[0]}->{c.crossings[1]}"
            cp = f"{c.copies[0]}->{c.copies[1]}"
            nb = signed_bytes(c.bytes[1] - c.bytes[0])
            t = f" {ms(c.seconds[0]) + '->' + ms(c.seconds[1]):>17}" if timed else ""
            extra = ""
            if c.status == "changed" and c.direction[0] != c.direction[1]:
                extra = f"  (direction {c.direction[0]} -> {c.direction[1]})"
            lines.append(f"{c.status:<8} {calls:>14} {cr:>14} {cp:>14} {nb:>11}{t}  {c.site}{extra}")
    else:
        lines.append("no per-site change")
    if same and not show_same:
        lines.append(f"({same} site(s) unchanged)")
    ta, tb = d["totals"]
    lines.append("totals: every crossing, wrapped or not (the lines nothing names included)")
    for key in ("up", "down", "d2d", "all"):
        a, b = ta.get(key, {}), tb.get(key, {})
        if key == "d2d" and not (a.get("copies") or b.get("copies")):
            continue  # shown apart, and only when there were any
        dc = b.get("crossings", 0) - a.get("crossings", 0)
        dk = b.get("copies", 0) - a.get("copies", 0)
        db = b.get("bytes", 0) - a.get("bytes", 0)
        line = (f"total {key:<5} crossings {a.get('crossings', 0)} -> {b.get('crossings', 0)} "
                f"({_signed(dc)}), copies {a.get('copies', 0)} -> {b.get('copies', 0)} "
                f"({_signed(dk)}), bytes {human_bytes(a.get('bytes', 0))} -> "
                f"{human_bytes(b.get('bytes', 0))} ({signed_bytes(db)})")
        if timed:
            sa, sb = a.get("seconds", 0.0), b.get("seconds", 0.0)
            line += f", ms {ms(sa)} -> {ms(sb)} ({signed_ms(sb - sa)})"
        lines.append(line)
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
                "seconds": list(c.seconds),
                "delta": {
                    "calls": c.calls[1] - c.calls[0],
                    "crossings": c.crossings[1] - c.crossings[0],
                    "copies": c.copies[1] - c.copies[0],
                    "bytes": c.bytes[1] - c.bytes[0],
                    "seconds": round(c.seconds[1] - c.seconds[0], 9),
                },
            }
            for c in d["sites"]
        ],
        "launches": d["launches"],
        "unwrapped": d["unwrapped"],
        "totals": d["totals"],
    }
