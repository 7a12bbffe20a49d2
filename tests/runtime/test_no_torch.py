"""`import xferaudit.runtime` never imports torch, and works where torch is absent."""

from __future__ import annotations

import subprocess
import sys
import textwrap

BLOCK_TORCH = textwrap.dedent(
    """
    import sys, importlib.abc

    class NoTorch(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name == "torch" or name.startswith("torch."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, NoTorch())
    """
)


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_import_does_not_import_torch():
    p = run(
        "import sys, xferaudit, xferaudit.runtime as xfer\n"
        "xfer.count(True); xfer.cpu([1], site='s') if False else None\n"
        "print('torch' in sys.modules)"
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "False"


def test_runtime_without_torch_installed():
    code = BLOCK_TORCH + textwrap.dedent(
        """
        import io
        import xferaudit.runtime as xfer

        class Arr:
            def item(self):
                return 3
            def cpu(self):
                return self

        a = Arr()
        assert xfer.item(a, site="s") == 3
        with xfer.counting():
            assert xfer.item(a, site="s") == 3
            assert xfer.cpu(a, site="c") is a
        f = xfer.graph(lambda: 1, site="g")
        f()
        buf = io.StringIO()
        rep = xfer.report(file=buf)
        assert [r.calls for r in rep.rows] == [1, 1], rep.rows
        assert "s" in buf.getvalue() and xfer.launches() == {"g": 1}
        try:
            xfer.tensor([1, 2], device="cuda", site="t")
        except ImportError as e:
            print("ERR", e)
        """
    )
    p = run(code)
    assert p.returncode == 0, p.stderr
    assert "ERR" in p.stdout and "torch is not installed" in p.stdout
    assert "pip install 'xferaudit[torch]'" in p.stdout


def test_ranges_without_torch_raise_when_asked_and_warn_from_the_environment():
    code = BLOCK_TORCH + textwrap.dedent(
        """
        import os, warnings
        import xferaudit.runtime as xfer

        try:
            xfer.count(True, ranges=True)
        except RuntimeError as e:
            assert "torch is not installed" in str(e), e
        else:
            raise AssertionError("ranges without torch did not raise")
        assert not xfer.is_counting()
        os.environ["XFERAUDIT_RANGES"] = "1"
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            xfer.count(True)
        assert xfer.is_counting() and not xfer.STATE.ranges
        assert any("XFERAUDIT_RANGES" in str(w.message) for w in seen), seen
        print("ok")
        """
    )
    p = run(code)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "ok"
