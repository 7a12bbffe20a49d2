"""A wrapper raises exactly what the bare call raises (same type, same
message), argument errors included, counting off and on, under the guard too."""

from __future__ import annotations

import io

import pytest

torch = pytest.importorskip("torch")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.runtime.counted.recorder import STATE  # noqa: E402


def _error(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - any error: compared below
        return type(e), str(e)
    return None


X = torch.ones(3)
S = torch.tensor(2.0)
CASES = {
    "copy_ src=": (lambda: torch.zeros(2).copy_(src=torch.ones(2)),
                   lambda: xfer.copy_(torch.zeros(2), src=torch.ones(2), site="s")),
    "copy_ no src": (lambda: torch.zeros(2).copy_(), lambda: xfer.copy_(torch.zeros(2), site="s")),
    "copy_ shape": (lambda: torch.zeros(2).copy_(torch.ones(3)),
                    lambda: xfer.copy_(torch.zeros(2), torch.ones(3), site="s")),
    "cpu positional": (lambda: X.cpu(3), lambda: xfer.cpu(X, 3, site="s")),
    "cpu bad keyword": (lambda: X.cpu(bogus=1), lambda: xfer.cpu(X, bogus=1, site="s")),
    "cpu memory_format": (lambda: X.cpu(memory_format=3), lambda: xfer.cpu(X, memory_format=3, site="s")),
    "item argument": (lambda: S.item(0), lambda: xfer.item(S, 0, site="s")),
    "item of many": (lambda: X.item(), lambda: xfer.item(X, site="s")),
    "tolist argument": (lambda: X.tolist(1), lambda: xfer.tolist(X, 1, site="s")),
    "numpy keyword": (lambda: X.numpy(force="x", bogus=1), lambda: xfer.numpy(X, force="x", bogus=1, site="s")),
    "to nonsense": (lambda: X.to("nonsense"), lambda: xfer.to(X, "nonsense", site="s")),
    "to too many": (lambda: X.to(1, 2, 3, 4, 5, 6), lambda: xfer.to(X, 1, 2, 3, 4, 5, 6, site="s")),
    "cuda keyword": (lambda: X.cuda(foo=1), lambda: xfer.cuda(X, foo=1, site="s")),
    "tensor no data": (lambda: torch.tensor(), lambda: xfer.tensor(site="s")),
    "as_tensor no data": (lambda: torch.as_tensor(), lambda: xfer.as_tensor(site="s")),
    "asarray bad keyword": (lambda: torch.asarray([1], bogus=1), lambda: xfer.asarray([1], bogus=1, site="s")),
    "load no file": (lambda: torch.load(), lambda: xfer.load(site="s")),
    "load bad bytes": (lambda: torch.load(io.BytesIO(b"no"), weights_only=True),
                       lambda: xfer.load(io.BytesIO(b"no"), weights_only=True, site="s")),
    "method missing": (lambda: X.no_such(), lambda: xfer.method(X, "no_such", site="s")),
    "method bad args": (lambda: X.add(), lambda: xfer.method(X, "add", site="s")),
    "call bad args": (lambda: torch.add(X), lambda: xfer.call(torch.add, X, site="s")),
}


@pytest.mark.parametrize("mode", ["off", "counting", "guard"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_bare_calls_error(name, mode):
    bare, wrapped = CASES[name]
    want = _error(bare)
    assert want is not None, f"{name}: the bare call raises nothing"
    if mode == "counting":
        xfer.count(True)
    try:
        if mode == "guard":
            with xfer.guard("count"):
                got = _error(wrapped)
        else:
            got = _error(wrapped)
    finally:
        xfer.count(False)
    assert got == want, name
    assert getattr(STATE.local, "depth", 0) == 0
