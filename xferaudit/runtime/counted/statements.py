"""The statement form, read at run time: a crossing on a statement that carries
a site comment is counted under that site.

Some crossings have no call of their own to wrap: a mask read ``boxes[keep]``,
``t.nonzero()``, an upload by a list index ``t[[0, 5]]``, the constants a
compiled call uploads the first time it runs. ``xferaudit wrap`` names such a
statement with a comment (the wrap grammar's statement form,
:func:`xferaudit.wrapform.statement_comment`)::

    kept = boxes[keep]  # xferaudit: site=":nms:boxes[keep]"

and the guard, the first time it sees a crossing on a line of that statement
outside every wrapper, reads the comment and counts the line's crossings under
the site (a short literal is named after the file, as a wrapper's is:
:func:`xferaudit.runtime.counted.sitenames.file_name`). The report shows them as a row
of that name (kind ``statement``), budgets hold it, and the guard does not
raise or warn about them: they are crossings somebody asked for and named.

Cost: nothing per crossing. The source of a file is read (``linecache``) and
tokenized once, when the guard first records a line of it; each line's answer
is a dict lookup after that, made only when a line's tally is made.

Counted where the guard watches: ``xferaudit run``, ``xfer.guard()``,
``xfer.expect()`` and the pytest plugin's markers. Without the source at hand
(a program run from ``.pyc`` files alone) the comment cannot be read, and the
crossing stays an unnamed one.
"""

from __future__ import annotations

import linecache
import threading
from typing import Optional

from ...wrapform import SHORT, statement_sites

__all__ = ["forget", "site_at"]

_lock = threading.Lock()
# co_filename -> (the lines linecache gave, line -> site literal)
_FILES: dict = {}
_MAX_FILES = 4096


def _sites_of(filename: str, fresh: bool) -> dict:
    hit = _FILES.get(filename)
    if hit is not None and not fresh:
        return hit[1]
    linecache.checkcache(filename)  # (a file rewritten since it was read: read again)
    lines = linecache.getlines(filename)
    if hit is not None and hit[0] is lines:
        return hit[1]
    sites = statement_sites("".join(lines)) if lines else {}
    with _lock:
        if len(_FILES) >= _MAX_FILES:
            _FILES.clear()
        _FILES[filename] = (lines, sites)
    return sites


def site_at(filename: str, line: int, fresh: bool = True) -> Optional[str]:
    """The full name of the site the statement comment of `filename`'s line
    `line` gives, or None when that statement carries none. `fresh`: look
    whether the file changed since it was read (a ``stat``; else a file read
    before is taken as it was)."""
    if not filename or filename.startswith("<frozen"):
        return None
    try:
        literal = _sites_of(filename, fresh).get(line)
    except Exception:  # (an unreadable source: no name, never an error in the program)
        return None
    if literal is None:
        return None
    if literal[:1] == SHORT:
        from .sitenames import file_name

        return file_name(filename) + literal
    return literal


def forget() -> None:
    """Forget every file read (tests)."""
    with _lock:
        _FILES.clear()
