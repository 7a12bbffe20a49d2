"""A findings cache that is corrupt, and a notebook no reader can hold, never
crash `check` or `sites`: the bad cache is discarded (or the bad entry) and
rebuilt; the bad notebook is XFA001 for that file alone."""

from __future__ import annotations

import json

import pytest

from xferaudit.cli import main

STEP = "import torch\n\n\ndef step(x, loss):\n    y = x.cpu()\n    return loss.item(), y\n"
OTHER = "def g(t):\n    return t.cuda()\n"


@pytest.fixture
def proj(make_project):
    return make_project({"train.py": STEP, "other.py": OTHER})


def _cache_file(proj):
    (f,) = (proj / ".xferaudit_cache").glob("findings-*.json")
    return f


def _runs(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _entry(proj, name="train.py"):
    return json.loads(_cache_file(proj).read_text())["files"][name]


def _deep(n):
    return "[" * n + "]" * n


def _corrupt_whole(text):
    return lambda proj: _cache_file(proj).write_text(text)


def _corrupt_entry(fn):
    def corrupt(proj):
        f = _cache_file(proj)
        data = json.loads(f.read_text())
        data["files"]["train.py"] = fn(data["files"]["train.py"])
        f.write_text(json.dumps(data))
    return corrupt


def _negative_line(entry):
    entry[1][4][0][0] = -3  # the first site's line
    return entry


def _site_field(i, value):
    def fn(entry):
        entry[1][4][0][i] = value
        return entry
    return fn


def _suppression(entry):
    entry[1][3] = [[-1, ["XFA202"]]]
    return entry


CORRUPTIONS = {
    "files null": _corrupt_whole('{"format": 1, "files": null}'),
    "files a list": _corrupt_whole('{"format": 1, "files": [1, 2]}'),
    "files a string": _corrupt_whole('{"format": 1, "files": "x"}'),
    "the whole cache a list": _corrupt_whole("[1, 2, 3]"),
    "100k-deep JSON": _corrupt_whole('{"format": 1, "files": ' + _deep(100_000) + "}"),
    "an entry that is a number": _corrupt_entry(lambda e: 7),
    "an entry that is null": _corrupt_entry(lambda e: None),
    "an entry of one item": _corrupt_entry(lambda e: [e[0]]),
    "findings that are a dict": _corrupt_entry(lambda e: [e[0], {"a": 1}]),
    "a negative line": _corrupt_entry(_negative_line),
    "a line that is a string": _corrupt_entry(_site_field(0, "5")),
    "a column that is a bool": _corrupt_entry(_site_field(1, True)),
    "a call that is a number": _corrupt_entry(_site_field(6, 12)),
    "a site of too few fields": _corrupt_entry(lambda e: [e[0], e[1][:4] + [[e[1][4][0][:3]]] + e[1][5:]]),
    "a negative suppression line": _corrupt_entry(_suppression),
    "an error line of zero": _corrupt_entry(lambda e: [e[0], [e[1][0], 0] + e[1][2:]]),
    "a line past the end of the file": _corrupt_entry(_site_field(0, 10_000)),
}


@pytest.mark.parametrize("corruption", CORRUPTIONS)
def test_a_corrupt_cache_is_discarded_and_rebuilt(proj, capsys, corruption):
    rc, fresh, _ = _runs(capsys, "check", "-q")
    assert rc == 1 and fresh.count("XFA20") == 3
    good = _entry(proj)
    CORRUPTIONS[corruption](proj)
    rc, out, err = _runs(capsys, "check", "-q")
    assert (rc, out) == (1, fresh), err
    assert "Traceback" not in err
    assert _entry(proj) == good  # rebuilt: the next run reads it back
    CORRUPTIONS[corruption](proj)
    rc, out, err = _runs(capsys, "sites", "--format", "json")
    assert rc == 0 and len(json.loads(out)) == 3, err


def test_a_notebook_nested_50000_deep_is_xfa001_for_that_file_alone(proj, capsys):
    (proj / "deep.ipynb").write_text('{"cells": [], "metadata": ' + _deep(50_000) + "}")
    rc, out, err = _runs(capsys, "check", "--no-cache", "-q")
    assert rc == 2 and "Traceback" not in err
    assert "deep.ipynb:1:1: XFA001" in out and "nested" in out
    assert out.count("XFA20") == 3  # the other files still checked
    rc, out, err = _runs(capsys, "sites", "--no-cache")
    assert "Traceback" not in err and out.count("XFA20") + out.count(".cpu") >= 2


def test_a_notebook_whose_code_nests_too_deeply_is_xfa001(proj, capsys):
    cell = {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
            "source": "x = " + "(" * 50_000 + ")" * 50_000 + "\n"}
    (proj / "code.ipynb").write_text(json.dumps({"cells": [cell], "metadata": {}, "nbformat": 4,
                                                 "nbformat_minor": 5}, indent=1) + "\n")
    rc, out, err = _runs(capsys, "check", "--no-cache", "-q")
    assert rc == 2 and "Traceback" not in err and "code.ipynb" in out and "XFA001" in out
    assert out.count("XFA20") == 3
    rc, out, err = _runs(capsys, "wrap", "--diff", "code.ipynb")
    assert rc == 2 and "Traceback" not in err
