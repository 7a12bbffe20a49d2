"""cuTile kernels (``import cuda.tile as ct``; liger-kernel's ``ops/cutile``)
are compiled like Triton's: no site inside ``@ct.kernel`` or ``@ct.function``,
and ``wrap`` leaves them byte for byte, while the host function that launches
one keeps its sites (issue 42, found on liger-kernel by bench/kernels_real.py)."""

from __future__ import annotations

import ast
import textwrap

import pytest

from xferaudit.static.front.finder import find_in_source

KERNEL_BODY = ("    t = ct.load(x, index=(ct.bid(0),), shape=(16,))\n    y = t.to(dev)\n    z = out.cpu()\n"
               "    return y.item()\n")


def sites(src: str) -> list:
    return [s for s in find_in_source(textwrap.dedent(src), "k.py").sites if not s.wrapped]


@pytest.mark.parametrize("header,deco", [
    ("import cuda.tile as ct", "@ct.kernel"),
    ("import cuda.tile as ct", "@ct.kernel(occupancy=1)"),
    ("from cuda import tile as ct", "@ct.kernel"),
    ("import cuda.tile as ct", "@ct.function"),
    ("import cuda.tile as ct\nfrom cuda.tile import kernel as K", "@K"),
])
def test_a_cutile_kernel_holds_no_site(header, deco):
    src = f"{header}\nimport torch\n\n{deco}\ndef k(x, out, dev):\n{KERNEL_BODY}"
    assert sites(src) == []
    # without the decorator the same body is eager code: its sites are found
    assert len(sites(f"{header}\nimport torch\n\ndef k(x, out, dev):\n{KERNEL_BODY}")) == 3


def test_a_name_ct_that_is_not_cuda_tile_makes_no_kernel():
    src = f"import torch\nimport mylib as ct\n\n@ct.kernel\ndef k(x, out, dev):\n{KERNEL_BODY}"
    assert len(sites(src)) == 3


def test_wrap_leaves_a_cutile_kernel_and_wraps_its_host_launcher():
    from xferaudit.static.codemod import wrap_source

    src = textwrap.dedent('''\
        import cuda.tile as ct
        import torch


        @ct.kernel(occupancy=1)
        def _scale_kernel(x, out, dev, n: ct.Constant[int]):
            t = ct.load(x, index=(ct.bid(0),), shape=(n,))
            t = t.to(dev)
            ct.store(out, index=(ct.bid(0),), tile=t)
            return out.cpu()


        def scale(x, n):
            y = x.to("cuda")
            out = torch.empty_like(y)
            ct.launch(torch.cuda.current_stream(), (1, 1, 1), _scale_kernel, (y, out, y.dtype, n))
            return out.cpu()
        ''')
    res = wrap_source(src.encode(), "k.py", None, "k.py")
    assert res.changed and sum(res.wrapped.values()) == 2
    new = res.new.decode()

    def segment(text: str, name: str) -> str:
        tree = ast.parse(text)
        node = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name)
        lines = text.splitlines(keepends=True)
        first = min([node.lineno] + [d.lineno for d in node.decorator_list])
        return "".join(lines[first - 1:node.end_lineno])

    assert segment(new, "_scale_kernel") == segment(src, "_scale_kernel")
    assert "_xfer" not in segment(new, "_scale_kernel")
    assert "_xfer" in segment(new, "scale")
