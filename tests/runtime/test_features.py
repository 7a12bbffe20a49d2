"""Version-dependent paths are chosen by feature, not by version string, and
say what they cannot do on a torch without the feature (each feature is
monkeypatched away here). And the extras: a range for users, the pin for tests."""

from __future__ import annotations

import importlib
import sys
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.packs.torch import runtime as tr  # noqa: E402

guard_mod = importlib.import_module("xferaudit.runtime.guarding.guard")  # (the module, not xfer.guard)

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


def test_features_on_this_torch():
    f = xfer.features()
    assert f["compile_test"] in ("is_dynamo_compiling", "is_compiling")
    assert f["traced_record"] == "op"
    assert f["guard_dispatch_mode"] is True and f["guard_compile_internals"] is True


def test_without_torch_compiler_nothing_is_ever_compiling():
    fn = tr._compile_test(types.SimpleNamespace())
    assert fn() is False and tr._FEATURES["compile_test"] is None
    old = types.SimpleNamespace(compiler=types.SimpleNamespace(is_compiling=lambda: False))
    assert tr._compile_test(old)() is False and tr._FEATURES["compile_test"] == "<lambda>"
    tr._compile_test(torch)  # (restore this torch's answer)


def test_without_effect_registration_compiled_sites_break_the_graph(monkeypatch):
    # A torch whose `torch.library` cannot define the op: the recorder is the
    # eager one behind torch.compiler.disable (a graph break per site).
    calls = []

    def disable(fn):
        calls.append(fn)
        return fn

    fake = types.SimpleNamespace(ops=types.SimpleNamespace(), library=None,
                                 compiler=types.SimpleNamespace(disable=disable))
    rec = tr._make_traced_record(fake)
    assert rec is tr._bump and calls == [tr._bump]
    assert tr._FEATURES["traced_record"] == "graph-break"
    bare = types.SimpleNamespace(ops=types.SimpleNamespace(), library=None)
    assert tr._make_traced_record(bare) is tr._bump and tr._FEATURES["traced_record"] is None
    tr._make_traced_record(torch)  # (restore: the op is registered already)
    assert tr._FEATURES["traced_record"] == "op"


def test_without_ignore_compile_internals_the_guard_says_so(monkeypatch):
    from torch.utils import _python_dispatch as pd

    monkeypatch.delattr(pd.TorchDispatchMode, "ignore_compile_internals", raising=False)
    assert guard_mod.features() == {"dispatch_mode": True, "compile_internals": False}


def test_without_dispatch_modes_the_guard_raises_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.utils._python_dispatch", None)
    assert guard_mod.features()["dispatch_mode"] is False
    with pytest.raises(guard_mod.GuardUnavailable, match="needs torch>=2.11"):
        guard_mod._mode_class(None)


def test_user_extras_give_a_range_and_tests_keep_the_pin():
    root = Path(__file__).resolve().parents[2]
    extras = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    torch_reqs = [r for r in extras["torch"] if r.startswith("torch")]
    assert torch_reqs == ["torch>=2.11"]
    for name, reqs in extras.items():
        if name != "test":
            assert not any(r.startswith("torch==") or "<" in r for r in reqs if r.startswith("torch")), name
    assert "torch==2.13.0" in extras["test"]
