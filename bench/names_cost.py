"""What naming a crossing by its expression costs the recorder, on the CPU.

1. Per event, the recorder alone (no torch op, no guard): ``record_at`` of a
   user's frame (the common path: an instruction seen before, one append) and
   ``record_event`` of a crossing placed inside a library (walked, named by
   the library function and the user's call; the name is one dict lookup per
   event in the code object's entry). Minimum over repeats (the machine is
   shared and noisy). Run it on an older checkout too (``PYTHONPATH=OLD``)
   for the figure before.
2. Once per instruction and file: the first name of an instruction (its
   source positions read, the file's tree walked, the function's expressions
   labelled for the ``#n`` index) and the parse of a file, on a file of this
   package.

    python bench/names_cost.py [--events 20000] [--repeats 7]
"""

from __future__ import annotations

import argparse
import dis
import os
import sys
import tempfile
import time
from pathlib import Path

LIB = '''\
import sys, time
from xferaudit.runtime.counted import recorder, frames


def go(n):
    t0 = time.perf_counter_ns()
    for _ in range(n):
        place = frames.locate(sys._getframe())
        recorder.record_event(place, "aten._local_scalar_dense", "down", 4)
    return (time.perf_counter_ns() - t0) / n
'''


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--events", type=int, default=20000)
    p.add_argument("--repeats", type=int, default=7)
    a = p.parse_args()
    import torch

    import xferaudit.runtime as xfer
    from xferaudit.runtime.counted import frames, recorder

    frames.init_skip_dirs(torch)
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "names_cost_lib.py").write_text(LIB)
        sys.path.insert(0, tmp)
        frames.set_frames(library=list(frames._default_library_dirs()) + [tmp])
        import names_cost_lib

        def user() -> float:
            f = sys._getframe()
            t0 = time.perf_counter_ns()
            for _ in range(a.events):
                recorder.record_at(f, "aten._local_scalar_dense", "down", 4)
            return (time.perf_counter_ns() - t0) / a.events

        xfer.reset()
        at = min(user() for _ in range(a.repeats))
        lib = min(names_cost_lib.go(a.events) for _ in range(a.repeats))
        frames.set_frames()
    print(f"1. per event (min of {a.repeats} x {a.events}): record_at (a user's frame) {at:.0f} ns, "
          f"record_event (a library's crossing, walked and named) {lib:.0f} ns")
    if not hasattr(frames, "label_at"):
        print("2. (this checkout names crossings by their line: nothing to label)")
        return 0
    import xferaudit.static.codemod.breaking as big

    codes = [v.__code__ for v in vars(big).values()
             if hasattr(v, "__code__") and v.__code__.co_filename == big.__file__]
    calls = [(c, i.offset, i.positions.lineno or 0) for c in codes for i in dis.get_instructions(c)
             if i.opname == "CALL"]
    frames._sources.clear()
    t0 = time.perf_counter()
    frames._source(big.__file__)
    t1 = time.perf_counter()
    for c, off, line in calls:
        frames.label_at(c, off, line)
    t2 = time.perf_counter()
    n = len(open(big.__file__).read().splitlines())
    print(f"2. once: the parse of {os.path.basename(big.__file__)} ({n} lines) {1e3 * (t1 - t0):.1f} ms; "
          f"the first name of an instruction {1e6 * (t2 - t1) / max(len(calls), 1):.0f} us "
          f"(mean of its {len(calls)} calls)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
