"""What `wrap` writes is the bare expression: one test per way it was not.

Each class of rewrite that changed a program's meaning has its test here: the
wrapped form written (or the site left, with its reason), the program run bare
and wrapped on the simulated device, and ``check``'s fix (``--format json``)
being exactly what ``wrap`` writes.
"""

from __future__ import annotations

import json
import textwrap

import pytest

torch = pytest.importorskip("torch")

from xferaudit.cli import main  # noqa: E402
from xferaudit.opforms import SITE_CATEGORIES  # noqa: E402
from xferaudit.static.codemod import CodemodError, unwrap_source, wrap_source  # noqa: E402
from xferaudit.static.front.evidence import FileEvidence  # noqa: E402
from xferaudit.static.front.finder import find_in_source  # noqa: E402

DEV = None  # the simulated device (conftest sets it up before the first test)


def _src(text: str) -> bytes:
    return textwrap.dedent(text).encode()


def everywhere(data: bytes) -> FileEvidence:
    """A run that saw every line cross, in every category (``wrap --from``)."""
    n = data.count(b"\n") + 1
    return FileEvidence(hot={ln: SITE_CATEGORIES for ln in range(1, n + 1)}, lines=n)


def wrap(data: bytes, evidence=None):
    res = wrap_source(data, "m.py", None, "m.py", evidence=evidence)
    new = res.new if res.changed else data
    back = unwrap_source(new, "m.py")
    assert (back.new if back.changed else new) == data
    assert sum(back.unwrapped.values()) == sum(res.wrapped.values())
    return new.decode(), res


def load(text: str) -> dict:
    ns: dict = {"__name__": "m", "__file__": "m.py"}
    exec(compile(text, "m.py", "exec"), ns)
    return ns


def run(text: str, fn: str, *args):
    """What `fn(*args)` of the module `text` returns, or raises (type and message)."""
    f = load(text)[fn]
    try:
        return ("value", f(*args))
    except Exception as e:  # noqa: BLE001 - the exception is the outcome compared
        return ("raised", type(e).__name__, str(e))


def check_json(tmp_path, monkeypatch, capsys, data: bytes) -> list[dict]:
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n")
    (tmp_path / "m.py").write_bytes(data)
    monkeypatch.chdir(tmp_path)
    main(["check", "--no-cache", "--format", "json", "m.py"])
    return json.loads(capsys.readouterr()[0])


# --- an attribute is wrapped whole ------------------------------------------------------------

ATTRIBUTES = _src("""\
    import math

    import torch


    class Box:
        def step(self, t: torch.Tensor, ctx):
            self.flag = t.sum() > 0
            self.loss = t.sum()
            out = []
            if self.flag:
                out.append(f"{self.loss:.2f}")
            while not self.flag:
                break
            assert self.flag, "no"
            out.append(math.isnan(self.loss))
            out.append(list(range(ctx.n)))
            out.append([1, 2, 3][:ctx.n])
            if ctx.flag:
                out.append(str(ctx.loss))
            return out


    def step(t, ctx):
        return Box().step(t, ctx)
    """)


class Ctx:
    def __init__(self, t) -> None:
        self.flag, self.loss, self.n = t > 0, t * 2, (t * 0 + 2).long()


def test_an_attribute_is_wrapped_whole_and_its_site_starts_where_it_starts():
    new, res = wrap(ATTRIBUTES, everywhere(ATTRIBUTES))
    assert "_xfer.bool(self.flag, site=" in new and "while not _xfer.bool(self.flag, site=" in new
    assert "_xfer.bool(ctx.flag, site=" in new and "range(_xfer.index(ctx.n, site=" in new
    assert "[:_xfer.index(ctx.n, site=" in new
    assert "._xfer." not in new  # never inside the attribute: `self._xfer.bool(flag, ...)`
    sites = [s for s in find_in_source(ATTRIBUTES.decode(), "m.py", None, "m.py").sites if s.call == "self.flag"]
    assert sites and all(s.column == ATTRIBUTES.decode().splitlines()[s.line - 1].index("self.flag") + 1
                         for s in sites)
    for v in (0.5, -0.5, float("nan")):
        t = torch.tensor(v).to(DEV)
        bare = run(ATTRIBUTES.decode(), "step", t, Ctx(t))
        assert repr(run(new, "step", t, Ctx(t))) == repr(bare)


def test_a_site_over_several_lines_in_a_nested_block_is_wrapped():
    src = _src("""\
        import torch


        def outer(t: torch.Tensor):
            def inner(a, b):
                if torch.logical_and(
                    a, b
                ).any() and not isinstance(a, int):
                    return 1
                return 0
            return inner(t > 0, t < 1)
        """)
    new, res = wrap(src, everywhere(src))
    assert not res.skipped, res.skipped
    assert "if _xfer.bool(\n" in new or "if _xfer.bool(torch.logical_and(" in new


def test_the_fix_for_an_attribute_is_what_wrap_writes(tmp_path, monkeypatch, capsys):
    recs = check_json(tmp_path, monkeypatch, capsys, ATTRIBUTES)
    fixes = [r for r in recs if r["fix"] and "self.flag" in r["message"]]
    assert fixes
    for r in fixes:
        for e in r["fix"]["edits"]:
            assert "._xfer." not in e["content"]
        assert any("_xfer.bool(self.flag, site=" in e["content"] for e in r["fix"]["edits"])


# --- `and`/`or` as a value is no truth test -----------------------------------------------------

BOOLOPS = _src("""\
    import torch


    def step(t: torch.Tensor, zero, lst):
        y = t.sum()
        threshold = y
        threshold = threshold or zero
        a = y and t
        b = (y and t) or zero
        c = -y or zero
        d = lst[::y.long() or 1]
        e = not y or zero
        if y and t.any():
            f = 1
        else:
            f = 0
        return threshold, a, b, c, d, e, f


    def last(t: torch.Tensor, x):
        y = t.sum()
        return y and x
    """)


def test_and_or_used_as_a_value_is_left_with_its_reason():
    new, res = wrap(BOOLOPS)
    left = {k.label: k.reason for k in res.skipped}
    for label in ("truth(threshold)", "truth(y)", "truth(y.long())", "truth(-y)"):
        assert "outside a condition" in left.get(label, ""), (label, left)
    assert "or zero" in new and "_xfer.bool(threshold" not in new and "_xfer.bool(-y" not in new
    assert "return y and x" in new
    # a truth test stays one: `if y and t.any():`, and `not y` (a bool whatever `y` is)
    assert "if _xfer.bool(y, site=" in new and "e = not _xfer.bool(y, site=" in new
    for v in (0.3, 0.0, -2.0):
        t = torch.tensor([v, v]).to(DEV)
        for fn, args in (("step", (t, "zero", [1, 2, 3])), ("last", (t, "x"))):
            assert repr(run(new, fn, *args)) == repr(run(BOOLOPS.decode(), fn, *args))


def test_check_says_why_an_and_or_value_is_left_and_offers_no_fix(tmp_path, monkeypatch, capsys):
    recs = check_json(tmp_path, monkeypatch, capsys, BOOLOPS)
    value = [r for r in recs if "truth(threshold)" in r["message"] or "`threshold`" in r["message"]]
    assert value and all(r["fix"] is None and "leaves it" in r["message"] for r in value)


# --- a tensor used as a dict key is no index ---------------------------------------------------

KEYS = _src("""\
    import torch


    def step(t: torch.Tensor, obj):
        i = t.argmax()
        names = {0: "a", 1: "b"}
        cache = {i: "hit"}
        seen = {}
        seen[i] = 1
        out = [cache[i], len(seen), list(range(4))[i], (10, 20, 30)[i], sorted([3, 1, 2])[:i]]
        try:
            out.append(names[i])
        except KeyError as e:
            out.append("missing")
        out.append(obj[:i])
        return out


    class Probe:
        def __getitem__(self, key):
            return type(key.stop).__name__
    """)


def test_a_dict_key_is_no_site_and_an_unknown_base_is_left_with_its_reason():
    new, res = wrap(KEYS)
    assert "cache[i]" in new and "names[i]" in new and "seen[i] = 1" in new  # a dict hashes it: no site
    assert "list(range(4))[_xfer.index(i, site=" in new and "(10, 20, 30)[_xfer.index(i, site=" in new
    assert "sorted([3, 1, 2])[:_xfer.index(i, site=" in new
    assert "obj[:i]" in new  # a class of its own gets the slice as it is
    assert any(k.label == "conversion(i)" and "`obj`" in k.reason for k in res.skipped), res.skipped
    sites = [s for s in find_in_source(KEYS.decode(), "m.py", None, "m.py").sites if s.implicit]
    assert not any(s.line in (7, 9) for s in sites)  # `cache = {i: ...}`, `seen[i] = 1`
    for data in ([0.0, 3.0], [5.0, 1.0]):
        t = torch.tensor(data).to(DEV)
        probe = load(KEYS.decode())["Probe"]()
        assert run(new, "step", t, probe) == run(KEYS.decode(), "step", t, probe)


# --- numpy, math and .format get the tensor itself ------------------------------------------------

CONSUMERS = _src("""\
    import logging
    import math

    import numpy as np
    import torch

    LOG = logging.getLogger("xferaudit.meaning")


    def direct(t: torch.Tensor):
        y = t * 1
        a = np.sin(y)
        b = math.isnan(y)
        c = "{0.shape}".format(y)
        d = f"{y:.2f}" + "%s" % y + "plain" % y
        LOG.warning("%s", y)
        return type(a).__name__, b, c, d
    """)


def test_numpy_math_and_format_calls_are_wrapped_whole_and_get_the_tensor():
    new, res = wrap(CONSUMERS)
    assert "_xfer.reads(np.sin, y, site=" in new and "_xfer.reads(math.isnan, y, site=" in new
    assert '_xfer.reads("{0.shape}".format, y, site=' in new
    assert 'LOG.warning("%s", y)' in new  # a logging call: left, with the reason
    assert any("logging call" in k.reason for k in res.skipped), res.skipped
    assert "_xfer.read(" in new  # the f-string field and `%` keep the value read in place
    host = torch.tensor([0.5, 2.0])
    for t in (host, host.to(DEV), torch.tensor(0.25), torch.tensor(0.25).to(DEV)):
        assert repr(run(new, "direct", t)) == repr(run(CONSUMERS.decode(), "direct", t))



# --- unwrap: a call it cannot restore is an error at its line ------------------------------------

BROKEN = b'''import torch
import xferaudit.runtime as _xfer


def f(ctx, x, flag):
    a = _xfer.cpu(x, site=":f:x.cpu")
    if ctx._xfer.bool(flag, site=":f:truth(ctx.flag)"):
        a = a + 1
    b = _xfer.item(x, site=":f:x.item", extra=3)
    return a, b
'''


def test_unwrap_names_each_call_it_cannot_restore_and_writes_nothing(tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n")
    (tmp_path / "m.py").write_bytes(BROKEN)
    good = BROKEN.replace(b"    if ctx._xfer.bool(flag, site=\":f:truth(ctx.flag)\"):\n        a = a + 1\n", b"") \
        .replace(b", extra=3)", b")")
    (tmp_path / "ok.py").write_bytes(good)
    monkeypatch.chdir(tmp_path)
    assert main(["unwrap", "m.py", "ok.py"]) == 2
    err = capsys.readouterr().err
    assert (tmp_path / "m.py").read_bytes() == BROKEN  # not half unwrapped
    assert b"xfer" not in (tmp_path / "ok.py").read_bytes()  # the other file is unwrapped
    assert "m.py:7:18: left as it is: unwrap cannot restore this wrapper call: the runtime's name is part" in err
    assert "m.py:9:15: left as it is: unwrap cannot restore this wrapper call: it is not in a form" in err
    assert "1 file skipped (1 cannot restore a wrapper call)" in err
    res = unwrap_source(BROKEN, "m.py")
    assert res.new is None and [(k.line, k.column) for k in res.skipped] == [(7, 18), (9, 15)]


def test_unwrap_from_stdin_writes_the_bytes_back_unchanged_and_fails(tmp_path, monkeypatch, capsys):
    import io
    import sys

    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n")
    monkeypatch.chdir(tmp_path)
    out = io.BytesIO()
    monkeypatch.setattr(sys, "stdin", type("S", (), {"buffer": io.BytesIO(BROKEN)})())
    monkeypatch.setattr(sys, "stdout", type("S", (), {"buffer": out, "flush": lambda self: None,
                                                      "write": lambda self, s: None})())
    assert main(["unwrap", "-", "--stdin-filename", "m.py"]) == 2
    assert out.getvalue() == BROKEN
    assert "m.py:7:18:" in capsys.readouterr().err


def test_wrap_and_unwrap_count_the_same_calls_on_the_corpus():
    from pathlib import Path

    here = Path(__file__).resolve().parent
    for path in sorted((here / "values_corpus").glob("*.py")) + sorted((here.parent / "corpus").glob("*.py")):
        data = path.read_bytes()
        try:
            res = wrap_source(data, path.name)
        except CodemodError:  # (a Python 2 file)
            continue
        if not res.changed:
            continue
        back = unwrap_source(res.new, path.name)
        assert back.new == data and not back.skipped, path
        assert sum(back.unwrapped.values()) == sum(res.wrapped.values()), path
