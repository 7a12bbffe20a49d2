"""Site names: readable, bounded, layout-free, and the same whether inner sites were wrapped first."""

from __future__ import annotations

import pytest

from xferaudit.static.front.finder import LABEL_LIMIT, find_in_source
from xferaudit.static.front.naming import compact_label

HEAD = "import torch\nimport xferaudit.runtime as xfer\n"


def _names(body: str) -> list[str]:
    return [s.site.split(":", 2)[2] for s in find_in_source(HEAD + body, "t.py").sites]


@pytest.mark.parametrize("body, name", [
    ("x.cpu()\n", "x.cpu"),
    ("(a + b).cpu()\n", "(a+b).cpu"),
    ("(x  # note\n  ).cpu()\n", "x.cpu"),
    ("async def g(x):\n    return (await x).cpu()\n", "(await_x).cpu"),
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


IMPLICIT = (
    "def f(n):\n"
    "    d = torch.zeros(3, device='cuda')\n"
    "    a = bool(d.sum() == n)\n"
    "    if not (d.isnan()).any():\n"
    "        b = float(d.sum() if n else d.mean())\n"
    "    return (d - n).cpu()\n"
)


def test_site_names_are_one_word():
    # no whitespace: the site="..." argument is one word, which E501 lets run
    # past the line length; a gap at a keyword is written `_`
    assert _names(IMPLICIT) == ["bool(d.sum()==n)", "truth(d.isnan().any())",
                                "float(d.sum()_if_n_else_d.mean())", "(d-n).cpu"]


def test_implicit_names_agree_in_check_wrap_and_the_wrapped_file():
    from xferaudit.static.codemod import wrap_source
    from xferaudit.static.codemod.style import CodeStyle

    src = HEAD.replace("import xferaudit.runtime as xfer\n", "") + IMPLICIT
    found = [s.site for s in find_in_source(src, "t.py").sites]
    out = wrap_source(src.encode(), "t.py", None, "t.py", style=CodeStyle(line_length=200)).new.decode()
    after = find_in_source(out, "t.py").sites
    assert all(s.wrapped for s in after) and [s.site for s in after] == found
    assert 'site=":f:bool(d.sum()==n)"' in out


@pytest.mark.parametrize("label, name", [
    ("bool(decision == self.world_size)", "bool(decision==self.world_size)"),
    ("truth(x is not None)", "truth(x_is_not_None)"),
    ("float(a if c else b)", "float(a_if_c_else_b)"),
    ("float(d.sum() if n else d.mean())", "float(d.sum()_if_n_else_d.mean())"),
    ("print(f'loss {x}')", "print(f'loss{x}')"),
    ("truth(x)", "truth(x)"),
])
def test_compact_label(label, name):
    assert compact_label(label) == name
