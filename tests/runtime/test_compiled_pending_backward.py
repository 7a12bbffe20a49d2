"""CUDA-graph runs kept in warm-up because a forward's backward never ran.

Found on an H100 (torch 2.11): a model compiled with ``mode="reduce-overhead"``,
run in training mode (its parameters want grad) with no ``backward()``,
replayed no call, and Inductor counted no skip: CUDA-graph trees wait for a
backward before they record a new generation, so every later run stays a
warm-up run. The run now names it. Here CUDA-graph trees' manager is a
stand-in with the same two attributes the hook reads (CUDA graphs need a GPU;
the GPU bench, ``bench/gpu_compiled.py``, runs the real one).
"""

from __future__ import annotations

import pytest

pytest.importorskip("torch")

from xferaudit.runtime.counted import compiled  # noqa: E402
from xferaudit.runtime.reporting.compiled_text import compiled_section  # noqa: E402


class CUDAWarmupNode:
    pass


class CUDAGraphNode:
    pass


class Manager:
    """CUDAGraphTreeManager's part the hook reads: the pending flag before a
    run, and the kind of node the run ended on."""

    def __init__(self) -> None:
        self.running_forwards_with_pending_backwards = False
        self.current_node = None

    def run(self, new_inputs, function_id):
        # a training forward (the tree's own rule): warm-up while a backward is pending
        if self.running_forwards_with_pending_backwards or self.current_node is None:
            self.current_node = CUDAWarmupNode()
        else:
            self.current_node = CUDAGraphNode()
        self.running_forwards_with_pending_backwards = True
        return new_inputs


@pytest.fixture
def region():
    compiled.STATE.regions.clear()
    compiled.STATE.on = True
    yield
    compiled.STATE.on = False
    compiled.STATE.regions.clear()


def _calls(m, run, backward: bool, n: int) -> None:
    for _ in range(n):
        call = compiled.begin("train.py:<module>:torch.compile")
        try:
            run(m, [1], 0)
        finally:
            compiled.end(call)
        if backward:
            m.running_forwards_with_pending_backwards = False  # (what a backward does)


def test_runs_kept_in_warm_up_by_a_pending_backward_are_counted_and_named(region):
    run = compiled._wrap_tree_run(Manager.run)
    m = Manager()
    _calls(m, run, backward=False, n=12)
    (r,) = compiled.snapshot()
    assert r["pending_backward"] == 11  # (the first run's warm-up is every graph's)
    text = "\n".join(compiled_section([r]))
    assert "11  run(s) kept in warm-up: a forward ran again before its backward" in text
    assert "torch.no_grad()" in text


def test_with_a_backward_each_step_nothing_is_counted(region):
    run = compiled._wrap_tree_run(Manager.run)
    m = Manager()
    _calls(m, run, backward=True, n=12)
    (r,) = compiled.snapshot()
    assert r["pending_backward"] == 0
    assert "warm-up" not in "\n".join(compiled_section([r]))


def test_the_delta_of_two_snapshots_keeps_it(region):
    run = compiled._wrap_tree_run(Manager.run)
    m = Manager()
    _calls(m, run, backward=False, n=3)
    before = compiled.snapshot()
    _calls(m, run, backward=False, n=4)
    (d,) = compiled.delta(before, compiled.snapshot())
    assert d["pending_backward"] == 4 and d["calls"] == 4
