"""Odd but valid inputs for the static half: optional imports, old Mac line
endings, annotations, star imports, quotes in file names."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from xferaudit.static.codemod import unwrap_source, wrap_source
from xferaudit.static.front.finder import find_in_source


def _kinds(src: str):
    return [(s.line, s.rule_id) for s in find_in_source(textwrap.dedent(src), "m.py").sites]


# --- an optional import is still the import --------------------------------------------

OPTIONAL = {
    "try/except": "try:\n    import torch\nexcept ImportError:\n    torch = None\n",
    "importorskip": "import pytest\ntorch = pytest.importorskip(\"torch\")\n",
    "import_module": "import importlib\ntorch = importlib.import_module(\"torch\")\n",
}
USES = (
    "@torch.compile\ndef f(x):\n    return x\n"
    "t = torch.tensor([1], device=\"cuda\")\n"
    "s = torch.load(f, map_location=\"cuda\")\n"
)


@pytest.mark.parametrize("how", sorted(OPTIONAL))
def test_an_optional_import_is_still_the_import(how):
    src = OPTIONAL[how] + USES
    got = sorted(r for _, r in _kinds(src))
    assert got == ["torch.compile", "torch.load", "torch.tensor"]


def test_an_optional_import_inside_a_function_too():
    src = "def g():\n    try:\n        import torch\n    except ImportError:\n        torch = None\n" \
          "    return torch.tensor([1], device='cuda')\n"
    assert [r for _, r in _kinds(src)] == ["torch.tensor"]


def test_a_name_rebound_to_something_else_is_no_longer_the_import():
    src = "import torch\ntorch = make_fake()\nt = torch.tensor([1], device='cuda')\n"
    assert _kinds(src) == []


# --- CR-only line endings ------------------------------------------------------------------

def test_noqa_is_honoured_with_cr_only_line_endings():
    src = "import torch\rx = 1\ry = t.item()  # noqa: XFA202\rz = t.cpu()\r"
    sites = find_in_source(src, "m.py").sites
    assert [(s.line, s.suppressed) for s in sites] == [(3, True), (4, False)]


def test_add_noqa_is_idempotent_with_cr_only_line_endings(tmp_path):
    f = tmp_path / "m.py"
    f.write_bytes(b"import torch\rx = 1\ry = t.item()\rz = t.cpu()  # keep\r")
    cmd = [sys.executable, "-m", "xferaudit", "check", "--no-cache", "--add-noqa", str(f)]
    subprocess.run(cmd, capture_output=True, cwd=tmp_path)
    once = f.read_bytes()
    assert once == b"import torch\rx = 1\ry = t.item()  # noqa: XFA202\rz = t.cpu()  # keep  # noqa: XFA202\r"
    subprocess.run(cmd, capture_output=True, cwd=tmp_path)
    assert f.read_bytes() == once
    r = subprocess.run([sys.executable, "-m", "xferaudit", "check", "--no-cache", str(f)],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout


# --- annotations -----------------------------------------------------------------------------

ANNOTATED = "def f(t: W.cpu() = W, *, k: W.item() = 1, **kw: W.tolist()) -> W.numpy(force=True):\n    pass\n"


def test_evaluated_annotations_are_sites():
    got = sorted(r for _, r in _kinds("import torch\n" + ANNOTATED))
    assert got == ["torch.cpu", "torch.item", "torch.numpy", "torch.tolist"]


def test_defaults_are_sites_under_postponed_annotations_and_annotations_are_not():
    src = "from __future__ import annotations\nimport torch\n" \
          "def f(t: W.cpu() = W.item(), *, k: W.tolist() = 1) -> W.cpu():\n    pass\n"
    assert [r for _, r in _kinds(src)] == ["torch.item"]


def test_local_variable_annotations_are_never_evaluated():
    src = "import torch\nx: W.cpu() = 1\ndef f():\n    y: W.item() = 2\n    class C:\n        z: W.tolist()\n"
    assert _kinds(src) == [(2, "torch.cpu"), (6, "torch.tolist")]


def test_wrap_leaves_postponed_annotations_alone():
    src = b"from __future__ import annotations\nimport torch\n\ndef f(t: W.cpu()) -> W.item():\n    return t.cpu()\n"
    res = wrap_source(src, "m.py", None, "m.py")
    new = res.new.decode()
    assert "def f(t: W.cpu()) -> W.item():" in new
    assert "return _xfer.cpu(t, site=" in new


# --- a star import may define the alias --------------------------------------------------

def test_wrap_puts_the_runtime_import_after_a_star_import(tmp_path):
    # (a star import takes a private name where the module lists it)
    (tmp_path / "helpers.py").write_text("__all__ = ['_xfer']\n\n\ndef _xfer():\n    return 'helpers'\n")
    src = b"import torch\nfrom helpers import *\n\n\ndef f(t):\n    return t.cpu()\n"
    res = wrap_source(src, "m.py", None, "m.py")
    new = res.new.decode()
    assert new.index("from helpers import *") < new.index("import xferaudit.runtime as _xfer")
    (tmp_path / "m.py").write_text(new)
    code = "import m, torch, xferaudit.runtime as r; assert m._xfer is r; print(m.f(torch.ones(1)))"
    out = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert unwrap_source(res.new, "m.py").new == src


def test_wrap_does_not_reuse_an_alias_a_later_star_import_may_rebind():
    src = b"import torch\nimport xferaudit.runtime as _xfer\nfrom helpers import *\n\nx = torch.ones(1, device=d).cpu()\n"
    new = wrap_source(src, "m.py", None, "m.py").new.decode()
    lines = new.splitlines()
    assert lines.index("from helpers import *") < lines.index("import xferaudit.runtime as _xfer_")
    assert "_xfer_.cpu(torch.ones(1, device=d), site=" in new


# --- quotes and backslashes in file names --------------------------------------------------

@pytest.mark.parametrize("name", ['q"b.py', "q'b.py", "a\\b.py", "q\"'b.py"])
def test_site_names_are_escaped_for_the_literal_they_go_into(name):
    src = "import torch\nx = t.item()\ns = f\"{t.item()}\"\nu = f'{t.cpu()}'\n".encode()
    res = wrap_source(src, name, None, name)
    assert res.changed and not res.skipped, res.skipped
    compile(res.new, name, "exec")
    names = [s.site for s in find_in_source(res.new.decode(), name, None, name).sites]
    assert len(names) == 3 and len(set(names)) == 3
    assert names[0] == f"{name}:<module>:t.item"  # a plain string holds the name as it is
    assert unwrap_source(res.new, name).new == src
