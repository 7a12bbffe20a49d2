"""mkdocs hook: the pages and tables that come from the code, made at build time.

* one page per rule code, from ``xferaudit.static.codes.CODES`` (and the Rules
  section of the navigation, so a new code gets its page and its nav entry);
* ``<!-- xferaudit:kinds -->``: the kinds of site and their codes, from
  ``xferaudit.rules``;
* ``<!-- xferaudit:packs -->``: every row of every pack, through the public API
  of ``xferaudit.rules`` (``available_packs()``, ``load_pack()``), never
  through the files the packs live in;
* ``<!-- xferaudit:codes -->``: the table of codes;
* ``<!-- xferaudit:cli -->``: each command's ``--help``, from the CLI's parser.

The package is imported from the tree being built (its root goes first on
``sys.path``), not from wherever it happens to be installed.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

MARK = "<!-- xferaudit:{} -->"
RULES_INDEX = "rules/index.md"


def _codes():
    from xferaudit.static.codes import CODES

    return CODES


# --- navigation -------------------------------------------------------------------


def _expand_rules_nav(nav):
    """Append one entry per code after the list item that is ``rules/index.md``."""
    if isinstance(nav, list):
        for i, item in enumerate(nav):
            if item == RULES_INDEX or (isinstance(item, dict) and RULES_INDEX in item.values()):
                nav[i + 1:i + 1] = [{f"{c} {d.name}": f"rules/{c}.md"} for c, d in _codes().items()]
                return True
            if _expand_rules_nav(item):
                return True
    elif isinstance(nav, dict):
        return any(_expand_rules_nav(v) for v in nav.values())
    return False


def on_config(config):
    if config.get("nav"):
        _expand_rules_nav(config["nav"])
    return config


# --- generated pages ------------------------------------------------------------------


def _fence(code: str) -> str:
    return "```python\n" + code.rstrip("\n") + "\n```\n"


def rule_page(d) -> str:
    fix = f"**Fix:** {d.fix}\n\n" if getattr(d, "fix", "") else ""
    note = getattr(d, "note", "")
    return (
        f"# {d.code} {d.name}\n\n"
        f"{d.summary}.\n\n"
        f"{fix}"
        f"## What it does\n\n{d.what}\n\n"
        f"## Why it matters\n\n{d.why}\n\n"
        f"## Example\n\n{_fence(d.example)}\n"
        f"## Use instead\n\n{_fence(d.instead)}\n"
        + (f"{note}\n\n" if note else "")
        + f"`xferaudit rule {d.code}` prints this page in the terminal; "
        f"`xferaudit rule {d.code} --format json` as data.\n"
    )


def codes_table() -> str:
    rows = ["| code | name | reported when |", "|---|---|---|"]
    for c, d in _codes().items():
        rows.append(f"| [`{c}`]({c}.md) | {d.name} | {_cell(d.summary)} |")
    return "\n".join(rows) + "\n"


def rules_index() -> str:
    return (
        "# Rules\n\n"
        "Every code `xferaudit check` reports. Codes are `XFA` and three digits, "
        "stable once published, and valid flake8 codes: `XFA0xx` the file itself, "
        "`XFA1xx` suppression comments, `XFA2xx` an unwrapped site (one code per "
        "kind), `XFA3xx` wrapped sites that are wrapped wrongly.\n\n"
        + codes_table()
        + "\n`xferaudit rule CODE` prints a code's page, `xferaudit rule --all` every page. "
        "These pages are generated from the same data when the site is built.\n"
    )


def on_files(files, config):
    from mkdocs.structure.files import File

    files.append(File.generated(config, RULES_INDEX, content=rules_index()))
    for code, d in _codes().items():
        files.append(File.generated(config, f"rules/{code}.md", content=rule_page(d)))
    return files


# --- tables inside hand-written pages ----------------------------------------------------


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _code(text: str) -> str:
    text = str(text)
    tick = "``" if "`" in text else "`"
    pad = " " if "`" in text else ""
    # Python-Markdown's tables do not split a cell at a pipe inside a code span.
    return f"{tick}{pad}{text}{pad}{tick}"


def kinds_table() -> str:
    from xferaudit.rules import KIND_CODES, KINDS

    codes = _codes()
    rows = ["| kind | code | reported as |", "|---|---|---|"]
    for k in KINDS:
        c = KIND_CODES[k]
        d = codes.get(c)
        rows.append(f"| `{k}` | [`{c}`](rules/{c}.md) | {_cell(d.summary) if d else ''} |")
    return "\n".join(rows) + "\n"


def _call_form(r) -> str:
    return f"E.{r.target}(...)" if r.call == "method" else f"{r.target}(...)"


def _kind(r) -> str:
    if r.kind != "device":
        return f"`{r.kind}`"
    where = []
    if r.device_pos is not None:
        where.append(f"argument {r.device_pos}")
    if r.device_kw:
        where.append(f"`{r.device_kw}=`")
    text = "from the device (" + " or ".join(where) + "): `up`, `down` or `move`"
    if getattr(r, "no_device", None):
        text += f"; `{r.no_device}` without one"
    return text


def _conditions(r) -> str:
    out = []
    if r.needs:
        out.append(f"only with `{r.needs}=`" + (" (the literal `\"cpu\"` there: no site)" if r.host_is_cpu else ""))
    elif r.host_is_cpu:
        out.append("the literal `\"cpu\"` as device: no site")
    if r.truthy:
        out.append(f"only with `{r.truthy}=` not literally false")
    if getattr(r, "min_args", None) is not None:
        out.append(f"at least {r.min_args} positional argument(s)")
    if getattr(r, "max_args", None) is not None:
        out.append(f"at most {r.max_args} positional argument(s)")
    if getattr(r, "keywords", None) is not None:
        out.append("keywords only " + (", ".join(f"`{k}`" for k in r.keywords) or "none"))
    if getattr(r, "not_receiver", ()):
        out.append("not on receivers matching " + ", ".join(_code(x) for x in r.not_receiver))
    if getattr(r, "arg_from", ()):
        out.append("first argument a call under " + ", ".join(f"`{x}`" for x in r.arg_from))
    if getattr(r, "aliases", ()):
        out.append("also spelled " + ", ".join(f"`{x}`" for x in r.aliases))
    return "; ".join(out)


def _wrapped(r) -> str:
    if r.wrap == "receiver":
        return f"`xfer.{r.wrapper}(E, ..., site=...)`"
    if r.wrap == "function":
        return f"`xfer.{r.wrapper}(..., site=...)`"
    return f"`xfer.{r.wrapper}(CALL, site=...)`"


def packs_tables() -> str:
    from xferaudit.rules import available_packs, load_pack

    out = []
    for name in sorted(available_packs(), key=lambda n: (n != "torch", n)):
        pack = load_pack(name)
        on = ("on in every file" if name == "torch"
              else "on in a file that imports " + ", ".join(f"`{m}`" for m in pack.imports)
              + f", or everywhere with `packs = [\"{name}\"]`")
        out.append(f"### The `{name}` pack\n\n{len(pack.rules)} rows; {on}.\n")
        out.append("| row | call | kind | wrapped as | only when | matches | does not match |")
        out.append("|---|---|---|---|---|---|---|")
        for r in pack.rules:
            out.append(
                f"| `{r.id}` | {_code(_call_form(r))} | {_kind(r)} | {_wrapped(r)} | {_conditions(r)} | "
                + "<br>".join(_code(m) for m in r.match) + " | "
                + "<br>".join(_code(m) for m in r.ignore) + " |"
            )
        out.append("")
    return "\n".join(out)


# Columns of the command reference: the site's code blocks show about 80
# characters beside both sidebars; longer lines are cut off on the right.
CLI_WIDTH = 78


def cli_help() -> str:
    import argparse

    from xferaudit.cli import _build_parser, _command_names

    out = []
    for name in _command_names():
        cmd = name.replace("_", "-")
        parser = _build_parser(cmd)
        sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
        command = sub.choices[cmd]
        command.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=CLI_WIDTH)
        text = command.format_help()
        out.append(f"## `xferaudit {cmd}`\n\n```text\n{text.rstrip()}\n```\n")
    return "\n".join(out)


GENERATORS = {
    "kinds": kinds_table,
    "packs": packs_tables,
    "codes": lambda: codes_table().replace("](", "](rules/"),
    "cli": cli_help,
}


def on_page_markdown(markdown, page, config, files):
    for key, make in GENERATORS.items():
        mark = MARK.format(key)
        if mark in markdown:
            markdown = markdown.replace(mark, make())
    return markdown


# --- docstrings written for Sphinx, shown by mkdocstrings ---------------------------------

_ROLE = re.compile(r":(?:class|func|meth|mod|data|attr|exc|obj):(?=<code>)")
_TILDE = re.compile(r"<code>~(?:[\w.]+\.)?(\w+)</code>")


def on_page_content(html, page, config, files):
    """Drop reST's leftovers from rendered docstrings: ``:class:`X``` roles and
    the ``::`` that introduces a literal block (mkdocstrings already shows the
    block as code)."""
    html = _ROLE.sub("", html)
    html = _TILDE.sub(r"<code>\1</code>", html)
    html = html.replace("<p>::</p>\n", "")
    return html.replace("::</p>", ":</p>")
