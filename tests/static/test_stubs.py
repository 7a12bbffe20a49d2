"""A stub (``.pyi``) runs no code: it holds no site, whatever calls its
defaults or bodies spell, and a stub that does not parse is still reported."""

from __future__ import annotations

import textwrap
from pathlib import Path

from xferaudit.config import load_config
from xferaudit.static.front.finder import find_in_source
from xferaudit.static.project.scan import scan

# the same text as a module holds sites: a move, a read, an implicit read
TEXT = textwrap.dedent("""
    import torch

    DEVICE = torch.device("cuda")
    ZERO = torch.zeros(3).cuda()

    def step(x: torch.Tensor = torch.ones(2).to("cuda")) -> float:
        if x.sum() > 0:
            return x.item()
        return float(x)
""")


def test_the_same_text_as_a_module_has_sites():
    assert len(find_in_source(TEXT, "m.py").sites) >= 3


def test_a_stub_holds_no_site():
    res = find_in_source(TEXT, "m.pyi")
    assert res.sites == [] and res.error is None


def test_a_stub_that_does_not_parse_is_reported():
    res = find_in_source("def f(:\n    ...\n", "bad.pyi")
    assert res.sites == []
    assert res.error is not None and res.error.startswith("SyntaxError") and res.error_line == 1


def test_check_of_a_folder_reports_the_module_not_its_stub(tmp_path: Path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n")
    (tmp_path / "m.py").write_text(TEXT)
    (tmp_path / "m.pyi").write_text(TEXT)
    (tmp_path / "broken.pyi").write_text("def f(:\n")
    monkeypatch.chdir(tmp_path)
    out = scan(["."], load_config(tmp_path), use_cache=False, jobs=1)
    by_name = {Path(r.path).name: r for r in out.results}
    assert len(by_name["m.py"].sites) >= 3
    assert by_name["m.pyi"].sites == [] and by_name["m.pyi"].error is None
    assert by_name["broken.pyi"].error is not None


def test_wrap_leaves_a_stub_as_it_is_and_still_refuses_one_that_does_not_parse():
    import pytest

    from xferaudit.static.codemod import CodemodError, wrap_source

    assert wrap_source(TEXT.encode(), "m.py").changed  # the same text as a module is wrapped
    assert not wrap_source(TEXT.encode(), "m.pyi").changed
    with pytest.raises(CodemodError, match="cannot parse"):
        wrap_source(b"def f(:\n", "bad.pyi")


def test_a_stub_weighs_what_its_parse_costs_in_the_pool_shares():
    # (a stub is parsed, not analysed: weighed as bytes, torch's two 1.1 MB stubs took a
    # worker's whole share on 16 cores and it ended early while the others worked on)
    from xferaudit.static.project.onepass import Item, shares

    data = b"x" * 800
    stub = Item("s.pyi", "/p/s.pyi", "s.pyi", "s.pyi", data, True, False)
    module = Item("m.py", "/p/m.py", "m.py", "m.py", data, True, True)
    assert module.weight == 800 and stub.weight == 300
    items = [stub, Item("a.py", "/p/a.py", "a.py", "a.py", b"y" * 400, True, True),
             Item("b.py", "/p/b.py", "b.py", "b.py", b"z" * 400, True, True)]
    out = shares(items, [0, 1, 2], 2)
    assert sorted(sum(items[j].weight for j in share) for share in out) == [400, 700]
