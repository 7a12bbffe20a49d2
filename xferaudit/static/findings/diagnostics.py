"""From sites to findings: the codes ``xferaudit check`` reports, and their formats.

A *finding* (:class:`Diagnostic`) is one line of the report: an unwrapped site
(XFA201-XFA204, by kind), a file that could not be read or parsed (XFA001), a
suppression comment with nothing to suppress (XFA101), or a wrapped call whose
site name another wrapped call already uses (XFA301). Suppressed findings are
kept, marked, so ``--show-suppressed`` can list them and the baseline can count.

Formats follow ruff's, so the tools that read ruff's output read ours:
``text`` (``path:line:col: CODE message``), ``json`` (ruff's record: code,
message, filename, location, end_location, fix, url, noqa_row), ``github``
(workflow commands that annotate the pull request) and ``sarif`` (SARIF 2.1.0,
for code scanning). A finding's ``fix`` (:mod:`.fixes`) is set only where a
format carries it (json, sarif, the editor server): computing it runs the
codemod.

Each finding links to its rule's page of the documentation site
(:func:`rule_url`): under the ``docs-url`` setting, else under the
``Documentation`` address the installed package declares; with neither, no
address is made up: the link is left out and the text says to run
``xferaudit rule CODE``.
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Iterable, Optional

from ... import __version__
from ..._text import printable, printable_path
from ...config import Config
from ...rules import Rule, RuleTable
from ...opforms import NO_CALL_FORM
from ...wrapform import (
    ALIAS, CALLEE, IMPLICIT, INNER, METHOD, RECEIVER, VALUE, form, form_of, statement_comment,
)
from ...wrapform import suggestion as wf_suggestion
from ..codes import CODES
from ..front.naming import renamed_site, short_receiver
from ..front.notebook import display_position, is_notebook, read as read_notebook
from ..site import Site
from ..front.source import decode_source, split_lines
from ..project.scan import Scan, display_path


@dataclass
class Diagnostic:
    path: str  # as displayed (relative to the working directory when under it)
    relpath: str  # relative to the project root (baselines, per-file-ignores)
    line: int
    column: int
    end_line: int
    end_column: int
    code: str
    message: str
    function: str = "<module>"
    suppressed: Optional[str] = None  # how: "noqa", "baseline"; None: reported
    # A fixes.Fix: the edits `wrap` makes for it (set by fixes.attach, where a format carries
    # it). Not imported here: fixes reads findings, and the import graph reads one way.
    fix: Optional[Any] = None

    @property
    def fatal(self) -> bool:
        return self.code == "XFA001"


# --- messages ---------------------------------------------------------------------
# (the value layer's, the compiled reads' and the run evidence's modules are imported where a finding needs
# them: a warm run of a file's cached findings need not import the finder's machinery)


def implicit_message(op: str, text: str, wrapped: Optional[str] = None) -> str:
    """An implicit site's message (:func:`..values.findings.message`)."""
    from ..values.findings import message

    return message(op, text, wrapped)


def compiled_message(s: Site, text: str, wrapped: Optional[str]) -> str:
    """A compiled read's message (:func:`..front.graph_breaks.message`)."""
    from ..front.graph_breaks import message

    return message(s, text, wrapped)

_WS = re.compile(r"\s+")

_KIND_TEXT = {
    "up": "copies host data to the device (up)",
    "down": "reads a device value to the host (down)",
    "move": "copies between host and device, in a direction only the run time knows (move)",
}


_COMMENT = re.compile(r"#[^\n]*")


def call_text(s: Site, limit: int = 60) -> str:
    """The call as one short line: `loss.item()`, `x.to(device)`, `torch.compile(...)`."""
    text = _squash(_COMMENT.sub("", s.call) if "#" in s.call else s.call)
    if len(text) <= limit:
        return text
    head = short_receiver(s.label) if s.label else text.split("(", 1)[0]
    return f"{head}(...)"


def _split_call(s: Site, rule: Rule) -> Optional[tuple[str, str, str]]:
    """(receiver or callee text, method name or "", argument text) sliced from the
    call's source, without parsing: the finder's label holds the receiver's exact
    source, and the call's text starts with it."""
    call = s.call
    if rule.call == "method":
        recv = s.label[: -(len(rule.method) + 1)] if s.label.endswith("." + rule.method) else None
        if not recv or not call.startswith(recv):
            return None
        rest = call[len(recv):]
        head, method = recv, rule.method
    else:
        rest = call
        head, method = "", ""
    i, j = rest.find("("), rest.rfind(")")
    if i < 0 or j < i:
        return None
    if not head:
        head = rest[:i].strip()
    return head, method, rest[i + 1 : j]


_EOL_COMMA = re.compile(r",[ \t]*(?:#[^\n]*)?\r?\n\s*([)\]}])")
_BEFORE_DOT = re.compile(r" \.(?=[A-Za-z_])")
_CONTINUATION = re.compile(r"\\(?:\r\n|\r|\n)")
_PLAIN_TEXT = re.compile(r"[^\s\\]*")  # no blank, line end or backslash: _squash keeps it as it is


def _squash(text: str) -> str:
    """Source text on one line, for a message: comments dropped by the caller,
    line continuations (a backslash at a line's end) and runs of blanks made one
    blank, none inside brackets or before a dot."""
    if _PLAIN_TEXT.fullmatch(text):  # (most calls: `x.cpu()`, nothing to squash)
        return text.rstrip(",")
    if "\\" in text:
        text = _CONTINUATION.sub(" ", text)
    if "\n" in text:
        # A trailing comma at a line's end goes (`f(\n  a,\n)`); one inside a
        # line stays: `(x,)` is a tuple.
        text = _EOL_COMMA.sub(r"\1", text)
    text = _WS.sub(" ", text).strip()
    if " " in text:
        # (no blank after an opening bracket or before a closing one: plain replaces, one blank at most
        # being left between two characters, which remove what _BEFORE_CLOSE's and _AFTER_OPEN's subs did)
        text = text.replace(" )", ")").replace(" ]", "]").replace(" }", "}")
        text = text.replace("( ", "(").replace("[ ", "[").replace("{ ", "{")
        if " ." in text:
            text = _BEFORE_DOT.sub(".", text)
    return text.rstrip(",").strip()


def suggestion(s: Site, rule: Optional[Rule]) -> str:
    """What to write instead: the wrapper call as ``xferaudit wrap`` writes it
    (its shape from :mod:`xferaudit.wrapform`), original arguments unchanged."""
    if rule is None:
        return f"{ALIAS}.<wrapper>(..., site=...)"
    shape = form_of(rule)
    w = rule.wrapper
    if INNER in shape.head:
        return wf_suggestion(shape, w, {INNER: call_text(s)}, None, s.decorator)
    parts = _split_call(s, rule)
    if parts is None:
        return f"{ALIAS}.{w}(..., site=...)"
    head, method, args = parts
    args = _squash(_COMMENT.sub("", args) if "#" in args else args)
    head = _squash(head)
    heads = {RECEIVER: head, CALLEE: head, METHOD: method}
    if METHOD in shape.head and not method:
        return f"{ALIAS}.{w}(..., site=...)"
    if s.op == "bound":  # arguments with side effects: the bound method, looked up first
        shape, w, heads = form("function", "call"), "call", {CALLEE: f"{head}.{method}"}
    text = wf_suggestion(shape, w, heads, args, s.decorator)
    if len(text) > 90:
        text = wf_suggestion(shape, w, heads, "..." if args else None, s.decorator)
    return text


_CONVERTERS = ("float", "int", "complex")


def implicit_suggestion(s: Site) -> Optional[str]:
    """What ``xferaudit wrap`` writes for an implicit site, its shape from the
    wrap grammar's implicit style (:data:`xferaudit.wrapform.IMPLICIT`); None
    for a category with no wrapped form (counts, uploads in indexing...)."""
    text = call_text(s)
    op = s.op
    wrapper = s.wrapper or {"conversion": "index", "truth": "bool", "format": "read", "math": "read",
                            "save": "save"}.get(op)
    if wrapper in ("save", "reads"):  # the call wrapped: xfer.reads(np.sin, t, site=...)
        i, j = text.find("("), text.rfind(")")
        if i < 0 or j < i:
            return f"{ALIAS}.{wrapper}(..., site=...)"
        return wf_suggestion(form("implicit", wrapper), wrapper, {CALLEE: text[:i].strip()}, text[i + 1 : j])
    if op in NO_CALL_FORM:  # no call to wrap: the statement is named (the grammar's statement form)
        return statement_comment("...").strip()
    if wrapper is None or wrapper not in IMPLICIT and wrapper != "call":
        return None
    name = text.split("(", 1)[0].strip()
    if op == "conversion" and text.endswith(")") and name in _CONVERTERS + ("bool",):
        inner = text[len(name) + 1 : -1].strip()
        if name == "bool":  # bool(t) -> bool(xfer.bool(t, site=...))
            return f"bool({wf_suggestion(form('implicit', 'bool'), 'bool', {VALUE: inner}, None)})"
        return wf_suggestion(form("implicit", name), name, {}, inner)
    if op == "format" and _bare_tuple(text):
        text = f"({text})"  # "%d + %d" % (a, b): the tuple is read whole, in its parentheses
    return wf_suggestion(form("implicit", wrapper), wrapper, {VALUE: text}, None)


def _bare_tuple(text: str) -> bool:
    """`text` is a tuple without parentheses (``a, b``)."""
    import ast

    try:
        return isinstance(ast.parse(text.strip(), mode="eval").body, ast.Tuple)
    except SyntaxError:
        return False


def no_wrap_message(s: Site, code: str) -> str:
    """The message of a site no wrapped form can keep as it is (``s.no_wrap``
    says why): what crosses, and that `wrap` leaves it, with no form to write."""
    head = implicit_message(s.op, call_text(s)).split("; ")[0] if s.implicit else \
        site_message(s, None).split("; ")[0]
    return f"{head}; `xferaudit wrap` leaves it: {s.no_wrap} (suppress it with `# noqa: {code}` where it is meant)"


def site_message(s: Site, rule: Optional[Rule]) -> str:
    if s.kind == "graph":
        what = (
            "makes a compiled graph (graph); each call of its result is a launch"
            if rule is not None and rule.wrap == "result"
            else "launches a captured graph (graph)"
        )
    else:
        what = _KIND_TEXT[s.kind]
    at = "@" if s.decorator else ""
    return f"`{at}{call_text(s)}` {what}; wrap it: `{at}{suggestion(s, rule)}` or run `xferaudit wrap`"


def fix_message(s: Site, rule: Optional[Rule], code: str, relpath: str) -> str:
    """What a finding's fix does, in one line (ruff's fix message)."""
    if code == "XFA302":
        return f"Rename the site to \"{renamed_site(s.site or '', relpath) or s.site}\""
    what = implicit_suggestion(s) if s.implicit else suggestion(s, rule)
    return f"Wrap it: `{'@' if s.decorator else ''}{what}`" if what else "Wrap it"


# --- links to the rule pages -----------------------------------------------------------


def docs_base(cfg: Optional[Config] = None) -> Optional[str]:
    """Where the documentation site is: the ``docs-url`` setting, else the
    ``Documentation`` address of the installed package's metadata; None when
    neither says (no address is made up)."""
    if cfg is not None and cfg.docs_url:
        return cfg.docs_url
    return _installed_docs()


_INSTALLED: list = []


def _installed_docs() -> Optional[str]:
    if not _INSTALLED:
        url = None
        try:
            from importlib.metadata import PackageNotFoundError, metadata

            for entry in metadata("xferaudit").get_all("Project-URL") or ():
                label, _, value = entry.partition(",")
                if label.strip().lower() in ("documentation", "docs") and value.strip():
                    url = value.strip()
                    break
        except (ImportError, PackageNotFoundError, ValueError):  # pragma: no cover
            pass
        _INSTALLED.append(url)
    return _INSTALLED[0]


def rule_url(code: str, base: Optional[str]) -> Optional[str]:
    """The page of `code` on the documentation site at `base` (mkdocs writes
    ``rules/CODE.md`` as ``rules/CODE/``; a site built into files, without a
    server, as ``rules/CODE/index.html``); None without a base."""
    if not base or code not in CODES:
        return None
    page = f"rules/{code}/" + ("index.html" if base.startswith("file:") else "")
    return base.rstrip("/") + "/" + page


# --- collecting -----------------------------------------------------------------------


def _suppresses(codes: Optional[tuple], code: str) -> bool:
    return codes is not None and (codes == () or code in codes)


def collect(scan: Scan, cfg: Config, rules: RuleTable, sources: Optional[dict] = None) -> list[Diagnostic]:
    """Every finding of a scan, suppressed ones marked, in file and line order;
    `sources` holds the source (bytes or text) of files not read from disk
    (standard input, an editor's buffer), by path."""
    by_id = {r.id: r for r in rules.rules}
    out: list[Diagnostic] = []
    first_use: dict[str, tuple[int, Site]] = {}  # site name -> (file index, wrapped site)
    for i, (res, rel) in enumerate(zip(scan.results, scan.relpaths)):
        if res.error is not None:
            msg = res.error if res.error.startswith("cannot") else f"cannot parse: {res.error}"
            if res.repaired:
                msg += " (read as old Python to find its sites, reported below)"
            out.append(Diagnostic(res.path, rel, res.error_line, res.error_column,
                                  res.error_line, res.error_column, "XFA001", msg))
            if not res.repaired:
                continue
        sup = dict(res.suppressions)
        file_diags: list[Diagnostic] = []
        notes, extra = ({}, ())
        if res.evidence is not None:
            from ..front.evidence import check_findings

            notes, extra = check_findings(res.evidence, res.sites)
        for s in res.sites:
            if s.wrapped:
                if not s.site:
                    continue
                if s.site not in first_use:
                    first_use[s.site] = (i, s)
                    here = renamed_site(s.site, rel)
                    if here is None:
                        continue
                    code = "XFA302"
                    msg = (
                        f"site name \"{s.site}\" names {s.site.split(':', 1)[0]}, but the call is in {rel} "
                        f"(moved or renamed?): run `xferaudit wrap --rename-sites` to name it \"{here}\""
                    )
                else:
                    code = "XFA301"
                    j, other = first_use[s.site]
                    msg = (
                        f"site name \"{s.site}\" is already used at "
                        f"{other.path}:{display_position(other.path, other.line, other.column)}; "
                        "both calls would count under one name: give this one its own"
                    )
            else:
                code = s.rule
                # implicit sites (the value layer's) say what crosses and how to count it
                if s.compiled:  # a read that breaks the graph of compiled code (XFA601)
                    msg = compiled_message(s, call_text(s), None if s.no_wrap else
                                           implicit_suggestion(s) if s.implicit else
                                           suggestion(s, by_id.get(s.rule_id)))
                elif s.no_wrap:
                    msg = no_wrap_message(s, code)
                else:
                    msg = (implicit_message(s.op, call_text(s), implicit_suggestion(s)) if s.implicit
                           else site_message(s, by_id.get(s.rule_id)))
                if id(s) in notes:  # seen crossing by a run: `wrap --from` wraps it
                    said, run = notes[id(s)]
                    msg = msg.replace("run `xferaudit wrap`", f"run `xferaudit wrap --from {run}`") + said
            if not cfg.code_enabled(code, rel):
                continue
            file_diags.append(Diagnostic(
                res.path, rel, s.line, s.column, s.end_line, s.end_column, code, msg,
                function=s.function, suppressed="noqa" if _suppresses(sup.get(s.line), code) else None,
            ))
        for line, col, code, msg, function in extra:  # run evidence no site explains (XFA5xx)
            if cfg.code_enabled(code, rel):
                file_diags.append(Diagnostic(res.path, rel, line, col, line, col, code, msg, function=function,
                                             suppressed="noqa" if _suppresses(sup.get(line), code) else None))
        out.extend(file_diags)
        if sup and cfg.code_enabled("XFA101", rel):
            out.extend(_unused(res, rel, sup, file_diags, cfg, (sources or {}).get(res.path)))
    for e in scan.gone:
        from ..front.evidence import Stale, stale_message, static_function

        rel = cfg.relpath(e.file)
        if cfg.code_enabled("XFA502", rel):
            msg = stale_message(Stale(e, "the file is gone"))
            out.append(Diagnostic(display_path(e.file, os.getcwd()), rel, max(e.line, 1), 1, max(e.line, 1), 1,
                                  "XFA502", msg, function=static_function(e.function) or "<module>"))
    out.sort(key=_order(scan))
    return out


def _order(scan: Scan):
    index = {p.path: i for i, p in enumerate(scan.results)}
    return lambda d: (index.get(d.path, 0), d.line, d.column, d.code)


def _unused(res, rel: str, sup: dict, diags: list[Diagnostic], cfg: Config,
            data: "bytes | str | None" = None) -> list[Diagnostic]:
    """XFA101: suppression codes that suppress nothing on their line."""
    on_line: dict[int, set] = {}
    for d in diags:
        on_line.setdefault(d.line, set()).add(d.code)
    bare_own = set(res.bare_own)
    found: list[tuple[int, str]] = []
    for ln, codes in sup.items():
        if "XFA101" in codes:
            continue
        present = on_line.get(ln, set())
        if codes == ():
            if ln in bare_own and not present:
                found.append((ln, "`# xferaudit: ignore` suppresses nothing on this line: remove it"))
            continue
        unused = [
            c for c in codes
            if c in CODES and c not in ("XFA001", "XFA101") and cfg.code_enabled(c, rel) and c not in present
        ]
        if unused:
            names = ", ".join(unused)
            found.append((ln, f"unused suppression of {names}: no {names} on this line; remove it"
                              " (a site's line is the line of its called name)"))
    if not found:
        return []
    cols = _comment_columns(res.path, [ln for ln, _ in found], data)
    return [
        Diagnostic(res.path, rel, ln, cols.get(ln, 1), ln, cols.get(ln, 1), "XFA101", msg)
        for ln, msg in found
    ]


_SUP_START = re.compile(r"#\s*(?:noqa|xferaudit\s*:)", re.I)


def _comment_columns(path: str, lines: list[int], data: "bytes | str | None" = None) -> dict[int, int]:
    """1-based columns of the suppression comments on `lines` (re-read: rare)."""
    try:
        if data is None:
            with open(path, "rb") as fh:
                data = fh.read()
        if isinstance(data, str):
            text = read_notebook(data.encode("utf-8")).text if is_notebook(path) else data
        else:
            text = read_notebook(data).text if is_notebook(path) else decode_source(data)
    except (OSError, SyntaxError, UnicodeDecodeError, LookupError, ValueError):
        return {}
    all_lines = split_lines(text)
    out = {}
    for ln in lines:
        if ln - 1 < len(all_lines):
            starts = [m.start() for m in _SUP_START.finditer(all_lines[ln - 1])]
            if starts:
                out[ln] = starts[-1] + 1  # the last suppression comment of the line
    return out


# --- output ------------------------------------------------------------------------


def reported(diags: Iterable[Diagnostic]) -> list[Diagnostic]:
    return [d for d in diags if d.suppressed is None]


def format_text(diags: list[Diagnostic], show_suppressed: bool = False) -> str:
    lines = []
    for d in diags:
        if d.suppressed is None:
            lines.append(f"{printable_path(d.path)}:{display_position(d.path, d.line, d.column)}: {d.code} "
                         f"{printable(d.message)}")
        elif show_suppressed:
            lines.append(f"{printable_path(d.path)}:{display_position(d.path, d.line, d.column)}: {d.code} "
                         f"[suppressed by {d.suppressed}] {printable(d.message)}")
    return "\n".join(lines)


def _record(d: Diagnostic, base: Optional[str]) -> dict:
    rec = {
        "code": d.code,
        "message": d.message,
        "filename": os.path.abspath(d.path),
        "location": {"row": d.line, "column": d.column},
        "end_location": {"row": d.end_line, "column": d.end_column},
        "fix": d.fix.to_json() if d.fix is not None else None,
        "url": rule_url(d.code, base),
        "noqa_row": d.line,
    }
    if d.suppressed is not None:
        rec["suppressed"] = d.suppressed
    return rec


def format_json(diags: list[Diagnostic], show_suppressed: bool = False, base: Optional[str] = None) -> str:
    """ruff's JSON: a list of records (code, message, filename, location,
    end_location, fix, url, noqa_row); `base` is the docs site of :func:`docs_base`."""
    recs = [_record(d, base) for d in diags if d.suppressed is None or show_suppressed]
    return json.dumps(recs, indent=2)


def _gh_escape(s: str, prop: bool = False) -> str:
    s = s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    s = printable(s)  # what is left: terminal escapes and other control characters
    if prop:
        s = s.replace(":", "%3A").replace(",", "%2C")
    return s


def format_github(diags: list[Diagnostic]) -> str:
    """GitHub Actions workflow commands: one annotation per finding."""
    out = []
    for d in reported(diags):
        level = "error"
        props = ",".join([
            f"title={_gh_escape(f'xferaudit ({d.code})', True)}",
            f"file={_gh_escape(d.path, True)}",
            f"line={d.line}",
            f"col={d.column}",
            f"endLine={d.end_line}",
            f"endColumn={d.end_column}",
        ])
        out.append(f"::{level} {props}::{_gh_escape(f'{d.path}:{d.line}:{d.column}: {d.code} {d.message}')}")
    return "\n".join(out)


def format_sarif(diags: list[Diagnostic], root: str, base: Optional[str] = None) -> str:
    """A SARIF 2.1.0 log: the tool, its rules (each with its page under `base`,
    where there is one), one result per finding, and its fix where it has one
    (columns count characters: ``columnKind`` says so)."""
    shown = reported(diags)
    used = sorted({d.code for d in shown} | set(CODES))
    rules = []
    for c in used:
        if c not in CODES:
            continue
        url = rule_url(c, base)
        rule = {
            "id": c,
            "name": CODES[c].name,
            "shortDescription": {"text": CODES[c].summary},
            "fullDescription": {"text": CODES[c].what},
            "help": {"text": f"{CODES[c].why} (`xferaudit rule {c}` explains it.)"},
            "defaultConfiguration": {"level": "error"},
        }
        if url:
            rule["helpUri"] = url
        rules.append(rule)
    index = {r["id"]: i for i, r in enumerate(rules)}
    root_abs = os.path.abspath(root)
    results = []
    for d in shown:
        ap = os.path.abspath(d.path)
        if ap.startswith(root_abs.rstrip(os.sep) + os.sep):
            uri, base_id = os.path.relpath(ap, root_abs).replace(os.sep, "/"), {"uriBaseId": "%SRCROOT%"}
        else:
            uri, base_id = "file://" + ap.replace(os.sep, "/"), {}
        artifact = {"uri": uri, **base_id}
        result = {
            "ruleId": d.code,
            "ruleIndex": index.get(d.code, 0),
            "level": "error",
            "message": {"text": d.message},
            "locations": [{
                "physicalLocation": {
                    "artifactLocation": artifact,
                    "region": _region(d.line, d.column, d.end_line, d.end_column),
                }
            }],
        }
        if d.fix is not None:
            result["fixes"] = [{
                "description": {"text": d.fix.message},
                "artifactChanges": [{
                    "artifactLocation": dict(artifact),
                    "replacements": [
                        {"deletedRegion": _region(*e.start, *e.end), "insertedContent": {"text": e.content}}
                        for e in d.fix.edits
                    ],
                }],
            }]
        results.append(result)
    driver = {"name": "xferaudit", "version": __version__, "rules": rules}
    if base:
        driver["informationUri"] = base
    log = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": driver},
            "originalUriBaseIds": {"%SRCROOT%": {"uri": "file://" + root_abs.replace(os.sep, "/").rstrip("/") + "/"}},
            "columnKind": "unicodeCodePoints",
            "results": results,
        }],
    }
    return json.dumps(log, indent=2)


def _region(line: int, column: int, end_line: int, end_column: int) -> dict:
    return {"startLine": line, "startColumn": column, "endLine": end_line, "endColumn": end_column}


def format_statistics(diags: list[Diagnostic]) -> str:
    """ruff's `--statistics`: count, code and name per code, most frequent first."""
    counts = Counter(d.code for d in reported(diags))
    width = max((len(str(n)) for n in counts.values()), default=1)
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    return "\n".join(f"{n:>{width}}\t{code}\t{CODES[code].name if code in CODES else ''}" for code, n in rows)

