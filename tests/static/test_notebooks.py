"""Notebooks: code cells read as Python, positions as cell and line (as ruff
writes them), magics skipped, and the file written back byte for byte."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from xferaudit.static.front import notebook

CELLS = [
    {"cell_type": "markdown", "metadata": {}, "source": ["# Training \u00fcn\u00efcode\n", "x.cpu()"]},
    {"cell_type": "code", "execution_count": 1, "metadata": {}, "outputs": [],
     "source": ["import torch\n", "%matplotlib inline\n", "x = torch.ones(3, device=\"cuda\")"]},
    {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
     "source": ["!pip install foo\n", "def step(model, batch, device):\n",
                "    out = model(batch).to(device, non_blocking=True)\n", "    %time y = 1\n",
                "    files = !ls\n", "    return out.mean().item()\n"]},
    {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
     "source": ["%%bash\n", "echo x.cpu()\n"]},
    {"cell_type": "raw", "metadata": {}, "source": ["x.cuda()"]},
    {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [], "source": "print(x.cpu())"},
]


def make(path, indent=1, sort_keys=True, ensure_ascii=False, final="\n"):
    nb = {"cells": CELLS, "metadata": {"kernelspec": {"name": "python3"}}, "nbformat": 4, "nbformat_minor": 5}
    path.write_text(json.dumps(nb, indent=indent, sort_keys=sort_keys, ensure_ascii=ensure_ascii) + final,
                    encoding="utf-8")
    return path


def run(*args, cwd):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "xferaudit", *args], capture_output=True, text=True, cwd=cwd,
                          env=env)


def test_code_cells_read_magics_and_other_cells_left_out(tmp_path):
    nb = notebook.read(make(tmp_path / "nb.ipynb").read_bytes())
    assert "%" not in nb.text and "!" not in nb.text and "echo" not in nb.text and "x.cuda" not in nb.text
    compile(nb.text, "nb", "exec")
    assert nb.text.count("pass  # xferaudit-magic") == 4


def test_check_and_sites_report_cell_and_line(tmp_path):
    make(tmp_path / "nb.ipynb")
    r = run("check", "nb.ipynb", cwd=tmp_path)
    assert r.returncode == 1
    assert "nb.ipynb:cell 3:3:24: XFA203" in r.stdout  # cell 3 counts the markdown cell, as ruff does
    assert "nb.ipynb:cell 3:6:23: XFA202" in r.stdout
    assert "nb.ipynb:cell 6:1:9: XFA202" in r.stdout
    assert r.stdout.count("XFA2") == 3  # nothing from the markdown, raw or %%bash cells
    s = run("sites", "nb.ipynb", cwd=tmp_path)
    assert "nb.ipynb:cell 3:3:24: move" in s.stdout


def test_folder_search_finds_notebooks(tmp_path):
    (tmp_path / "sub").mkdir()
    make(tmp_path / "sub" / "nb.ipynb")
    r = run("check", ".", cwd=tmp_path)
    assert "sub/nb.ipynb:cell 3:3:24: XFA203" in r.stdout


@pytest.mark.parametrize("layout", [
    dict(indent=1, sort_keys=True, ensure_ascii=False),  # as Jupyter writes it
    dict(indent=2, sort_keys=False, ensure_ascii=True, final=""),
])
def test_wrap_then_unwrap_gives_the_notebook_back_byte_for_byte(tmp_path, layout):
    p = make(tmp_path / "nb.ipynb", **layout)
    before = p.read_bytes()
    r = run("wrap", "nb.ipynb", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    after = json.loads(p.read_text(encoding="utf-8"))
    cells = after["cells"]
    assert cells[0] == CELLS[0] and cells[3] == CELLS[3] and cells[4] == CELLS[4]  # untouched
    assert "import xferaudit.runtime as _xfer\n" in cells[1]["source"]
    assert "%matplotlib inline\n" in cells[1]["source"] and "    %time y = 1\n" in cells[2]["source"]
    assert cells[5]["source"] == 'print(_xfer.cpu(x, site="nb.ipynb:<module>:x.cpu"))'  # a string stays a string
    assert run("check", "nb.ipynb", cwd=tmp_path).returncode == 0
    r = run("unwrap", "nb.ipynb", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert p.read_bytes() == before


def test_unrecognised_json_layout_is_left_alone(tmp_path):
    p = tmp_path / "nb.ipynb"
    make(p)
    odd = p.read_text(encoding="utf-8").replace('"cells": [', '"cells":   [')
    p.write_text(odd, encoding="utf-8")
    r = run("wrap", "nb.ipynb", cwd=tmp_path)
    assert r.returncode == 2 and "layout" in r.stdout + r.stderr
    assert p.read_text(encoding="utf-8") == odd


def test_not_json_is_reported_not_a_traceback(tmp_path):
    (tmp_path / "nb.ipynb").write_text("{not json", encoding="utf-8")
    r = run("check", "nb.ipynb", cwd=tmp_path)
    assert r.returncode != 0 and "XFA001" in r.stdout + r.stderr and "Traceback" not in r.stderr
    r = run("wrap", "nb.ipynb", cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
