"""The gpu-first reading against what crosses: a library function that never
places its tensors, run on a device under the guard. Every line the guard
sees crossing is one the static reading reports (gpu-first), and every line
it reports is seen (but an upload inside indexing, which happens in the
kernel); the proven reading reports none of them (nothing is placed). On
CPU-only machines the simulated device stands in for CUDA."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.runtime.counted import recorder  # noqa: E402
from xferaudit.runtime.guarding.guard import guard  # noqa: E402

LIB = Path(__file__).parent / "gpu_first_lib" / "lib.py"


def _static(reading: str) -> list[int]:
    finder = pytest.importorskip("xferaudit.static.front.finder")
    from xferaudit.rules import table

    rules = dataclasses.replace(table(), implicit=reading)
    res = finder.find_in_source(LIB.read_text(), str(LIB), rules, "lib/lib.py")
    return sorted({s.line for s in res.sites if s.implicit})


def _crossing_lines(dev) -> list[int]:
    spec = importlib.util.spec_from_file_location("xfa_gpu_first_lib", LIB)
    mod = importlib.util.module_from_spec(spec)
    sys.modules["xfa_gpu_first_lib"] = mod
    spec.loader.exec_module(mod)
    logits = torch.randn(6, 3).to(dev)
    labels = torch.tensor([0, 1, 2, 0, 1, 2]).to(dev)
    xfer.reset()
    with xfer.counting(), guard("count", mode="full"):
        mod.score(logits, labels, 0.2, [0, 2])
    return sorted({t.line for t in recorder.STATE.unwrapped.values() if Path(t.path).resolve() == LIB.resolve()})


MARKED = sorted(i for i, line in enumerate(LIB.read_text().splitlines(), 1) if line.rstrip().endswith("# crosses")
                or "# crosses (" in line)


def test_the_readings_of_the_library():
    assert _static("gpu-first") == MARKED and len(MARKED) == 5
    assert _static("proven") == []


#: an upload inside indexing happens in the indexing kernel's own code, which the
#: guard may not see as an op of its own: the check allows it either way
INSIDE = [i for i, line in enumerate(LIB.read_text().splitlines(), 1) if "inside the indexing" in line]


def _check(dev):
    seen = _crossing_lines(dev)
    assert set(MARKED) - set(INSIDE) <= set(seen) <= set(MARKED), (seen, MARKED)


@pytest.mark.skipif(torch.cuda.is_available(), reason="CUDA runs the real thing")
def test_on_the_simulated_device():
    from xferaudit.testing import simulated_device

    _check(simulated_device())


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_on_cuda():
    _check(torch.device("cuda"))
