"""One wrap grammar: for every row of every pack (and the generic forms a user
row gets), `check`'s suggestion is what `wrap` writes, `unwrap` gives the
original back, and the wrapper named exists at run time and counts the row's kind."""

from __future__ import annotations

import re

import pytest

import xferaudit.runtime as xfer
from xferaudit.rules import KINDS, RuleTable, available_packs, load_pack, table, user_rules
from xferaudit.runtime.counted.kinds import kind_of
from xferaudit.static.codemod import unwrap_source, wrap_source
from xferaudit.static.codemod.style import CodeStyle
from xferaudit.static.findings.diagnostics import suggestion
from xferaudit.static.front.finder import find_in_source
from xferaudit.wrapform import FORMS, GENERIC, IMPLICIT, form, form_of

USER_ROWS = [
    {"id": "u.method", "call": "method", "target": "to_device", "kind": "up",
     "match": ["batch.to_device(dev)"]},
    {"id": "u.call", "call": "function", "target": "mylib.put", "kind": "up",
     "match": ["mylib.put(x, dev)"]},
    {"id": "u.graph", "call": "function", "target": "mylib.trace", "kind": "graph",
     "match": ["mylib.trace(fn)"]},
]


def _table() -> RuleTable:
    return table(extra=user_rules(USER_ROWS))


def _prefix(pack: str) -> str:
    if pack == "user":
        return "import mylib\n"
    prelude = load_pack(pack).prelude
    return prelude.rstrip("\n") + "\n" if prelude else "import torch\n"


ROWS = [(name, r) for name in available_packs() for r in load_pack(name).rules] + [
    ("user", r) for r in user_rules(USER_ROWS)
]
CASES = [(pack, r, r.match[0]) for pack, r in ROWS]


def _site_of(src: str, rule, rules):
    found = find_in_source(src, "example.py", rules, "example.py")
    mine = [s for s in found.sites if s.rule_id == rule.id]
    assert len(mine) == 1, (rule.id, [(s.rule_id, s.call) for s in found.sites])
    return mine[0]


@pytest.mark.parametrize("pack,rule,example", CASES, ids=[r.id for _, r, _ in CASES])
def test_suggestion_is_what_wrap_writes_and_unwrap_restores(pack, rule, example):
    rules = _table()
    *before, last = example.split("\n")  # a row whose value the code must show (`model = Net()`) first
    src = _prefix(pack) + "".join(b + "\n" for b in before) + "y = " + last + "\n"
    site = _site_of(src, rule, rules)
    said = suggestion(site, rule)
    # one line, whatever its length (the grammar is compared, not the layout)
    res = wrap_source(src.encode(), "example.py", rules, "example.py", style=CodeStyle(line_length=10_000))
    assert res.changed and not res.skipped, res.skipped
    new = res.new.decode()
    written = new.rstrip("\n").rsplit("\n", 1)[-1]
    assert written.startswith("y = ")
    written = re.sub(r'site="[^"]*"', "site=...", written[len("y = "):])
    assert said == written
    # the wrapper named is the row's (or the generic one its style falls back to)
    assert written.startswith(f"_xfer.{rule.wrapper}(")
    # the finder reads the wrapped call back as the same site, same kind
    again = [s for s in find_in_source(new, "example.py", rules, "example.py").sites if s.rule_id == rule.id]
    assert len(again) == 1 and again[0].wrapped and again[0].kind == site.kind
    back = unwrap_source(res.new, "example.py", rules)
    assert back.new == src.encode()


def test_every_form_is_a_row_and_the_generic_ones_are_named():
    assert {f.style for f in FORMS} == {"receiver", "function", "result", "implicit"}
    assert set(GENERIC) == {"method", "call"}
    assert form("receiver", "method").head == ("receiver", "method")
    assert form("function", "call").head == ("callee",)
    assert form("result", "graph").head == ("inner",)
    assert form("result", "jax_jit") is form("result", "graph")


def test_jax_jit_suggestion_names_its_own_wrapper():
    rules = table()
    src = "import jax\nf = jax.jit(step)\n"
    site = _site_of(src, next(r for r in rules.rules if r.id == "jax.jit"), rules)
    rule = next(r for r in rules.rules if r.id == "jax.jit")
    assert suggestion(site, rule) == "_xfer.jax_jit(jax.jit(step), site=...)"
    assert form_of(rule).head == ("inner",)


@pytest.mark.parametrize("pack,rule", [(p, r) for p, r in ROWS if p != "user"], ids=[r.id for p, r in ROWS if p != "user"])
def test_the_wrapper_exists_at_run_time_with_the_rows_kind(pack, rule):
    w = getattr(xfer, rule.wrapper, None)
    assert callable(w), f"xferaudit.runtime has no wrapper {rule.wrapper!r} for {rule.id}"
    kinds = getattr(xfer, "WRAPPER_KINDS", None)
    if kinds is not None:
        want = rule.kind if rule.kind in KINDS else "move"  # a device row's direction is the run's
        assert kinds.get(rule.wrapper) == want


# --- the torch rows, run on the simulated accelerator ---------------------------------

def _torch_env():
    torch = pytest.importorskip("torch")
    from xferaudit.testing import simulated_device

    dev = simulated_device()
    return torch, dev, {
        # row id: (example whose wrapped form runs, names it reads)
        "torch.cpu": ("x.cpu()", {"x": torch.ones(2).to(dev)}),
        "torch.item": ("loss.item()", {"loss": torch.ones(()).to(dev)}),
        "torch.tolist": ("preds.tolist()", {"preds": torch.ones(2).to(dev)}),
        "torch.numpy": ("x.numpy(force=True)", {"x": torch.ones(2).to(dev)}),
        "torch.to": ("x.to(device)", {"x": torch.ones(2), "device": dev}),
        "torch.copy_": ("dst.copy_(src)", {"dst": torch.zeros(2), "src": torch.ones(2).to(dev)}),
        "torch.tensor": ("torch.tensor(d, device=dev)", {"d": [1.0, 2.0], "dev": dev}),
        "torch.as_tensor": ("torch.as_tensor(a, device=dev)", {"a": [1.0], "dev": dev}),
        "torch.asarray": ("torch.asarray(a, device=dev)", {"a": [1.0], "dev": dev}),
    }


TORCH_RUN = ["torch.cpu", "torch.item", "torch.tolist", "torch.numpy", "torch.to", "torch.copy_",
             "torch.tensor", "torch.as_tensor", "torch.asarray"]
# Not run here: cuda (no CUDA), load (the simulated device has no storage),
# replay / compile / make_graphed_callables (graphs; their wrappers are checked above).


@pytest.mark.parametrize("rid", TORCH_RUN)
def test_the_wrapped_torch_row_counts_its_kind(rid):
    torch, dev, env = _torch_env()
    example, names = env[rid]
    rules = table()
    rule = next(r for r in rules.rules if r.id == rid)
    src = "import torch\ny = " + example + "\n"
    site = _site_of(src, rule, rules)
    new = wrap_source(src.encode(), "example.py", rules, "example.py").new.decode()
    xfer.reset()
    was = xfer.count(True)
    try:
        exec(compile(new, "example.py", "exec"), dict(names))
        rows = [r for r in xfer.snapshot().rows if r.site == site.site]
    finally:
        xfer.count(was)
        xfer.reset()
    assert len(rows) == 1 and rows[0].crossings == 1
    taken = set(rows[0].by_direction)
    if site.kind == "move":  # decided at run time: one way or the other
        assert taken <= {"up", "down"} and taken
    else:
        assert taken == {site.kind}


IMPLICIT_CASES = [
    ("float", "total = float(loss)\n", "total = _xfer.float(loss, site=...)\n"),
    ("int", "n = int(loss)\n", "n = _xfer.int(loss, site=...)\n"),
    ("complex", "z = complex(loss)\n", "z = _xfer.complex(loss, site=...)\n"),
    ("bool", "if loss > 100:\n        pass\n", "if _xfer.bool(loss > 100, site=...):\n        pass\n"),
    ("index", "r = range(loss)\n", "r = range(_xfer.index(loss, site=...))\n"),
    ("read", "print(loss)\n", "print(_xfer.read(loss, site=...))\n"),
    ("save", "torch.save(loss, 'f.pt')\n", "_xfer.save(torch.save, loss, 'f.pt', site=...)\n"),
]


@pytest.mark.parametrize("wrapper,bare,wrapped", IMPLICIT_CASES, ids=[c[0] for c in IMPLICIT_CASES])
def test_implicit_forms_are_the_grammars_written_read_back_and_restored(wrapper, bare, wrapped):
    """Each implicit wrapper's shape is a row of the grammar: wrap writes it, the
    finder reads it back as the same wrapped implicit site, unwrap restores the
    bytes, and the runtime records the grammar's kind for it."""
    assert wrapper in IMPLICIT and form("implicit", wrapper).style == "implicit"
    src = "import torch\ndef step(x, dev):\n    loss = (x.to(dev) * 2).sum()\n    " + bare
    res = wrap_source(src.encode(), "example.py")
    assert res.changed and not res.skipped, res.skipped
    new = res.new.decode()
    assert re.sub(r'site="[^"]*"', "site=...", new).endswith(wrapped), new
    sites = [s for s in find_in_source(new, "example.py").sites if s.implicit]
    assert len(sites) == 1 and sites[0].wrapped and sites[0].op == IMPLICIT[wrapper][0]
    assert unwrap_source(res.new, "example.py").new == src.encode()
    assert kind_of(wrapper) == IMPLICIT[wrapper][1] == sites[0].kind
