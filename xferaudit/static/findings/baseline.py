"""Baselines: accept a legacy codebase's findings, fail on every new one.

A baseline counts findings per *(file, code, enclosing function)*, not per line,
so it survives edits that shift lines, and a site that moves inside its function
still matches. A key whose count grows above its baseline fails the check at
once: every finding of that key is reported (the tool cannot tell which one is
new), with the counts in the message. Keys that shrink are fine; rewrite the
baseline to lock the gain in.

The file is JSON, sorted, one entry per key, so it diffs well in review::

    {"xferaudit-baseline": 1,
     "entries": [{"file": "train.py", "code": "XFA202", "function": "Trainer.step", "count": 2}]}

Paths are relative to the project root. XFA001 (a file that cannot be parsed)
is never baselined.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Iterable

from ..._atomic import atomic_write
from .diagnostics import Diagnostic

FORMAT = 1
Key = tuple  # (file, code, function)


class BaselineError(ValueError):
    """The baseline file is missing or malformed; the message names it."""


def _key(d: Diagnostic) -> Key:
    return (d.relpath, d.code, d.function)


def counts(diags: Iterable[Diagnostic]) -> Counter:
    return Counter(_key(d) for d in diags if d.suppressed is None and not d.fatal)


def write(path: Path, diags: Iterable[Diagnostic]) -> int:
    """Write the baseline of the reported findings; returns how many it holds."""
    c = counts(diags)
    entries = [
        {"file": f, "code": code, "function": fn, "count": n}
        for (f, code, fn), n in sorted(c.items())
    ]
    text = json.dumps({"xferaudit-baseline": FORMAT, "entries": entries}, indent=1) + "\n"
    try:
        atomic_write(path, text)  # the old file's mode kept, a link written through
    except OSError as e:
        raise BaselineError(f"{path}: cannot write the baseline: {e.strerror or e}") from None
    return sum(c.values())


def load(path: Path) -> Counter:
    """The counts of a baseline file; :class:`BaselineError` (naming the file and
    the entry) for anything else: a count that is not a whole number from 0 to
    2**63-1, an entry without its four keys, JSON nested too deeply."""
    from ..._validate import MAX_COUNT, count, parse_json

    path = Path(path)
    from ..._readfile import read_text

    text = read_text(path, str(path), BaselineError,
                     missing=f"{path}: no such baseline file (write one with --write-baseline)")
    data = parse_json(text, str(path), BaselineError)
    if not isinstance(data, dict) or data.get("xferaudit-baseline") != FORMAT:
        raise BaselineError(f"{path}: not an xferaudit baseline (format {FORMAT})")
    entries = data.get("entries", [])
    if not isinstance(entries, list):
        raise BaselineError(f"{path}: \"entries\" must be a list")
    out: Counter = Counter()
    for i, e in enumerate(entries):
        if not isinstance(e, dict) or not all(isinstance(e.get(k), str) for k in ("file", "code", "function")):
            raise BaselineError(f"{path}: entry {i} needs file, code and function (strings) and count")
        n = count(e.get("count"), f"{path}: entry {i}", "count", BaselineError)
        key = (e["file"], e["code"], e["function"])
        out[key] = min(out[key] + n, MAX_COUNT)
    return out


def apply(diags: list[Diagnostic], base: Counter) -> list[Diagnostic]:
    """Mark findings covered by the baseline as suppressed ("baseline"); keys over
    their count stay reported, all of them, with the counts said."""
    now = counts(diags)
    for d in diags:
        if d.suppressed is not None or d.fatal:
            continue
        k = _key(d)
        allowed = base.get(k, 0)
        if now[k] <= allowed:
            d.suppressed = "baseline"
        elif allowed:
            d.message += f" [baseline: {allowed} allowed in {d.function}, {now[k]} found]"
    return diags
