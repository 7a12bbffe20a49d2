"""Which budgets a run with no device refuses (runs/no_device.py): one that
holds crossings cannot be judged on the CPU (nothing could cross); one that
holds launches alone (a compiled program's graph sites, which a CPU run
launches as a GPU's does) is judged there."""

import types

import pytest

from xferaudit.runtime.runs.budget import budget_from_mapping
from xferaudit.runtime.runs.no_device import refusal

@pytest.fixture(autouse=True)
def _no_simulated_device(monkeypatch):
    # (a test before this one may have set up the simulated device in this process: it counts as a device)
    import xferaudit.testing as testing

    monkeypatch.setattr(testing, "_ready", False, raising=False)


NO_GPU = types.SimpleNamespace(cuda=types.SimpleNamespace(is_available=lambda: False), accelerator=None)


def test_a_budget_holding_crossings_is_refused_without_a_device():
    p = refusal(NO_GPU, budget_from_mapping({"train.py:step:loss.item": 1}))
    assert p is not None and p.kind == "no-device" and "--simulate" in p.message


def test_a_budget_of_zeros_is_refused_too_since_nothing_could_cross():
    assert refusal(NO_GPU, budget_from_mapping({"train.py:step:loss.item": 0})) is not None


def test_a_budget_of_launches_alone_is_judged_on_the_cpu():
    assert refusal(NO_GPU, budget_from_mapping({"c.py:<module>:torch.compile": {"launches": 3}})) is None


def test_no_torch_at_all_is_refused_for_a_budget_of_crossings():
    assert "never imported torch" in refusal(None, budget_from_mapping({"a.py:f:x.cpu": 1})).message
