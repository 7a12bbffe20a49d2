"""The package's one post-import hook (``xferaudit._after_import``): what the
runner, the simulation, the C counted path's Dynamo registration and the
TorchScript registration all use."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from xferaudit._after_import import AfterImport, after_import

ROOT = Path(__file__).resolve().parents[1]


def test_now_when_imported_already():
    seen = []
    after_import("json", seen.append)
    assert seen == [sys.modules["json"]]


def test_right_after_the_import_once_and_failures_told(tmp_path, monkeypatch):
    (tmp_path / "xfa_late_mod.py").write_text("VALUE = 41\n")
    (tmp_path / "xfa_late_bad.py").write_text("VALUE = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    seen, told = [], []

    def ready(mod):
        seen.append(mod.VALUE)  # (the module has finished executing)

    after_import("xfa_late_mod", ready)
    after_import(("xfa_late_mod",), ready)  # (the same hook asked twice: one)
    assert sum(isinstance(f, AfterImport) and f.names == ("xfa_late_mod",) for f in sys.meta_path) == 1
    import xfa_late_mod  # noqa: F401

    assert seen == [41]
    assert not any(isinstance(f, AfterImport) and f.names == ("xfa_late_mod",) for f in sys.meta_path)

    def boom(mod):
        raise RuntimeError("no")

    after_import("xfa_late_bad", boom, told.append)
    import xfa_late_bad  # (the import itself goes on)

    assert xfa_late_bad.VALUE == 1 and [str(e) for e in told] == ["no"]


@pytest.mark.skipif(pytest.importorskip("torch") is None, reason="torch")
def test_the_runtime_registers_with_torch_imported_after_it():
    """``import xferaudit.runtime`` before torch: its hooks are AfterImport
    finders, and once torch (and Dynamo) are imported, the C path's stand-ins
    are registered with Dynamo (where the C path is built) and the TorchScript
    overloads with torch."""
    code = (
        "import sys\n"
        "import xferaudit.runtime\n"
        "from xferaudit._after_import import AfterImport\n"
        "import importlib.abc\n"
        "ours = [type(f).__name__ for f in sys.meta_path if type(f).__module__.startswith('xferaudit')]\n"
        "assert all(n == 'AfterImport' for n in ours), ours\n"
        "import torch, torch._dynamo\n"
        "from xferaudit.runtime.counted import fastpath\n"
        "from xferaudit.packs.torch import scripting\n"
        "assert fastpath._registered == bool(fastpath.NATIVE), (fastpath._registered, fastpath.NATIVE)\n"
        "print('ok', len(ours), fastpath.AVAILABLE)\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    p = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300,
                       check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.startswith("ok ")
