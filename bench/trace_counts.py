"""What a torch profile and a report say crossed, per direction: the readers
the GPU scripts (gpu_truth.py, gpu_truth_ddp.py, gpu_copies.py, gpu_evidence.py,
gpu_site_time.py) compare with. Standard library only; a module of its own so
those scripts import it and not each other.
"""

from __future__ import annotations

import collections
import json
import os
import tempfile


def chrome_trace(prof) -> dict:
    """The profile as a chrome trace (torch writes it only to a file)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "trace.json")
        prof.export_chrome_trace(path)
        with open(path) as f:
            return json.load(f)


def memcpy_events(trace: dict) -> dict:
    """direction -> [count, bytes] from a chrome trace's gpu_memcpy events, and
    "<direction>_pageable" -> [count, 0] of those from pageable host memory."""
    out = collections.defaultdict(lambda: [0, 0])
    for e in trace.get("traceEvents", []):
        if e.get("cat") != "gpu_memcpy":
            continue
        name = e.get("name", "")
        d = "up" if "HtoD" in name else "down" if "DtoH" in name else "d2d" if "DtoD" in name else "other"
        out[d][0] += 1
        out[d][1] += int(e.get("args", {}).get("bytes", 0))
        if "Pageable" in name:
            out[d + "_pageable"][0] += 1
    return dict(out)


#: The ops whose d2d copy the guard records as one (a same-device or
#: device-to-device ``copy_`` / ``to``): a d2d memcpy under these alone is the
#: copy the dispatcher saw at the program's line. Under any other op it is made
#: inside that op: ``clone``/``contiguous`` (a memcpy inside an op that is no
#: transfer), ``lift_fresh`` (the device-side clone torch.compile makes of a
#: constant it put on the device: its upload is the guard's, its clone is not),
#: a backward formula's own copy.
COPY_OPS = ("aten::copy_", "aten::_to_copy", "aten::to", "aten::_copy_from")


def d2d_inside_other_ops(trace: dict) -> list:
    """[count, bytes] of the d2d memcpys launched inside another op: under an
    aten op that is no copy (a backward formula's own copy, such as
    ``PowBackward0 > aten::pow > aten::copy_``) or inside a compiled region (its
    compilation's clones of constants, its graph's inputs). They are below the
    dispatcher, where no Python mode sees them: no transfer of the program's, so
    the runner's bench lists them apart (found from the profiler's own op stack
    of each memcpy: no calibration)."""
    ev = trace.get("traceEvents", [])
    launch = {}
    for e in ev:
        if e.get("cat") in ("cuda_runtime", "cuda_driver"):
            launch[e.get("args", {}).get("correlation")] = e
    spans: dict = collections.defaultdict(list)
    for e in ev:
        if e.get("cat") == "cpu_op" and "dur" in e:
            spans[e.get("tid")].append(e)
    out = [0, 0]
    for e in ev:
        if e.get("cat") != "gpu_memcpy" or "DtoD" not in e.get("name", ""):
            continue
        rt = launch.get(e.get("args", {}).get("correlation"))
        if rt is None:
            continue
        t = rt["ts"]
        names = [s["name"] for s in spans.get(rt.get("tid"), ()) if s["ts"] <= t <= s["ts"] + s["dur"]]
        inside = any(str(n).startswith("Torch-Compiled Region") for n in names) or any(
            str(n).startswith("aten::") and n not in COPY_OPS for n in names)
        if inside:
            out[0] += 1
            out[1] += int(e.get("args", {}).get("bytes", 0))
    return out


def runtime_calls(trace: dict, name: str) -> int:
    return sum(1 for e in trace.get("traceEvents", []) if e.get("name") == name)


def compiled_region_calls(trace: dict) -> int:
    return sum(1 for e in trace.get("traceEvents", [])
               if e.get("cat") == "cpu_op" and str(e.get("name", "")).startswith("Torch-Compiled Region"))


def xfer_directions(d: dict) -> dict:
    """direction -> [copies, bytes] from a report dict: wrapped rows and unwrapped
    events (a module move counts each tensor; a print the copies it made)."""
    out = collections.defaultdict(lambda: [0, 0])
    for row in d["rows"]:
        for direction, v in row.get("by_direction", {}).items():
            if direction != "none":
                out[direction][0] += v["copies"]
                out[direction][1] += v["bytes"]
    for ev in d.get("unwrapped", []):
        out[ev["direction"]][0] += ev["copies"]
        out[ev["direction"]][1] += ev["bytes"]
    return dict(out)


def spans(trace: dict, pred) -> list:
    """(start, end) of the trace's events for which `pred(event)` holds."""
    return [(e["ts"], e["ts"] + e.get("dur", 0)) for e in trace.get("traceEvents", [])
            if "ts" in e and pred(e)]


def graph_launches_outside(trace: dict, regions: list) -> int:
    """``cudaGraphLaunch`` calls not made inside one of `regions` (compiled calls)."""
    return sum(1 for s, _ in spans(trace, lambda e: e.get("name") == "cudaGraphLaunch")
               if not any(a <= s <= b for a, b in regions))
