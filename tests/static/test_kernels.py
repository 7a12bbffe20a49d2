"""GPU kernels are not PyTorch: no site inside a function that Triton, the CuTe
DSL, numba or another kernel language compiles, and ``wrap`` leaves it byte for
byte (issue 42). What makes a kernel is the packs' ``[kernels]`` tables, names
resolved through the file's imports."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import pytest

from xferaudit.rules import RuleError, load_pack, table
from xferaudit.static.front.finder import find_in_source

FIXTURES = Path(__file__).parent / "codemod_fixtures"


def sites(src: str) -> list:
    return [s for s in find_in_source(textwrap.dedent(src), "k.py").sites if not s.wrapped]


def lines(src: str) -> list:
    return sorted({s.line for s in sites(src)})


def _defs(text: str) -> dict:
    tree = ast.parse(text)
    return {n.name: ast.get_source_segment(text, n) for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}


def test_triton_file_reports_only_the_host_functions_sites():
    text = (FIXTURES / "triton_ops.in.py").read_text()
    found = find_in_source(text, "triton_ops.py").sites
    tree = ast.parse(text)
    kernels = [n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("_")]
    assert len(kernels) == 4
    for s in found:
        assert s.function in ("scale", "rowsum", "cast", "softplus"), (s.line, s.call)
    # every host function's move and read is still a site
    assert sorted({s.function for s in found}) == ["cast", "rowsum", "scale", "softplus"]
    assert len(found) == 9


def test_wrap_leaves_every_kernel_byte_for_byte():
    from xferaudit.static.codemod import wrap_source

    data = (FIXTURES / "triton_ops.in.py").read_bytes()
    res = wrap_source(data, "triton_ops.py", None, "triton_ops.py")
    assert res.changed and sum(res.wrapped.values()) == 9
    before, after = _defs(data.decode()), _defs(res.new.decode())
    for name in ("_scale_kernel", "_rowsum_kernel", "_cast_kernel", "_softplus_impl"):
        assert after[name] == before[name], name
        assert "_xfer" not in after[name]
    # the decorators (host code) and the kernel made by a call stay too
    assert "_softplus_kernel = triton.jit(_softplus_impl)" in res.new.decode()


@pytest.mark.parametrize("header,deco", [
    ("import triton", "@triton.jit"),
    ("import triton as tr", "@tr.jit"),
    ("from triton import jit", "@jit"),
    ("from triton import jit as J", "@J(do_not_specialize=['n'])"),
    ("import triton", "@triton.autotune(configs=[], key=['n'])\n@triton.jit"),
    ("import triton", "@triton.heuristics({'E': lambda a: True})\n@triton.jit"),
    ("from numba import cuda", "@cuda.jit"),
    ("from numba import cuda", "@cuda.jit('void(float32[:])')"),
    ("import numba", "@numba.cuda.jit(device=True)"),
    ("import numba.cuda as nc", "@nc.jit"),
    ("import cutlass.cute as cute", "@cute.kernel"),
    ("import cutlass.cute as cute", "@cute.jit"),
    ("from cutlass import cute", "@cute.jit"),
    ("import helion", "@helion.kernel()"),
    ("import warp as wp", "@wp.kernel"),
    ("from cupyx import jit", "@jit.rawkernel()"),
])
def test_a_kernel_decorator_by_what_it_resolves_to(header, deco):
    src = f"{header}\nimport torch\n\n{deco}\ndef k(x, out, dev):\n    y = x.to(dev)\n    z = out.cpu()\n    return y.item()\n"
    assert lines(src) == []
    # the same function without the decorator is eager code: three sites
    assert len(sites(f"{header}\nimport torch\n\ndef k(x, out, dev):\n    y = x.to(dev)\n    z = out.cpu()\n"
                     f"    return y.item()\n")) == 3


def test_a_name_that_only_looks_like_a_kernel_decorator_is_not_one():
    src = """
    import torch

    def jit(fn):
        return fn

    class triton:
        jit = staticmethod(jit)

    @jit
    def a(x, dev):
        return x.to(dev)

    @triton.jit
    def b(x):
        return x.cpu()
    """
    assert lines(src) == [12, 16]


def test_kernel_language_calls_make_a_kernel_whatever_decorates_it():
    src = """
    import torch
    import triton.language as tl
    from triton.language import load
    from mylib import libentry

    @libentry()
    def a(x_ptr, n):
        x = tl.load(x_ptr)
        return x.to(tl.float32)

    def b(x_ptr):
        return load(x_ptr).to(x_ptr.dtype.element_ty)

    def host(x, dev):
        dtype = tl.float32  # (a name of the language, not a call: host code may name its dtypes)
        return x.to(dev)
    """
    assert lines(src) == [17]


def test_a_kernel_made_by_a_call_and_one_nested_in_a_factory():
    src = """
    import torch
    import triton

    def _impl(x, out, dev):
        out.store(x.to(dev))

    kernel = triton.autotune(configs=[], key=[])(triton.jit(_impl))

    def factory(dev):
        import triton as T

        @T.jit
        def inner(x):
            return x.cpu()

        w = torch.ones(2).to(dev)
        return inner, w
    """
    assert lines(src) == [17]


def test_the_decorators_and_the_launch_are_host_code():
    src = """
    import torch
    import triton

    @triton.heuristics({"EVEN": lambda args: args["n"].item() % 2 == 0})
    @triton.jit
    def k(x_ptr, n):
        return x_ptr.to(n)

    def launch(x, out, dev, n):
        k[(n,)](x.to(dev), out, n)
        k[(n,)](x, out, n)
    """
    found = sites(src)
    assert [(s.line, s.call) for s in found] == [(5, 'args["n"].item()'), (11, "x.to(dev)")]


def test_value_layer_sites_inside_a_kernel_are_dropped_too():
    src = """
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def k(x_ptr, n: torch.Tensor):
        if n:
            v = float(n)
        print(n)

    def host(n: torch.Tensor):
        if n:
            return float(n)
    """
    assert lines(src) == [13, 14]


def test_a_wrapped_site_in_a_kernel_is_read_back_so_unwrap_restores_it():
    """A kernel that an older ``wrap`` rewrote: ``unwrap`` gives it back."""
    from xferaudit.static.codemod import unwrap_source

    src = (b"import triton\nimport triton.language as tl\nimport xferaudit.runtime as _xfer\n\n\n@triton.jit\n"
           b"def k(a_ptr, out_ptr):\n    acc = tl.load(a_ptr)\n"
           b"    tl.store(out_ptr, _xfer.to(acc, out_ptr.dtype.element_ty, site=':k:acc.to'))\n")
    back = unwrap_source(src, "k.py")
    assert back.changed and b"acc.to(out_ptr.dtype.element_ty)" in back.new


def test_the_vocabulary_is_data():
    kernels = table().kernels
    assert {"triton.jit", "triton.autotune", "cutlass.cute.kernel", "numba.cuda.jit"} <= kernels.decorators
    assert "cupyx.jit.rawkernel" in kernels.decorators  # the cupy pack's row, on whether or not cupy is
    assert "triton.language" in load_pack("torch").kernels.modules


def test_a_malformed_kernels_table_is_refused(tmp_path, monkeypatch):
    import xferaudit.rules as rules

    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "rules.toml").write_text('pack = "bad"\n[kernels]\ndecorators = "triton.jit"\n')
    monkeypatch.setattr(rules, "PACK_DIR", tmp_path)
    rules.load_pack.cache_clear()
    try:
        with pytest.raises(RuleError, match=r"\[kernels\]: decorators must be a list"):
            rules.load_pack("bad")
    finally:
        rules.load_pack.cache_clear()
