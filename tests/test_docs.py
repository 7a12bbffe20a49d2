"""The documentation site: generated pages cover the code, and the site builds
with warnings as errors (skipped where mkdocs is not installed)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _hook():
    spec = importlib.util.spec_from_file_location("xferaudit_docs_hook", ROOT / "docs" / "_hooks" / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_row_of_every_pack_is_in_the_generated_table():
    from xferaudit.rules import available_packs, load_pack

    text = _hook().packs_tables()
    for name in available_packs():
        assert f"### The `{name}` pack" in text
        for r in load_pack(name).rules:
            assert f"| `{r.id}` |" in text, r.id


def test_every_code_gets_a_page_and_a_nav_entry():
    from xferaudit.static.codes import CODES

    hook = _hook()
    index = hook.rules_index()
    nav = [{"Rules": ["rules/index.md"]}]
    hook._expand_rules_nav(nav)
    entries = [next(iter(e.values())) for e in nav[0]["Rules"][1:]]
    assert entries == [f"rules/{c}.md" for c in CODES]
    for code, doc in CODES.items():
        assert f"[`{code}`]({code}.md) | {doc.name} |" in index
        page = hook.rule_page(doc)
        assert page.startswith(f"# {code} {doc.name}\n") and doc.example.strip() in page


def test_the_cli_reference_has_every_command():
    from xferaudit.cli import _command_names

    text = _hook().cli_help()
    for name in _command_names():
        assert f"## `xferaudit {name.replace('_', '-')}`" in text


def test_the_site_builds_strictly(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("material")
    pytest.importorskip("mkdocstrings")
    r = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, capture_output=True, text=True, timeout=600,
        env={"NO_MKDOCS_2_WARNING": "1", **__import__("os").environ},
    )
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    from xferaudit.static.codes import CODES

    from xferaudit.static.diagnostics import rule_url

    for code in CODES:
        assert (tmp_path / "site" / "rules" / code / "index.html").is_file()
        # the address a finding links to (docs-url = the site) is that page
        url = rule_url(code, (tmp_path / "site").as_uri())
        assert Path(url[len("file://"):]).is_file()
    sites = (tmp_path / "site" / "sites" / "index.html").read_text(encoding="utf-8")
    assert "torch.cpu" in sites and "jax.device_put" in sites
