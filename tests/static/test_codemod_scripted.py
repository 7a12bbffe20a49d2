"""Wrapped code that TorchScript compiles (issue 42): every context of the
differential test (codemod_programs.CONTEXTS) that ``torch.jit.script``
compiles bare also compiles wrapped, and gives the bare result, counting off
and on; a model scripted from a file the project pass never sees
(``torch.jit.script(Model())`` in a deployment script) works after ``wrap``.

The contexts are rendered as one scripted function each (the holes filled
with expressions TorchScript takes), wrapped as ``wrap`` wraps them (plainly,
and as ``wrap --from`` a run that saw every line cross). Scripted code calls
the bare ops (xferaudit/packs/torch/scripting.py): it is not counted. That
includes ``xfer.reads(fn, value, site=...)`` (a consumer called with the value:
``math.floor(t)``, ``'{}'.format(t)``): TorchScript takes no function as a
value, so it is given the bare call ``fn(value)`` to compile.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from codemod_programs import CONTEXTS  # noqa: E402
from test_codemod_differential import _everywhere  # noqa: E402

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.static.codemod import wrap_source  # noqa: E402

HEADER = '''\
import math
import operator
from typing import List

import torch


def case(t: torch.Tensor, u: torch.Tensor, lst: List[int], flagged: bool):
'''

#: Fills TorchScript takes: explicit sites, and implicit ones (t, u are annotated tensors).
FILLS = (
    {"E": "t.sum().cpu()", "E2": "t.cpu()", "B": "(t.cpu() > 0).all()", "N": "u.sum().item()"},
    {"E": "t.sum()", "E2": "t.mean()", "B": "t.sum() > 0", "N": "u.sum()"},
    {"E": "t.to('cpu').sum()", "E2": "t.to(torch.float64)", "B": "bool(t.sum().to('cpu') > 0)",
     "N": "int(u.sum().item())"},
)
INPUTS = ((0.3, 1), (-1.5, 2), ([1.0, 2.0], [1, 2]))


def render(ctx: str, fill: dict) -> str:
    body = CONTEXTS[ctx].format(**fill)
    return HEADER + textwrap.indent(body, "    ") + "\n    return r\n"


def _script(src: str):
    import linecache

    name = f"m_{abs(hash(src))}.py"  # (TorchScript reads the source through linecache)
    linecache.cache[name] = (len(src), None, src.splitlines(True), name)
    ns: dict = {"__name__": "xferaudit_scripted_m"}
    exec(compile(src, name, "exec", dont_inherit=True), ns)  # noqa: S102 - the program under test
    return torch.jit.script(ns["case"])


def _run(fn, tv, uv):
    t, u = torch.tensor(tv), torch.tensor(uv)
    try:
        out = fn(t, u, [5, 6, 7, 8], True)
    except Exception as e:  # noqa: BLE001 - an exception is an outcome to compare
        return ("raised", type(e).__name__, str(e).split("\n")[0])
    if isinstance(out, torch.Tensor):
        return ("tensor", str(out.dtype), out.tolist())
    return ("value", type(out).__name__, repr(out))


def _cases():
    for ctx in sorted(CONTEXTS):
        for i in range(len(FILLS)):
            yield ctx, i


@pytest.mark.parametrize("ctx,fill", list(_cases()))
def test_a_scripted_context_compiles_wrapped_and_gives_the_bare_result(ctx, fill):
    src = render(ctx, FILLS[fill])
    try:
        bare = _script(src)
    except Exception:  # noqa: BLE001 - TorchScript does not take this context: nothing to keep
        pytest.skip("TorchScript does not compile the bare form")
    wrapped_any = False
    for everywhere in (False, True):
        data = src.encode()
        res = wrap_source(data, "m.py", None, "m.py", evidence=_everywhere(data) if everywhere else None)
        if not res.changed:
            continue
        wrapped_any = True
        new = res.new.decode()
        scripted = _script(new)  # must compile (xfer.reads(math.floor, v, site=...) too: TorchScript sees math.floor(v))
        for tv, uv in INPUTS:
            want = _run(bare, tv, uv)
            for count in (False, True):
                prev = xfer.count(count)
                try:
                    got = _run(scripted, tv, uv)
                finally:
                    xfer.count(prev)
                assert got == want, f"counting {'on' if count else 'off'}:\n{new}"
    if not wrapped_any:
        pytest.skip("no site wrapped")


def test_enough_contexts_script():
    """The test above is no vacuous skip: many contexts compile bare and wrap."""
    n = 0
    for ctx, i in _cases():
        src = render(ctx, FILLS[i])
        try:
            _script(src)
        except Exception:  # noqa: BLE001
            continue
        if wrap_source(src.encode(), "m.py", None, "m.py").changed:
            n += 1
    assert n >= 40, n


MODEL = '''\
import torch


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 2)

    def forward(self, x, dev: torch.device):
        z = self.lin(x.to(dev))
        y = z.cpu()
        scale = torch.tensor([2.0, 3.0], device=dev)
        if z.sum() > 0:
            return y * scale.cpu() + float(z.mean())
        return y - z.mean().item()


def helper(x: torch.Tensor) -> float:
    return float(x.sum().cpu())
'''

DEPLOY = '''\
import sys
import torch
sys.path.insert(0, sys.argv[1])
import model

torch.manual_seed(0)
m = model.Model()
x = torch.randn(4, 3)
dev = torch.device("cpu")
eager = m(x, dev)
scripted = torch.jit.script(m)
helpers = [model.helper]
fns = [torch.jit.script(f) for f in helpers]
out = scripted(x, dev)
assert torch.equal(out, eager), (out, eager)
torch.jit.save(scripted, sys.argv[2])
print(repr(out.tolist()), fns[0](x))
'''

LOAD = '''\
import sys
import torch
m = torch.jit.load(sys.argv[1])
torch.manual_seed(0)
torch.nn.Linear(3, 2)
x = torch.randn(4, 3)
print(repr(m(x, torch.device("cpu")).tolist()), "xferaudit" in sys.modules)
'''


@pytest.mark.parametrize("pure", [False, True], ids=["C path", "pure Python"])
def test_a_model_scripted_from_a_separate_file_after_wrap(tmp_path: Path, pure: bool):
    """``wrap`` of model.py alone (the deployment script is not in the project,
    so the project pass cannot see that it scripts the model): the deployment
    script scripts it, runs it, saves it; the result is the bare model's. The
    saved model is plain TorchScript, with the C scalar reads (``float``,
    ``item``, the truth test) as with the Python wrappers
    (XFERAUDIT_PURE_PYTHON=1): it loads where xferaudit is never imported."""
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "model.py").write_text(MODEL)
    (tmp_path / "deploy.py").write_text(DEPLOY)
    (tmp_path / "load.py").write_text(LOAD)
    env = dict(os.environ)
    env.pop("XFERAUDIT_PURE_PYTHON", None)
    if pure:
        env["XFERAUDIT_PURE_PYTHON"] = "1"

    def deploy(saved: str) -> str:
        done = subprocess.run([sys.executable, str(tmp_path / "deploy.py"), str(proj), str(tmp_path / saved)],
                              capture_output=True, text=True, env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout.strip()

    bare = deploy("bare.pt")
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-m", "xferaudit", "wrap", "--no-cache", str(proj / "model.py")],
                          capture_output=True, text=True, env=dict(env, PYTHONPATH=str(root)), timeout=300,
                          cwd=proj)
    assert done.returncode == 0, done.stderr
    text = (proj / "model.py").read_text()
    assert text.count("_xfer.") >= 6, text  # .to, .cpu (x3), torch.tensor, the truth test, float, item
    assert deploy("wrapped.pt") == bare
    # the saved model is plain TorchScript, C path or not: it loads where xferaudit is never imported
    clean = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    got = subprocess.run([sys.executable, str(tmp_path / "load.py"), str(tmp_path / "wrapped.pt")],
                         capture_output=True, text=True, env=clean, timeout=300, cwd=tmp_path)
    assert got.returncode == 0, got.stderr[-3000:]
    assert got.stdout.strip().endswith("False")


def test_registered_when_torch_is_imported_after_the_runtime():
    """``import xferaudit.runtime`` imports no torch; TorchScript still knows
    the wrappers once torch is imported, before any wrapper has run."""
    prog = textwrap.dedent('''
        import sys, linecache
        import xferaudit.runtime as _xfer
        assert "torch" not in sys.modules
        import torch
        src = "def f(x: torch.Tensor):\\n    return _xfer.float(_xfer.cpu(x.sum(), site='a'), site='b')\\n"
        linecache.cache["f.py"] = (len(src), None, src.splitlines(True), "f.py")
        exec(compile(src, "f.py", "exec"), globals())
        print(torch.jit.script(f)(torch.ones(3)))
    ''')
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, PYTHONPATH=str(root)))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "3.0"
