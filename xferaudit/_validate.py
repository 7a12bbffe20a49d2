"""Checks for files the tool reads back: saved reports, budgets, baselines.

A file can be valid JSON and still hold nonsense: ``"crossings": -7``, a
count of ``10**400`` or ``1e400``, 5,000 digits, ``"by_direction": {"up":
"x"}``, 100,000 nested arrays. Each of these must end as one line naming the
file and the field (exit 2 on the command line), never as a traceback or a
silently wrong figure. The loaders call :func:`parse_json` and the checks
below, passing their own error class (``ReportError``, ``BudgetError``,
``BaselineError``), so callers keep catching what they caught before.

Limits: a count is a whole number from 0 to :data:`MAX_COUNT` (2**63 - 1, what
a 64-bit counter holds); JSON nests at most :data:`MAX_DEPTH` deep; ``NaN``
and ``Infinity`` are not numbers here; an object giving a key twice is refused
(readers differ on which one wins). The file itself is opened by
:mod:`xferaudit._readfile` (regular files only, of bounded size).
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable, Optional

MAX_COUNT = 2**63 - 1
MAX_DEPTH = 64

Err = Callable[[str], Exception]


def reject_constant(name: str) -> Any:
    """``parse_constant`` of a JSON decoder: NaN and Infinity are not numbers here."""
    raise ValueError(f"{name} is not a number")


class DuplicateKey(ValueError):
    """An object of a JSON document gives a key twice (JSON readers differ on
    which one wins: the tool reads no such file)."""


def unique_pairs(pairs: list) -> dict:
    """``object_pairs_hook``: the object, or :class:`DuplicateKey`."""
    d = dict(pairs)
    if len(d) != len(pairs):
        seen: set = set()
        for k, _ in pairs:
            if k in seen:
                raise DuplicateKey(f"key {k!r} is there twice")
            seen.add(k)
    return d


#: The decoder of every JSON file the tool reads back: NaN and Infinity are not
#: numbers, a key given twice in any object is refused.
DECODER = json.JSONDecoder(parse_constant=reject_constant, object_pairs_hook=unique_pairs)


def parse_json(text: str, where: str, error: Err) -> Any:
    """``json.loads`` whose every failure is `error` naming `where` (nesting too
    deep, an integer of too many digits, NaN/Infinity, a key given twice, a
    syntax error)."""
    try:
        data = DECODER.decode(text)
    except json.JSONDecodeError as e:
        raise error(f"{where}: not JSON: {e.msg} at line {e.lineno}") from None
    except DuplicateKey as e:
        raise error(f"{where}: {e}") from None
    except RecursionError:
        raise error(f"{where}: not a usable file: JSON nested too deeply") from None
    except ValueError as e:  # an integer of more digits than Python converts, NaN, Infinity
        raise error(f"{where}: bad value: {e}") from None
    check_depth(data, where, error)
    return data


def parse_toml(text: str, where: str, error: Err, what: str = "cannot parse") -> Any:
    """``tomllib.loads`` whose every failure is `error` naming `where` (a syntax
    error, an integer of too many digits, nesting too deep)."""
    import sys

    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover
        import tomli as tomllib
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        raise error(f"{where}: {what}: {e}") from None
    except RecursionError:
        raise error(f"{where}: {what}: nested too deeply") from None
    except ValueError as e:  # an integer of more digits than Python converts
        raise error(f"{where}: bad value: {e}") from None
    check_depth(data, where, error)
    return data


def check_depth(data: Any, where: str, error: Err, limit: int = MAX_DEPTH, depth: int = 0) -> None:
    """No list or object nested deeper than `limit` (checked without recursion);
    `depth`: how deep `data` itself sits in its document."""
    if not isinstance(data, (list, dict)):
        return
    stack = [(data, depth)]
    while stack:
        v, d = stack.pop()
        if isinstance(v, (list, dict)):
            if d >= limit:
                raise error(f"{where}: not a usable file: nested too deeply (more than {limit} levels)")
            stack.extend((x, d + 1) for x in (v.values() if isinstance(v, dict) else v))


def _bad_count(v: Any, what: str) -> str:
    return f"{what!r} must be an integer from 0 to 2**63-1, not {_short(v)}"


def _short(v: Any) -> str:
    if isinstance(v, int) and not isinstance(v, bool) and abs(v) > MAX_COUNT:
        return f"a number of {len(str(abs(v))) if abs(v) < 10**4000 else 'thousands of'} digits"
    r = repr(v)
    return r if len(r) <= 60 else r[:57] + "..."


def count(v: Any, where: str, field: str, error: Err) -> int:
    """`v` as a count (int, 0..MAX_COUNT), else `error` naming `where` and `field`."""
    if isinstance(v, bool) or not isinstance(v, int) or not 0 <= v <= MAX_COUNT:
        raise error(f"{where}: {_bad_count(v, field)}")
    return v


def number(v: Any, where: str, error: Err, what: str = "value") -> float:
    """A finite number >= 0 no larger than MAX_COUNT (int or float), else `error`."""
    ok = not isinstance(v, bool) and isinstance(v, (int, float))
    if ok and isinstance(v, int):
        ok = 0 <= v <= MAX_COUNT
    elif ok:
        ok = math.isfinite(v) and 0 <= v <= MAX_COUNT
    if not ok:
        raise error(f"{where}: must be a {what} >= 0 (at most 2**63-1), not {_short(v)}")
    return v


def _counts(obj: dict, keys: tuple, w: str, error: Err) -> None:
    for k in keys:
        if k in obj:
            count(obj[k], w, k, error)


def check_report(data: Any, where: str, error: Err) -> None:
    """The counts of a saved report (and of each rank of a merged one): whole
    numbers >= 0, ``crossings <= calls``, ``by_direction`` a table of
    ``{"calls", "bytes"}`` counts no larger than the row's. Structure beyond
    the counts is left to the report's own loader."""
    check_depth(data, where, error)
    if not isinstance(data, dict):
        return
    _check_one(data, where, error)
    ranks = data.get("ranks")
    if isinstance(ranks, list):
        for i, r in enumerate(ranks):
            if isinstance(r, dict):
                _check_one(r, f"{where}: ranks[{i}]", error)
                if "rank" in r:
                    count(r["rank"], f"{where}: ranks[{i}]", "rank", error)
    if "world_size" in data and data["world_size"] is not None:
        count(data["world_size"], where, "world_size", error)
    if "steps" in data:
        count(data["steps"], where, "steps", error)


def _check_one(data: dict, where: str, error: Err) -> None:
    meta = data.get("meta")
    if isinstance(meta, dict):
        check_meta(meta, where, error)
    rows = data.get("rows")
    for i, r in enumerate(rows if isinstance(rows, list) else ()):
        check_row(r, f"{where}: rows[{i}]", error)
    for key, kinds in (("launches", (list, dict)), ("unwrapped", (list,))):
        if data.get(key) is not None and not isinstance(data[key], kinds):
            raise error(f"{where}: {key!r} must be a list, not {_short(data[key])}")
    launches = data.get("launches")
    items = launches.values() if isinstance(launches, dict) else launches if isinstance(launches, list) else ()
    for i, x in enumerate(items):
        check_launch(x, f"{where}: launches[{i}]", error)
    unwrapped = data.get("unwrapped")
    for i, u in enumerate(unwrapped if isinstance(unwrapped, list) else ()):
        check_unwrapped(u, f"{where}: unwrapped[{i}]", error)
    check_timeline(data.get("timeline"), where, error)


# One check per part of a report, so a reader that streams a file checks each
# row as it comes, exactly as check_report checks the whole document.

def check_meta(meta: dict, where: str, error: Err) -> None:
    for k in ("rank", "world_size", "steps"):
        if meta.get(k) is not None:
            count(meta[k], f"{where}: meta", k, error)
    if meta.get("steps_seconds") is not None:
        number(meta["steps_seconds"], f"{where}: meta: 'steps_seconds'", error, "number of seconds")


def _seconds_ok(v: Any) -> bool:
    return v is None or (type(v) in (int, float) and 0 <= v <= MAX_COUNT)  # (NaN fails both)


def check_row(r: Any, w: str, error: Err) -> None:
    """One row's counts (`w` names it: ``file: rows[3]``)."""
    if not isinstance(r, dict):
        return
    calls, crossings, nbytes, by = r.get("calls"), r.get("crossings"), r.get("bytes"), r.get("by_direction")
    if (type(calls) is int and type(crossings) is int and type(nbytes) is int and type(by) is dict
            and 0 <= crossings <= calls <= MAX_COUNT and 0 <= nbytes <= MAX_COUNT
            and _seconds_ok(r.get("seconds"))
            and all(type(v) is dict and type(v.get("calls", 0)) is int and type(v.get("bytes", 0)) is int
                    and 0 <= v.get("calls", 0) <= calls and 0 <= v.get("bytes", 0) <= MAX_COUNT
                    and _seconds_ok(v.get("seconds")) for v in by.values())):
        return  # a row as save() writes it, good: checked in one go (the rest words each fault)
    _counts(r, ("calls", "crossings", "bytes"), w, error)
    if "seconds" in r:
        number(r["seconds"], f"{w}: 'seconds'", error, "number of seconds")
    calls, crossings = r.get("calls"), r.get("crossings")
    if isinstance(calls, int) and isinstance(crossings, int) and crossings > calls:
        raise error(f"{w}: crossings ({crossings}) cannot exceed calls ({calls}): "
                    "a crossing is a call that moved data")
    by = r.get("by_direction")
    if by is None:
        return
    if not isinstance(by, dict):
        raise error(f"{w}: by_direction must be an object of direction -> "
                    "{\"calls\": n, \"bytes\": n}, not " + _short(by))
    for d, v in by.items():
        if not isinstance(v, dict):
            raise error(f"{w}: by_direction[{d!r}] must be an object {{\"calls\": n, \"bytes\": n}}, "
                        f"not {_short(v)}")
        _counts(v, ("calls", "bytes"), f"{w}: by_direction[{d!r}]", error)
        if "seconds" in v:
            number(v["seconds"], f"{w}: by_direction[{d!r}]: 'seconds'", error, "number of seconds")
        n = v.get("calls", 0)
        if isinstance(calls, int) and n > calls:
            raise error(f"{w}: by_direction[{d!r}]: calls ({n}) cannot exceed the row's calls ({calls})")


def check_launch(x: Any, w: str, error: Err) -> None:
    if isinstance(x, dict):
        _counts(x, ("launches",), w, error)
        if x.get("nodes") is not None:
            count(x["nodes"], w, "nodes", error)
    else:
        count(x, w, "launches", error)


def check_unwrapped(u: Any, w: str, error: Err) -> None:
    if not isinstance(u, dict):
        return
    _counts(u, ("line", "count", "bytes", "copies", "pageable"), w, error)
    if "seconds" in u:
        number(u["seconds"], f"{w}: seconds", error, "number of seconds")
    for name, chain in _chains(u):
        for j, f in enumerate(chain if isinstance(chain, list) else ()):
            if isinstance(f, dict) and "line" in f:
                count(f["line"], f"{w}: {name}[{j}]", "line", error)


def _chains(u: dict) -> list:
    """(name, frames) of an unwrapped entry's chains of user frames."""
    out = [("frames", u.get("frames"))]
    chains = u.get("chains")
    if isinstance(chains, list):
        out += [(f"chains[{k}]", c) for k, c in enumerate(chains)]
    return out


def check_timeline(tl: Any, where: str, error: Err) -> None:
    if not isinstance(tl, dict):
        return
    if "t0_ns" in tl:
        count(tl["t0_ns"], f"{where}: timeline", "t0_ns", error)
    events = tl.get("events")
    for i, e in enumerate(events if isinstance(events, list) else ()):
        if isinstance(e, list) and len(e) == 5:
            count(e[0], f"{where}: timeline.events[{i}]", "time_ns", error)
            count(e[4], f"{where}: timeline.events[{i}]", "n", error)


def steps_of(raw: Any, where: str, error: Err) -> Optional[int]:
    """A report's declared ``steps`` (top level or ``meta``), or None; >= 1."""
    if not isinstance(raw, dict):
        return None
    meta = raw.get("meta") if isinstance(raw.get("meta"), dict) else {}
    declared = raw.get("steps", meta.get("steps"))
    if declared is None:
        return None
    if isinstance(declared, bool) or not isinstance(declared, int) or not 1 <= declared <= MAX_COUNT:
        raise error(f"{where}: steps: must be a whole number >= 1, not {_short(declared)}")
    return declared
