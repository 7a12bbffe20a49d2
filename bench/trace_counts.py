"""What a torch profile and a report say crossed, per direction: the readers
gpu_truth.py, gpu_truth_ddp.py and gpu_copies.py compare with (standard
library only; a module of its own so those scripts import it and not each other).
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
