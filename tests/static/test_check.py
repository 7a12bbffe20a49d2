"""`xferaudit check` and `xferaudit sites` end to end: formats, exit codes,
suppressions, baselines, --add-noqa, the cache and the config."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from xferaudit.cli import main

STEP = """\
import torch

def step(model, batch, device):
    x = batch.to(device)
    loss = model(x)
    return loss.item()
"""

WRAPPED = """\
import torch
import xferaudit.runtime as _xfer

def step(model, batch, device):
    x = _xfer.to(batch, device, site="train.py:step:batch.to")
    return _xfer.item(model(x), site="train.py:step:loss.item")
"""


@pytest.fixture
def proj(tmp_path, monkeypatch):
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def write(root: Path, rel: str, text: str) -> Path:
    p = root / rel
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(textwrap.dedent(text), encoding="utf-8")
    return p


def run(capsys, *args) -> tuple[int, str, str]:
    rc = main(list(args))
    out, err = capsys.readouterr()
    return rc, out, err


# --- text output and exit codes ----------------------------------------------------


def test_findings_exit_1_with_actionable_lines(proj, capsys):
    write(proj, "train.py", STEP)
    rc, out, _ = run(capsys, "check", "--no-cache")
    assert rc == 1
    lines = out.splitlines()
    assert lines[0].startswith("train.py:4:15: XFA203 `batch.to(device)`")
    assert "wrap it: `_xfer.to(batch, device, site=...)`" in lines[0]
    assert lines[1] == (
        "train.py:6:17: XFA202 `loss.item()` reads a device value to the host (down); "
        "wrap it: `_xfer.item(loss, site=...)` or run `xferaudit wrap`"
    )
    assert lines[-1] == "Found 2 findings."


def test_clean_exit_0(proj, capsys):
    write(proj, "train.py", WRAPPED)
    rc, out, _ = run(capsys, "check", "--no-cache", "train.py")
    assert rc == 0 and out.strip() == "All checks passed!"


def test_unparsable_file_is_reported_and_others_still_checked(proj, capsys):
    write(proj, "a_bad.py", "def f(:\n    pass\n")
    write(proj, "b_train.py", STEP)
    rc, out, _ = run(capsys, "check", "--no-cache", ".")
    assert rc == 2
    assert "a_bad.py:1:7: XFA001 cannot parse: SyntaxError: invalid syntax" in out
    assert "b_train.py:6:17: XFA202" in out


def test_missing_path_is_an_input_error(proj, capsys):
    write(proj, "train.py", STEP)
    rc, out, _ = run(capsys, "check", "--no-cache", "train.py", "nope.py")
    assert rc == 2
    assert "nope.py:1:1: XFA001 cannot read: No such file or directory" in out
    assert "train.py:6:17: XFA202" in out


def test_exit_zero_and_statistics(proj, capsys):
    write(proj, "train.py", STEP + "y = z.cpu()\nw = v.cpu()\n")
    rc, out, _ = run(capsys, "check", "--no-cache", "--exit-zero", "--statistics")
    assert rc == 0
    assert out.splitlines() == ["3\tXFA202\tunwrapped-down", "1\tXFA203\tunwrapped-move"]


def test_select_and_ignore_override_the_config(proj, capsys):
    (proj / "pyproject.toml").write_text('[tool.xferaudit]\nignore = ["XFA202"]\n')
    write(proj, "train.py", STEP)
    rc, out, _ = run(capsys, "check", "--no-cache", "-q")
    assert [ln.split()[1] for ln in out.splitlines()] == ["XFA203"]
    rc, out, _ = run(capsys, "check", "--no-cache", "-q", "--ignore", "XFA203")
    assert [ln.split()[1] for ln in out.splitlines()] == ["XFA202"]
    rc, out, _ = run(capsys, "check", "--no-cache", "-q", "--select", "XFA2", "--ignore", "")
    assert [ln.split()[1] for ln in out.splitlines()] == ["XFA203", "XFA202"]
    rc, out, err = run(capsys, "check", "--no-cache", "--select", "E501")
    assert rc == 2 and "E501" in err


def test_per_file_ignores_and_excludes(proj, capsys):
    (proj / "pyproject.toml").write_text(textwrap.dedent("""\
        [tool.xferaudit]
        per-file-ignores = { "tests/*" = ["XFA2"] }
        extend-exclude = ["legacy"]
    """))
    write(proj, "tests/test_x.py", STEP)
    write(proj, "legacy/old.py", STEP)
    write(proj, "src/train.py", STEP)
    rc, out, _ = run(capsys, "check", "--no-cache", "-q", ".")
    assert {ln.split(":")[0] for ln in out.splitlines()} == {"src/train.py"}
    # A file named explicitly is excluded too (pre-commit passes files by name).
    rc, out, _ = run(capsys, "check", "--no-cache", "legacy/old.py")
    assert rc == 0


# --- machine formats -------------------------------------------------------------


def test_json_is_ruffs_record(proj, capsys):
    write(proj, "train.py", STEP)
    rc, out, _ = run(capsys, "check", "--no-cache", "--format", "json")
    recs = json.loads(out)
    assert rc == 1 and len(recs) == 2
    r = recs[1]
    assert set(r) >= {"code", "message", "filename", "location", "end_location", "fix", "url"}
    assert r["code"] == "XFA202" and r["fix"]["applicability"] == "safe"
    assert r["url"] is None  # no docs-url and no documentation address installed: none made up
    assert r["filename"] == str(proj / "train.py")
    assert r["location"] == {"row": 6, "column": 17}
    assert r["end_location"] == {"row": 6, "column": 23}


def test_github_annotations(proj, capsys):
    write(proj, "train.py", STEP)
    rc, out, _ = run(capsys, "check", "--no-cache", "--format", "github")
    first = out.splitlines()[0]
    assert first.startswith(
        "::error title=xferaudit (XFA203),file=train.py,line=4,col=15,endLine=4,endColumn=25::"
        "train.py:4:15: XFA203 "
    )


def test_sarif_is_a_valid_minimal_2_1_0_log(proj, capsys):
    write(proj, "src/train.py", STEP)
    rc, out, _ = run(capsys, "check", "--no-cache", "--format", "sarif")
    log = json.loads(out)
    assert log["version"] == "2.1.0" and "sarif-2.1.0" in log["$schema"]
    (run_,) = log["runs"]
    driver = run_["tool"]["driver"]
    assert driver["name"] == "xferaudit"
    ids = [r["id"] for r in driver["rules"]]
    assert "XFA202" in ids and all(r["shortDescription"]["text"] for r in driver["rules"])
    res = run_["results"]
    assert [r["ruleId"] for r in res] == ["XFA203", "XFA202"]
    for r in res:
        assert driver["rules"][r["ruleIndex"]]["id"] == r["ruleId"]
        assert r["message"]["text"]
        loc = r["locations"][0]["physicalLocation"]
        assert loc["artifactLocation"] == {"uri": "src/train.py", "uriBaseId": "%SRCROOT%"}
        assert loc["region"]["startLine"] >= 1 and loc["region"]["startColumn"] >= 1
    assert run_["originalUriBaseIds"]["%SRCROOT%"]["uri"].endswith("/")


# --- suppressions and the codes beyond XFA2xx ---------------------------------------


def test_unused_suppressions_and_show_suppressed(proj, capsys):
    write(proj, "train.py", """\
        a = x.cpu()  # noqa: XFA202
        b = x.cpu()  # noqa: XFA201
        c = 1  # xferaudit: ignore
        d = 2  # noqa
        e = 3  # noqa: E501
    """)
    rc, out, _ = run(capsys, "check", "--no-cache", "-q")
    assert out.splitlines() == [
        "train.py:2:7: XFA202 `x.cpu()` reads a device value to the host (down); wrap it: "
        "`_xfer.cpu(x, site=...)` or run `xferaudit wrap`",
        "train.py:2:14: XFA101 unused suppression of XFA201: no XFA201 on this line; remove it "
        "(a site's line is the line of its called name)",
        "train.py:3:8: XFA101 `# xferaudit: ignore` suppresses nothing on this line: remove it",
    ]
    rc, out, _ = run(capsys, "check", "--no-cache", "-q", "--show-suppressed")
    assert "train.py:1:7: XFA202 [suppressed by noqa]" in out


def test_duplicate_site_names_across_files(proj, capsys):
    write(proj, "a.py", WRAPPED)
    write(proj, "b.py", WRAPPED.replace("batch.to", "other.to"))
    rc, out, _ = run(capsys, "check", "--no-cache", "-q", "--select", "XFA301")  # (XFA302 too: named train.py)
    assert rc == 1
    assert out.splitlines() == [
        'b.py:6:18: XFA301 site name "train.py:step:loss.item" is already used at a.py:6:18; '
        "both calls would count under one name: give this one its own"
    ]


# --- legacy codebases: --add-noqa and baselines -------------------------------------------


def test_add_noqa_keeps_encoding_line_endings_and_merges(proj, capsys):
    src = (
        "# -*- coding: latin-1 -*-\r\n"
        "import torch\r\n"
        "s = 'caf\xe9'; a = x.cpu()\r\n"
        "b = y.to(dev)  # noqa: E501\r\n"
        "c = '''\r\n"
        "text''' + z.cpu()\r\n"
        "d = (w\r\n"
        "     .item())\r\n"
    )
    p = proj / "legacy.py"
    p.write_bytes(src.encode("latin-1"))
    rc, _, err = run(capsys, "check", "--no-cache", "--add-noqa")
    assert rc == 0 and "Added 4 noqa directive(s) to 1 file(s)." in err
    data = p.read_bytes()
    assert data.count(b"\r\n") == 8 and b"\n" not in data.replace(b"\r\n", b"")
    text = data.decode("latin-1")
    assert "s = 'caf\xe9'; a = x.cpu()  # noqa: XFA202\r\n" in text
    assert "b = y.to(dev)  # noqa: E501, XFA203\r\n" in text
    assert "text''' + z.cpu()  # noqa: XFA202\r\n" in text
    assert "     .item())  # noqa: XFA202\r\n" in text
    rc, out, _ = run(capsys, "check", "--no-cache")
    assert rc == 0, out


def test_add_noqa_skips_a_line_that_ends_inside_a_string(proj, capsys):
    p = write(proj, "m.py", 'a = f(x.cpu(), """\ndoc\n""")\n')
    before = p.read_text()
    rc, _, err = run(capsys, "check", "--no-cache", "--add-noqa")
    assert rc == 2 and "m.py:1: the line ends inside a string" in err
    assert p.read_text() == before


def test_baseline_survives_line_shifts_and_fails_on_new_sites(proj, capsys):
    p = write(proj, "train.py", STEP)
    rc, _, err = run(capsys, "check", "--no-cache", "--write-baseline", "xfa-baseline.json")
    assert rc == 0 and "baseline of 2 finding(s)" in err
    base = json.loads((proj / "xfa-baseline.json").read_text())
    assert {"file": "train.py", "code": "XFA202", "function": "step", "count": 1} in base["entries"]
    assert run(capsys, "check", "--no-cache", "--baseline", "xfa-baseline.json")[0] == 0
    # Lines shift: still fine.
    p.write_text("# a header\n# more\n" + STEP)
    assert run(capsys, "check", "--no-cache", "--baseline", "xfa-baseline.json")[0] == 0
    # One more read in step: the key (train.py, XFA202, step) goes over its count.
    p.write_text(STEP.replace("return loss.item()", "print(loss.item())\n    return loss.item()"))
    rc, out, _ = run(capsys, "check", "--no-cache", "-q", "--baseline", "xfa-baseline.json")
    assert rc == 1
    lines = out.splitlines()
    assert len(lines) == 2 and all(" XFA202 " in ln for ln in lines)
    assert "[baseline: 1 allowed in step, 2 found]" in lines[0]
    # A new site in another function is a new key.
    p.write_text(STEP + "def other(t):\n    return t.cpu()\n")
    rc, out, _ = run(capsys, "check", "--no-cache", "-q", "--baseline", "xfa-baseline.json")
    assert rc == 1 and out.splitlines()[0].startswith("train.py:8:14: XFA202")


def test_bad_baseline_is_an_error_naming_the_file(proj, capsys):
    write(proj, "train.py", STEP)
    (proj / "b.json").write_text("{not json")
    rc, _, err = run(capsys, "check", "--no-cache", "--baseline", "b.json")
    assert rc == 2 and "b.json" in err
    rc, _, err = run(capsys, "check", "--no-cache", "--baseline", "missing.json")
    assert rc == 2 and "missing.json: no such baseline file" in err


# --- config errors -----------------------------------------------------------------------


@pytest.mark.parametrize("toml,needle", [
    ("[tool.xferaudit\n", "cannot parse"),
    ("[tool.xferaudit]\nselct = ['XFA2']\n", "unknown key(s) in [tool.xferaudit]: selct"),
    ("[tool.xferaudit]\nselect = 'XFA9x'\n", "is not an xferaudit code"),
    ("[[tool.xferaudit.rule]]\ncall = 'function'\ntarget = 'a.b'\nkind = 'sideways'\n", "kind must be one of"),
    ("[[tool.xferaudit.rule]]\ncall = 'function'\nkind = 'move'\n", "missing field 'target'"),
])
def test_config_errors_exit_2_naming_the_file(proj, capsys, toml, needle):
    (proj / "pyproject.toml").write_text(toml)
    write(proj, "train.py", STEP)
    rc, _, err = run(capsys, "check", "--no-cache")
    assert rc == 2
    assert str(proj / "pyproject.toml") in err and needle in err


def test_user_rule_rows_and_explicit_config(proj, capsys):
    cfg = proj / "conf" / "xfa.toml"
    cfg.parent.mkdir()
    cfg.write_text(textwrap.dedent("""\
        [[tool.xferaudit.rule]]
        id = "accelerate.send_to_device"
        call = "function"
        target = "accelerate.utils.send_to_device"
        kind = "move"
    """))
    write(proj, "train.py", "from accelerate.utils import send_to_device\nb = send_to_device(batch, dev)\n")
    rc, out, _ = run(capsys, "check", "--no-cache", "-q", "--config", str(cfg))
    assert rc == 1 and out.startswith("train.py:2:5: XFA203 `send_to_device(batch, dev)`")
    assert "wrap it: `_xfer.call(send_to_device, batch, dev, site=...)`" in out
    assert run(capsys, "check", "--no-cache")[0] == 0  # not without that config


# --- the cache ---------------------------------------------------------------------------


def test_cache_answers_a_warm_run_and_follows_content(proj, capsys, monkeypatch):
    p = write(proj, "train.py", STEP)
    rc1, out1, _ = run(capsys, "check", "-q")
    cache = list((proj / ".xferaudit_cache").glob("findings-*.json"))
    assert len(cache) == 1 and (proj / ".xferaudit_cache" / ".gitignore").read_text().strip().endswith("*")

    from xferaudit.static.project import scan as scan_mod

    calls = []
    real = scan_mod.analyze
    monkeypatch.setattr(scan_mod, "analyze", lambda *a: calls.append(a[1]) or real(*a))
    rc2, out2, _ = run(capsys, "check", "-q")
    assert (rc2, out2) == (rc1, out1) and calls == []  # answered from the cache
    p.write_text(STEP.replace("loss.item()", "loss"))
    rc3, out3, _ = run(capsys, "check", "-q")
    assert calls == ["train.py"] and rc3 == 1 and "XFA202" not in out3
    cache[0].write_text("{broken")
    assert run(capsys, "check", "-q")[1] == out3  # a broken cache is ignored


def test_parallel_and_serial_scans_agree(proj):
    from xferaudit.config import load_config
    from xferaudit.static.project.scan import scan

    for i in range(6):
        write(proj, f"pkg/m{i}.py", STEP * (i + 1))
    cfg = load_config(proj)
    serial = scan(["pkg"], cfg, use_cache=False, jobs=1)
    parallel = scan(["pkg"], cfg, use_cache=False, jobs=2)
    assert parallel.stats.workers == 2 and serial.stats.workers == 1
    key = lambda sc: [[(s.path, s.line, s.column, s.kind, s.site) for s in r.sites] for r in sc.results]  # noqa: E731
    assert key(serial) == key(parallel) and sum(map(len, key(serial))) == 2 * 21


# --- sites --------------------------------------------------------------------------------


def test_sites_json_lists_wrapped_and_unwrapped(proj, capsys):
    write(proj, "src/a.py", STEP)
    write(proj, "src/b.py", WRAPPED + "z = q.cpu()  # noqa: XFA202\n")
    rc, out, _ = run(capsys, "sites", "src", "--format", "json", "--no-cache")
    assert rc == 0
    items = json.loads(out)
    keys = {"path", "line", "column", "end_line", "end_column", "kind", "rule", "call", "wrapped", "site", "suppressed"}
    assert all(keys <= set(i) for i in items)
    assert [(i["path"], i["line"], i["column"], i["kind"], i["wrapped"], i["suppressed"]) for i in items] == [
        ("src/a.py", 4, 15, "move", False, False),
        ("src/a.py", 6, 17, "down", False, False),
        ("src/b.py", 5, 15, "move", True, False),
        ("src/b.py", 6, 18, "down", True, False),
        ("src/b.py", 7, 7, "down", False, True),
    ]
    assert items[0]["site"] == "src/a.py:step:batch.to" and items[0]["rule"] == "XFA203"


def test_sites_text_and_paths_relative_to_cwd(proj, capsys, monkeypatch):
    write(proj, "src/a.py", STEP)
    monkeypatch.chdir(proj / "src")
    rc, out, _ = run(capsys, "sites", "--no-cache", str(proj / "src" / "a.py"))
    assert out.splitlines()[0].startswith("a.py:4:15: move  XFA203 unwrapped  batch.to(device)")


# --- rule docs ------------------------------------------------------------------------------


def test_rule_docs(capsys):
    rc, out, _ = run(capsys, "rule", "xfa202")
    assert rc == 0
    for head in ("# unwrapped-down (XFA202)", "## What it does", "## Why is this bad?", "## Example", "## Use instead:"):
        assert head in out
    rc, out, _ = run(capsys, "rule", "--all", "--format", "json")
    assert [d["code"] for d in json.loads(out)] == [
        "XFA001", "XFA101", "XFA201", "XFA202", "XFA203", "XFA204", "XFA301", "XFA302",
        "XFA401", "XFA402", "XFA403", "XFA404", "XFA405", "XFA406", "XFA407", "XFA408", "XFA451", "XFA501", "XFA502",
        "XFA601",
    ]
    rc, _, err = run(capsys, "rule", "XFA999")
    assert rc == 2 and "unknown code" in err


def test_every_code_is_a_valid_flake8_code():
    import re

    from xferaudit.rules import KIND_CODES
    from xferaudit.static.codes import CODES

    assert set(KIND_CODES.values()) <= set(CODES)
    assert all(re.fullmatch(r"[A-Z]{1,3}[0-9]{3}", c) for c in CODES)


# --- start-up stays light -------------------------------------------------------------------


def test_check_never_imports_libcst_or_torch(proj):
    """Nor in any format but json and sarif, whose fixes run the codemod."""
    write(proj, "train.py", STEP)
    code = (
        "import sys; from xferaudit.cli import main\n"
        "for f in ('full', 'gitlab', 'junit', 'github'):\n"
        "    main(['check', '--no-cache', '-q', '--format', f, 'train.py'])\n"
        "rc = main(['check', '--no-cache', '-q', 'train.py'])\n"
        "bad = [m for m in ('libcst', 'torch', 'numpy') if m in sys.modules]\n"
        "print(rc, bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=proj, capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])})
    assert out.stdout.strip().splitlines()[-1] == "1 []", out.stderr


def test_urls_point_at_the_rule_pages_of_the_configured_docs_site(proj, capsys):
    (proj / "pyproject.toml").write_text('[tool.xferaudit]\ndocs-url = "https://docs.example.org/xferaudit"\n')
    write(proj, "train.py", STEP)
    rc, out, _ = run(capsys, "check", "--no-cache", "--format", "json")
    assert [r["url"] for r in json.loads(out)] == [
        "https://docs.example.org/xferaudit/rules/XFA203/", "https://docs.example.org/xferaudit/rules/XFA202/"]
    rc, out, _ = run(capsys, "check", "--no-cache", "--format", "sarif")
    rules = json.loads(out)["runs"][0]["tool"]["driver"]["rules"]
    assert {r["id"]: r["helpUri"] for r in rules}["XFA202"] == "https://docs.example.org/xferaudit/rules/XFA202/"


def test_without_a_docs_site_no_address_is_made_up(proj, capsys):
    write(proj, "train.py", STEP)
    rc, out, _ = run(capsys, "check", "--no-cache", "--format", "sarif")
    run_ = json.loads(out)["runs"][0]
    assert all("helpUri" not in r and "xferaudit rule " + r["id"] in r["help"]["text"]
               for r in run_["tool"]["driver"]["rules"])
    assert "informationUri" not in run_["tool"]["driver"]
    from xferaudit.static.findings import diagnostics

    assert not hasattr(diagnostics, "DOCS_URL")


@pytest.mark.parametrize("value", ["docs.example.org", "ftp://x/", 3, "https://a b/"])
def test_a_bad_docs_url_is_a_config_error(proj, capsys, value):
    (proj / "pyproject.toml").write_text(f"[tool.xferaudit]\ndocs-url = {json.dumps(value)}\n")
    write(proj, "train.py", STEP)
    rc, _, err = run(capsys, "check", "--no-cache")
    assert rc == 2 and "docs-url must be an http(s) or file:// address" in err


def test_the_installed_packages_documentation_address_is_the_default(monkeypatch):
    from xferaudit.static.findings import diagnostics

    monkeypatch.setattr(diagnostics, "_INSTALLED", ["https://pkg.example.org/docs/"])
    assert diagnostics.rule_url("XFA202", diagnostics.docs_base(None)) == "https://pkg.example.org/docs/rules/XFA202/"
    assert diagnostics.rule_url("XFA202", "file:///srv/site") == "file:///srv/site/rules/XFA202/index.html"


def test_the_cache_key_covers_every_module_of_the_static_package_and_every_pack():
    from pathlib import Path

    import xferaudit
    from xferaudit.rules import pack_files
    from xferaudit.static.project import cache

    pkg = Path(xferaudit.__file__).parent
    hashed = set(cache._code_files())
    static = {p for p in (pkg / "static").rglob("*.py") if "__pycache__" not in p.parts}
    assert static <= hashed  # found, not listed by hand: a new module is covered too
    assert (pkg / "static" / "codemod" / "shapes.py") in hashed and (pkg / "static" / "front" / "finder.py") in hashed
    assert (pkg / "wrapform.py") in hashed
    assert set(pack_files()) <= hashed and pack_files()


def test_a_backslash_continued_call_reads_as_one_line(proj, capsys):
    write(proj, "train.py", "def step(x, loss, model):\n    y = x \\\n        .cpu()\n"
                            "    z = loss.to(\\\n        'cpu')\n    return y, z\n")
    rc, out, _ = run(capsys, "check", "--no-cache", "-q")
    assert rc == 1
    assert "XFA202 `x.cpu()` reads" in out and "\\." not in out
    assert "`loss.to('cpu')`" in out and "\\" not in out
