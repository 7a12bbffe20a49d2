"""``xferaudit run`` on a real CUDA device (skipped without one): the
unmodified every-category program counted at its lines, d2d copies, CUDA
graph replays and compiled calls counted without wrap.

Run on the GPU machine (torch + CUDA, no libcst needed):
    python -m pytest tests/runtime/test_runner_gpu.py -v -rs
"""

from __future__ import annotations

import contextlib
import io
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.runtime.guarding.guard import guard  # noqa: E402
from xferaudit.runtime.runs.runner import counted, run_path  # noqa: E402

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

PROGRAM = Path(__file__).resolve().parents[2] / "bench" / "copies_program.py"


def here() -> int:
    return sys._getframe(1).f_lineno


def line_of(text: str) -> int:
    """The line of bench/copies_program.py holding `text`."""
    (n,) = [i for i, ln in enumerate(PROGRAM.read_text().splitlines(), 1) if text in ln]
    return n


def test_the_unmodified_program_is_counted_at_its_lines(tmp_path):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        res = run_path(str(PROGRAM), ["--steps", "4"], output=str(tmp_path / "r.json"), quiet=True)
    assert res.exit_code == 0
    rep = res.report
    assert rep.meta["steps"] == 4 and rep.meta["kind"] == "run"
    by_line = {(u.line, u.op): u for u in rep.unwrapped}
    copy = by_line[(line_of("self.static.copy_(x)"), "aten.copy_")]
    assert (copy.direction, copy.count, copy.copies, copy.bytes) == ("d2d", 4, 4, 4 * 256 * 64 * 4)
    pageable = by_line[(line_of("torch.from_numpy(self.host_np)"), "aten._to_copy")]
    assert pageable.pageable == 4 and pageable.seconds > 0
    pinned = by_line[(line_of("self.pinned.to(dev"), "aten._to_copy")]
    assert pinned.pageable == 0
    root = rep.meta["root"]
    path = str(PROGRAM.relative_to(root)) if str(PROGRAM).startswith(root) else str(PROGRAM)
    launches = {x.site: x.launches for x in rep.launches}
    # named by the call (path:function:expression), as wrap names them: no line number
    assert launches[f"{path}:Program.__init__:torch.compile"] == 4
    assert launches[f"{path}:Program.step:self.graph.replay"] == 4
    assert launches[f"{path}:Program.__init__:torch.cuda.make_graphed_callables"] == 4
    lines = rep.meta["lines"]
    assert lines[f"{path}:Program.__init__:torch.compile"][0][1] == line_of("torch.compile(lambda x")
    assert len(launches) == 3  # (the compiled function's own replays are its launches, not more)


def test_a_copy_within_the_gpu_is_a_d2d_event_in_both_modes():
    a, b = torch.zeros(1024, device="cuda"), torch.ones(1024, device="cuda")
    for mode in ("lite", "full"):
        xfer.reset()
        with guard("count", mode=mode):
            a.copy_(b)
            line = here() - 1
        (u,) = xfer.snapshot().unwrapped
        assert (u.line, u.op, u.direction, u.copies, u.bytes) == (line, "aten.copy_", "d2d", 1, 4096)


def test_the_cheap_scalar_read_on_cuda_is_the_dispatch_modes_event():
    t = torch.tensor(2.5, device="cuda")
    seen = {}
    for mode in ("lite", "full"):
        xfer.reset()
        with guard("count", mode=mode):
            float(t)
        (u,) = xfer.snapshot().unwrapped
        seen[mode] = (u.op, u.direction, u.count, u.copies, u.bytes)
    assert seen["lite"] == seen["full"] == ("aten._local_scalar_dense", "down", 1, 1, 4)


def test_replays_and_compiled_calls_are_counted_without_wrap():
    static = torch.zeros(64, device="cuda")
    with counted() as run:
        g = torch.cuda.CUDAGraph()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            out = static + 1
        torch.cuda.current_stream().wait_stream(side)
        with torch.cuda.graph(g):
            out = static + 1
        f = torch.compile(lambda x: x * 3, mode="reduce-overhead")
        for _ in range(5):
            g.replay()
            f(static)
        torch.cuda.synchronize()
    launches = {x.site.rsplit(":", 1)[1]: x.launches  # the expression (path:function:expression)
                for x in run.result.report.launches}
    assert launches == {"g.replay": 5, "torch.compile": 5}
    del out
