"""More formats of ``xferaudit check``, for CI systems and people (the others,
text, json, github and sarif, are in :mod:`.diagnostics`):

- ``gitlab``: GitLab's Code Quality report (a JSON list of issues: description,
  check_name, fingerprint, severity, location.path and location.lines), shown
  on the merge request;
- ``junit``: JUnit XML, one test suite per file and one failing test case per
  finding (a clean run is one passing case), for any CI that reads test reports;
- ``full``: the text format with the source line under each finding and a caret
  under the call, as ruff's ``full`` format shows it.

Standard library only: ``check`` stays light in every format but json and
sarif (whose fixes run the codemod).
"""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from typing import Callable, Optional
from xml.sax.saxutils import escape, quoteattr

from ..._text import printable, printable_path
from ..codes import CODES
from .diagnostics import Diagnostic, reported, rule_url
from ..front.notebook import display_position, is_notebook
from ..front.source import decode_source, split_lines

# --- gitlab ---------------------------------------------------------------------------

#: GitLab's severities (info, minor, major, critical, blocker), per code prefix.
SEVERITY = (("XFA001", "critical"), ("XFA1", "minor"), ("XFA3", "minor"), ("XFA", "major"))


def severity(code: str) -> str:
    return next(level for prefix, level in SEVERITY if code.startswith(prefix))


def _gitlab_path(d: Diagnostic) -> str:
    """The path relative to the repository GitLab shows (``CI_PROJECT_DIR`` in
    a GitLab job), else to the project root."""
    base = os.environ.get("CI_PROJECT_DIR")
    if base:
        ap, top = os.path.abspath(d.path), os.path.abspath(base)
        if ap.startswith(top.rstrip(os.sep) + os.sep):
            return os.path.relpath(ap, top).replace(os.sep, "/")
    return d.relpath


def fingerprints(diags: list[Diagnostic]) -> list[str]:
    """One fingerprint per finding that stays the same while lines move: the
    file, code, function and message, and the count of equal ones before it."""
    seen: Counter = Counter()
    out = []
    for d in diags:
        key = (d.relpath, d.code, d.function, d.message)
        seen[key] += 1
        h = hashlib.blake2b(digest_size=16)
        h.update(json.dumps([*key, seen[key]]).encode("utf-8"))
        out.append(h.hexdigest())
    return out


def format_gitlab(diags: list[Diagnostic]) -> str:
    shown = reported(diags)
    issues = [
        {
            "description": f"{d.code} {d.message}",
            "check_name": d.code,
            "fingerprint": fp,
            "severity": severity(d.code),
            "location": {"path": _gitlab_path(d), "lines": {"begin": d.line, "end": d.end_line}},
        }
        for d, fp in zip(shown, fingerprints(shown))
    ]
    return json.dumps(issues, indent=2)


# --- junit -------------------------------------------------------------------------------


def format_junit(diags: list[Diagnostic]) -> str:
    shown = reported(diags)
    by_file: dict[str, list[Diagnostic]] = {}
    for d in shown:
        by_file.setdefault(d.path, []).append(d)
    n = len(shown)
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<testsuites name="xferaudit" tests="{max(n, 1)}" failures="{n}" errors="0">']
    if not shown:
        out += ['  <testsuite name="xferaudit" tests="1" failures="0" errors="0" skipped="0">',
                '    <testcase name="no findings" classname="xferaudit"/>',
                "  </testsuite>"]
    for path, ds in by_file.items():
        name = printable_path(path)
        cls = name[:-3].replace("/", ".") if name.endswith(".py") else name
        out.append(f'  <testsuite name={_attr(name)} tests="{len(ds)}" failures="{len(ds)}" errors="0" '
                   f'skipped="0">')
        for d in ds:
            where = display_position(d.path, d.line, d.column)
            out.append(f'    <testcase name={_attr(f"{d.code} {name}:{where}")} classname={_attr(cls)}>')
            out.append(f'      <failure message={_attr(d.message)} type={_attr(d.code)}>'
                       f'{_text(f"{name}:{where}: {d.code} {d.message}")}</failure>')
            out.append("    </testcase>")
        out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out)


def _attr(s: str) -> str:
    # control characters, which XML 1.0 cannot hold, as the escapes the text format shows
    return quoteattr(printable(s))


def _text(s: str) -> str:
    return escape(printable(s))


# --- full ------------------------------------------------------------------------------

#: Lines of context shown above and below the finding's line.
CONTEXT = 2


def format_full(diags: list[Diagnostic], show_suppressed: bool = False,
                sources: Optional[dict[str, bytes]] = None, base: Optional[str] = None) -> str:
    """Each finding as the text format writes it, then its source lines with
    the call underlined, and where its code is explained (its page on the docs
    site at `base`, else the rule command)."""
    blocks = []
    cache: dict[str, Optional[tuple[list[str], Callable[[int], int]]]] = {}
    for d in diags:
        if d.suppressed is not None and not show_suppressed:
            continue
        sup = f"[suppressed by {d.suppressed}] " if d.suppressed is not None else ""
        head = (f"{printable_path(d.path)}:{display_position(d.path, d.line, d.column)}: {d.code} "
                f"{sup}{printable(d.message)}")
        if d.path not in cache:
            cache[d.path] = _lines(d.path, (sources or {}).get(d.path))
        snippet = _snippet(d, *cache[d.path]) if cache[d.path] else []
        url = rule_url(d.code, base)
        tail = ([f"  = help: {url or f'`xferaudit rule {d.code}`'} explains {CODES[d.code].name}"]
                if d.code in CODES else [])
        blocks.append("\n".join([head, *snippet, *tail]))
    return "\n\n".join(blocks)


def _lines(path: str, data: Optional[bytes]) -> Optional[tuple[list[str], Callable[[int], int]]]:
    """The file's lines, and the number each is shown with (a notebook's: in its cell)."""
    try:
        if data is None:
            with open(path, "rb") as fh:
                data = fh.read()
        if is_notebook(path):
            from ..front import notebook

            nb = notebook.read(data)
            return split_lines(nb.text), lambda ln: notebook.position(nb, ln)[1]
        return split_lines(decode_source(data)), lambda ln: ln
    except (OSError, SyntaxError, UnicodeDecodeError, LookupError, ValueError):
        return None


def _shown(text: str) -> str:
    return printable(text.expandtabs(4))


def _snippet(d: Diagnostic, lines: list[str], number: Callable[[int], int]) -> list[str]:
    if not 0 < d.line <= len(lines):
        return []
    first, last = max(1, d.line - CONTEXT), min(len(lines), d.line + CONTEXT)
    width = len(str(number(last)))
    pad = " " * width
    out = [f"{pad} |"]
    for ln in range(first, last + 1):
        raw = lines[ln - 1].rstrip("\r\n")
        out.append(f"{number(ln):>{width}} | {_shown(raw)}".rstrip())
        if ln == d.line:
            start = len(_shown(raw[: d.column - 1]))
            end_col = d.end_column if d.end_line == d.line else len(raw) + 1
            length = max(1, len(_shown(raw[: end_col - 1])) - start)
            out.append(f"{pad} | {' ' * start}{'^' * length} {d.code}")
    out.append(f"{pad} |")
    return out
