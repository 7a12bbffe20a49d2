"""A Chrome / Perfetto trace of a run's transfers and launches over time.

``xferaudit report RUN.json --trace out.json`` (or :func:`build_trace`) turns
the report's event timeline (recorded while ``xfer.timeline(True)`` or
``xfer.count(True, timeline=True)`` was on) into Trace Event Format JSON,
which ui.perfetto.dev and chrome://tracing open:

* ``ph: "i"`` (instant) events, one per wrapped call (name = the site; ``cat``
  ``xferaudit,up`` / ``down`` / ``d2d``, or ``none`` for a call that crossed
  nothing), per graph launch and per unwrapped crossing the guard saw, each on
  its own named track ("xferaudit transfers", "xferaudit launches",
  "xferaudit unwrapped"). An instant sits where the wrapper returned (the
  recorder sees the end of the call, not its start); torch.profiler's own
  trace shows how long the copy took.
* ``ph: "C"`` counters: cumulative bytes and crossings per direction.
* ``ph: "X"``: one slice spanning the recorded window (timeline start to the
  report), with how many events the ring buffer dropped, if any.

Lining up with torch.profiler: the timeline's clock is ``time.time_ns()``,
the clock of torch.profiler's Chrome trace, whose ``ts`` are that time minus
the trace's ``baseTimeNanoseconds`` (epoch rounded down to a 7,889,238-second
"trimonth", as Kineto does), in microseconds. This writes the same
``baseTimeNanoseconds`` and the same ``ts``, with ``pid`` the recording
process's id (torch.profiler's ``pid`` for host events), so the two files
show the same times; ``--trace-with PROFILER.json`` writes one file holding
the profiler's events and ours, on its base. A multi-rank report gives one
process per rank.
"""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path
from typing import Any, Optional, Union

from ._atomic import atomic_write

TRIMONTH_SECONDS = 7889238
# Synthetic thread ids for our tracks (far above any Linux tid, pid_max <= 2**22).
TID_TRANSFERS = 900_000_001
TID_LAUNCHES = 900_000_002
TID_UNWRAPPED = 900_000_003
_TRACKS = ((TID_TRANSFERS, "xferaudit transfers"), (TID_LAUNCHES, "xferaudit launches"),
           (TID_UNWRAPPED, "xferaudit unwrapped (guard)"))
_DIRS = ("up", "down", "d2d")


class TraceError(ValueError):
    """No timeline to draw, or a profiler trace to join that cannot be read."""


def base_ns(epoch_ns: int) -> int:
    """torch.profiler's (Kineto's) ``baseTimeNanoseconds`` for a time: the trimonth floor."""
    return (epoch_ns // 1_000_000_000 // TRIMONTH_SECONDS) * TRIMONTH_SECONDS * 1_000_000_000


def _sources(rep: Any) -> list:
    """(label, rank, timeline) for each rank (or the one report) that has a timeline."""
    from .runtime.ranks.distributed import RankedReport

    reps = rep.ranks if isinstance(rep, RankedReport) else [rep]
    out = []
    for r in reps:
        if r.timeline is not None:
            rank = r.meta.get("rank")
            label = "xferaudit" if rank is None else f"xferaudit rank {rank}"
            out.append((label, rank, r.timeline))
    return out


def _ts(t_ns: int, base: int) -> float:
    return round((t_ns - base) / 1000.0, 3)


def read_profiler_trace(path: Union[str, "os.PathLike[str]"]) -> dict:
    """A Chrome trace JSON (``.json`` or ``.json.gz``), e.g. torch.profiler's export."""
    p = Path(path)
    try:
        opener = gzip.open if p.suffix == ".gz" else open
        with opener(p, "rt", encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise TraceError(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError, EOFError) as e:
        raise TraceError(f"{p}: cannot read: {e}") from None
    except json.JSONDecodeError as e:
        raise TraceError(f"{p}: not JSON: {e.msg} at line {e.lineno}") from None
    if isinstance(data, list):  # the bare-array form of the format
        data = {"traceEvents": data}
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise TraceError(f"{p}: not a Chrome trace (no \"traceEvents\" list)")
    return data


def build_trace(rep: Any, join: Optional[dict] = None) -> dict:
    """The trace of `rep` (Report or RankedReport) as a dict; joined into `join` if given.

    Raises TraceError when no rank of `rep` has a timeline.
    """
    sources = _sources(rep)
    if not sources:
        raise TraceError(
            "this report has no timeline: record one with xfer.timeline(True) "
            "(or xfer.count(True, timeline=True)) before the run, then save the report"
        )
    first = min(tl["t0_ns"] for _, _, tl in sources)
    if join is not None:
        b = join.get("baseTimeNanoseconds")
        # A trace without a base has absolute microseconds since the epoch.
        base = int(b) if isinstance(b, (int, float)) and not isinstance(b, bool) else 0
        events = list(join["traceEvents"])
        taken = {e.get("pid") for e in events if isinstance(e, dict)}
        out = {k: v for k, v in join.items() if k != "traceEvents"}
    else:
        base = base_ns(first)
        events, taken = [], set()
        out = {"displayTimeUnit": "ms", "baseTimeNanoseconds": base}

    used_pids: set = set()
    summary = []
    for label, rank, tl in sources:
        pid = tl.get("pid")
        if not isinstance(pid, int) or isinstance(pid, bool) or pid in used_pids:
            pid = 1_000_000 + (rank or 0) + len(used_pids)  # hand-made or duplicate
        used_pids.add(pid)
        t0 = tl["t0_ns"]
        if pid not in taken:
            events.append({"ph": "M", "name": "process_name", "pid": pid, "tid": 0,
                           "args": {"name": label}})
            if rank is not None:
                events.append({"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0,
                               "args": {"sort_index": rank}})
        else:
            events.append({"ph": "M", "name": "process_labels", "pid": pid, "tid": 0,
                           "args": {"labels": label}})
        used = {TID_TRANSFERS}
        used.update(TID_LAUNCHES if e[1] == "launch" else
                    TID_UNWRAPPED if e[1] == "unwrapped" else TID_TRANSFERS
                    for e in tl["events"])
        for i, (tid, name) in enumerate(_TRACKS):
            if tid not in used:
                continue
            events.append({"ph": "M", "name": "thread_name", "pid": pid, "tid": tid,
                           "args": {"name": name}})
            events.append({"ph": "M", "name": "thread_sort_index", "pid": pid, "tid": tid,
                           "args": {"sort_index": 1_000_000 + i}})
        end = t0 + int(tl.get("end_ns", 0) or 0)
        last = max([t0 + e[0] for e in tl["events"]] + [end])
        dropped = int(tl.get("dropped", 0) or 0)
        events.append({
            "ph": "X", "name": "xferaudit timeline", "cat": "xferaudit", "pid": pid,
            "tid": TID_TRANSFERS, "ts": _ts(t0, base), "dur": round((last - t0) / 1000.0, 3),
            "args": {"events": len(tl["events"]), "dropped": dropped, "rank": rank,
                     "clock": tl.get("clock", "time.time_ns")},
        })
        cum_bytes = {d: 0 for d in _DIRS}
        cum_cross = {d: 0 for d in _DIRS}
        n_events = 0
        for dt, what, name, direction, n in tl["events"]:
            ts = _ts(t0 + dt, base)
            n_events += 1
            if what == "launch":
                args: dict = {"site": name}
                if n >= 0:
                    args["nodes"] = n
                events.append({"ph": "i", "s": "t", "name": name, "cat": "xferaudit,launch",
                               "pid": pid, "tid": TID_LAUNCHES, "ts": ts, "args": args})
                continue
            tid = TID_UNWRAPPED if what == "unwrapped" else TID_TRANSFERS
            key = "where" if what == "unwrapped" else "site"
            events.append({"ph": "i", "s": "t", "name": name, "cat": f"xferaudit,{direction}",
                           "pid": pid, "tid": tid, "ts": ts,
                           "args": {key: name, "direction": direction, "bytes": n}})
            if direction in cum_bytes:
                cum_bytes[direction] += n
                cum_cross[direction] += 1
                events.append({"ph": "C", "name": "xferaudit bytes", "pid": pid,
                               "tid": TID_TRANSFERS, "ts": ts, "args": dict(cum_bytes)})
                events.append({"ph": "C", "name": "xferaudit crossings", "pid": pid,
                               "tid": TID_TRANSFERS, "ts": ts, "args": dict(cum_cross)})
        summary.append({"label": label, "rank": rank, "pid": pid, "events": n_events,
                        "dropped": dropped, "bytes": cum_bytes, "crossings": cum_cross})
    out["traceEvents"] = events
    other = dict(out.get("otherData") or {}) if isinstance(out.get("otherData"), dict) else {}
    other["xferaudit"] = {
        "clock": "time.time_ns (wall clock, the clock of torch.profiler's trace)",
        "baseTimeNanoseconds": base,
        "processes": summary,
    }
    out["otherData"] = other
    return out


def write_trace(rep: Any, path: Union[str, "os.PathLike[str]"],
                join: Optional[Union[str, "os.PathLike[str]"]] = None) -> Path:
    """Write the trace of `rep` to `path` (``.json``, or gzip for ``.json.gz``), atomically.

    `join`: a profiler trace file whose events go in the same file, on its base.
    """
    prof = read_profiler_trace(join) if join is not None else None
    return save_trace(build_trace(rep, prof), path)


def save_trace(data: dict, path: Union[str, "os.PathLike[str]"]) -> Path:
    """Write a built trace (see :func:`build_trace`) through a temporary file."""
    out = Path(path)
    if not out.parent.is_dir():
        raise TraceError(f"{out}: directory {out.parent} does not exist")
    body = json.dumps(data, separators=(",", ":")).encode("utf-8")  # the C encoder: json.dump is slower
    if out.suffix == ".gz":
        body = gzip.compress(body)
    try:
        atomic_write(out, body)
    except OSError as e:
        raise TraceError(f"{out}: cannot write the trace: {e.strerror or e}") from None
    return out
