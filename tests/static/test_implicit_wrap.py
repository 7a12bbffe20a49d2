"""`wrap` / `unwrap` of implicit sites, and what the guard sees after `wrap`."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from xferaudit.static.codemod import unwrap_source, wrap_source
from xferaudit.static.finder import find_in_source

CORPUS = Path(__file__).resolve().parent / "values_corpus"
FILES = sorted(CORPUS.glob("*.py"))
NO_FORM = {"XFA405", "XFA406", "XFA407", "XFA451"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_wrap_then_unwrap_is_byte_for_byte_and_wrap_is_idempotent(path: Path):
    src = path.read_bytes()
    res = wrap_source(src, path.name)
    new = res.new if res.new is not None else src
    assert unwrap_source(new, path.name).new in (src, None if new == src else src)
    again = wrap_source(new, path.name)
    assert again.new is None
    # what is left unwrapped is what has no wrapped form, each said why
    left = [s for s in find_in_source(new.decode(), path.name).sites if s.implicit and not s.wrapped]
    assert {s.rule for s in left} <= NO_FORM
    assert {(k.line, k.code) for k in res.skipped if k.code.startswith("XFA4")} >= {
        (s.line, s.rule) for s in find_in_source(src.decode(), path.name).sites if s.rule in NO_FORM}


def test_wrapped_forms():
    src = (
        "import math\n"
        "import torch\n"
        "def step(model, x, dev, seq):\n"
        "    loss = model.to(dev)(x.to(dev)).sum()\n"
        "    if loss > 100 and not loss.isnan():\n"
        "        print(loss, f'{loss:.3f}')\n"
        "    a, b = float(loss), bool(loss)\n"
        "    c = list(seq)[loss.long()]\n"
        "    d = math.isnan(loss)\n"
        "    e = f'{loss=}'\n"
        "    torch.save(loss, 'l.pt')\n"
    ).encode()
    res = wrap_source(src, "train.py")
    out = res.new.decode()
    for want in (
        'if xfer.bool(loss > 100, site="train.py:step:truth(loss > 100)") and not xfer.bool(loss.isnan(), site=',
        "print(xfer.read(loss, site=", "f'{xfer.read(loss, site=\"train.py:step:format(loss)#2\"):.3f}'",
        'a, b = xfer.float(loss, site="train.py:step:float(loss)"), bool(xfer.bool(loss, site=',
        "c = list(seq)[xfer.index(loss.long(), site=", "d = math.isnan(xfer.read(loss, site=",
        "e = f'{loss=}'", 'xfer.save(torch.save, loss, \'l.pt\', site="train.py:step:torch.save(loss)")',
    ):
        assert want in out, want
    assert [k.reason for k in res.skipped if k.line == 10][0].startswith("a self-documenting f-string field")
    assert unwrap_source(res.new, "train.py").new == src


STEP = '''\
import logging
import math

import numpy as np
import torch

log = logging.getLogger("xferaudit.test")


def step(model, x, y, dev, names):
    model = model.to(dev)
    x, y = x.to(dev), y.to(dev)
    loss = torch.nn.functional.mse_loss(model(x), y)
    total = float(loss) + int(loss) + complex(loss).real
    flag = bool(loss)
    if loss > 100:
        total += 1
    while not loss.isfinite():
        break
    assert loss >= 0
    k = (loss * 0).long()
    for _ in range(k):
        pass
    names = list(names)
    first = names[k]
    part = names[:k]
    text = str(loss) + repr(loss) + f"{loss:.3f}" + "%s" % loss + "{}".format(loss)
    print(loss)
    log.info("loss %s", loss)
    isn = math.isnan(loss)
    return total, flag, first, part, text, isn
'''


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_after_wrap_the_guard_sees_no_unwrapped_transfer_in_the_file(tmp_path, capsys):
    torch = pytest.importorskip("torch")
    import xferaudit.runtime as xfer
    from xferaudit.runtime import recorder
    from xferaudit.runtime.guard import guard
    from xferaudit.testing import simulated_device

    dev = simulated_device()
    bare = tmp_path / "bare_step.py"
    bare.write_text(STEP)
    wrapped = tmp_path / "wrapped_step.py"
    res = wrap_source(STEP.encode(), "wrapped_step.py")
    assert not [k for k in res.skipped], res.skipped
    wrapped.write_bytes(res.new)

    def run(path: Path, name: str):
        mod = _load(path, name)
        torch.manual_seed(0)
        model = torch.nn.Linear(2, 1)
        xfer.reset()
        with xfer.counting(), guard("count"):
            out = mod.step(model, torch.ones(4, 2), torch.zeros(4, 1), dev, ["a", "b", "c"])
        lines = sorted({t.line for t in recorder.STATE.unwrapped.values() if t.path == str(path)})
        return out, lines, xfer.snapshot()

    out_bare, lines_bare, _ = run(bare, "bare_step")
    out_wrapped, lines_wrapped, rep = run(wrapped, "wrapped_step")
    assert len(lines_bare) >= 10  # the bare step crosses on most lines
    # the wrapped step: only the explicit .to() calls and nothing else
    assert lines_wrapped == []
    assert out_bare == out_wrapped  # same values, same text
    by_site = {r.site: r for r in rep.rows}
    assert by_site["wrapped_step.py:step:float(loss)"].crossings == 1
    assert by_site["wrapped_step.py:step:float(loss)"].direction == "down"
    assert sum(r.crossings for r in rep.rows if r.direction == "down") >= 14
    capsys.readouterr()


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_checks_suggestion_is_what_wrap_writes_for_implicit_sites(path: Path):
    """One grammar: for every implicit site wrap rewrites, check's suggestion
    (site=... aside) is the text wrap wrote on that line."""
    import re

    from xferaudit.static.diagnostics import implicit_suggestion

    data = path.read_bytes()
    res = wrap_source(data, path.name)
    skipped = {(k.line, k.column) for k in res.skipped}
    new_lines = re.sub(r"site=(\"[^\"]*\"|'[^']*')", "site=...", (res.new or data).decode()).splitlines()
    checked = 0
    for s in find_in_source(data.decode(), path.name).sites:
        if not s.implicit or (s.line, s.column) in skipped or "\n" in s.call or len(s.call) > 60:
            continue
        said = implicit_suggestion(s)
        if said is None:
            continue
        around = "\n".join(new_lines[s.line - 1 : s.end_line + 1])
        assert said in around, (s.line, s.call, said, around)
        checked += 1
    assert checked or path.name == "hazard.py"  # a hazard has no wrapped form
