"""A report whose names are safe to print: the one escaping of a runtime text.

Site names, paths and ops reach the terminal or a CI log from code or files
the user may not have written (``site=f"{name}"``, a report from another
machine). The printed table (``print(report)``, ``xfer.report()``,
``xferaudit report``) escapes their control characters, so a name cannot
start a line of its own (a GitHub ``::error`` annotation) or move the cursor;
the report itself, and its JSON, keep the names as recorded.
"""

from __future__ import annotations

import copy
import dataclasses
from itertools import filterfalse
from operator import attrgetter

from ..._text import has_control, printable

_FIELDS = (("rows", ("site", "kind", "direction")), ("launches", ("site",)),
           ("unwrapped", ("path", "op", "direction", "via", "function", "text", "name")))


def _needs_escape(rep: object, rows: bool = True) -> bool:
    """Whether a name `rep`'s table prints holds a control character: C-level
    passes that only look closer at the rare name that is not printable (a
    million rows cost a small part of the table itself). `rows`: False for a
    rank of a merged report, whose table prints the rank's counts, not its rows
    (which may wait on disk)."""
    for table, names in _FIELDS[0 if rows else 1:]:
        for name in names:
            values = map(attrgetter(name), getattr(rep, table))
            if any(map(has_control, filterfalse(str.isprintable, values))):
                return True
    if any(has_control(v) for v in rep.meta.values() if isinstance(v, str)):
        return True
    if any(has_control(v) for u in rep.unwrapped for f in u.frames for v in f.values()
           if isinstance(v, str)):
        return True
    return any(_needs_escape(r, rows=False) for r in getattr(rep, "ranks", None) or ())


def printable_report(rep: object, rows: bool = True) -> object:
    """`rep` (a Report or RankedReport) if no name in it holds a control
    character, else a copy whose sites, paths, ops, directions and notes have
    them escaped (:func:`xferaudit._text.printable`).
    Figures are unchanged; JSON output uses the report itself, since JSON
    escapes on its own."""
    if not _needs_escape(rep, rows):
        return rep
    c = copy.copy(rep)
    if rows:
        c.rows = [dataclasses.replace(r, site=printable(r.site), kind=printable(r.kind),
                                      direction=printable(r.direction)) for r in rep.rows]
    c.launches = [dataclasses.replace(x, site=printable(x.site)) for x in rep.launches]
    c.unwrapped = [dataclasses.replace(u, path=printable(u.path), op=printable(u.op),
                                       direction=printable(u.direction), via=printable(u.via),
                                       function=printable(u.function), text=printable(u.text),
                                       name=printable(u.name), frames=[{k: printable(v) if isinstance(v, str) else v
                                                for k, v in f.items()} for f in u.frames])
                   for u in rep.unwrapped]
    c.meta = {k: printable(v) if isinstance(v, str) else v for k, v in rep.meta.items()}
    if isinstance(getattr(rep, "ranks", None), list):
        c.ranks = [printable_report(r, rows=False) for r in rep.ranks]
    return c
