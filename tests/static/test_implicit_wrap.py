"""`wrap` / `unwrap` of implicit sites, and what the guard sees after `wrap`."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from xferaudit.rules import table
from xferaudit.static.codemod import unwrap_source, wrap_source
from xferaudit.static.codemod.style import CodeStyle
from xferaudit.static.front.finder import find_in_source

WIDE = CodeStyle(line_length=10_000)  # (the forms compared here are one-line)
CORPUS = Path(__file__).resolve().parent / "values_corpus"
FILES = sorted(CORPUS.glob("*.py"))
NO_FORM = {"XFA451"}  # (a hazard; counts, uploads and downloads in indexing get their statement named)
NAMED = {"XFA405", "XFA406", "XFA407"}
#: both readings of the rows in force (gpu-first finds more in the same files)
TABLES = {m: dataclasses.replace(table(), implicit=m) for m in ("proven", "gpu-first")}


@pytest.mark.parametrize("mode", TABLES)
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_wrap_then_unwrap_is_byte_for_byte_and_wrap_is_idempotent(path: Path, mode: str):
    rules = TABLES[mode]
    src = path.read_bytes()
    res = wrap_source(src, path.name, rules)
    new = res.new if res.new is not None else src
    assert unwrap_source(new, path.name, rules).new in (src, None if new == src else src)
    again = wrap_source(new, path.name, rules)
    assert again.new is None
    # what is left unwrapped is what has no wrapped form, each said why
    after = find_in_source(new.decode(), path.name, rules).sites
    left = [s for s in after if s.implicit and not s.wrapped]
    assert all(s.rule in NO_FORM or s.no_wrap for s in left), [(s.line, s.rule) for s in left if not s.no_wrap]
    assert {(k.line, k.code) for k in res.skipped if k.code.startswith("XFA4")} >= {
        (s.line, s.rule) for s in find_in_source(src.decode(), path.name, rules).sites if s.rule in NO_FORM}
    # a count, upload or download in indexing: its statement named by a site comment, read back as wrapped
    before = [s for s in find_in_source(src.decode(), path.name, rules).sites if s.rule in NAMED]
    named = [s for s in after if s.op == "statement"]
    assert len(named) == len({s.line for s in before}) and {n.site for n in named} <= {s.site for s in before}
    assert all(n.wrapped and "  # xferaudit: site=" in new.decode().splitlines()[n.end_line - 1] for n in named)


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
    res = wrap_source(src, "train.py", style=WIDE)
    out = res.new.decode()
    for want in (
        'if _xfer.bool(loss > 100, site=":step:truth(loss>100)") and not _xfer.bool(loss.isnan(), site=',
        "print(_xfer.read(loss, site=", "f'{_xfer.read(loss, site=\":step:format(loss)#2\"):.3f}'",
        'a, b = _xfer.float(loss, site=":step:float(loss)"), bool(_xfer.bool(loss, site=',
        "c = list(seq)[_xfer.index(loss.long(), site=", "d = _xfer.reads(math.isnan, loss, site=",
        "e = f'{loss=}'", '_xfer.save(torch.save, loss, \'l.pt\', site=":step:torch.save(loss)")',
    ):
        assert want in out, want
    assert [k.reason for k in res.skipped if k.line == 10][0].startswith("a self-documenting f-string field")
    assert unwrap_source(res.new, "train.py").new == src


# What the guard sees after wrap, on the simulated device and on CUDA: tests/packs/torch/test_implicit_step.py


@pytest.mark.parametrize("mode", TABLES)
@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_checks_suggestion_is_what_wrap_writes_for_implicit_sites(path: Path, mode: str):
    """One grammar: for every implicit site wrap rewrites, check's suggestion
    (site=... aside) is the text wrap wrote on that line."""
    import re

    from xferaudit.static.findings.diagnostics import implicit_suggestion

    rules = TABLES[mode]
    data = path.read_bytes()
    res = wrap_source(data, path.name, rules, style=WIDE)  # one-line forms to compare
    skipped = {(k.line, k.column) for k in res.skipped}
    new_lines = re.sub(r"site=(\"[^\"]*\"|'[^']*')", "site=...", (res.new or data).decode()).splitlines()
    checked = 0
    for s in find_in_source(data.decode(), path.name, rules).sites:
        if not s.implicit or (s.line, s.column) in skipped or "\n" in s.call or len(s.call) > 60:
            continue
        said = implicit_suggestion(s)
        if said is None:
            continue
        around = "\n".join(new_lines[s.line - 1 : s.end_line + 1])
        assert said in around, (s.line, s.call, said, around)
        checked += 1
    # a hazard has no wrapped form; nothing in gpu_first.py is proven
    assert checked or path.name == "hazard.py" or (path.name, mode) == ("gpu_first.py", "proven")
