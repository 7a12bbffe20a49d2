"""A value placed on the device by a helper in another module of the project.

``x = move(x)`` with ``move`` in ``pkg/utils.py`` returning ``x.to("cuda")``:
the importing file's implicit reads of ``x`` are found, however the helper is
imported, in the reading the file is read in, the same cold, cached or one file
at a time; a helper that returns a host value (or one nothing places) gives none.
"""

from __future__ import annotations

import json
import os
import textwrap
from pathlib import Path

import pytest

from xferaudit.cli import main

UTILS = '''\
import torch


def to_device(batch, device):
    return {k: v.to(device) for k, v in batch.items()}


def move(x):
    return x.to("cuda", non_blocking=True)


def on_gpu(x):
    y = x.cuda()
    return y


def zeros(n, dev):
    return torch.zeros(n, device=dev)


def like(x, ref):
    return x.to(ref.device)


def to_host(x):
    return x.to("cuda").cpu()


def as_array(x):
    return x.cuda().numpy()


def wrapped(x):
    y = x.to("cuda")
    return make(y)


def grid(n, device=None):
    return torch.arange(n, device=device)
'''

TRAIN = '''\
import torch

import pkg.utils as U
from pkg.utils import zeros
from . import utils
from .utils import as_array, grid, like, move, to_device, to_host, wrapped


def step(model, x, ref):
    x = move(x)
    if x.sum() > 0:
        pass
    y = utils.on_gpu(x)
    loss = model(y).mean()
    print(float(loss))
    b = U.to_device({"a": x}, "cuda")
    print(b["a"])
    z = zeros(3, "cuda")
    assert z.any()
    w = like(x, ref)
    if w.all():
        pass


def host(x):
    h = to_host(x)
    if h.any():
        pass
    a = as_array(x)
    if a.any():
        pass
    u = wrapped(x)
    if u.any():
        pass
    c = to_device({"a": x}, "cpu")
    print(c["a"])


def grids(n, dev="cpu"):
    g = grid(n)  # the default device: the host
    if g.any():
        pass
    k = grid(n, device="cuda")
    if k.any():
        pass
    d = grid(n, device=dev)  # the caller's own default: the host
    if d.any():
        pass
    e = like(n, dev)  # a helper that places where its inputs are, given none on the device
    if e.all():
        pass
'''

#: (line, code) of pkg/train.py's implicit findings, in each reading
PROVEN = [(11, "XFA402"), (15, "XFA401"), (17, "XFA403"), (19, "XFA402"), (44, "XFA402")]
GPU_FIRST = sorted(PROVEN + [(21, "XFA402")])  # x.to(ref.device): where ref is, gpu-first the accelerator


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n", encoding="utf-8")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg/__init__.py").write_text("", encoding="utf-8")
    (tmp_path / "pkg/utils.py").write_text(UTILS, encoding="utf-8")
    (tmp_path / "pkg/train.py").write_text(TRAIN, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _sites(capsys, *args: str) -> list:
    main(["sites", *args, "--format", "json"])
    return json.loads(capsys.readouterr().out or "[]")


def _implicit(capsys, path: str, mode: str, *args: str) -> list:
    return sorted((r["line"], r["rule"]) for r in _sites(capsys, path, "--implicit", mode, *args)
                  if r.get("implicit") and r["path"].endswith("train.py"))


@pytest.mark.parametrize("mode, want", [("proven", PROVEN), ("gpu-first", GPU_FIRST)])
def test_each_import_form_and_reading(project, capsys, mode, want):
    # relative (`from .utils import move`, `from . import utils`), absolute (`from pkg.utils
    # import zeros`), a module alias (`import pkg.utils as U`); host helpers give none
    assert _implicit(capsys, "pkg", mode, "--no-cache") == want


def test_cold_cached_and_one_file_alone_agree(project, capsys):
    cold = _implicit(capsys, "pkg", "proven", "--no-cache")
    assert cold == PROVEN
    assert _implicit(capsys, "pkg", "proven") == cold  # writes the cache
    assert _implicit(capsys, "pkg", "proven") == cold  # reads it
    assert _implicit(capsys, "pkg/train.py", "proven") == cold  # the project's root is walked
    assert _implicit(capsys, "pkg/train.py", "proven", "--no-cache") == cold


def test_the_evidence_names_the_helper_and_where_it_is(project, capsys):
    found = {r["line"]: r for r in _sites(capsys, "pkg/train.py", "--implicit", "proven", "--no-cache")
             if r.get("implicit")}
    assert "moved to the device by `pkg.utils.move` (pkg/utils.py:8)" in found[11]["evidence"]
    assert "`pkg.utils.to_device` (pkg/utils.py:4)" in found[17]["evidence"]
    main(["sites", "pkg/train.py", "--explain", "--implicit", "proven"])
    assert "`pkg.utils.zeros` (pkg/utils.py:17)" in capsys.readouterr().out


def test_a_change_to_the_helper_reaches_the_callers_cached_findings(project, capsys):
    assert (11, "XFA402") in _implicit(capsys, "pkg", "proven")
    utils = project / "pkg/utils.py"
    utils.write_text(UTILS.replace('return x.to("cuda", non_blocking=True)', "return x.cpu()"), encoding="utf-8")
    assert (11, "XFA402") not in _implicit(capsys, "pkg", "proven")  # train.py itself unchanged
    assert (11, "XFA402") not in _implicit(capsys, "pkg/train.py", "proven")
    utils.write_text(UTILS, encoding="utf-8")
    os.utime(utils, ns=(1, 1))  # (another state of the project than any seen)
    assert (11, "XFA402") in _implicit(capsys, "pkg", "proven")


def test_a_name_bound_otherwise_is_not_the_helper(project, capsys):
    (project / "pkg/other.py").write_text(textwrap.dedent('''\
        from .utils import move


        def f(x, move):
            x = move(x)
            if x.sum() > 0:
                pass


        def g(x):
            from .nothing import move
            x = move(x)
            if x.sum() > 0:
                pass
    '''), encoding="utf-8")
    found = [r for r in _sites(capsys, "pkg/other.py", "--implicit", "gpu-first", "--no-cache") if r.get("implicit")]
    assert found == []


def test_wrap_wraps_the_sites_the_helpers_show(project, capsys):
    assert main(["wrap", "pkg/train.py", "--implicit", "proven"]) in (0, 1)
    out = (project / "pkg/train.py").read_text()
    assert 'if _xfer.bool(x.sum() > 0, site=":step:truth(x.sum()>0)"):' in out
    assert 'print(_xfer.float(loss, site=":step:float(loss)"))' in out
    assert """print(_xfer.read(b["a"], site=":step:format(b['a'])"))""" in out
    assert 'assert _xfer.bool(z.any(), site=":step:truth(z.any())")' in out
    assert "if h.any():" in out and "if a.any():" in out  # the host helpers' results: left
    assert main(["unwrap", "pkg/train.py"]) == 0
    assert (project / "pkg/train.py").read_text() == TRAIN


def test_the_pass_reads_only_what_it_needs(project):
    from xferaudit.static.values.project import placed_in_project

    files = [str(p) for p in sorted(Path(project).rglob("*.py"))]
    found = placed_in_project(files, lambda p: str(Path(p).relative_to(project)))
    helpers = found["helpers"]
    assert sorted(helpers) == ["pkg.utils.grid", "pkg.utils.like", "pkg.utils.move", "pkg.utils.on_gpu",
                               "pkg.utils.to_device", "pkg.utils.zeros"]
    assert helpers["pkg.utils.grid"][3] == [["device", 1]] and helpers["pkg.utils.move"][3] == []
    assert helpers["pkg.utils.like"][0] is None and helpers["pkg.utils.like"][1] == ["devx", None]
    assert helpers["pkg.utils.move"][2] == "pkg/utils.py:8"
    assert found["files"][str(project / "pkg/train.py")][:2] == ["pkg.train", False]
    assert "pkg.utils.move" in found["files"][str(project / "pkg/train.py")][2]


def test_a_helper_the_package_re_exports(project, capsys):
    (project / "pkg/__init__.py").write_text("from .utils import move as send\n", encoding="utf-8")
    (project / "app.py").write_text(textwrap.dedent('''\
        from pkg import send


        def run(x):
            x = send(x)
            if x.sum() > 0:
                pass
    '''), encoding="utf-8")
    found = [r for r in _sites(capsys, "app.py", "--implicit", "proven", "--no-cache") if r.get("implicit")]
    assert [(r["line"], r["rule"]) for r in found] == [(6, "XFA402")]
    assert "`pkg.send` (pkg/utils.py:8)" in found[0]["evidence"]
