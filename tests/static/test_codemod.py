"""The codemod's rewrites: fixture pairs, round trips, encodings, aliases, safety."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from xferaudit.rules import RuleTable, load_pack, user_rules
from xferaudit.static.codemod import (
    CodemodError,
    choose_alias,
    import_bindings,
    spell,
    string_literal,
    unwrap_source,
    wrap_source,
)
from xferaudit.static.codemod.style import CodeStyle
from xferaudit.static.front.finder import decode_source, find_in_source

WIDE = CodeStyle(line_length=10_000)  # no wrapped line is broken

FIXTURES = Path(__file__).parent / "codemod_fixtures"
CASES = sorted(p.name[: -len(".in.py")] for p in FIXTURES.glob("*.in.py"))


def wrap(src: bytes, rules=None, relpath: str = "train.py", **kw) -> bytes:
    res = wrap_source(src, relpath, rules, relpath, **kw)
    return res.new if res.changed else src


def unwrap(src: bytes, rules=None, style=None) -> bytes:
    res = unwrap_source(src, "train.py", rules, style)
    return res.new if res.changed else src


def unwrapped_sites(data: bytes, rules=None) -> list:
    res = find_in_source(decode_source(data), "train.py", rules, "train.py")
    assert res.error is None, res.error
    return [s for s in res.sites if not s.wrapped and not s.suppressed]


def assert_round_trip(src: bytes, rules=None, style=None) -> bytes:
    """wrap compiles, is idempotent, leaves no unwrapped site behind (other than those
    it reports), and unwrap gives back the exact bytes."""
    res = wrap_source(src, "train.py", rules, "train.py", style=style)
    new = res.new if res.changed else src
    compile(new, "train.py", "exec", dont_inherit=True)
    assert wrap(new, rules, style=style) == new, "wrap twice != wrap once"
    left = {(s.line, s.column) for s in res.skipped}
    after = unwrapped_sites(new, rules)
    assert len(after) == len(left)
    assert unwrap(new, rules, style) == src
    return new


# --- fixture pairs ---------------------------------------------------------------------


def test_fixtures_exist():
    assert len(CASES) >= 10
    for name in CASES:
        assert (FIXTURES / f"{name}.out.py").is_file(), f"{name}.out.py is missing"


@pytest.mark.parametrize("name", CASES)
def test_fixture(name):
    src = (FIXTURES / f"{name}.in.py").read_bytes()
    want = (FIXTURES / f"{name}.out.py").read_bytes()
    res = wrap_source(src, "train.py", None, "train.py")
    assert (res.new if res.changed else src).decode() == want.decode()
    # The lines marked `# left:` are exactly the sites reported and left alone.
    marked = {i for i, line in enumerate(src.decode().splitlines(), 1) if "# left:" in line}
    assert {s.line for s in res.skipped} == marked
    assert all(s.reason for s in res.skipped)
    assert_round_trip(src)


def test_wrapper_forms_exact():
    out = (FIXTURES / "wrapper_forms.out.py").read_text()
    assert '_xfer.item(loss, site=":train_step:loss.item")' in out
    assert '_xfer.to(x, dev, non_blocking=True, site=":train_step:x.to")' in out
    assert '_xfer.graph(torch.compile(model), site=":train_step:torch.compile")' in out
    assert '_xfer.replay(g, site=":train_step:g.replay")' in out
    assert '_xfer.tensor(d, device=dev, site=":train_step:torch.tensor")' in out
    assert '@_xfer.graph(torch.compile(mode="x"), site=":<module>:torch.compile", decorator=True)' in out
    # once, in sort order in the third-party section (after `import torch`)
    assert out.count("import xferaudit.runtime as _xfer") == 1
    assert out.splitlines()[1:3] == ["import torch", "import xferaudit.runtime as _xfer"]


def test_summary_counts_per_kind():
    res = wrap_source((FIXTURES / "wrapper_forms.in.py").read_bytes(), "train.py", None, "train.py")
    assert dict(res.wrapped) == {"move": 1, "graph": 3, "up": 1, "down": 1}


# --- imports and aliases -------------------------------------------------------------------


def test_import_after_docstring_and_future_keeps_comment_with_its_statement():
    out = (FIXTURES / "imports_docstring.out.py").read_text().splitlines()
    i = out.index("import xferaudit.runtime as _xfer")
    assert out[i - 5] == "from __future__ import division"
    assert out[i - 3] == "# Imports the tool must leave alone."
    assert out[i - 2].startswith("import os")
    assert out[i - 1] == "import torch"  # sorted after it, in its section


def test_alias_reused_when_already_imported():
    src = b"import xferaudit.runtime as xr\nimport torch\n\n\ndef f(x):\n    return x.cpu()\n"
    new = wrap(src)
    assert new.count(b"import xferaudit.runtime") == 1
    assert b'xr.cpu(x, site=":f:x.cpu")' in new
    assert unwrapped_sites(new) == []
    # unwrap restores the call; the import was the user's and is still... unused, so it goes
    back = unwrap(new)
    assert b"x.cpu()" in back


def test_unwrap_keeps_import_still_in_use():
    src = b"import torch\n\n\ndef f(x):\n    return x.cpu()\n"
    new = wrap(src) + b"\nREPORT = _xfer.report\n"
    back = unwrap(new)
    assert b"import xferaudit.runtime as _xfer" in back
    assert b"return x.cpu()" in back


def test_alias_choice():
    import libcst as cst

    def alias(text):
        return choose_alias(text, cst.parse_module(text))[0]

    assert alias("x = 1\n") == "_xfer"
    assert alias("__all__ = ['f']\nx = 1\n") == "_xfer"  # private whether or not the module lists names
    assert alias("xfer = 1\n") == "_xfer"
    assert alias("_xfer = 1\n") == "_xfer_"
    assert alias("def f(_xfer): pass\n_xfer_ = 2\n") == "_xfer2"
    assert alias("# _xfer in a comment\ns = '_xfer'\nobj._xfer = 1\n") == "_xfer"
    assert alias("from m import _xfer\n") == "_xfer_"
    assert alias("import xferaudit.runtime as rt\n") == "rt"
    assert alias("import xferaudit.runtime as xfer\n") == "xfer"  # the file's own import, reused


def test_a_wrapped_module_gains_no_public_name(tmp_path):
    """`from m import *` and the names a module shows (no leading underscore)
    are the same before and after `wrap`, with or without `__all__`."""
    import subprocess
    import sys

    srcs = {"plain": b"import torch\n\n\ndef f(x):\n    return x.cpu()\n",
            "listed": b"import torch\n\n__all__ = ['f']\n\n\ndef f(x):\n    return x.cpu()\n"}
    code = ("import sys; sys.path.insert(0, '.'); import importlib; m = importlib.import_module(sys.argv[1]); "
            "ns = {}; exec('from ' + sys.argv[1] + ' import *', ns); "
            "print(sorted(n for n in vars(m) if not n.startswith('_')), sorted(n for n in ns if n != '__builtins__'))")
    for name, src in srcs.items():
        (tmp_path / f"{name}.py").write_bytes(src)
        before = subprocess.run([sys.executable, "-c", code, name], cwd=tmp_path, capture_output=True, text=True)
        (tmp_path / f"{name}.py").write_bytes(wrap(src))
        after = subprocess.run([sys.executable, "-c", code, name], cwd=tmp_path, capture_output=True, text=True)
        assert before.returncode == 0 and after.returncode == 0, after.stderr
        assert after.stdout == before.stdout, name


def test_spelling_of_function_rows():
    assert spell("torch.tensor", [("torch", "torch")]) == "torch.tensor"
    assert spell("torch.tensor", [("T", "torch")]) == "T.tensor"
    assert spell("torch.tensor", [("tensor", "torch.tensor")]) == "tensor"
    assert spell("torch.tensor", [("tensor", "torch.tensor"), ("torch", "torch")]) == "torch.tensor"
    assert spell("torch.cuda.make_graphed_callables", [("cuda", "torch.cuda")]) == "cuda.make_graphed_callables"
    assert spell("torch.tensor", []) == "torch.tensor"
    assert import_bindings("import torch.nn as nn\nfrom torch import tensor as tt\nfrom . import x\n") == [
        ("nn", "torch.nn"), ("tt", "torch.tensor"),
    ]


def test_callee_spelled_otherwise_goes_through_generic_call():
    out = (FIXTURES / "function_rows.out.py").read_text()
    assert "_xfer.call(T.tensor, d, device=dev," in out
    assert "_xfer.call(tensor, d, device=dev," in out
    # and the finder reads them back as wrapped torch.tensor sites
    res = find_in_source(out, "train.py", None, "train.py")
    kinds = [(s.rule_id, s.wrapped) for s in res.sites if s.line in (12, 13)]
    assert kinds == [("torch.tensor", True), ("torch.tensor", True)]


# --- encodings, newlines, positions ----------------------------------------------------------


def test_crlf_preserved():
    src = b'"""d."""\r\nimport torch\r\n\r\ndef f(x):\r\n    y = x.cpu()\r\n    return y\r\n'
    new = assert_round_trip(src)
    assert b"\n" not in new.replace(b"\r\n", b"")
    assert b'    y = _xfer.cpu(x, site=":f:x.cpu")\r\n' in new


def test_mixed_newlines_preserved():
    src = b"import torch\ndef f(x):\r\n    a = x.cpu()\r\n    b = x.item()\n    return a, b\n"
    assert_round_trip(src)


def test_bom_preserved_with_site_on_first_line():
    src = b"\xef\xbb\xbfx.cpu()  # \xc3\xa9\ny = 1\n"
    new = assert_round_trip(src)
    assert new.startswith(b"\xef\xbb\xbfimport xferaudit.runtime as _xfer\n")
    assert b'_xfer.cpu(x, site=":<module>:x.cpu")' in new


def test_latin1_declared_encoding_preserved():
    text = '# -*- coding: latin-1 -*-\nimport torch\n\n\ndef f(x):\n    s = "caf\xe9"; return x.cpu(), s  # \xe9t\xe9\n'
    src = text.encode("latin-1")
    new = assert_round_trip(src)
    assert new.decode("latin-1").count("\xe9") == 3
    assert '_xfer.cpu(x, site=":f:x.cpu")' in new.decode("latin-1")


def test_site_name_characters_the_encoding_cannot_hold_are_escaped():
    assert string_literal("a\u20acb", '"', "latin-1") == '"a\\u20acb"'
    assert string_literal('say "hi"\\', '"', "utf-8") == '"say \\"hi\\"\\\\"'
    assert "\t" not in string_literal("tab\there", "'", "utf-8")
    for value in ('q"\'\\\t\n\u20ac', "plain"):
        for q in ("'", '"'):
            assert ast.literal_eval(string_literal(value, q, "latin-1")) == value


def test_tabs_and_non_ascii_before_the_call_on_the_same_line():
    src = "import torch\nif True:\n\tx = torch.ones(1, device=d); s = '\u00e9\u00e9\u4e2d'; y = x.cpu(); z = (x,\n\t\t'\u00e9').count(x.item())\n"
    new = assert_round_trip(src.encode())
    assert "_xfer.cpu(x, site=" in new.decode()
    assert "_xfer.item(x, site=" in new.decode()


def test_form_feed_and_lone_cr_lines():
    src = b"import torch\n\x0c\ndef f(x):\n    # \xc3\xa9 \x0c\n    return x.cpu()\n"
    assert b"xfer.cpu" in assert_round_trip(src)
    src = b"import torch\rdef f(x):\r    return x.cpu()\r"
    assert b"xfer.cpu" in assert_round_trip(src)


def test_no_trailing_newline():
    src = b"import torch\nx = torch.ones(1).cuda()"
    new = assert_round_trip(src)
    assert not new.endswith(b"\n")


def test_untouched_regions_byte_identical():
    src = (FIXTURES / "formatting.in.py").read_bytes()
    new = wrap(src, style=WIDE)  # no line broken
    site_lines = {s.line for s in find_in_source(src.decode(), "train.py").sites}
    old_lines = src.decode().splitlines()
    new_lines = new.decode().splitlines()
    new_lines.remove("import xferaudit.runtime as _xfer")  # the one added line
    # every line without a site (or a site's continuation) is unchanged
    spans = set()
    for s in find_in_source(src.decode(), "train.py").sites:
        spans.update(range(min(s.line, s.end_line) - 3, s.end_line + 1))
    for i, line in enumerate(old_lines, 1):
        if i not in spans and i not in site_lines:
            assert new_lines[i - 1] == line


# --- failures and safety ------------------------------------------------------------------------


def test_unparsable_file_raises_codemod_error():
    with pytest.raises(CodemodError, match="cannot parse"):
        wrap_source(b"def f(:\n    x.cpu()\n", "bad.py")
    with pytest.raises(CodemodError, match="cannot decode"):
        wrap_source(b"x = '\xff\xfe'\n", "bad.py")


def test_file_without_sites_is_not_parsed_by_libcst(monkeypatch):
    import xferaudit.static.codemod as cm

    def boom(*a, **k):
        raise AssertionError("libcst parse of a file without sites")

    monkeypatch.setattr(cm.cst, "parse_module", boom)
    res = wrap_source(b"import torch\nx = torch.ones(1)\n", "a.py")
    assert not res.changed
    res = unwrap_source(b"import torch\nx = torch.ones(1).cpu()\n", "a.py")
    assert not res.changed


def test_suppressed_sites_are_not_wrapped():
    src = b"import torch\nx = torch.ones(1, device=d).cpu()  # noqa: XFA202\ny = torch.ones(1, device=d).item()  # xferaudit: ignore\n"
    res = wrap_source(src, "a.py")
    assert not res.changed and res.suppressed == 2


def test_codes_filter():
    src = b"import torch\nx = torch.ones(1, device=d).cpu()\ny = torch.ones(1).cuda()\n"
    res = wrap_source(src, "a.py", codes_ok=lambda code: code.startswith("XFA201"))
    assert b"_xfer.cuda(" in res.new and b"torch.ones(1, device=d).cpu()" in res.new
    assert res.not_selected == 1 and dict(res.wrapped) == {"up": 1}


def test_receiver_side_effects_keep_their_order():
    """In `recv.m(args)` the receiver is evaluated before the arguments, and so it is
    in `_xfer.m(recv, args)`: receivers with side effects are wrapped, and the
    wrapped code makes the same calls in the same order."""
    src = (
        "def run(log, it, q, dev):\n"
        "    a = next(it).to(log('arg', dev))\n"
        "    b = q.pop().cpu()\n"
        "    c = (w := log('walrus', q[0])).to(log('arg2', w))\n"
        "    d = log('recv', q[0]).to(*[log('star', 1)], non_blocking=log('kw', True))\n"
        "    return a, b, c, d\n"
    )
    new = wrap(src.encode()).decode()
    assert new.count("site=") == 4

    class T:
        def __init__(self, log, name):
            self.log, self.name = log, name

        def to(self, *a, **k):
            self.log("to", self.name)
            return self

        def cpu(self):
            self.log("cpu", self.name)
            return self

    class Xfer:  # what the runtime's wrappers do: call the method (or the bound method), count
        def __getattr__(self, name):
            def w(recv, *a, site=None, **k):
                return recv(*a, **k) if name == "call" else getattr(recv, name)(*a, **k)
            return w

    def trace(code):
        events = []
        log = lambda *e: events.append(tuple(getattr(v, "name", v) for v in e)) or e[-1]  # noqa: E731
        items = [T(log, "i0"), T(log, "i1")]
        q = [T(log, "q0"), T(log, "q1"), T(log, "q2")]
        ns = {"_xfer": Xfer()}
        exec(code.replace("import xferaudit.runtime as _xfer\n", ""), ns)
        ns["run"](log, iter(items), q, "dev")
        return [e for e in events]

    assert trace(new) == trace(src)


def test_user_rows_use_generic_wrappers():
    rows = user_rules([
        {"call": "method", "target": "send", "kind": "up"},
        {"call": "function", "target": "accel.utils.send_to_device", "kind": "move"},
    ])
    rules = RuleTable.of(load_pack("torch").rules + rows)
    src = (
        b"from accel.utils import send_to_device\nimport accel\n\n\n"
        b"def f(batch, dev, ch):\n"
        b"    a = send_to_device(batch, dev)\n"
        b"    b = accel.utils.send_to_device(batch, dev)\n"
        b"    c = ch.send(\n        batch,\n    )\n"
        b"    return a, b, c\n"
    )
    new = assert_round_trip(src, rules, style=WIDE)
    assert b'_xfer.call(send_to_device, batch, dev, site=":f:accel.utils.send_to_device")' in new
    assert b"_xfer.call(accel.utils.send_to_device, batch, dev," in new
    assert b'_xfer.method(\n        ch, "send", batch, site=":f:ch.send",\n    )' in new


def test_wrapped_sites_are_named_from_the_relpath():
    src = b"import torch\n\n\ndef step(x):\n    return x.cpu()\n"
    a = wrap(src, relpath="pkg/a.py")
    b = wrap(src, relpath="pkg/b.py")
    # the literal is short in both; the finder (and the runtime) put each file's path before it
    assert a == b and b'site=":step:x.cpu"' in a
    assert [s.site for s in find_in_source(a.decode(), "pkg/a.py", None, "pkg/a.py").sites] == ["pkg/a.py:step:x.cpu"]
    assert [s.site for s in find_in_source(b.decode(), "pkg/b.py", None, "pkg/b.py").sites] == ["pkg/b.py:step:x.cpu"]


def test_partial_wrap_then_new_sites_get_fresh_names():
    src = b"import torch\n\n\ndef step(x):\n    return x.cpu()\n"
    once = wrap(src)
    grown = once + b"\n\ndef step2(x):\n    return x.cpu(), x.cpu()\n"
    twice = wrap(grown)
    names = re.findall(rb'site="([^"]+)"', twice)
    assert len(names) == len(set(names)) == 3
    assert twice.count(b"import xferaudit.runtime") == 1


# --- the skeleton: PositionProvider over the statements that hold a site only ----------------


def _positions_agree(src: bytes) -> int:
    import libcst as cst
    from libcst.metadata import MetadataWrapper, PositionProvider

    from xferaudit.static.codemod import _ast, _layout

    text = decode_source(src)
    module = cst.parse_module(src)
    lines = [s.line for s in find_in_source(text, "m.py").sites]
    layout = _layout(module, _ast(text), text, lines)
    assert layout is not None
    part = layout.positions()
    whole = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    shared = [n for n in part if n in whole]
    assert all(part[n] == whole[n] for n in shared)
    # every called name at a site line is placed
    return len(shared)


@pytest.mark.parametrize("name", CASES)
def test_skeleton_positions_equal_whole_module_positions(name):
    assert _positions_agree((FIXTURES / f"{name}.in.py").read_bytes()) > 0


def test_skeleton_positions_with_comments_footers_and_crlf():
    src = (
        b"#!/usr/bin/env python\r\n\r\n# c\r\nimport torch\r\n\r\n\r\nclass A:\r\n    '''doc'''\r\n\r\n"
        b"    @staticmethod\r\n    # between\r\n    @torch.compile(mode='x')\r\n    def f(x):\r\n"
        b"        a = 1; b = x.cpu()\r\n        # footer of f\r\n\r\n    def g(self):\r\n        pass\r\n"
        b"    # footer of A\r\n\r\n# module footer\r\ny = torch.ones(1).cuda()\r\n# end"
    )
    assert _positions_agree(src) > 0
    assert_round_trip(src)


def test_layout_failure_falls_back_to_whole_module_positions(monkeypatch):
    import xferaudit.static.codemod as cm

    src = (FIXTURES / "contexts.in.py").read_bytes()
    want = (FIXTURES / "contexts.out.py").read_bytes()

    def broken(self, *a, **k):
        raise cm._LayoutError

    monkeypatch.setattr(cm._Layout, "__init__", broken)
    assert wrap(src) == want
    assert unwrap(want) == src


def test_misplaced_skeleton_positions_fall_back(monkeypatch):
    import xferaudit.static.codemod as cm

    src = (FIXTURES / "chains_nested.in.py").read_bytes()
    want = (FIXTURES / "chains_nested.out.py").read_bytes()
    monkeypatch.setattr(cm._Layout, "positions", lambda self: {})
    assert wrap(src) == want
