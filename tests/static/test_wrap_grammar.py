"""Wrap-grammar correctness: code whose wrapped form would behave differently.

TorchScript (scripted code cannot call the wrappers), self-documenting
f-string fields (their text is printed), ``site`` as a keyword of the user's
own call, and the order in which the bare call looks its method up and
evaluates its arguments. Each case runs the code before and after ``wrap``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("libcst")

from xferaudit.static.codemod import unwrap_source, wrap_source  # noqa: E402
from xferaudit.static.front.finder import find_in_source  # noqa: E402

torch = pytest.importorskip("torch")


def wrapped(src: str, relpath: str = "m.py"):
    res = wrap_source(src.encode(), relpath, None, relpath)
    new = res.new.decode() if res.changed else src
    back = unwrap_source(new.encode(), relpath)
    assert (back.new.decode() if back.changed else new) == src, "unwrap did not give the bytes back"
    return new, res.skipped


def run(src: str, tmp_path, name: str = "m.py") -> str:
    """The program's stdout, run in a fresh interpreter (wrapped code imports the runtime)."""
    p = tmp_path / name
    p.write_text(src)
    out = subprocess.run([sys.executable, str(p)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def unwrapped(src: str):
    return [s for s in find_in_source(src, "m.py", None, "m.py").sites if not s.wrapped]


def check_messages(src: str, tmp_path) -> list[str]:
    (tmp_path / "m.py").write_text(src)
    out = subprocess.run([sys.executable, "-m", "xferaudit", "check", "--format", "json", "m.py"],
                         capture_output=True, text=True, cwd=tmp_path, timeout=120)
    return [d["message"] for d in json.loads(out.stdout)]


# --- TorchScript ------------------------------------------------------------------------

SCRIPTED = textwrap.dedent('''\
    import torch


    def helper(x):
        return x.cpu() + 1


    @torch.jit.script
    def scripted(x):
        return helper(x).to(torch.float64)


    class Net(torch.nn.Module):
        def forward(self, x):
            return self.part(x).cpu()

        def part(self, x):
            return x.to(torch.float32) * 2

        @torch.jit.export
        def extra(self, x):
            return x.cpu()

        @torch.jit.ignore
        def python_only(self, x):
            return x.cpu()


    class Scripted(torch.jit.ScriptModule):
        @torch.jit.script_method
        def forward(self, x):
            return x.cpu()


    net = torch.jit.script(Net())
    sm = Scripted()
    x = torch.arange(3)
    print(scripted(x).tolist(), net(x).tolist(), net.extra(x).tolist(), sm(x).tolist())
    print(x.cpu().tolist())
''')


def test_scripted_code_runs_before_and_after_wrap(tmp_path):
    new, skipped = wrapped(SCRIPTED)
    assert run(new, tmp_path) == run(SCRIPTED, tmp_path)
    # the eager sites are wrapped; the ignored method runs in Python, so it is wrapped too
    assert '_xfer.cpu(x, site="m.py:Net.python_only:x.cpu")' in new or ":Net.python_only:x.cpu" in new
    assert "print(_xfer.tolist(" in new
    reasons = {s.label: why for s, why in [(k, k.reason) for k in skipped]}
    assert any("TorchScript" in why for why in reasons.values()), reasons


def test_scripted_sites_are_reported_as_unwrappable_not_as_wraps(tmp_path):
    src = textwrap.dedent('''\
        import torch


        @torch.jit.script
        def f(x):
            return x.cpu()
    ''')
    (site,) = unwrapped(src)
    assert "TorchScript" in site.no_wrap
    (msg,) = check_messages(src, tmp_path)
    assert "TorchScript" in msg and "wrap it" not in msg


def test_a_module_scripted_through_a_variable(tmp_path):
    src = textwrap.dedent('''\
        import torch


        class Net(torch.nn.Module):
            def forward(self, x):
                return x.cpu() * 2


        model = Net()
        scripted = torch.jit.script(model)
        print(scripted(torch.ones(2)).tolist())
    ''')
    new, skipped = wrapped(src)
    assert run(new, tmp_path) == run(src, tmp_path)
    assert [s.label for s in skipped] == ["x.cpu"]


@pytest.mark.parametrize("head, deco", [
    ("from torch import jit as J", "@J.script"),
    ("import torch.jit as J", "@J.script"),
    ("from torch.jit import script", "@script"),
    ("from torch import nn, jit", "@jit.script"),
])
def test_scripting_under_another_name_is_found(head, deco):
    src = f"import torch\n{head}\n\n\n{deco}\ndef f(x):\n    return x.cpu()\n"
    (site,) = unwrapped(src)
    assert "TorchScript" in site.no_wrap


# --- self-documenting f-strings ---------------------------------------------------------

SELFDOC = textwrap.dedent('''\
    import torch


    def show(x):  # (a tensor the file does not place: a host one would be no site)
        print(f"{x.sum().item()=}")
        print(f"{x.cpu() = }")
        print(f"{x.cpu()=!s} {x.double().tolist()=} and {x.sum().item():.1f}")


    show(torch.ones(2))
''')


def test_self_documenting_fields_print_the_same_after_wrap(tmp_path):
    new, skipped = wrapped(SELFDOC)
    assert run(new, tmp_path) == run(SELFDOC, tmp_path)
    assert "_xfer.item(x.sum()" in new  # the plain field is wrapped
    assert sum("self-documenting" in s.reason for s in skipped) == 4
    msgs = check_messages(SELFDOC, tmp_path)
    assert sum("self-documenting" in m and "wrap it" not in m for m in msgs) == 4


# --- `site` as a keyword of the user's call --------------------------------------------

def test_a_call_passing_site_itself_is_left_and_check_suggests_no_second_site(tmp_path):
    src = textwrap.dedent('''\
        import torch


        class Box:
            def to(self, *args, **kwargs):
                return sorted(kwargs)


        b = Box()
        print(b.to("cpu", **{"site": "mine"}))
        print(b.to("cpu", site="here"))
        print(b.to("cpu", **dict(site="there")))
        print(b.to("cpu", **{"other": 1}))
    ''')
    new, skipped = wrapped(src)
    assert run(new, tmp_path) == run(src, tmp_path)
    assert len(skipped) == 3 and all("site" in s.reason for s in skipped)
    msgs = check_messages(src, tmp_path)
    assert len(msgs) == 4
    for m in msgs[:3]:
        assert "site=" in m and "wrap it" not in m, m
        assert "site=..., site" not in m and 'site="here", site' not in m
    assert "wrap it" in msgs[3]


# --- evaluation order ------------------------------------------------------------------

ORDER = textwrap.dedent('''\
    import torch

    log = []


    def arg(v):
        log.append(v)
        return v


    it = iter(["cpu", "meta"])


    def move(x):
        return x.to(next(it))


    def plain(y, dev):
        return y.to(dev)


    def keyword(y):
        return y.to(device=arg("cpu"))


    try:
        move(None)
    except AttributeError as e:
        log.append(type(e).__name__)
    print(next(it))
    y = torch.ones(2)
    print(plain(y, "cpu").device, keyword(y).device, move(y).device, log)
''')


def test_the_method_is_looked_up_before_the_arguments_are_evaluated(tmp_path):
    new, skipped = wrapped(ORDER)
    assert not skipped
    before = run(ORDER, tmp_path)
    assert before.startswith("cpu\n")  # the bare call did not consume `it`
    assert run(new, tmp_path) == before
    # plain arguments keep the receiver form; calls in them take the bound method
    assert "_xfer.to(y, dev, site=" in new
    assert "_xfer.call(x.to, next(it), site=" in new
    assert '_xfer.call(y.to, device=arg("cpu"), site=' in new


@pytest.mark.parametrize("call, bound", [
    ("y.to(devs[0], non_blocking=True)", False),  # reads are taken as free of effects
    ("y.to(self.device)", False),
    ("y.to(*devs)", False),
    ("y.to(dev, **opts)", False),
    ("y.to(-1)", False),
    ("y.to(torch.device(dev))", True),
    ("y.to(devs[pick()])", True),
    ("y.to(a + b)", True),
    ("y.to(*make())", True),
    ("y.to(dev, non_blocking=flag())", True),
    ("y.to(d := dev)", True),
])
def test_which_arguments_take_the_bound_form(call, bound):
    src = f"import torch\n\n\ndef f(self, y, dev, devs, opts, a, b, pick, make, flag):\n    return {call}\n"
    new, skipped = wrapped(src)
    assert not skipped
    assert ("_xfer.call(y.to, " in new) == bound, new


def test_the_bound_form_is_read_back_named_and_suggested(tmp_path):
    src = "import torch\nit = iter([torch.float64])\nx = torch.ones(1)\nx = x.to(next(it))\n"
    new, _ = wrapped(src)
    (site,) = [s for s in find_in_source(new, "m.py", None, "m.py").sites]
    assert site.wrapped and site.rule_id == "torch.to" and site.site == "m.py:<module>:x.to"
    (msg,) = check_messages(src, tmp_path)
    assert "`_xfer.call(x.to, next(it), site=...)`" in msg


def test_the_bound_form_counts_like_the_receiver_form():
    import xferaudit.runtime as xfer
    from xferaudit.testing import simulated_device

    dev = simulated_device()
    x = torch.ones(4)
    with xfer.counting():
        a = xfer.call(x.to, dev, site="t.py:f:bound-x.to")
        b = xfer.call(a.cpu, site="t.py:f:bound-a.cpu")
        v = xfer.call(a.sum().item, site="t.py:f:bound-item")
    rows = {r.site: r for r in xfer.snapshot().rows}
    assert b.device.type == "cpu" and v == 4.0
    assert (rows["t.py:f:bound-x.to"].direction, rows["t.py:f:bound-x.to"].bytes) == ("up", 16)
    assert (rows["t.py:f:bound-a.cpu"].direction, rows["t.py:f:bound-a.cpu"].kind) == ("down", "down")
    assert (rows["t.py:f:bound-item"].direction, rows["t.py:f:bound-item"].bytes) == ("down", 4)
