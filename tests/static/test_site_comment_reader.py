"""Issue 44, items 1-3: the site comment is wrap's alone. Only the comment token
that ends a logical line (found by the tokenizer) is ever read or taken off as
one; a user's comment line, a comment inside brackets or a string holding the
form is left as it is, and a formatter keeps the comment on the statement it names."""

from __future__ import annotations

import pytest

from xferaudit.static.codemod import unwrap_source, wrap_source
from xferaudit.static.front.finder import find_in_source
from xferaudit.wrapform import statement_sites

HEAD = "import torch\n\nx = torch.ones(4, device='cuda')\n"


@pytest.mark.parametrize("user", [
    '# see the old note  # xferaudit: site=":f:old"\n',  # a comment line of the user's
    '    # xferaudit: site=":f:old"\n',
    'y = f(1,  # xferaudit: site=":f:inner"\n      2)\n',  # a comment inside brackets
])
def test_unwrap_leaves_the_users_comments_that_end_in_the_form(user):
    src = (HEAD + user + "k = x[x > 0]\n").encode()
    res = wrap_source(src, "t.py")
    assert res.new is not None and res.new.count(b"# xferaudit: site=") == 2
    back = unwrap_source(res.new, "t.py")
    assert back.new == src  # byte for byte: the user's line kept
    assert back.unwrapped["statement"] == 1  # only wrap's comment counted


def test_a_string_holding_the_form_does_not_hide_the_comment_wrap_wrote():
    src = (HEAD + "k = (x[x > 0], '# xferaudit: site=\"')\n").encode()
    res = wrap_source(src, "t.py")
    assert res.new is not None
    assert res.new.decode().endswith("'# xferaudit: site=\"')  # xferaudit: site=\":<module>:count(x[x>0])\"\n")
    back = unwrap_source(res.new, "t.py")
    assert back.new == src
    assert back.unwrapped["statement"] == 1


def test_the_finder_and_the_guard_read_only_the_comment_ending_a_logical_line():
    text = (
        '# xferaudit: site=":own:line"\n'  # 1: a comment line
        'y = f(a,  # xferaudit: site=":inside"\n'  # 2-3: inside brackets, not at the end
        '      b)\n'
        's = "# xferaudit: site=\\":str\\""  # xferaudit: site=":real"\n'  # 4
        'z = 1  # xferaudit: site=":f:z" and more\n'  # 5: not at the end of the comment
    )
    assert statement_sites(text) == {4: ":real"}
    named = [s for s in find_in_source(text, "t.py").sites if s.op == "statement"]
    assert [(s.line, s.site) for s in named] == [(4, "t.py:real")]


# --- item 3: a formatter keeps the comment on the header it names -------------------------

ONE_LINE = [
    "for v in x[[0, 1]]: out.append(v)\n",
    "for v in x[[0, 1]]: out.append(v)  # mine\n",
    "if x[[0]].any(): y = 1\nelse: y = 2\n",
    "def f():\n    while x[[0]].any(): break\n    return 1\n",
]
OUT = HEAD + "out = []\n"


def _formatters() -> list:
    import importlib.util
    import shutil
    import subprocess
    import sys

    out = []
    if shutil.which("ruff"):
        out.append(("ruff", lambda p: subprocess.run(["ruff", "format", "-q", "--no-cache", str(p)], check=True)))
    if importlib.util.find_spec("black") is not None:
        out.append(("black", lambda p: subprocess.run([sys.executable, "-m", "black", "-q", str(p)], check=True)))
    return out


@pytest.mark.parametrize("body", ONE_LINE)
def test_a_one_line_compound_statement_whose_header_crosses_is_split_and_given_back(body):
    src = (OUT + body).encode()
    res = wrap_source(src, "t.py")
    out = res.new.decode()
    (header,) = [ln for ln in out.splitlines() if "# xferaudit: site=" in ln]
    assert header.endswith('", split')  # the comment on the header,
    assert header.split("  # xferaudit:")[0].endswith(":")  # the body on a line of its own
    assert unwrap_source(res.new, "t.py").new == src  # joined back, byte for byte
    compile(res.new, "t.py", "exec")


def test_a_body_that_crosses_alone_is_named_where_it_is():
    src = (OUT + "for v in range(3): k = x[x > 0]\n").encode()
    out = wrap_source(src, "t.py").new.decode()
    assert out.endswith('for v in range(3): k = x[x > 0]  # xferaudit: site=":<module>:count(x[x>0])"\n')


@pytest.mark.parametrize("body", ONE_LINE)
def test_after_a_formatter_the_comment_still_names_the_header(tmp_path, body):
    formatters = _formatters()
    if not formatters:
        pytest.skip("neither ruff nor black here")
    src = (OUT + body).encode()
    wrapped = wrap_source(src, "t.py").new
    for name, run in formatters:
        path = tmp_path / f"{name}.py"
        path.write_bytes(wrapped)
        run(path)
        text = path.read_text()
        sites = find_in_source(text, "t.py").sites
        named = [s for s in sites if s.op == "statement"]
        assert len(named) == 1, (name, text)
        assert not [s for s in sites if s.rule == "XFA406" and not s.wrapped], (name, text)  # no new finding
        header = text.splitlines()[named[0].line - 1]
        assert header.lstrip().startswith(("for ", "if ", "while ")), (name, text)
        assert "out.append" not in header and "y = 1" not in header and "break" not in header
        # unwrap takes the comment off the formatted file too
        back = unwrap_source(text.encode(), "t.py").new
        assert back is not None and b"xferaudit: site=" not in back
        compile(back, "t.py", "exec")
