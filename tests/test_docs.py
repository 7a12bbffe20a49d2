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

    from xferaudit.static.findings.diagnostics import rule_url

    for code in CODES:
        assert (tmp_path / "site" / "rules" / code / "index.html").is_file()
        # the address a finding links to (docs-url = the site) is that page
        url = rule_url(code, (tmp_path / "site").as_uri())
        assert Path(url[len("file://"):]).is_file()
    sites = (tmp_path / "site" / "sites" / "index.html").read_text(encoding="utf-8")
    assert "torch.cpu" in sites and "jax.device_put" in sites


def test_every_pre_commit_rev_in_the_docs_is_a_placeholder_or_a_commit():
    """A `rev:` naming a tag the repository does not have fails `pre-commit install`."""
    import re

    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    revs = [(p.name, m.group(1)) for p in pages
            for m in re.finditer(r"^\s*rev:\s*(<[^>\n]*>|\S+)", p.read_text(encoding="utf-8"), re.M)]
    assert revs  # the set-up is documented
    for page, rev in revs:
        assert re.fullmatch(r"<[^>]+>|[0-9a-f]{40}", rev), f"{page}: rev: {rev}"


def test_the_cli_reference_fits_the_page():
    """The site's code blocks show about 80 characters (Material's content column
    beside both sidebars): longer help lines were cut off on the right."""
    hook = _hook()
    text = hook.cli_help()
    long = [ln for ln in text.splitlines() if len(ln) > 80]
    assert not long, long[:3]
    assert "--jobs N" in text and "--select CODES" in text


def test_rule_pages_say_that_wrapping_an_implicit_sync_counts_it_and_keeps_it():
    from xferaudit.static.codes import CODES, render

    hook = _hook()
    for code in ("XFA401", "XFA402", "XFA403", "XFA404", "XFA408"):
        d = CODES[code]
        for page in (render(d), hook.rule_page(d)):
            assert "Fix is available" not in page and "**Fix:** available" not in page, code
            assert "does not remove" in page, code
    for code in ("XFA201", "XFA202", "XFA203", "XFA204"):
        for page in (render(CODES[code]), hook.rule_page(CODES[code])):
            assert "rewrites the call into its counting wrapper" in page, code


def test_the_use_instead_of_a_read_in_a_loop_shows_the_read_after_the_loop():
    """XFA401's example keeps the sum on the device "for one read after the loop": show it."""
    from xferaudit.static.codes import CODES

    lines = CODES["XFA401"].instead.rstrip().splitlines()
    loop = next(i for i, ln in enumerate(lines) if ln.startswith("for "))
    after = [ln for ln in lines[loop + 1:] if ln and not ln.startswith((" ", "\t"))]
    assert after and ".item()" in after[-1]


def test_the_set_up_is_written_for_a_users_machine():
    """How to get torch on your own machine (PyTorch's CPU wheels, or the torch you
    have), not a description of the machines the project was built on."""
    for page in (ROOT / "README.md", ROOT / "docs" / "getting-started.md"):
        text = page.read_text(encoding="utf-8")
        setup = text.split("## Set up", 1)[1].split("\n## ", 1)[0]
        assert "these machines" not in setup, page.name
        assert "https://download.pytorch.org/whl/cpu" in setup, page.name
        assert "torch you have" in setup, page.name
