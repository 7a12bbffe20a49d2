"""Wrapped code a maintainer accepts: the runtime import where isort / ruff's
I001 puts it, over-long wrapped lines broken as black breaks them, and
``unwrap`` still restoring every byte."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from xferaudit.static.codemod import unwrap_source, wrap_source
from xferaudit.static.codemod.style import CodeStyle, code_style

BODY = b"\n\ndef f(x):\n    return x.cpu()\n"


def wrap(src: bytes, style=None, relpath="train.py") -> bytes:
    res = wrap_source(src, relpath, None, relpath, style=style)
    assert res.changed
    back = unwrap_source(res.new, relpath, None, style)
    assert back.new == src, "unwrap did not restore the bytes"
    assert wrap_source(res.new, relpath, None, relpath, style=style).new is None  # idempotent
    return res.new


def head(out: bytes) -> list[str]:
    return out.decode().split("\n\n\ndef f", 1)[0].splitlines()


@pytest.mark.parametrize("imports, want", [
    # in the third-party section, sorted
    ("import os\n\nimport numpy\nimport torch\n",
     ["import os", "", "import numpy", "import torch", "import xferaudit.runtime as _xfer"]),
    ("import os\n\nimport torch\nimport zmq\n",
     ["import os", "", "import torch", "import xferaudit.runtime as _xfer", "import zmq"]),
    # plain imports before from-imports
    ("import torch\nfrom torch import nn\n",
     ["import torch", "import xferaudit.runtime as _xfer", "from torch import nn"]),
    # a section of its own after the standard library...
    ("import os\nimport sys\n",
     ["import os", "import sys", "", "import xferaudit.runtime as _xfer"]),
    # ... and before first-party / local ones
    ("import os\n\nfrom . import util\n",
     ["import os", "", "import xferaudit.runtime as _xfer", "", "from . import util"]),
    ("from . import util\n",
     ["import xferaudit.runtime as _xfer", "", "from . import util"]),
    # case-insensitive order
    ("import Torch\nimport zmq\n",
     ["import Torch", "import xferaudit.runtime as _xfer", "import zmq"]),
])
def test_import_goes_where_isort_puts_it(imports, want):
    src = b'"""Doc."""\n' + imports.encode() + b"\n" + BODY
    out = wrap(src)
    assert head(out)[1:] == want


def test_import_after_the_future_section():
    src = b"from __future__ import annotations\n\nx = 1\n" + BODY
    out = wrap(src)
    assert out.startswith(b"from __future__ import annotations\n\nimport xferaudit.runtime as _xfer\n\nx = 1\n")


def test_import_in_a_file_without_imports_stays_at_the_top():
    src = b'"""Doc."""\n' + BODY
    assert wrap(src).startswith(b'"""Doc."""\n\n\nimport xferaudit.runtime as _xfer\n\n\ndef f')


@pytest.mark.parametrize("src", [
    b'"""Doc."""\n' + BODY,
    b"#!/usr/bin/env python\n\ndef f(x):\n    return x.cpu()\n",
    b"def f(x):\n    return x.cpu()\n",
    b"# a comment\n\n\n@dec\nclass A:\n    def f(self, x):\n        return x.cpu()\n",
])
def test_the_import_above_a_def_leaves_the_two_blank_lines_flake8_wants(src, tmp_path):
    pycodestyle = pytest.importorskip("pycodestyle")
    p = tmp_path / "t.py"
    p.write_bytes(wrap(src))  # (and unwrap gives the bytes back)
    report = pycodestyle.StyleGuide(select=["E3"], quiet=True).check_files([str(p)])
    assert report.total_errors == 0, p.read_text()


def test_known_first_party_and_force_sort_within_sections():
    src = b"import os\n\nimport torch\nimport zmq\n\nimport mypkg\n" + BODY
    first = CodeStyle(known_first_party=("xferaudit", "mypkg"))
    assert head(wrap(src, first))[-3:] == ["", "import mypkg", "import xferaudit.runtime as _xfer"]
    forced = CodeStyle(force_sort_within_sections=True)
    src2 = b"import os\n\nimport torch\nfrom torch import nn\nfrom zmq import green\n" + BODY
    assert head(wrap(src2, forced))[2:] == [
        "import torch", "from torch import nn", "import xferaudit.runtime as _xfer", "from zmq import green"]


def test_first_party_found_on_disk(tmp_path):
    (tmp_path / "xferaudit").mkdir()  # as when wrapping xferaudit's own tree
    (tmp_path / "src" / "aaa").mkdir(parents=True)
    style = code_style(tmp_path)
    src = b"import torch\n\nimport aaa\n" + BODY
    assert head(wrap(src, style)) == ["import torch", "", "import aaa", "import xferaudit.runtime as _xfer"]


def test_settings_read_from_pyproject_and_ruff_toml(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.black]\nline-length = 100\n"
        "[tool.ruff.lint.isort]\nknown-first-party = ['xferaudit']\nforce-sort-within-sections = true\n"
    )
    s = code_style(tmp_path)
    assert s.line_length == 100 and s.known_first_party == ("xferaudit",) and s.force_sort_within_sections
    (tmp_path / "ruff.toml").write_text("line-length = 120\n")
    assert code_style(tmp_path).line_length == 120
    (tmp_path / "pyproject.toml").write_text("[tool.isort]\nprofile = 'google'\nknown_third_party = ['x']\n")
    (tmp_path / "ruff.toml").unlink()
    s = code_style(tmp_path)
    assert s.line_length == 88 and s.force_sort_within_sections and s.known_third_party == ("x",)
    (tmp_path / "pyproject.toml").write_text("not toml [")
    assert code_style(tmp_path).line_length == 88  # a broken formatter config: defaults


# --- long lines ----------------------------------------------------------------------------------


def test_long_wrapped_line_is_broken_one_argument_a_line():
    src = (b"import torch\n\n\ndef train(model, batch, device):\n"
           b"    out = model(batch).to(device, non_blocking=True)\n    return out\n")
    out = wrap(src)
    assert b"    out = _xfer.to(\n        model(batch),\n        device,\n        non_blocking=True,\n" \
           b"        site=\":train:model(batch).to\",\n    )\n" in out
    # a wider project keeps it on one line
    assert b"    out = _xfer.to(model(batch), device, non_blocking=True, site=" in wrap(src, CodeStyle(line_length=120))


BLACK_STABLE = [
    b"y = x.cpu()  # a comment stays after the closing parenthesis, as black keeps it",
    b"loss_value_for_the_logging_system = compute_the_loss(model, batch).mean().item()",
    b"return torch.tensor(data_of_the_tensor, dtype=torch.float32, device=device_name)",
    b"assert some_condition_of_it(x), x.detach().cuda().float().mean().tolist()",
]
# (each statement fits before wrap: a line already over the limit keeps its layout)
IN_PLACE = [  # part of a larger expression: broken in place, ruff format would redo it
    b"y = a_long_name_for_something + and_another_one_here + x.cpu().numpy().tolist()",
    b"y = x.cpu().numpy().tolist() + a_long_name_for_something + and_another_one_here",
    b"foo(x.cpu().numpy().tolist(), a_long_name_for_something, and_another_one_here)",
    b"ys = {k: v.item() for k, v in long_name_for_something.items() if v is not None}",
    b"if x.cpu().numpy().tolist() == a_long_name_for_something + and_another_one_here:\n            pass",
    b"for t in x.cpu().numpy().tolist() + a_long_name_for_something + and_another_one:\n            pass",
]


@pytest.mark.parametrize("stmt", IN_PLACE)
def test_lines_broken_in_place_fit_and_round_trip(stmt):
    src = b"import torch\n\n\ndef f(x, model, batch, data_for_the_tensor, device_name, device):\n    if x:\n" \
          b"        " + stmt + b"\n"
    out = wrap(src)
    assert max(len(line) for line in out.decode().splitlines() if "site=" not in line) <= 88
    assert max(len(line) for line in out.decode().splitlines()) <= 88 + 20


@pytest.mark.parametrize("stmt", BLACK_STABLE)
def test_broken_lines_round_trip(stmt, tmp_path):
    src = b"import torch\n\n\ndef f(x, model, batch, data_for_the_tensor, device_name, device):\n    if x:\n" \
          b"        " + stmt + b"\n"
    out = wrap(src)  # asserts the round trip and idempotence
    assert b"(\n" in out
    if shutil.which("ruff"):  # and the broken layout is one ruff format keeps
        p = tmp_path / "m.py"
        p.write_bytes(out)
        r = subprocess.run(["ruff", "format", "--isolated", "--diff", str(p)], capture_output=True, text=True)
        assert r.returncode == 0, r.stdout


def test_tab_indented_file_round_trips():
    src = (b"import torch\n\n\ndef forward_the_batch(x, model, batch):\n\tif x:\n"
           b"\t\ty = model(batch).to(x, non_blocking=True, copy=False)\n")
    out = wrap(src)
    assert b"\t\ty = _xfer.to(\n\t\t    model(batch),\n" in out


def test_unusual_spacing_is_not_broken():
    src = b"import torch\n\n\ndef f(x, model, batch):\n    y = model(batch).to(x ,  non_blocking=True, copy=False, memory_format=None)\n"
    out = wrap(src)
    assert b"non_blocking=True, copy=False, memory_format=None, site=" in out  # left on one line


def test_one_line_wrapped_call_written_with_newlines_is_not_mistaken_for_the_broken_form():
    # the call already spans lines: wrap keeps its own layout, unwrap restores it
    src = b"import torch\n\n\ndef f(x, d):\n    return torch.tensor(\n        x,\n        device=d,\n    )\n"
    out = wrap(src)
    assert b"        x,\n        device=d, site=" in out


@pytest.mark.skipif(shutil.which("ruff") is None, reason="ruff not installed")
def test_ruff_finds_nothing_new(tmp_path):
    src = (b'"""Doc."""\n\nimport os\n\nimport numpy as np\nimport torch\nfrom torch import nn\n\n'
           b"from . import util\n\n\n"
           b"def train(model: nn.Module, batch, device) -> float:\n"
           b"    out = model(batch).to(device, non_blocking=True)\n"
           b"    scale = np.pi + len(os.sep) + util.x\n"
           b"    return out.mean().item()\n")
    p = tmp_path / "pkg" / "m.py"
    p.parent.mkdir()
    p.write_bytes(wrap(src, code_style(tmp_path), "pkg/m.py"))
    r = subprocess.run(["ruff", "check", "--isolated", "--select", "E501,I001", str(p)],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 0, r.stdout + p.read_text()
    r = subprocess.run(["ruff", "format", "--isolated", "--diff", str(p)], capture_output=True, text=True,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stdout


def test_site_of_a_call_over_several_lines_goes_to_a_line_of_its_own():
    src = (b"import torch\n\n\ndef f(buffer, dev):\n    if dev:\n        t = torch.tensor(\n"
           b"            bytearray(buffer.getbuffer()), device=dev, dtype=torch.float\n        )\n"
           b"        u = torch.tensor(\n            buffer,\n            device=dev,\n        )\n")
    out = wrap(src, CodeStyle(line_length=79))
    assert (b"            bytearray(buffer.getbuffer()), device=dev, dtype=torch.float,\n"
            b"            site=\":f:torch.tensor\"\n        )\n") in out
    # already one argument a line with a magic trailing comma: site= stays beside the last one
    assert b"            device=dev, site=\":f:torch.tensor#2\",\n        )\n" in out


# A new wrapper call on a line still too long after the first break: each one
# is broken in place, one argument a line, indented one step deeper than the
# line it starts on, and unwrap restores every byte.
STILL_LONG = {
    "two calls on one line, both broken": (
        b"    value_of_it = x.item() if the_condition_of_it(x) == 1 else x.tolist()\n",
        b"    value_of_it = _xfer.item(\n        x,\n        site=\":f:x.item\",\n"
        b"    ) if the_condition_of_it(x) == 1 else _xfer.tolist(\n"),
    "a dict entry on a continuation line": (
        b"    return {\n        \"last_val\": x.item() if isinstance(x, torch.Tensor) else the_last_value,\n"
        b"        \"mode\": mode,\n    }\n",
        b"        \"last_val\": _xfer.item(\n            x,\n            site=\":f:x.item\",\n"
        b"        ) if isinstance(x, torch.Tensor) else the_last_value,\n"),
    "a branch of a parenthesized conditional expression": (
        b"    value = (\n        x.clone().detach()\n        if isinstance(x, torch.Tensor)\n"
        b"        else torch.tensor(x, device=the_device, dtype=the_default_dtype)\n    )\n",
        b"        else _xfer.tensor(\n            x,\n            device=the_device,\n"),
    "a comprehension's element in a call over several lines": (
        b"    metrics.update({\n        name: torch.tensor(value, device=the_root_device) for name, value in s.items()\n"
        b"    })\n",
        b"        name: _xfer.tensor(\n            value,\n            device=the_root_device,\n"),
    "a call among the arguments of the call broken first": (
        b"    for src_param, dst_param in zip(the_source_module.parameters(), dst.parameters()):\n"
        b"        dst_param.detach().copy_(src_param.to(dst_param.device, non_blocking=True))\n",
        b"            _xfer.to(\n                src_param,\n                dst_param.device,\n"),
}


@pytest.mark.parametrize("case", list(STILL_LONG))
def test_new_calls_still_too_long_are_broken_where_they_stand(case):
    body, want = STILL_LONG[case]
    src = b"import torch\n\n\ndef f(x, all, decision, metrics, stat, mode, the_device):\n" + body
    out = wrap(src)  # asserts the round trip and idempotence
    assert want in out, out.decode()
    assert max(len(line) for line in out.decode().splitlines()) <= 88, out.decode()


def test_site_of_a_call_one_argument_a_line_too_long_goes_to_a_line_of_its_own():
    # the user's own one-argument-a-line call with a magic trailing comma: with
    # site= on a line of its own and that comma kept, it would read as the
    # layout wrap writes for a call that was on one line (unwrap would join
    # it); the comma after site= is left out instead, and unwrap puts it back
    src = (b"import torch\n\n\nclass Loop:\n    def broadcast_the_signal(self, trainer):\n        try:\n"
           b"            flag = torch.tensor(\n                [1 if trainer.received else 0],\n"
           b"                device=trainer.strategy.root_device,\n            )\n"
           b"        except Exception:\n            flag = torch.tensor([0], device=trainer.strategy.root_device)\n")
    out = wrap(src, CodeStyle(line_length=79))  # asserts the round trip and idempotence
    assert (b"                device=trainer.strategy.root_device,\n"
            b"                site=\":Loop.broadcast_the_signal:torch.tensor\"\n            )\n") in out
    # the call that was on one line: one argument a line, trailing comma
    assert b"site=\":Loop.broadcast_the_signal:torch.tensor#2\",\n            )\n" in out
    assert all(len(line) <= 79 for line in out.decode().splitlines() if " " in line.strip()), out.decode()


# --- lines already over the limit before wrap -------------------------------------


def _break(src: str, limit: int, bare):
    """break_long_lines over an already wrapped module, as the codemod calls it,
    with the bare-call reader `bare` (None: the one the codemod passes)."""
    import libcst as cst

    from xferaudit.rules import table
    from xferaudit.static.codemod.breaking import break_long_lines
    from xferaudit.static.codemod.imports import import_bindings
    from xferaudit.static.codemod.shapes import _Shapes

    shapes = _Shapes(table(), lambda: import_bindings(src))

    def name(call):
        f = call.func
        ok = isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == "_xfer"
        return f.attr.value if ok and f.attr.value in shapes.infos else None

    def is_new(call):
        return name(call) is not None and any(a.keyword is not None and a.keyword.value == "site" for a in call.args)

    def check(old, new):
        a, b = shapes.unwrap(old, name(old)), shapes.unwrap(new, name(new))
        return a is not None and b is not None and cst.Module([]).code_for_node(a) == cst.Module([]).code_for_node(b)

    if bare is None:
        def bare(call):
            return shapes.unwrap(call, name(call)) if name(call) is not None else None

    out, n = break_long_lines(cst.parse_module(src), is_new, limit, check, bare=bare)
    return out.code, n


LONG_BEFORE = (
    b"import torch\n\n\ndef get_batch_of_the_model(x, y, device):\n"
    b"    if device:\n"
    b"        x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device)\n"
    b"        z = torch.tensor(\n            x,\n            device=device,  # a comment long enough to be too long\n"
    b"        )\n"
    b"        u = torch.tensor(\n            x,\n            device=device,  # a short comment\n        )\n"
    b"    w_of_the_batch = x.cpu()\n"
    b"    return x, y, z, u, w_of_the_batch\n"
)


def test_a_line_already_too_long_before_wrap_keeps_its_layout():
    # `x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory()...`
    # was too long before wrap: breaking it would change ruff's E501 count (one
    # fewer) and the user's layout; a line wrap made too long is broken
    out = wrap(LONG_BEFORE, CodeStyle(line_length=60)).decode()  # asserts the round trip and idempotence
    assert "        x, y = _xfer.to(x.pin_memory(), device, non_blocking=True, site=" in out
    assert "            device=device, site=\":get_batch_of_the_model:torch.tensor\",  # a comment long" in out
    assert ("            device=device,\n"
            "            site=\":get_batch_of_the_model:torch.tensor#2\",  # a short comment\n") in out
    assert "    w_of_the_batch = _xfer.cpu(\n        x,\n        site=\":get_batch_of_the_model:x.cpu\",\n    )\n" in out


def test_the_bare_call_reader_given_is_the_one_asked():
    wrapped = wrap_source(LONG_BEFORE, "t.py", None, "t.py", style=CodeStyle(line_length=1000)).new.decode()
    out, n = _break(wrapped, 60, bare=None)  # the default reader: as wrap does it
    assert n == 2 and "x, y = _xfer.to(x.pin_memory(), device, non_blocking=True, site=" in out
    # a reader that reads nothing back: every too-long line is broken
    out, n = _break(wrapped, 60, bare=lambda call: None)
    assert n == 5 and "x, y = _xfer.to(\n" in out


def test_one_argument_a_line_without_trailing_comma_keeps_site_beside_the_last():
    # with site= on a line of its own and no comma after it, the call would
    # read as one the user wrote with a trailing comma: the line stays long
    src = (b"import torch\n\n\ndef f(buffer_of_it, dev):\n    if dev:\n        u = torch.tensor(\n"
           b"            buffer_of_it,\n            device=dev\n        )\n")
    out = wrap(src, CodeStyle(line_length=60))  # asserts the round trip and idempotence
    assert b"            device=dev, site=\":f:torch.tensor\"\n        )\n" in out


FSTRINGS = b'''import torch


def train(loss, fabric, epoch):
    fabric.print(f"val loss {loss.item():.4f} and more text to make it long")
    x = f"{loss.item()}"  # short
    y = f"{loss.item():.4f} was a long line before wrap, well past the limit of 88 columns"
    print(
        f"Train Epoch: {epoch}"
        f" rest of the text for the line of this: {loss.item():.6f}"
    )
    z = f"{loss.item():.4f} and more text to make it long"  # a comment of the user's
'''


def test_a_line_an_fstring_wrapper_takes_past_the_limit_gets_a_noqa_unwrap_takes_away():
    # no line break can go inside an f-string's braces (before Python 3.12):
    # the line gets `# noqa: E501 (xferaudit)` when it had no comment and was
    # within the limit before; unwrap takes it away (asserted by wrap())
    # (after the user's own comment, the marker goes after it)
    out = wrap(FSTRINGS).decode().splitlines()
    marked = [line for line in out if line.endswith("  # noqa: E501 (xferaudit)")]
    assert len(marked) == 3
    assert marked[0].startswith('    fabric.print(f"val loss {_xfer.item(loss, site=')
    assert marked[1].startswith('        f" rest of the text for the line of this: {_xfer.item(loss, site=')
    assert marked[2].endswith(":.4f} and more text to make it long\"  # a comment of the user's  # noqa: E501 (xferaudit)")
    assert not any("noqa" in line for line in out if "was a long line before" in line or "# short" in line)


@pytest.mark.skipif(shutil.which("ruff") is None, reason="needs ruff")
def test_ruff_counts_no_new_line_too_long_after_wrapping_fstrings(tmp_path):
    f = tmp_path / "t.py"
    f.write_bytes(FSTRINGS)
    cmd = ["ruff", "check", "--no-cache", "--select", "E501", "--line-length", "88", "--output-format", "concise", str(f)]
    before = subprocess.run(cmd, capture_output=True, text=True).stdout.count("E501")
    f.write_bytes(wrap(FSTRINGS))
    after = subprocess.run(cmd, capture_output=True, text=True).stdout.count("E501")
    assert before == after == 1


def test_the_noqa_after_a_bare_hash_comment_is_taken_away_too():
    src = (b"import torch\n\n\ndef f(loss, fabric):\n"
           b'    fabric.print(f"val loss {loss.item():.4f} and more text to make it long")  #\n')
    out = wrap(src).decode()  # asserts the round trip
    assert out.endswith("make it long\")  #  # noqa: E501 (xferaudit)\n")
