"""Fixes as data: each finding `wrap` can rewrite carries the edits `wrap` makes.

The edits are applied here by a tiny applier of our own (rows and character
columns from 1, sorted, an identical edit applied once, an overlapping one
skipped, as ruff applies fixes), never by the code that made them; the result
must be byte for byte what `wrap` writes when it wraps that one site.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path

import pytest

from xferaudit.cli import main
from xferaudit.static.codemod import code_style, wrap_source
from xferaudit.static.findings.edits import Positions, hunks, text_edits
from xferaudit.static.front.source import decode_source, split_lines

ROOT = Path(__file__).resolve().parents[2]


# --- the independent applier ---------------------------------------------------------


def _offset(lines: list[str], row: int, column: int) -> int:
    """Rows and columns from 1, columns in characters: the row's start plus the column."""
    return sum(len(x) for x in lines[: row - 1]) + column - 1


def apply_edits(text: str, edits: list[dict]) -> str:
    lines = split_lines(text)
    spans = []
    for e in edits:
        a = _offset(lines, e["location"]["row"], e["location"]["column"])
        b = _offset(lines, e["end_location"]["row"], e["end_location"]["column"])
        spans.append((a, b, e["content"]))
    out, last = [], 0
    for a, b, content in sorted(set(spans)):  # an identical edit once
        if a < last:
            continue  # overlaps one applied already: the next round gets it
        out.append(text[last:a])
        out.append(content)
        last = b
    out.append(text[last:])
    return "".join(out)


def test_the_applier_itself():
    text = "ab\ncd\n"
    e1 = {"content": "X", "location": {"row": 1, "column": 2}, "end_location": {"row": 2, "column": 1}}
    e2 = {"content": "Y", "location": {"row": 1, "column": 1}, "end_location": {"row": 1, "column": 3}}
    assert apply_edits(text, [e1]) == "aXcd\n"
    assert apply_edits(text, [e1, e1]) == "aXcd\n"  # identical: once
    assert apply_edits(text, [e2, e1]) == "Y\ncd\n"  # overlapping: the later one skipped


# --- helpers -------------------------------------------------------------------------------


@pytest.fixture
def proj(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def check_json(capsys, *args) -> list[dict]:
    main(["check", "--no-cache", "--format", "json", *args])
    out, _ = capsys.readouterr()
    return json.loads(out)


def wrap_one(path: Path, rel: str, rec: dict) -> str:
    """What `wrap` writes for the site of one finding, that site alone."""
    from xferaudit.config import load_config

    cfg = load_config(path)
    data = path.read_bytes()
    row, col = rec["location"]["row"], rec["location"]["column"]
    res = wrap_source(data, str(path), cfg.table(), rel, lambda c: cfg.code_enabled(c, rel), code_style(cfg.root),
                      site_ok=lambda s: (s.line, s.column, s.rule) == (row, col, rec["code"]))
    assert res.new is not None, rec
    return decode_source(res.new)


def assert_each_fix_is_wraps_edit(path: Path, rel: str, recs: list[dict]) -> int:
    text = decode_source(path.read_bytes())
    n = 0
    for rec in recs:
        if rec["fix"] is None:
            continue
        n += 1
        assert apply_edits(text, rec["fix"]["edits"]) == wrap_one(path, rel, rec), rec
    return n


def fixpoint(path: Path, capsys) -> str:
    """Apply every fix of the file, round after round, as `ruff --fix` does."""
    for _ in range(10):
        recs = [r for r in check_json(capsys, str(path)) if r["fix"]]
        if not recs:
            break
        text = decode_source(path.read_bytes())
        path.write_text(apply_edits(text, [e for r in recs for e in r["fix"]["edits"]]), encoding="utf-8")
    return path.read_text(encoding="utf-8")


# --- the property: a fix is what wrap writes -------------------------------------------------

CASES = {
    # two sites on adjacent lines and two in one statement: each wrapped alone
    "adjacent.py": """\
        import torch

        def step(model, batch, device):
            x = batch.to(device)
            y = batch.cuda()
            loss = model(x, y)
            a, b = loss.cpu(), x.cpu()
            return loss.item()
        """,
    # a site right below where the import goes
    "import_next.py": """\
        import torch
        x = torch.ones(3).cuda()
        print(x.cpu())
        """,
    # a long line wrap breaks black-style; a receiver on lines above the call
    "long.py": """\
        import torch

        def evaluate(model, batches, device):
            total = sum(model(b.to(device, non_blocking=True)).argmax(dim=-1).eq(b).sum().item() for b in batches)
            ids = (
                batches[0]
                .cpu()
            )
            return total, ids
        """,
    # a graph, a decorator and implicit sites
    "graph.py": """\
        import torch

        model = torch.nn.Linear(4, 4).cuda()
        fast = torch.compile(model)

        @torch.compile
        def f(x):
            return x * 2

        def loop(net, x, dev):
            loss = net.to(dev)(x.to(dev)).sum()
            if loss > 100:
                print(float(loss))
        """,
    # non-ASCII text before a site: columns count characters
    "unicode.py": """\
        import torch

        def f(x):
            s = "héllo → wörld"; y = x.cpu()
            return y, "ü", x.item()
        """,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_each_json_fix_applied_alone_is_what_wrap_writes_for_that_site(proj, capsys, name):
    path = proj / name
    path.write_text(textwrap.dedent(CASES[name]), encoding="utf-8")
    recs = check_json(capsys, name)
    assert assert_each_fix_is_wraps_edit(path, name, recs) >= 2


@pytest.mark.parametrize("name", sorted(CASES))
def test_all_fixes_applied_round_after_round_wrap_every_site_and_unwrap_gives_the_file_back(proj, capsys, name):
    from xferaudit.static.codemod import unwrap_source

    path = proj / name
    original = textwrap.dedent(CASES[name])
    path.write_text(original, encoding="utf-8")
    wrapped = wrap_source(path.read_bytes(), str(path), None, name, None, code_style(proj)).new.decode()
    fixed = fixpoint(path, capsys)
    assert not [r for r in check_json(capsys, name) if r["fix"]]
    assert unwrap_source(fixed.encode(), name, None, code_style(proj)).new.decode() == original
    if name not in ("adjacent.py", "graph.py"):
        # Sites in statements of their own: one round, and exactly what wrap writes. (Two
        # sites of one statement may be broken over lines differently one at a time.)
        assert fixed == wrapped


@pytest.mark.parametrize("rel", ["tests/corpus/train_classifier.py", "tests/corpus/eval_lm.py",
                                 "tests/corpus/ddp_cudagraph_train.py", "examples/gpt_train.py"])
def test_fixes_on_realistic_files(proj, capsys, rel):
    shutil.copy(ROOT / rel, proj / "t.py")
    recs = check_json(capsys, "t.py")
    assert assert_each_fix_is_wraps_edit(proj / "t.py", "t.py", recs) >= 5
    # the fixes of distinct statements share one identical import edit
    fixed = [r for r in recs if r["fix"]]
    firsts = {json.dumps(r["fix"]["edits"][0], sort_keys=True) for r in fixed}
    assert len(firsts) <= 2


def test_fix_shape_and_applicability_per_kind(proj, capsys):
    (proj / "a.py").write_text(textwrap.dedent(CASES["graph.py"]) + "z = torch.zeros(2).cuda()\nv = z.item()\n")
    recs = check_json(capsys, "a.py")
    by_code = {}
    for r in recs:
        by_code.setdefault(r["code"], r)
    fix = by_code["XFA202"]["fix"]
    assert set(fix) == {"applicability", "message", "edits"}
    assert fix["applicability"] == "safe" and fix["message"].startswith("Wrap it: `_xfer.item(z, site=")
    assert all(set(e) == {"content", "location", "end_location"} for e in fix["edits"])
    assert by_code["XFA201"]["fix"]["applicability"] == "safe"
    assert by_code["XFA204"]["fix"]["applicability"] == "unsafe"
    implicit = [r for r in recs if r["code"].startswith("XFA4") and r["fix"]]
    assert implicit and all(r["fix"]["applicability"] == "unsafe" for r in implicit)


def test_a_count_read_backs_fix_is_a_safe_comment_on_its_statement_without_the_import(proj, capsys):
    (proj / "a.py").write_text("import torch\n\nz = torch.zeros(4).cuda()\nn = z.nonzero(\n)\nv = z.item()\n")
    recs = {r["code"]: r for r in check_json(capsys, "a.py")}
    fix = recs["XFA405"]["fix"]
    assert fix["applicability"] == "safe"
    text = (proj / "a.py").read_text()
    assert apply_edits(text, fix["edits"]) == text.replace(
        "n = z.nonzero(\n)\n", "n = z.nonzero(\n)  # xferaudit: site=\":<module>:z.nonzero()\"\n")


def test_no_fix_where_wrap_writes_nothing(proj, capsys):
    # a suppressed site is not reported; a site above the import cannot use its alias
    (proj / "a.py").write_text("from __future__ import annotations\nimport torch\n"
                               "x = torch.ones(1, device='cuda')\ny = x.cpu()  # noqa: XFA202\n"
                               "with open('f') as fh: z = fh.read()\n")
    recs = check_json(capsys, "--show-suppressed", "a.py")
    assert [r["fix"] for r in recs if r.get("suppressed")] == [None]
    (proj / "b.py").write_text("print('no sites')\n")
    assert check_json(capsys, "b.py") == []


def test_rename_fix_for_a_site_named_in_another_file(proj, capsys):
    (proj / "new.py").write_text(
        "import xferaudit.runtime as _xfer\n\n"
        "def f(x):\n    return _xfer.cpu(x, site=\"old.py:f:x.cpu\")\n"
    )
    (rec,) = check_json(capsys, "new.py")
    assert rec["code"] == "XFA302"
    assert rec["fix"]["applicability"] == "unsafe"
    text = (proj / "new.py").read_text()
    # the new name is the file's own: the short literal (the path comes from the file at run time)
    assert apply_edits(text, rec["fix"]["edits"]) == text.replace("old.py:f:x.cpu", ":f:x.cpu")


def test_a_notebook_finding_has_no_fix(proj, capsys):
    nb = {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
                     "source": ["import torch\n", "x = torch.ones(1).cuda()\n"]}],
          "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (proj / "n.ipynb").write_text(json.dumps(nb))
    recs = check_json(capsys, "n.ipynb")
    assert recs and all(r["fix"] is None for r in recs)


# --- edits ------------------------------------------------------------------------------


def test_edits_rows_and_columns_count_characters_and_python_lines():
    old = "a = 'é'; b = x.cpu()\r\nc = 1\x0cd = 2\n"
    new = old.replace("x.cpu()", "_xfer.cpu(x)")
    (e,) = text_edits(old, new)
    assert e.start == (1, 14) and e.end == (1, 20) and e.content == "_xfer.cpu(x"
    pos = Positions(old)
    assert pos.position(len(old)) == (3, 1)  # the form feed does not split a line
    assert Positions("ab").position(2) == (1, 3)


def test_edits_never_split_a_word_and_insertions_are_whole_lines():
    old = "import torch\n\nx = y.cpu()\n"
    new = "import torch\nimport xferaudit.runtime as _xfer\n\nx = _xfer.cpu(y)\n"
    ins, call = hunks(old, new)
    assert ins.edit.content == "import xferaudit.runtime as _xfer\n" and ins.edit.start == ins.edit.end == (2, 1)
    assert call.edit.content == "_xfer.cpu(y" and call.edit.start == (3, 5)


def test_fixes_made_on_a_process_pool_are_the_ones_made_in_process(proj, capsys):
    for i, rel in enumerate(["tests/corpus/train_classifier.py", "tests/corpus/eval_lm.py",
                             "examples/gpt_train.py"] * 3):
        shutil.copy(ROOT / rel, proj / f"m{i}.py")
    serial = check_json(capsys, "--jobs", "1")
    pooled = check_json(capsys, "--jobs", "2")
    assert pooled == serial and sum(1 for r in serial if r["fix"]) > 20


def test_adjacent_sites_and_sites_sharing_a_line_take_one_codemod_run(proj, capsys, monkeypatch):
    # runs of adjacent lines, two sites to a line, between lines that repeat: each fix is still
    # what wrap writes for its site alone, from the one codemod run over the whole file
    import xferaudit.static.codemod as cm

    body = "".join(f"    v{k} = batch[{k}].to(dev); w{k} = model(v{k}).cpu()\n" for k in range(3))
    text = "import torch\n\n\n" + "".join(f"def step{i}(model, batch, dev):\n{body}    return None\n\n\n"
                                          for i in range(3)) + "# filler\n" * 30
    path = proj / "many.py"
    path.write_text(text, encoding="utf-8")
    real, runs = cm.wrap_source, []
    monkeypatch.setattr(cm, "wrap_source", lambda *a, **k: runs.append(1) or real(*a, **k))
    recs = check_json(capsys, "many.py")
    monkeypatch.setattr(cm, "wrap_source", real)
    assert len(runs) == 1 and len(recs) == 18 and all(r["fix"] for r in recs)
    middle = [r for r in recs if 12 <= r["location"]["row"] <= 14]  # (step1's: the others are alike)
    assert assert_each_fix_is_wraps_edit(path, "many.py", middle) == 6


def test_the_line_diff_is_a_diff_and_keeps_changes_apart():
    from xferaudit.static.findings.edits import changed_runs

    a = ["def f():\n", "    x = 1\n", "\n", "    return x\n"] * 500
    b = list(a)
    for k in range(3, len(b), 40):  # many lines changed, among lines that repeat
        b[k] = f"    return x + {k}\n"
    runs = changed_runs(a, b)
    assert [(i1, i2) for i1, i2, _, _ in runs] == [(k, k + 1) for k in range(3, len(b), 40)]
    assert all(j2 - j1 == 1 for _, _, j1, j2 in runs)
    assert text_edits("".join(a), "".join(b))[0].content == " + 3"
