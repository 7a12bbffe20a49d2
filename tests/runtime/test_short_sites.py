"""Short site literals (``site=":f:x.cpu"``) are named after the calling file at
run time, as the static half names them: the full names in reports, budgets and
baselines are what they were with full literals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.runtime.counted import sitenames  # noqa: E402

DEV = None  # the simulated device, set by tests/conftest.py before each test runs (not at import)

MODULE = textwrap.dedent('''\
    import xferaudit.runtime as xfer


    def f(x):
        return xfer.cpu(x, site=":f:x.cpu")
''')

MAIN = textwrap.dedent('''\
    import json, sys
    import torch
    import xferaudit.runtime as xfer
    from xferaudit.testing import simulated_device
    sys.path.insert(0, {src!r})
    import b
    from pkg import a

    x = torch.ones(2).to(simulated_device())
    with xfer.counting():
        a.f(x)
        b.f(x)
        b.f(x)
        xfer.cpu(x, site="hand-named")
        xfer.cpu(x, site="old/full.py:f:x.cpu")
    print(json.dumps(sorted((r.site, r.calls) for r in xfer.snapshot().rows)))
''')


def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n")
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text(MODULE)
    (tmp_path / "b.py").write_text(MODULE)
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "main.py").write_text(MAIN.format(src=str(tmp_path)))


def rows_of(tmp_path, cwd, env=None):
    out = subprocess.run([sys.executable, str(tmp_path / "tools" / "main.py")], capture_output=True, text=True,
                         cwd=cwd, env={**os.environ, **(env or {})}, timeout=120)
    assert out.returncode == 0, out.stderr
    return [tuple(r) for r in json.loads(out.stdout)]


WANT = [("b.py:f:x.cpu", 2), ("hand-named", 1), ("old/full.py:f:x.cpu", 1), ("pkg/a.py:f:x.cpu", 1)]


def test_a_short_literal_is_named_after_the_file_of_the_code_that_calls_the_wrapper(tmp_path):
    project(tmp_path)
    assert rows_of(tmp_path, tmp_path) == WANT
    # from a folder inside the project, or outside it, the names are the same
    assert rows_of(tmp_path, tmp_path / "pkg") == WANT
    assert rows_of(tmp_path, tmp_path.parent) == WANT


def test_xferaudit_root_names_the_root_outright(tmp_path):
    project(tmp_path)
    got = rows_of(tmp_path, tmp_path, {"XFERAUDIT_ROOT": str(tmp_path / "pkg")})
    assert ("a.py:f:x.cpu", 1) in got and ("hand-named", 1) in got


def test_runtime_names_are_the_names_sites_lists_after_wrap(tmp_path):
    pytest.importorskip("libcst")  # the codemod (the GPU image has no libcst)
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n")
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "step.py").write_text(textwrap.dedent('''\
        import torch


        def step(x, dev):
            y = x.to(dev)
            return y.sum().item(), y.cpu()
    '''))
    (tmp_path / "run.py").write_text(textwrap.dedent('''\
        import json, sys
        import torch
        import xferaudit.runtime as xfer
        from xferaudit.testing import simulated_device
        sys.path.insert(0, "src")
        import step
        with xfer.counting():
            step.step(torch.ones(3), simulated_device())
        print(json.dumps(sorted(r.site for r in xfer.snapshot().rows)))
    '''))
    cli = [sys.executable, "-m", "xferaudit"]
    assert subprocess.run([*cli, "wrap", "-q", "src"], cwd=tmp_path).returncode == 0
    assert 'site=":step:x.to"' in (tmp_path / "src" / "step.py").read_text()
    listed = json.loads(subprocess.run([*cli, "sites", "--format", "json", "src"], cwd=tmp_path,
                                       capture_output=True, text=True).stdout)
    ran = subprocess.run([sys.executable, "run.py"], cwd=tmp_path, capture_output=True, text=True)
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout) == sorted(s["site"] for s in listed) == [
        "src/step.py:step:x.to", "src/step.py:step:y.cpu", "src/step.py:step:y.sum().item"]


def test_a_budget_made_with_full_literals_holds_after_they_are_shortened(tmp_path):
    pytest.importorskip("libcst")  # the codemod (the GPU image has no libcst)
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n")
    old = textwrap.dedent('''\
        import torch
        import xferaudit.runtime as xfer


        def step(x, dev):
            return xfer.cpu(xfer.to(x, dev, site="train.py:step:x.to"), site="train.py:step:x.to(dev).cpu")
    ''')
    train = tmp_path / "train.py"
    train.write_text(old)
    (tmp_path / "run.py").write_text(textwrap.dedent('''\
        import sys
        import torch
        import xferaudit.runtime as xfer
        from xferaudit.testing import simulated_device
        import train
        dev = simulated_device()
        with xfer.expect(sys.argv[1], on_fail="raise") as ex:
            for _ in range(2):
                train.step(torch.ones(2), dev)
                ex.step()
        print("ok")
    '''))
    (tmp_path / "budget.toml").write_text('"train.py:step:x.to" = 1\n"train.py:step:x.to(dev).cpu" = 1\n')
    cli = [sys.executable, "-m", "xferaudit"]

    def passes() -> bool:
        r = subprocess.run([sys.executable, "run.py", "budget.toml"], cwd=tmp_path, capture_output=True, text=True)
        return r.returncode == 0 and "ok" in r.stdout

    assert passes()
    subprocess.run([*cli, "wrap", "-q", "--rename-sites", "."], cwd=tmp_path)
    assert 'site=":step:x.to"' in train.read_text() and "train.py:" not in train.read_text()
    assert passes()


def test_a_graph_is_named_after_the_file_that_made_it_not_the_one_that_launches_it(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n")
    (tmp_path / "model.py").write_text(textwrap.dedent('''\
        import torch
        import xferaudit.runtime as xfer


        def make():
            return xfer.graph(lambda t: t + 1, site=":make:torch.compile")
    '''))
    (tmp_path / "loop.py").write_text("def run(fn, x):\n    return fn(x)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sitenames.forget()
    import loop
    import model

    xfer.reset()
    fn = model.make()
    loop.run(fn, torch.ones(1))
    assert xfer.launches() == {"model.py:make:torch.compile": 1}
    sitenames.forget()


def compiled_rows(tmp_path, monkeypatch, name: str, device: str, compile_args: str) -> dict:
    """{site: (calls, direction, bytes)} of 3 calls of a compiled function of
    `name`_outer.py that calls a wrapped `.to(device)` of `name`_inner.py (inlined)."""
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n")
    (tmp_path / f"{name}_inner.py").write_text(textwrap.dedent(f'''\
        import xferaudit.runtime as xfer


        def move(x):
            return xfer.to(x, "{device}", site=":move:x.to") * 2
    '''))
    (tmp_path / f"{name}_outer.py").write_text(textwrap.dedent(f'''\
        import torch
        import {name}_inner


        @torch.compile({compile_args})
        def run(x):
            return {name}_inner.move(x + 1).sum()
    '''))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    sitenames.forget()
    outer = __import__(f"{name}_outer")
    torch._dynamo.reset()
    xfer.reset()
    with xfer.counting():
        for _ in range(3):
            outer.run(torch.ones(256))
    if device == "cuda":
        torch.cuda.synchronize()
    sitenames.forget()
    return {r.site: (r.calls, r.direction, r.bytes) for r in xfer.snapshot().rows}


def test_under_torch_compile_the_site_is_named_after_its_own_file(tmp_path, monkeypatch):
    rows = compiled_rows(tmp_path, monkeypatch, "eager", "cpu", 'backend="eager", fullgraph=True')
    assert rows == {"eager_inner.py:move:x.to": (3, "none", 0)}


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_under_inductor_on_cuda_the_site_is_named_after_its_own_file(tmp_path, monkeypatch):
    rows = compiled_rows(tmp_path, monkeypatch, "inductor", "cuda", "")
    assert rows == {"inductor_inner.py:move:x.to": (3, "up", 3 * 256 * 4)}


def test_full_names_and_hand_names_are_taken_as_they_are():
    assert sitenames.named("a.py:f:x.cpu") == "a.py:f:x.cpu"
    assert sitenames.named("upload") == "upload"
    assert sitenames.named(None) is None
    here = xfer.graph(lambda: 0, site=":f:x.cpu").__xferaudit_site__  # resolved where it is made
    assert here == "tests/runtime/test_short_sites.py:f:x.cpu"


def test_a_call_without_a_site_is_named_by_its_expression_and_the_report_prints(tmp_path, monkeypatch):
    monkeypatch.setenv(sitenames.ROOT_ENV, os.path.dirname(os.path.abspath(__file__)))
    sitenames.forget()
    x = torch.ones(2).to(DEV)

    def step(t):
        return xfer.item(t[0]), xfer.float(t[1]), xfer.cpu(t)

    with xfer.counting():
        for _ in range(3):
            step(x)
        xfer.item(x[0])
    # path:function:expression, one name per call (no line number: an edit above moves nothing)
    fn = "test_short_sites.py:test_a_call_without_a_site_is_named_by_its_expression_and_the_report_prints"
    got = sorted((r.site, r.calls) for r in xfer.snapshot().rows)
    assert got == [(f"{fn}.step:xfer.cpu", 3), (f"{fn}.step:xfer.float", 3), (f"{fn}.step:xfer.item", 3),
                   (f"{fn}:xfer.item", 1)]
    name, top = f"{fn}.step:xfer.item", f"{fn}:xfer.item"
    rep = xfer.report()
    assert name in rep.format() and name in str(rep)
    rep.save(tmp_path / "r.json")
    assert {name, top} <= {r.site for r in xfer.Report.load(tmp_path / "r.json").rows}
    sitenames.forget()
