"""The finder's decisions and positions, case by case."""

from __future__ import annotations

import textwrap

import pytest

from xferaudit.static.front.finder import find_in_source, name_sites, split_lines


def sites(src: str, path: str = "train.py"):
    res = find_in_source(textwrap.dedent(src), path)
    assert res.error is None, res.error
    return res.sites


def kinds(src: str):
    return [(s.line, s.column, s.kind) for s in sites(src)]


# --- positions --------------------------------------------------------------


def test_position_is_the_called_name_one_based():
    (s,) = sites("y = loss.item()\n")
    assert (s.line, s.column, s.end_line, s.end_column) == (1, 10, 1, 16)
    assert s.call == "loss.item()"
    assert s.to_json()["column"] == 10


def test_multiline_chain_reports_the_line_of_the_name():
    src = """\
    import torch
    out = (model(x)
           .softmax(-1)
           .cpu())
    t = torch.tensor(
        data, device=dev)
    """
    assert kinds(src) == [(4, 9, "down"), (5, 11, "up")]


def test_columns_are_characters_not_bytes():
    src = 'name = "naïve 日本語 🙂"; y = x.cpu()\n'
    (s,) = sites(src)
    assert src[s.column - 1:].startswith("cpu")
    assert s.byte_col == src.encode()[: src.encode().index(b"cpu")].__len__()


def test_call_inside_fstring_is_a_site_at_its_place():
    src = 'print(f"loss {loss.item():.3f} on {x.cpu()}")\n'
    assert [(s.column, s.kind) for s in sites(src)] == [(20, "down"), (38, "down")]


def test_crlf_and_lone_cr_line_endings():
    src = "import torch\r\na = 1\r\nb = x.cuda()\rc = y.cpu()\r\n"
    assert [(s.line, s.column) for s in find_in_source(src, "w.py").sites] == [(3, 7), (4, 7)]


def test_form_feed_and_line_separator_do_not_shift_lines():
    src = "import torch\n\x0c\ns = 'a\u2028b'\ny = x.cpu()\n"
    (s,) = find_in_source(src, "f.py").sites
    assert (s.line, s.column) == (4, 7)
    assert len(split_lines(src)) == 4


def test_strings_comments_and_docstrings_are_not_sites():
    src = '''\
    """Call x.cpu() and loss.item() here."""
    import torch
    # y = x.cuda()
    s = "torch.tensor(d, device='cuda')"
    def f():
        """z.to(device)"""
        return 'w.tolist()'
    '''
    assert sites(src) == []


# --- names through imports ------------------------------------------------------


def test_function_forms_resolve_through_imports():
    src = """\
    import torch as T
    from torch import tensor as mk, load
    from torch import compile
    a = T.tensor(d, device=dev)
    b = mk(d, device=dev)
    c = load(f, map_location="cuda:0")
    m = compile(model)
    """
    assert [(s.line, s.rule_id) for s in sites(src)] == [
        (4, "torch.tensor"), (5, "torch.tensor"), (6, "torch.load"), (7, "torch.compile"),
    ]


def test_shadowing_definitions_are_not_sites():
    src = """\
    from torch import tensor
    def tensor(data, device=None):
        return data
    a = tensor([1], device="cuda")

    def g(torch):
        return torch.tensor([1], device="cuda")

    def h(load):
        return load(f, map_location="cuda")

    import re
    pat = re.compile("x")
    """
    assert sites(src) == []


def test_local_binding_shadows_in_the_whole_function():
    src = """\
    from torch import tensor
    def f(d):
        x = tensor(d, device="cuda")
        tensor = list
        return x
    def g(d):
        return tensor(d, device="cuda")
    """
    # In f, `tensor` is local (bound later in the function); in g it is torch's.
    assert [s.function for s in sites(src)] == ["g"]


def test_comprehension_lambda_and_walrus_scopes():
    src = """\
    from torch import tensor
    a = [tensor(x, device=d) for tensor in makers]
    b = lambda tensor: tensor(1, device=d)
    if (tensor := pick()):
        c = tensor(2, device=d)
    """
    assert sites(src) == []


def test_star_import_and_bare_torch():
    src = """\
    from torch import *
    a = tensor([1], device=dev)
    """
    assert [s.rule_id for s in sites(src)] == ["torch.tensor"]
    # `torch` with no import in sight (a notebook cell) is still torch.
    assert [s.rule_id for s in sites("t = torch.load(f, map_location=dev)\n")] == ["torch.load"]


# --- kinds -------------------------------------------------------------------------


@pytest.mark.parametrize("call,kind", [
    ('x.to("cpu")', "down"),
    ('x.to(device="cpu", dtype=torch.float16)', "down"),
    ('x.to(torch.device("cpu"))', "down"),
    ('x.to("cuda:1", non_blocking=True)', "up"),
    ('x.to(f"cuda:{rank}")', "up"),
    ("x.to(torch.device('cuda', rank))", "up"),
    ("x.to(torch.device(0))", "up"),
    ("x.to(3)", "up"),
    ('x.to("cuda:%d" % rank)', "up"),
    ('x.to("cuda:{}".format(rank))', "up"),
    ('x.to("cuda:" + str(rank))', "up"),
    ('x.to(torch.device("cuda:%d" % rank))', "up"),
    ('x.to(torch.device("cuda" if ok else "cuda:1"))', "up"),
    ('x.to(torch.device("cuda" if ok else "cpu"))', "move"),
    ('x.to("{}".format(dev))', "move"),
    ('x.to("kg")', None),
    ("x.to(device)", "move"),
    ("x.to(args.gpu)", "move"),
    ("x.to(batch[0])", "move"),
    ("x.to(get_device())", "move"),
    ("x.to(y.dtype, device=y.device)", "move"),
    ('x.to("cuda" if ok else "cpu")', "move"),
    ("x.to(*args, **kwargs)", "move"),
    ("x.to(**kw)", "move"),
    ("x.to(torch.float16)", None),
    ("x.to(torch.bfloat16)", None),
    ("x.to(dtype=torch.float32)", None),
    ("x.to(memory_format=torch.channels_last)", None),
    ("x.to(self.dtype)", None),
    ("x.to(model_dtype)", None),
    ("x.to(get_dtype())", None),
    ("x.to(np.float32)", None),
    ("x.to(non_blocking=True)", None),
    ("x.to()", None),
    ("x.numpy()", None),
    ("x.numpy(force=True)", "down"),
    ("x.pin_memory()", None),
    ("x.new_zeros(3)", None),
    ("d.items()", None),
    ("y = args.cpu", None),
    ("torch.zeros(3, device=dev)", None),
    ("torch.from_numpy(a)", None),
    ("torch.LongTensor([1])", None),
    ("torch.tensor(d, device=dev)", "up"),
    ("torch.tensor(d, device='cpu')", None),
    ("torch.as_tensor(d, torch.float32, 'cuda')", "up"),
    ("torch.load(f, map_location=lambda s, loc: s)", "up"),
    ("torch.load(f, dev)", "up"),
    ("torch.load(f, 'cpu')", None),
    ("torch.cuda.make_graphed_callables(m, (x,))", "graph"),
    ("g.replay()", "graph"),
    ("dst.copy_(src)", "move"),
    ("torch.jit.script(m)", None),
    ("torch.cuda.synchronize()", None),
    ("dist.all_reduce(t)", None),
    ("accelerator.prepare(model)", None),
])
def test_kind_of_each_form(call, kind):
    found = sites("import torch\nimport numpy as np\n" + call + "\n")
    assert [s.kind for s in found] == ([kind] if kind else [])


def test_graph_decorators_bare_and_called():
    src = """\
    import torch
    @torch.compile
    def f(x): return x
    @torch.compile(mode="max-autotune")
    def g(x): return x
    class M:
        @torch.compile()
        def h(self): pass
    """
    found = sites(src)
    assert [(s.line, s.column, s.decorator, s.function) for s in found] == [
        (2, 8, True, "<module>"), (4, 8, True, "<module>"), (7, 12, True, "M"),
    ]


# --- wrapped sites and names ---------------------------------------------------------


def test_wrapped_sites_are_found_with_their_names():
    src = """\
    import torch
    import xferaudit.runtime as xfer
    def step(x, loss):
        a = xfer.cpu(x, site="train.py:step:x.cpu")
        b = xfer.to(x, dev, non_blocking=True, site="train.py:step:x.to")
        c = xfer.graph(torch.compile(model), site="train.py:step:torch.compile")
        d = xfer.method(x, "cpu", site="train.py:step:x.cpu#2")
        e = xfer.call(torch.load, f, map_location=dev, site="train.py:step:torch.load")
        f = loss.item()
    @xfer.graph(torch.compile, site="train.py:<module>:torch.compile", decorator=True)
    def g(): pass
    """
    found = sites(src)
    wrapped = [(s.rule_id, s.kind, s.site) for s in found if s.wrapped]
    assert wrapped == [
        ("torch.cpu", "down", "train.py:step:x.cpu"),
        ("torch.to", "move", "train.py:step:x.to"),
        ("torch.compile", "graph", "train.py:step:torch.compile"),
        ("torch.cpu", "down", "train.py:step:x.cpu#2"),
        ("torch.load", "up", "train.py:step:torch.load"),
        ("torch.compile", "graph", "train.py:<module>:torch.compile"),
    ]
    (unwrapped,) = [s for s in found if not s.wrapped]
    assert unwrapped.site == "train.py:step:loss.item"


def test_site_names_repeat_with_suffixes_and_avoid_taken_names():
    src = """\
    import xferaudit.runtime as xfer
    class Trainer:
        def step(self, loss, x):
            a = xfer.item(loss, site="train.py:Trainer.step:loss.item")
            b = loss.item()
            c = loss.item()
            d = x.to(dev)
    """
    names = [s.site for s in sites(src)]
    assert names == [
        "train.py:Trainer.step:loss.item",
        "train.py:Trainer.step:loss.item#2",
        "train.py:Trainer.step:loss.item#3",
        "train.py:Trainer.step:x.to",
    ]


def test_name_sites_uses_the_relative_path():
    res = find_in_source("y = x.cpu()\n", "/abs/proj/pkg/m.py", relpath="pkg/m.py")
    assert res.sites[0].site == "pkg/m.py:<module>:x.cpu"
    name_sites(res.sites, "other.py")
    assert res.sites[0].site == "other.py:<module>:x.cpu"


# --- suppressions and errors -------------------------------------------------------------


def test_suppression_comments():
    src = textwrap.dedent("""\
    a = x.cpu()  # noqa: XFA202
    b = x.cpu()  # noqa
    c = x.cpu()  # noqa: XFA201
    d = x.cpu()  # xferaudit: ignore[XFA202]
    e = x.cpu()  # xferaudit: ignore
    f = x.cpu(); s = "# noqa: XFA202"
    """)
    res = find_in_source(src, "s.py")
    assert [s.suppressed for s in res.sites] == [True, True, False, True, True, False]
    assert dict(res.suppressions)[3] == ("XFA201",)
    assert 6 not in dict(res.suppressions)  # inside a string: no comment
    assert res.bare_own == [5]


def test_syntax_error_is_a_result_not_an_exception():
    res = find_in_source("def f(:\n    x.cpu()\n", "bad.py")
    assert res.sites == [] and res.error.startswith("SyntaxError")
    assert res.error_line == 1


def test_deeply_nested_expression_is_analysed_or_reported_never_a_crash():
    src = "import torch\ny = (" + " + ".join(["a.cpu()"] * 1500) + ")\n"
    res = find_in_source(src, "deep.py")
    assert res.error is None and len(res.sites) == 1500
    src = "import torch\ny = (" + " + ".join(["a.cpu()"] * 20000) + ")\n"
    res = find_in_source(src, "deeper.py")
    assert res.sites == [] and res.error.startswith("RecursionError")


def test_the_device_vocabulary_is_the_torch_packs_data():
    from xferaudit.rules import Devices, RuleTable, load_pack, no_data_devices, table

    pack = load_pack("torch")
    assert pack.devices.no_data == {"meta"} and no_data_devices() == {"meta"}
    assert "fakegpu" in pack.devices.accelerators and "torch.device" in pack.devices.constructors
    assert pack.devices.is_not_device("torch.float16") and "torch" in pack.assumed_imports
    src = "import torch\na = x.to(torch.device('meta'))\nb = x.to('fakegpu')\nc = x.to(torch.float16)\n"
    assert [(s.line, s.kind) for s in find_in_source(src, "m.py", table()).sites] == [(3, "up")]
    # The same rows with another vocabulary decide otherwise: nothing is hard-coded.
    bare = RuleTable.of(pack.rules, devices=Devices(host=frozenset({"cpu"}), constructors=frozenset({"torch.device"})))
    assert [(s.line, s.kind) for s in find_in_source(src, "m.py", bare).sites] == [(2, "move")]


def test_an_analysis_plugs_in_with_a_couple_of_lines(monkeypatch):
    import ast

    from xferaudit.static.front import finder

    seen = []

    def numpy_calls(ctx):
        for node in ast.walk(ctx.tree):
            if isinstance(node, ast.FunctionDef):
                with ctx.resolver.entered(node):
                    seen.extend(ctx.resolver.qualname(c.func) for c in ast.walk(node) if isinstance(c, ast.Call))
        return []

    monkeypatch.setattr(finder, "ANALYSES", [numpy_calls])
    src = "import numpy as np\nimport torch as T\ndef f():\n    np.linspace(0, 1)\n    T.tensor(1)\n"
    finder.find_in_source(src, "m.py")
    assert seen == ["numpy.linspace", "torch.tensor"]
