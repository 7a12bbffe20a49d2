"""The statement form of the wrap grammar: a site comment names a statement whose
crossing has no call to wrap. `wrap` writes it, `unwrap` takes it off byte for
byte, the finder reads it back as a wrapped site, and `check` accepts it."""

from __future__ import annotations

import pytest

from xferaudit.static.codemod import unwrap_source, wrap_source
from xferaudit.static.codemod.style import CodeStyle
from xferaudit.static.front.finder import find_in_source
from xferaudit.wrapform import (
    statement_comment,
    statement_comments,
    statement_sites,
    statement_spans,
    strip_statement_comment,
)

HEAD = "import torch\n\nx = torch.ones(4, device='cuda')\n"


def test_the_reader_takes_comments_only_and_names_every_line_of_the_statement():
    text = (
        "a = 1\n"
        "kept = boxes[keep]  # xferaudit: site=\":nms:boxes[keep]\"\n"
        "y = f(a,\n"
        "      b[m])  # mine  # xferaudit: site=':f:y'\n"
        "s = \"# xferaudit: site='no'\"\n"
        "if t[m].any():  # xferaudit: site=\":g:\\\"q\\\"\"\n"
        "    pass\n"
        "# xferaudit: site=\":own:line\"\n"
        "z = 2\n"
    )
    assert statement_sites(text) == {2: ":nms:boxes[keep]", 3: ":f:y", 4: ":f:y", 6: ':g:"q"'}
    assert statement_spans(text)[:4] == [(1, 1), (2, 2), (3, 4), (5, 5)]
    assert statement_sites("x = 1  # nothing here\n") == {}


@pytest.mark.parametrize("line,back", [
    ('k = b[m]  # xferaudit: site=":f:k"', "k = b[m]"),
    ('k = b[m]  # mine  # xferaudit: site=":f:k"', "k = b[m]  # mine"),
    ('k = b[m] # xferaudit: site=":f:k"', "k = b[m]"),  # (one written by hand with one space)
    ('k = b[m]  # xferaudit: site=":f:k" and more', None),  # not at the end: not the form
    ("k = b[m]  # mine", None),
])
def test_strip_takes_off_exactly_the_comment_that_ends_the_line(line, back):
    found = statement_comments(line + "\n")
    assert (strip_statement_comment(line, found[0]) if found else None) == back


def test_the_comment_is_two_spaces_and_the_literal():
    assert statement_comment('":f:k"') == '  # xferaudit: site=":f:k"'


@pytest.mark.parametrize("body,last", [
    ("k = x[x > 0]\n", 'k = x[x > 0]  # xferaudit: site=":<module>:count(x[x>0])"\n'),
    ("k = x[x > 0]  # keep\n", 'k = x[x > 0]  # keep  # xferaudit: site=":<module>:count(x[x>0])"\n'),
    ("k = x[x > 0]   \n", 'k = x[x > 0]     # xferaudit: site=":<module>:count(x[x>0])"\n'),
    ("k = (x[x > 0]\n     .sum())\n", '     .sum())  # xferaudit: site=":<module>:count(x[x>0])"\n'),
    ("k = 1 + \\\n    x[x > 0].sum()\n", '    x[x > 0].sum()  # xferaudit: site=":<module>:count(x[x>0])"\n'),
    ("for v in x[[0, 1]]:\n    pass\n", 'for v in x[[0, 1]]:  # xferaudit: site=":<module>:upload(x[[0,1]])"\n'),
    ("n = x.nonzero()", 'n = x.nonzero()  # xferaudit: site=":<module>:x.nonzero()"'),
])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_wrap_names_the_statement_and_unwrap_gives_every_byte_back(body, last, newline):
    src = (HEAD + body).replace("\n", newline).encode()
    res = wrap_source(src, "t.py")
    assert res.new is not None, res.skipped
    out = res.new.decode()
    assert last.replace("\n", newline) in out
    assert "import xferaudit" not in out  # (a comment calls nothing)
    assert unwrap_source(res.new, "t.py").new == src
    assert wrap_source(res.new, "t.py").new is None  # (named already)
    compile(res.new, "t.py", "exec")


def test_a_file_with_a_bom_and_a_coding_cookie_keeps_them():
    src = b"\xef\xbb\xbf" + (HEAD + "k = x[x > 0]\n").encode()
    res = wrap_source(src, "t.py")
    assert res.new.startswith(b"\xef\xbb\xbf") and b"# xferaudit: site=" in res.new
    assert unwrap_source(res.new, "t.py").new == src
    latin = ("# -*- coding: latin-1 -*-\n" + HEAD + "k = x[x > 0]  # \u00e9t\u00e9\n").encode("latin-1")
    res = wrap_source(latin, "t.py")
    assert "# \u00e9t\u00e9  # xferaudit: site=" in res.new.decode("latin-1")
    assert unwrap_source(res.new, "t.py").new == latin


def test_the_finder_reads_a_named_statement_as_one_wrapped_site_and_check_accepts_it():
    text = HEAD + 'k, j = x[x > 0], x[[0, 1]]  # xferaudit: site=":<module>:both"\nn = x.nonzero()\n'
    sites = find_in_source(text, "t.py").sites
    named = [s for s in sites if s.op == "statement"]
    assert [(s.line, s.site, s.wrapped, s.implicit) for s in named] == [(4, "t.py:<module>:both", True, True)]
    # the two sites no call makes on it are that site; the other statement's stays a finding
    assert [(s.line, s.rule, s.wrapped) for s in sites if s.implicit and s.op != "statement"] == [(5, "XFA405", False)]


@pytest.mark.parametrize("style", [CodeStyle(line_length=200), CodeStyle(line_length=40)], ids=["wide", "narrow"])
def test_a_call_with_a_form_on_a_named_statement_is_still_wrapped_by_its_wrapper(style):
    src = (HEAD + "n = float(x[x > 0].sum())\n").encode()
    out = wrap_source(src, "t.py", style=style).new.decode()
    if style.line_length > 100:
        assert 'n = _xfer.float(x[x > 0].sum(), site=":<module>:float(x[x>0].sum())")  # xferaudit: site=' in out
    else:  # broken as black breaks a long line: the comment stays at the statement's end
        assert out.endswith(')  # xferaudit: site=":<module>:count(x[x>0])"\n')
    assert unwrap_source(out.encode(), "t.py", style=style).new == src
