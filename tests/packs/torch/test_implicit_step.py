"""After `wrap`, a step whose every line crosses implicitly (float, int, complex,
bool, truth tests, indices, str/repr/f-string/%/format, print, logging,
math.isnan, torch.save) leaves the guard nothing unwrapped in the file's own
lines, on the simulated device and on CUDA in both guard modes.

The wrapped twin is committed (the GPU machine has no libcst); a CPU test keeps
it equal to what `wrap` writes from the plain file.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.runtime.counted import recorder  # noqa: E402
from xferaudit.runtime.guarding.guard import guard  # noqa: E402

HERE = Path(__file__).parent / "implicit_step"
PLAIN = HERE / "step_plain.py"
WRAPPED = HERE / "step_wrapped.py"
REL = "tests/packs/torch/implicit_step/step_wrapped.py"


def test_the_wrapped_twin_is_what_wrap_writes_and_unwrap_restores():
    codemod = pytest.importorskip("xferaudit.static.codemod")
    res = codemod.wrap_source(PLAIN.read_bytes(), str(WRAPPED), relpath=REL)
    assert not res.skipped, res.skipped
    assert res.new == WRAPPED.read_bytes(), "run this test's wrap again: the twin is stale"
    back = codemod.unwrap_source(WRAPPED.read_bytes(), str(WRAPPED))
    assert back.new == PLAIN.read_bytes()


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def _run(path: Path, name: str, dev, mode: str, save: bool):
    mod = _load(path, name)
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    xfer.reset()
    with xfer.counting(), guard("count", mode=mode):
        out = mod.step(model, torch.ones(4, 2), torch.zeros(4, 1), dev, ["a", "b", "c"], save)
    # (the guard shows paths relative to the working directory)
    lines = sorted({t.line for t in recorder.STATE.unwrapped.values()
                    if Path(t.path).resolve() == path.resolve()})
    return out, lines, xfer.snapshot()


def _check(dev, mode: str, capsys, save: bool = True):
    out_plain, lines_plain, _ = _run(PLAIN, "xfa_step_plain", dev, mode, save)
    out_wrapped, lines_wrapped, rep = _run(WRAPPED, "xfa_step_wrapped", dev, mode, save)
    capsys.readouterr()
    assert len(lines_plain) >= 12, lines_plain  # the plain step crosses on most lines
    assert lines_wrapped == []  # every crossing went through a wrapper
    assert out_plain == out_wrapped  # same values, same text
    rows = {r.site.rsplit(":", 1)[-1]: r for r in rep.rows}
    assert rows["float(loss)"].direction == "down" and rows["float(loss)"].crossings == 1
    if save:
        # torch.save copies whole storages (a 0-dim mse_loss result's is 16 bytes on an H200)
        assert rows["torch.save(loss)"].direction == "down" and rows["torch.save(loss)"].bytes >= 4
    assert sum(r.crossings for r in rep.rows if r.direction == "down") >= 16 + save


# The simulated device's backend and CUDA's autograd engine do not share a
# process well (torch 2.11 asserts in the engine's stream check on a later CUDA
# backward): its tests run on CPU-only machines, where it stands in for CUDA.
simulated_only = pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA runs the real thing")


@simulated_only
def test_on_the_simulated_device(capsys):
    from xferaudit.testing import simulated_device

    _check(simulated_device(), "full", capsys, save=False)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("mode", ["lite", "full"])
def test_on_cuda(mode, capsys):
    _check(torch.device("cuda"), mode, capsys)


@simulated_only
def test_a_wrapped_print_counts_the_copies_the_printer_makes(capsys):
    """Not one copy of the tensor: what the printer really reads (the H200's
    profiler: 8 copies, 17 bytes for a 0-dim float32; 18, 52 for five floats;
    an f-string of a 0-dim tensor reads it once)."""
    from xferaudit.testing import simulated_device

    dev = simulated_device()
    t, v = torch.tensor(1.5).to(dev), torch.arange(5.0).to(dev)
    with xfer.counting():
        print(xfer.read(t, site="p0"), xfer.read(v, site="p5"))
        text = f"{xfer.read(t, site='f0'):.2f}"
        with guard("count"):
            print(xfer.read(t, site="g0"))
        rep = xfer.snapshot()
    capsys.readouterr()
    got = {r.site: (r.direction, r.copies, r.bytes) for r in rep.rows}
    assert got == {"p0": ("down", 8, 17), "p5": ("down", 18, 52), "f0": ("down", 1, 4),
                   "g0": ("down", 8, 17)}
    assert text == "1.50" and rep.unwrapped == []


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_wrapped_print_counts_the_copies_the_printer_makes_on_cuda(capsys):
    t, v = torch.tensor(1.5, device="cuda"), torch.arange(5.0, device="cuda")
    with xfer.counting():
        print(xfer.read(t, site="p0"), xfer.read(v, site="p5"))
        text = f"{xfer.read(t, site='f0'):.2f}"
        rep = xfer.snapshot()
    capsys.readouterr()
    got = {r.site: (r.direction, r.copies, r.bytes) for r in rep.rows}
    assert got == {"p0": ("down", 8, 17), "p5": ("down", 18, 52), "f0": ("down", 1, 4)}
    assert text == "1.50"
