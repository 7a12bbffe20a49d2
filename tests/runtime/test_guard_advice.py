"""The guard's message suggests the form `wrap` writes for the op it saw (not
`xfer.item` for every crossing), from the one op table (xferaudit/opforms.py)."""

from __future__ import annotations

import re

import pytest

torch = pytest.importorskip("torch")

from xferaudit import opforms
from xferaudit.runtime.guarding.guard import UnexpectedTransfer, guard
from xferaudit.static.codemod import wrap_source
from xferaudit.testing import simulated_device


@pytest.fixture(scope="module")
def dev():
    return simulated_device()


def _message(fn) -> str:
    with pytest.raises(UnexpectedTransfer) as ei, guard("raise"):
        fn()
    return str(ei.value)


def test_a_cpu_copy_is_told_to_use_xfer_cpu_not_item(dev):
    x = torch.ones(3).to(dev)
    msg = _message(lambda: x.cpu())
    assert "aten._to_copy" in msg
    assert "`_xfer.cpu(x, site=...)` for `x.cpu()`" in msg
    assert "xfer.item" not in msg


def test_an_upload_is_told_to_use_xfer_to(dev):
    msg = _message(lambda: torch.ones(3).to(dev))
    assert "`_xfer.to(x, device, site=...)` for `x.to(device)`" in msg
    assert "xfer.cpu" not in msg and "xfer.item" not in msg


def test_a_scalar_read_names_the_conversion_the_truth_test_and_item(dev):
    x = torch.ones(()).to(dev)
    msg = _message(lambda: float(x))
    assert "`_xfer.float(x, site=...)` for `float(x)`" in msg
    assert "`_xfer.bool(x, site=...)` for `if x:`" in msg
    assert "`_xfer.item(x, site=...)` for `x.item()`" in msg


def test_a_print_is_told_to_use_xfer_read(dev):
    x = torch.ones(2).to(dev)
    msg = _message(lambda: f"{x}")
    assert "`_xfer.read(x, site=...)`" in msg


def test_a_count_read_back_is_told_to_name_its_statement_and_how_to_avoid_it(dev):
    x = torch.ones(4).to(dev)
    msg = _message(lambda: x.nonzero())
    assert "aten.nonzero" in msg
    assert "xfer." not in msg  # (no call to wrap)
    assert "`x.nonzero()  # xferaudit: site=...`" in msg and "Name its statement" in msg
    assert "data-dependent size" in msg and "move it out of the guarded step" in msg


# --- every suggested form is what `wrap` writes for its construct --------------

_SETUP = "import torch\n\nfn = print\ndev = 'cuda'\ndata = [1]\nx = torch.ones(2).cuda()\ndst = torch.ones(2).cuda()\nsrc = torch.ones(2)\n"


def _all_forms():
    seen = []
    for cat in {id(c): c for c in opforms._PACKETS.values()}.values():
        for f in cat.forms:
            seen.append((cat, f))
    for cat in (opforms.FORMAT, opforms.LAUNCH):
        for f in cat.forms:
            seen.append((cat, f))
    return seen


@pytest.mark.parametrize("cat,f", _all_forms(), ids=lambda v: getattr(v, "construct", getattr(v, "name", "")))
def test_each_suggested_form_is_the_one_wrap_writes(cat, f):
    src = _SETUP + ("y = " + f.construct if not f.construct.endswith(":") and not f.construct.startswith("print")
                    else f.construct + ("\n    pass" if f.construct.endswith(":") else "")) + "\n"
    res = wrap_source(src.encode(), "t.py")
    assert res.new is not None, (f.construct, res.skipped)
    out = res.new.decode()
    text = opforms._spell(f, _rules())
    pattern = re.escape(text).replace(re.escape("site=..."), r"site=\"[^\"]+\"")
    assert re.search(pattern, out), (text, out)


def _rules():
    from xferaudit.rules import table

    return table(("torch",))
