"""The value layer and the implicit rules (XFA4xx), against a hand-labelled corpus.

`values_corpus/x.py` holds every implicit category beside its look-alikes on
host values and on values nothing in the file places; `x.txt` lists the
expected `line:CODE` findings of the "proven" reading (written by hand, from
the `# expect:` notes), and `x.gpu-first.txt`, where the gpu-first reading
differs, those of gpu-first (the `# expect:` and `# gpu-first:` notes).
Files are read with their path relative to the corpus, so `tests/` is a test
folder (read "proven" in both readings).
"""

from __future__ import annotations

import ast
import dataclasses
import json
from collections import Counter
from pathlib import Path

import pytest

from xferaudit.cli import main
from xferaudit.rules import table
from xferaudit.static.front.finder import analyse as analyse_file
from xferaudit.static.front.finder import decode_source, find_in_source
from xferaudit.static.values import implicit
from xferaudit.static.values import walk as V
from xferaudit.static.values.sites import gpu_first as reads_gpu_first

CORPUS = Path(__file__).resolve().parent / "values_corpus"
FILES = sorted(CORPUS.rglob("*.py"))
MODES = ("proven", "gpu-first")
RULES = {m: dataclasses.replace(table(), implicit=m) for m in MODES}


def _rel(path: Path) -> str:
    return path.relative_to(CORPUS).as_posix()


def _implicit(path: Path, mode: str = "proven") -> list[str]:
    res = find_in_source(decode_source(path.read_bytes()), path.name, RULES[mode], _rel(path))
    assert res.error is None, res.error
    return sorted(f"{s.line}:{s.rule}" for s in res.sites if s.implicit)


def _labels(path: Path, mode: str = "proven") -> list[str]:
    own = path.with_suffix(".gpu-first.txt")
    src = own if mode == "gpu-first" and own.is_file() else path.with_suffix(".txt")
    return sorted(ln.strip() for ln in src.read_text().splitlines() if ln.strip())


def test_corpus_covers_every_code():
    codes = {lab.split(":")[1] for p in FILES for lab in _labels(p)}
    assert codes == {"XFA401", "XFA402", "XFA403", "XFA404", "XFA405", "XFA406", "XFA407", "XFA408", "XFA451"}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path", FILES, ids=_rel)
def test_implicit_findings_match_labels_exactly(path: Path, mode: str):
    got, want = Counter(_implicit(path, mode)), Counter(_labels(path, mode))
    assert got == want, f"missing {sorted((want - got).elements())}, extra {sorted((got - want).elements())}"


@pytest.mark.parametrize("mode", MODES)
def test_corpus_precision_and_recall(mode: str):
    tp = fp = fn = 0
    for p in FILES:
        got, want = Counter(_implicit(p, mode)), Counter(_labels(p, mode))
        tp += sum((got & want).values())
        fp += sum((got - want).values())
        fn += sum((want - got).values())
    assert tp >= (70 if mode == "proven" else 85)
    assert tp / (tp + fp) == 1.0 and tp / (tp + fn) == 1.0


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("path", FILES, ids=_rel)
def test_the_value_layer_reads_the_corpus_without_error(path: Path, mode: str):
    """The finder keeps a file's explicit sites when the value layer fails on
    it (a scan must not stop); here a failure is an error."""
    src = path.read_text()
    _, ctx = analyse_file(src, path.name, RULES[mode], _rel(path))
    res = implicit.find(ctx.tree, src, ctx.finder_resolver.qualname, frozenset(), reads_gpu_first(ctx))
    assert {f.code for f in res.findings} <= set(implicit.CODES)


def test_test_folders_are_read_proven_even_under_gpu_first():
    path = CORPUS / "tests" / "cpu_model.py"
    src = path.read_text()
    excluded = find_in_source(src, path.name, RULES["gpu-first"], "tests/cpu_model.py")
    moved = find_in_source(src, path.name, RULES["gpu-first"], "lib/cpu_model.py")
    mine = find_in_source(src, path.name, dataclasses.replace(RULES["gpu-first"], gpu_first_exclude=("lib",)),
                          "lib/cpu_model.py")
    lines = lambda res: sorted(s.line for s in res.sites if s.implicit)  # noqa: E731
    assert lines(excluded) == lines(mine) == [14]
    assert lines(moved) == [7, 9, 14]


# --- the value layer -----------------------------------------------------------------


def _values_at(src: str, line: int) -> dict:
    """name -> kind in force before the statement on `line`."""
    tree = ast.parse(src)
    seen: dict = {}

    def hook(st, ev):
        if st.lineno == line:
            seen.update({k: v.kind for k, v in ev.env.items() if isinstance(k, str)})

    V.analyse(tree, lambda n: None, hook)
    return seen


def test_flow_sensitive_rebinding():
    src = (
        "def f(x, dev):\n"
        "    x = x.to(dev)\n"
        "    a = x.sum()\n"
        "    x = x.cpu()\n"
        "    b = x.sum()\n"
        "    c = b.item()\n"
        "    n = x.numpy()\n"
        "    pass\n"
    )
    assert _values_at(src, 3)["x"] == "devx"
    got = _values_at(src, 8)
    assert got["a"] == "dev" and got["x"] == "host" and got["b"] == "host"
    assert got["c"] == "py" and got["n"] == "numpy"


def test_branches_join():
    src = (
        "import torch\n"
        "def f(x, dev, flag):\n"
        "    if flag:\n"
        "        t = torch.ones(2, device=dev)\n"
        "    else:\n"
        "        t = torch.ones(2)\n"
        "    total = 0\n"
        "    for _ in range(3):\n"
        "        total += torch.ones(2, device=dev).sum()\n"
        "    pass\n"
    )
    got = _values_at(src, 10)
    assert got["t"] == "either"  # device on one path, host on the other: host evidence wins, not reported
    assert got["total"] == "dev"  # an accumulator of device values


def test_factories_and_pinning():
    src = (
        "import torch\n"
        "import numpy as np\n"
        "def f(dev):\n"
        "    a = torch.zeros(3)\n"
        "    b = torch.zeros(3, pin_memory=True)\n"
        "    c = torch.zeros(3, device='cpu')\n"
        "    d = torch.zeros(3, device=dev)\n"
        "    e = torch.zeros_like(d)\n"
        "    g = np.zeros(3)\n"
        "    h = torch.from_numpy(g)\n"
        "    pass\n"
    )
    tree = ast.parse(src)
    seen = {}

    def hook(st, ev):
        if st.lineno == 11:
            seen.update(ev.env)

    V.analyse(tree, lambda n: {"torch": "torch", "np": "numpy"}.get(getattr(n, "id", None)) if
              isinstance(n, ast.Name) else _dotted(n), hook)
    assert seen["a"].kind == "host" and seen["a"].pageable
    assert seen["b"].kind == "host" and not seen["b"].pageable
    assert seen["c"].kind == "host"
    assert seen["d"].kind == "dev" and seen["e"].kind == "dev"
    assert seen["g"].kind == "numpy"
    assert seen["h"].kind == "host" and seen["h"].pageable


def _dotted(n):
    parts = []
    while isinstance(n, ast.Attribute):
        parts.append(n.attr)
        n = n.value
    if isinstance(n, ast.Name) and n.id in ("torch", "np"):
        parts.append({"torch": "torch", "np": "numpy"}[n.id])
        return ".".join(reversed(parts))
    return None


def test_self_attributes_and_annotations():
    src = (
        "import torch\n"
        "from torch import nn, Tensor\n"
        "class M(nn.Module):\n"
        "    def __init__(self, dev):\n"
        "        self.net = nn.Linear(2, 2).to(dev)\n"
        "        self.buf = torch.zeros(2)\n"
        "    def forward(self, x: Tensor):\n"
        "        y = self.net(x)\n"
        "        z = self.buf + 1\n"
        "        w = x + 1\n"
        "        pass\n"
    )
    got = _values_at(src, 11)
    assert got["y"] == "devout" and got["z"] == "host" and got["w"] == "tensor"


def test_unknown_is_never_reported():
    src = (
        "import math\n"
        "def f(loss, t, seq):\n"
        "    if loss > 1:\n"
        "        print(loss, float(t), math.isnan(loss), seq[t], t[t > 0])\n"
        "device = None\n"
    )
    assert [s for s in find_in_source(src, "x.py").sites if s.implicit] == []


# --- explicit rules on what is no tensor ------------------------------------------------


def _explicit(src: str) -> list[str]:
    return [s.call for s in find_in_source(src, "x.py").sites if not s.implicit]


def test_receivers_that_are_no_tensors_are_no_sites():
    src = (
        "import numpy as np\n"
        "import torch\n"
        "from torch.nn import init\n"
        "from . import initialization as init2\n"
        "def f(w, v, x):\n"
        "    init.copy_(w, v)\n"
        "    init2.copy_(w, v)\n"
        "    a = np.linspace(0, 1, 5).tolist()\n"
        "    b = x.numpy().tolist()\n"
        "    c = x.cpu().tolist()\n"
        "    d = w.copy_(v)\n"
        "    return a, b, c, d\n"
    )
    # x.cpu().tolist(): the .cpu() crosses; .tolist() of what is then on the host crosses nothing
    assert _explicit(src) == ["x.cpu()", "w.copy_(v)"]


def test_a_local_name_shadowing_an_import_is_still_a_receiver():
    src = (
        "from torch.nn import init\n"
        "def f(w, v):\n"
        "    init = w\n"
        "    init.copy_(v)\n"
    )
    assert _explicit(src) == ["init.copy_(v)"]


def test_unbound_tensor_methods_are_the_site_of_their_first_argument():
    from xferaudit.static.codemod import unwrap_source, wrap_source

    src = (
        "import torch\n"
        "from torch import Tensor\n"
        "def f(x, dev):\n"
        "    return torch.Tensor.to(x, 'cuda'), Tensor.cpu(x)\n"
    ).encode()
    res = find_in_source(src.decode(), "x.py")
    assert [(s.call, s.kind) for s in res.sites] == [("torch.Tensor.to(x, 'cuda')", "up"), ("Tensor.cpu(x)", "down")]
    from xferaudit.static.codemod.style import CodeStyle

    new = wrap_source(src, "x.py", style=CodeStyle(line_length=10_000)).new
    assert b"xfer.call(torch.Tensor.to, x, 'cuda', site=" in new and b"xfer.call(Tensor.cpu, x, site=" in new
    assert all(s.wrapped for s in find_in_source(new.decode(), "x.py").sites)
    assert unwrap_source(new, "x.py").new == src


@pytest.mark.parametrize("code,sites", [
    ("x.new_tensor([1, 2])", 1), ("x.new([1, 2, 3])", 1), ("x.new(2, 3)", 0), ("x.new(n)", 0),
    ("x.type(torch.cuda.FloatTensor)", 1), ("x.type('torch.cuda.FloatTensor')", 1),
    ("x.type(torch.float32)", 0), ("re.compile('a')", 0),
    ("m = torch.nn.Linear(2, 2)\nm.compile()", 1), ("lowered.compile()", 0),
])
def test_new_torch_rows(code, sites):
    src = "import re\nimport torch\ndef f(x, n, lowered):\n" + "".join("    " + ln + "\n" for ln in code.split("\n"))
    assert len(_explicit(src)) == sites


# --- check, sites --format json, suppressions --------------------------------------------------


SRC = (
    "import torch\n"
    "def step(model, x, dev):\n"
    "    loss = model.to(dev)(x.to(dev)).sum()\n"
    "    if loss > 100:\n"
    "        pass\n"
    "    v = float(loss)  # noqa: XFA401\n"
    "    print(loss)\n"
)


def test_sites_json_lists_implicit_sites(tmp_path, capsys):
    p = tmp_path / "train.py"
    p.write_text(SRC)
    assert main(["sites", str(p), "--format", "json", "--no-cache"]) == 0
    recs = json.loads(capsys.readouterr().out)
    imp = [r for r in recs if r.get("implicit")]
    assert [(r["line"], r["kind"], r["rule"], r["op"]) for r in imp] == [
        (4, "down", "XFA402", "truth"), (6, "down", "XFA401", "conversion"), (7, "down", "XFA403", "format"),
    ]
    explicit = [r for r in recs if not r.get("implicit")]
    assert explicit and all("implicit" not in r and "op" not in r for r in explicit)
    assert set(explicit[0]) == {"path", "line", "column", "end_line", "end_column", "kind", "rule", "call",
                                "wrapped", "site", "suppressed", "rule_id", "function", "decorator"}


def test_check_reports_selects_and_suppresses_implicit_codes(tmp_path, capsys):
    p = tmp_path / "train.py"
    p.write_text(SRC)
    main(["check", str(p), "--no-cache"])
    out = capsys.readouterr().out
    assert "train.py:4:8: XFA402" in out and "train.py:7:11: XFA403" in out
    assert "XFA401" not in out  # suppressed by its noqa
    main(["check", str(p), "--no-cache", "--select", "XFA4", "--ignore", "XFA403"])
    out = capsys.readouterr().out
    assert "XFA402" in out and "XFA403" not in out and "XFA203" not in out


@pytest.mark.parametrize("code", ["XFA401", "XFA402", "XFA403", "XFA404", "XFA405", "XFA406", "XFA407",
                                  "XFA408", "XFA451"])
def test_every_implicit_code_is_documented(code, capsys):
    assert main(["rule", code]) == 0
    out = capsys.readouterr().out
    for head in ("## What it does", "## Why is this bad?", "## Example", "## Use instead:"):
        assert head in out


def test_the_value_layer_is_a_finder_analysis_reading_names_through_the_one_resolver():
    """Plugged in through the finder's seam, and its module-level imports are
    the resolver's answers (no import reader of its own)."""
    from xferaudit.static.front import finder
    from xferaudit.static.values import sites as value_sites

    assert value_sites.analyse in finder.ANALYSES
    tree = ast.parse("import torch as T\nfrom numpy import asarray\n")
    asked = []

    def qualname(node):
        asked.append(node.id)
        return "resolved." + node.id

    got = V.module_imports(tree, qualname)
    assert asked == ["T", "asarray"]
    assert {k: v.qual for k, v in got.items()} == {"T": "resolved.T", "asarray": "resolved.asarray"}


def test_a_wrapped_pageable_copy_is_still_a_hazard():
    """Wrapping counts the copy; it does not pin the host side: check keeps XFA451."""
    from xferaudit.static.codemod import wrap_source

    src = (
        "import torch\n"
        "def load(a, dev):\n"
        "    return torch.from_numpy(a).to(dev, non_blocking=True)\n"
    )
    before = [s.rule for s in find_in_source(src, "x.py").sites if s.rule == "XFA451"]
    res = wrap_source(src.encode(), "x.py")
    assert [k.code for k in res.skipped] == ["XFA451"]
    after = [s.rule for s in find_in_source(res.new.decode(), "x.py").sites
             if s.rule == "XFA451" and not s.wrapped]
    assert before == after == ["XFA451"]


# --- the reading on the command line, in the config and in the cache -------------------------

LIB = (
    "import torch\n"
    "from torch import Tensor\n"
    "def f(x: Tensor):\n"
    "    if x.sum() > 0:\n"
    "        print(x)\n"
)


def test_implicit_option_of_check_sites_and_wrap(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n")
    p = tmp_path / "lib.py"
    p.write_text(LIB)
    assert main(["check", str(p), "--no-cache", "--implicit", "proven"]) == 0
    capsys.readouterr()
    assert main(["check", str(p), "--no-cache", "--implicit", "gpu-first"]) == 1
    out = capsys.readouterr().out
    assert "lib.py:4:8: XFA402" in out and "lib.py:5:15: XFA403" in out
    assert main(["sites", str(p), "--no-cache", "--format", "json", "--implicit", "gpu-first"]) == 0
    assert [r["rule"] for r in json.loads(capsys.readouterr().out)] == ["XFA402", "XFA403"]
    assert main(["wrap", str(p), "--implicit", "gpu-first", "-q"]) == 0
    assert "xfer.bool(x.sum() > 0, site=" in p.read_text()
    with pytest.raises(SystemExit):
        main(["check", str(p), "--implicit", "gpu"])


def test_the_reading_is_part_of_the_findings_cache_key(tmp_path, capsys):
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n")
    p = tmp_path / "lib.py"
    p.write_text(LIB)
    cache = str(tmp_path / "cache")
    assert main(["check", str(p), "--cache-dir", cache, "--implicit", "proven"]) == 0
    assert main(["check", str(p), "--cache-dir", cache, "--implicit", "gpu-first"]) == 1
    assert main(["check", str(p), "--cache-dir", cache, "--implicit", "proven"]) == 0
    (tmp_path / "pyproject.toml").write_text('[tool.xferaudit]\nimplicit = "gpu-first"\ngpu-first-exclude = ["lib.py"]\n')
    assert main(["check", str(p), "--cache-dir", cache]) == 0  # excluded: read proven
    capsys.readouterr()


# --- host tensors are no sites ---------------------------------------------------------------


@pytest.mark.parametrize("code,sites", [
    ("torch.zeros(3).sum().item()", []),
    ("torch.arange(4).tolist()", []),
    ("[x.item() for x in torch.linspace(0, 1, 5, device='cpu')]", []),
    ("torch.zeros(3).cpu()", []),
    ("torch.zeros(3).to('cpu')", []),
    ("torch.zeros(3).cuda()", ["up"]),  # a host tensor uploaded: a site
    ("torch.zeros(3, device='cuda').item()", ["down"]),
    ("t.item()", ["down"]),  # nothing says where t is
    ("(torch.zeros(3) if flag else t).item()", ["down"]),  # host on one path only
])
def test_host_tensors_are_no_sites(code, sites):
    src = f"import torch\ndef f(t, flag):\n    return {code}\n"
    assert [s.kind for s in find_in_source(src, "x.py").sites if not s.implicit] == sites


def test_a_default_device_set_in_the_file_is_minded():
    src = (
        "import torch\n"
        "torch.set_default_device('cuda')\n"
        "def f():\n"
        "    return torch.zeros(3).item()\n"
    )
    assert [s.kind for s in find_in_source(src, "x.py").sites if not s.implicit] == ["down"]
    src = (
        "import torch\n"
        "def f():\n"
        "    with torch.device('cuda'):\n"
        "        a = torch.zeros(3)\n"
        "    b = torch.zeros(3)\n"
        "    if a.sum() > 0:\n"
        "        pass\n"
        "    return a.item(), b.item()\n"
    )
    res = find_in_source(src, "x.py").sites
    assert [(s.line, s.rule, s.call) for s in res] == [(6, "XFA402", "a.sum() > 0"), (8, "XFA202", "a.item()")]


def test_the_module_compile_row_needs_a_module_receiver():
    src = (
        "import torch.nn as nn\n"
        "class Net(nn.Module):\n"
        "    def build(self):\n"
        "        self.compile()\n"  # nn.Module.compile
        "class Grammar:\n"
        "    def compile(self):\n"
        "        return 1\n"
        "    def build(self):\n"
        "        self.compile()\n"  # its own compile: no site
        "def f(m, dev, parser):\n"
        "    m.to(dev)\n"  # a move in place: a module
        "    m.compile()\n"
        "    parser.compile()\n"  # nothing says what it is
    )
    assert [s.line for s in find_in_source(src, "x.py").sites if s.rule_id == "torch.module_compile"] == [4, 12]
