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
