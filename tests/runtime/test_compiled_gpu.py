"""Compiled regions on a real CUDA device (skipped without one): a
``mode="reduce-overhead"`` program with graph breaks and a CPU tensor input,
and one with a mutated input, under ``xferaudit run`` against the profiler and
Inductor (bench/gpu_compiled.py does the work, each program in a fresh process).

Run on the GPU machine (torch + CUDA, no libcst needed):
    python -m pytest tests/runtime/test_compiled_gpu.py -v -rs
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

BENCH = Path(__file__).resolve().parents[2] / "bench"
sys.path.insert(0, str(BENCH))

import gpu_compiled as gc  # noqa: E402


@pytest.fixture(scope="module")
def progs(tmp_path_factory):
    out = tmp_path_factory.mktemp("gpu_compiled")
    return out, gc.programs(out / "programs")


@pytest.mark.parametrize("name", ["breaks", "mutated", "breaks_fixed", "mutated_fixed"])
@pytest.mark.parametrize("mode", ["lite", "full"])
def test_run_agrees_with_the_profiler_and_inductor(progs, name, mode):
    out, programs = progs
    plain = gc.plain_counters(programs[name], 8, out)
    got = gc.profiled(programs[name], 8, mode, out)
    assert gc.check(name, plain, got) == []
    skips = [s for r in got["regions"] for s in r.get("skips") or ()]
    assert sum(s["count"] for s in skips) == plain["cudagraph_skips"]  # Inductor's own counter
    if name == "mutated":  # Inductor skips it: the skip is there, with its reason and place
        assert skips and all(s["at"] for s in skips)
        assert any(s["reason"] == "mutated input" for s in skips), skips
    elif name == "breaks" and plain["cudagraph_skips"]:  # (torch 2.11 counts none for the CPU input)
        assert any(s["reason"] == "CPU input" and s["at"] for s in skips), skips
    if name == "breaks":  # two breaks in forward, at their lines, with their classes
        (region,) = [r for r in got["regions"] if r["breaks"]]
        assert sorted(b["reason"] for b in region["breaks"]) == ["data-dependent branch", "host read"]
    if name.endswith("_fixed"):  # no break left, and every call after the first replayed (check's rule too)
        assert not any(r["breaks"] for r in got["regions"])
        assert sum(r["replays"] for r in got["regions"]) == got["cudaGraphLaunch"] > 0
