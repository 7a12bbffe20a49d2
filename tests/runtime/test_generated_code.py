"""Issue 44, item 5: code torch generates is recognised by what made it (a module
Inductor's PyCodeCache loaded), never by a piece of its path: the user's file
under a folder named ``torchinductor_*`` or under ``$TORCHINDUCTOR_CACHE_DIR``
is the user's, and its crossings are placed at its lines."""

from __future__ import annotations

import sys

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.runtime.counted import frames  # noqa: E402
from xferaudit.runtime.guarding.guard import guard  # noqa: E402
from xferaudit.testing import simulated_device  # noqa: E402

SRC = "def call(t):\n    return float(t)\n"


def _crossing_from(filename: str) -> tuple:
    ns: dict = {}
    exec(compile(SRC, filename, "exec"), ns)
    t = torch.tensor(1.0).to(simulated_device())
    xfer.reset()
    with guard("count"):
        ns["call"](t)
    (u,) = xfer.snapshot().unwrapped
    xfer.reset()
    return u.path, u.line


@pytest.mark.parametrize("folder", ["torchinductor_me/ab", "work/torchinductor_notes"])
def test_a_users_file_under_a_torchinductor_folder_is_the_users(tmp_path, monkeypatch, folder):
    monkeypatch.chdir(tmp_path)
    (tmp_path / folder).mkdir(parents=True)
    path, line = _crossing_from(str(tmp_path / folder / "model.py"))
    assert (path, line) == (f"{folder}/model.py", 2)


def test_a_users_file_under_the_inductor_cache_folder_is_the_users(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path.parent))  # (a parent of the project)
    path, line = _crossing_from(str(tmp_path / "model.py"))
    assert (path, line) == ("model.py", 2)


def test_a_module_inductor_loaded_is_generated(tmp_path, monkeypatch):
    codecache = pytest.importorskip("torch._inductor.codecache")
    monkeypatch.chdir(tmp_path)
    gen = tmp_path / "cache" / "ab" / "cabc.py"
    gen.parent.mkdir(parents=True)
    gen.write_text(SRC)
    mod = codecache.PyCodeCache.load_by_key_path("cabc", str(gen))
    assert frames.kind(mod.call.__code__) == frames.SKIP
    t = torch.tensor(1.0).to(simulated_device())
    xfer.reset()
    with guard("count"):
        mod.call(t)
        line = sys._getframe().f_lineno - 1
    (u,) = xfer.snapshot().unwrapped
    xfer.reset()
    assert u.line == line and u.path.endswith("tests/runtime/test_generated_code.py")  # (the caller's line)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_the_modules_inductor_writes_on_cuda_are_generated_code():
    """(GPU session) What torch.compile's Inductor loaded is known as generated,
    by its PyCodeCache, wherever its cache folder is; no crossing is placed in it."""
    from torch._inductor.codecache import PyCodeCache

    fn = torch.compile(lambda t: (t * 2).sum())
    x = torch.ones(64, device="cuda")
    xfer.reset()
    with guard("count"):
        float(fn(x))
        float(fn(x))
    files = [m.__file__ for m in list(PyCodeCache.modules) + list(getattr(PyCodeCache, "modules_no_attr", {}).values())
             if getattr(m, "__file__", None)]
    assert files and all(frames._generated(f) for f in files), files
    assert all(frames.kind(m.call.__code__) == frames.SKIP for m in PyCodeCache.modules if hasattr(m, "call"))
    assert not [u for u in xfer.snapshot().unwrapped if u.path in files or u.path == "<unknown>"]
    xfer.reset()
