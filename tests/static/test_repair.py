"""Old Python the parser refuses is read anyway, so its sites are listed at
their original positions (xferaudit/static/front/repair.py)."""

from __future__ import annotations

from xferaudit.static.front.finder import find_in_source, split_lines
from xferaudit.static.front.repair import repair


def positions(src: str):
    res = find_in_source(src, "old.py")
    return res, [(s.line, s.column, s.kind) for s in res.sites]


def test_async_keyword_argument_and_columns_after_it():
    src = "import torch\nx, y = a.cuda(async=True), b.cuda(async=True)\n"
    res, found = positions(src)
    assert res.repaired and res.error.startswith("SyntaxError")
    assert found == [(2, 10, "up"), (2, 30, "up")]
    assert src.splitlines()[1][29:33] == "cuda"


def test_print_statements_one_and_several_lines():
    src = (
        "import torch\n"
        "print 'loss', loss.item()  # a comment with x.cpu()\n"
        "print >>sys.stderr, 'acc %.2f' % (\n"
        "    acc.cpu(),)\n"
        "print\n"
    )
    res, found = positions(src)
    assert res.repaired
    assert found == [(2, 20, "down"), (4, 9, "down")]


def test_python2_statements_and_literals():
    src = (
        "import torch\n"
        "try:\n"
        "    n = 0777 + 10L\n"
        "except Exception, e:\n"
        "    raise ValueError, 'bad %s' % e.tolist()\n"
        "if a <> b: c = `d` + x.cpu()\n"  # (`d`.cpu() would be repr(d).cpu(): a str, no site)
        "s = ur'x'\n"
    )
    res, found = positions(src)
    assert res.repaired
    assert found == [(5, 36, "down"), (6, 24, "down")]


def test_notebook_magics_and_tab_indentation():
    src = "%matplotlib inline\n!pip install torch\nif x:\n\ty = z.to(dev)\n        w = v.cpu()\n"
    res, found = positions(src)
    assert res.repaired
    assert found == [(4, 8, "move"), (5, 15, "down")]


def test_lines_are_never_added_and_hopeless_files_give_up():
    src = "print 'a'\nx = 1\n"
    text, cmap = repair(split_lines(src))
    assert text.count("\n") == src.count("\n") and 1 in cmap and 2 not in cmap
    assert repair(split_lines("def f(:\n    pass\n")) is None
    res, found = positions("def f(:\n    x.cpu()\n")
    assert not res.repaired and found == []


def test_check_reports_xfa001_and_the_sites_of_a_repaired_file(tmp_path, monkeypatch, capsys):
    from xferaudit.cli import main

    (tmp_path / "old.py").write_text("print 'x', y.cpu()\n")
    monkeypatch.chdir(tmp_path)
    rc = main(["check", "--no-cache", "-q", "old.py"])
    out = capsys.readouterr().out.splitlines()
    assert rc == 2
    assert out[0].startswith("old.py:1:1: XFA001 cannot parse: SyntaxError: Missing parentheses")
    assert out[1].startswith("old.py:1:14: XFA202 `y.cpu()`")
    rc = main(["sites", "--no-cache", "--format", "json", "old.py"])
    captured = capsys.readouterr()
    assert rc == 0 and '"column": 14' in captured.out and "read it as old Python" not in captured.out
    assert "old Python" in captured.err
