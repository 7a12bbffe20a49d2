"""Site names: readable, bounded, layout-free, and the same whether inner sites were wrapped first."""

from __future__ import annotations

import pytest

from xferaudit.static.finder import LABEL_LIMIT, find_in_source

HEAD = "import torch\nimport xferaudit.runtime as xfer\n"


def _names(body: str) -> list[str]:
    return [s.site.split(":", 2)[2] for s in find_in_source(HEAD + body, "t.py").sites]


@pytest.mark.parametrize("body, name", [
    ("x.cpu()\n", "x.cpu"),
    ("(a + b).cpu()\n", "(a + b).cpu"),
    ("(x  # note\n  ).cpu()\n", "x.cpu"),
    ("async def g(x):\n    return (await x).cpu()\n", "(await x).cpu"),
    ("(logits.argmax(-1) == y).float().mean().item()\n", "...float().mean().item"),
    ("model(batch['input_ids'].view(bsz * n, -1)).logits.softmax(dim=-1).cpu()\n",
     "model(...).logits.softmax(...).cpu"),
])
def test_label(body, name):
    assert _names(body) == [name]
    assert len(name) <= LABEL_LIMIT


def test_outer_site_keeps_its_name_after_its_inner_site_is_wrapped():
    plain = _names("y = x.to('cuda:1').cpu()\n")
    staged = find_in_source(HEAD + "y = xfer.to(x, 'cuda:1', site='t.py:<module>:x.to').cpu()\n", "t.py").sites
    assert plain == ["x.to", "x.to('cuda:1').cpu"]
    assert [s.site.split(":", 2)[2] for s in staged if not s.wrapped] == ["x.to('cuda:1').cpu"]


def test_repeats_get_suffixes():
    assert _names("x.cpu()\nx.cpu()\nx.cpu()\n") == ["x.cpu", "x.cpu#2", "x.cpu#3"]
