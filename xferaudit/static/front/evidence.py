"""Run evidence: the lines a recorded run saw crossing, found again in today's source.

``xferaudit run`` writes a run file: a report whose ``unwrapped`` entries are
the crossings made outside every wrapper, each at the user's line, keyed by
what survives an edit elsewhere (:mod:`xferaudit.runkeys`)::

    {"path": "pkg/train.py", "line": 42, "function": "Trainer.step",
     "text": "loss_val = float(loss)", "op": "aten._local_scalar_dense",
     "direction": "down", "count": 3, "copies": 3, "bytes": 12, ...}

This module reads such files (plain JSON and the report checks of
:mod:`xferaudit._validate`: no torch) and matches each entry to a line of the
file as it is now (:func:`match_file`):

* by its key: the enclosing function's qualified name and the line's text,
  whitespace normalised and its trailing comment left out (a ``# noqa`` added
  later keeps the key); the line number is a hint only: among the lines with
  that key, the nearest wins (several entries of one key take the lines in
  order), so lines inserted or deleted above move nothing;
* failing that, by its name (``path:function:expression``, :mod:`xferaudit.labels`):
  the expression in that function, where the line's text changed around it
  (a reformatted file); an entry of a run file from before names has none;
* failing that, in the file's *unwrapped* text (the bare calls put back, as
  ``unwrap`` would): a line ``wrap`` has rewritten since the run (and maybe
  broken over several lines) is found there, and mapped back to the lines it
  became (``rewritten``);
* failing both, the entry is *stale*: the line's text changed since the run.
  It is reported as such, never dropped.

Each matched entry marks its statement's lines as *hot* with the site
categories its op can come from (:func:`xferaudit.opforms.site_categories`):
the value layer treats an unknown value on a hot line as a device tensor
(``static/values/checks.py``, ``Checker.assume``), so ``wrap --from`` and ``check --evidence`` see the
crossings of function parameters and attributes that no proof reaches.
"""

from __future__ import annotations

import ast
import bisect
import difflib
import io
import os
import tokenize
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Optional, Sequence

from ... import opforms
from ...runkeys import MODULE_FUNCTION, function_name, normalise_text
from .source import split_lines

__all__ = [
    "Entry", "Evidence", "EvidenceError", "FileEvidence", "Matched", "Stale", "category_of", "code_key",
    "check_findings", "fitting", "load", "match_file", "run_message", "seen", "stale_message", "static_function",
    "wrap_outcome",
]


class EvidenceError(ValueError):
    """A run file that cannot be used as evidence; the message names the file and the field."""


@dataclass(frozen=True)
class Entry:
    """One line a run saw crossing outside every wrapper."""

    source: str  # the run file, as named
    path: str  # as the run file writes it
    file: str  # where that is on this machine (absolute)
    line: int  # the line when the run saw it: a hint
    function: Optional[str]  # the enclosing function's qualified name (None: not recorded)
    text: Optional[str]  # the line's source, normalised (None: not recorded)
    op: str
    direction: str
    count: int = 0
    copies: int = 0
    bytes: int = 0
    via: str = ""
    name: str = ""  # path:function:expression (no line number); "" in a run file from before names

    def describe(self) -> str:
        """``aten._to_copy, down, 3 times, 12 bytes``, for messages."""
        times = "once" if self.count == 1 else f"{self.count} times"
        via = f", via {self.via}" if self.via else ""
        return f"{self.op}, {self.direction}, {times}, {self.bytes} bytes{via}"


@dataclass
class Evidence:
    """The entries of one or more run files, by the file they name."""

    entries: list = field(default_factory=list)
    sources: list = field(default_factory=list)
    by_file: dict = field(default_factory=dict)  # real path -> [Entry]

    def add(self, entry: Entry) -> None:
        self.entries.append(entry)
        self.by_file.setdefault(_real(entry.file), []).append(entry)

    def for_file(self, path: str) -> list:
        """The entries naming `path` (any spelling of it)."""
        if not self.by_file:
            return []
        return self.by_file.get(_real(path), [])

    def __bool__(self) -> bool:
        return bool(self.sources)


def _real(path: str) -> str:
    return os.path.normcase(os.path.realpath(path))


# --- reading run files -----------------------------------------------------------------


def _base(meta: dict, root: Path) -> Path:
    """What the run file's relative paths are relative to: the run's root when it
    lies in this project (a run started in a subfolder), else this project's root
    (the run was made in another checkout, or on another machine)."""
    run_root = meta.get("root")
    if isinstance(run_root, str) and run_root and os.path.isdir(run_root):
        real, top = os.path.realpath(run_root), os.path.realpath(root)
        if real == top or real.startswith(top.rstrip(os.sep) + os.sep):
            return Path(run_root)
    return root


def read_run(path: str, root: Path) -> list:
    """The entries of one run file; :class:`EvidenceError` for a file that is
    not a usable run file (one line, naming it). The file is read by the one
    reader of saved reports (:meth:`xferaudit.runtime.Report.load`: a regular
    file only, of bounded size, every field checked, a key given twice refused,
    a path holding a NUL refused)."""
    from ...runtime.reporting._report import Report, ReportError

    try:
        rep = Report.load(path, missing=f"{path}: no such run file (record one with `xferaudit run`)")
    except ReportError as e:
        raise EvidenceError(str(e)) from None
    meta = rep.meta
    if not isinstance(meta, dict) or meta.get("kind") != "run":
        raise EvidenceError(f"{path}: not a run file (its meta.kind is not \"run\"): record one with "
                            "`xferaudit run`")
    base = _base(meta, root)
    out = []
    for u in rep.unwrapped:
        name, op = u.path, u.op
        if not name or name.startswith("<") or not opforms.is_crossing(op):
            continue  # no user line (a device thread's event), or a flag on a crossing
        text = u.text or None  # "" or absent: not recorded
        file = name if os.path.isabs(name) else str(base / name)
        out.append(Entry(
            source=path, path=name, file=os.path.abspath(file), line=u.line, function=u.function or None,
            text=normalise_text(text) if text is not None else None, op=op, direction=u.direction,
            count=u.count, copies=u.copies, bytes=u.bytes, via=u.via, name=u.name,
        ))
    return out


def load(paths: Iterable[str], root: Path) -> Evidence:
    """The entries of every run file of `paths` (relative paths are the
    caller's to resolve), each file read once."""
    ev = Evidence()
    for p in dict.fromkeys(paths):
        ev.sources.append(p)
        for e in read_run(p, root):
            ev.add(e)
    return ev


# --- keys ------------------------------------------------------------------------------

def static_function(qualname: Optional[str]) -> Optional[str]:
    """A code object's qualified name as the finder names functions:
    ``Trainer.fit.<locals>.step`` -> ``Trainer.fit.step``; lambdas and
    comprehensions are their enclosing function's lines (:func:`~xferaudit.runkeys.function_name`)."""
    if qualname is None:
        return None
    parts = [p for p in function_name(qualname).split(".") if p != "<locals>"]
    return ".".join(parts) or MODULE_FUNCTION


def code_key(line: str) -> str:
    """A line's text as evidence compares it: without its trailing comment,
    whitespace normalised."""
    if "#" in line:
        try:
            for tok in tokenize.generate_tokens(io.StringIO(line).readline):
                if tok.type == tokenize.COMMENT:
                    line = line[: tok.start[1]]
                    break
        except (tokenize.TokenError, SyntaxError, IndentationError):
            pass  # an unfinished line (its comment, if any, was met first)
    return normalise_text(line)


class _Layout:
    """Per line of a file: its function, its statement's lines, and the lines
    holding each of the `wanted` keys."""

    def __init__(self, text: str, tree: Optional[ast.Module], wanted: Iterable[str] = ()) -> None:
        self.lines = split_lines(text)
        n = len(self.lines)
        self.function = [MODULE_FUNCTION] * (n + 2)
        self.span: list = [None] * (n + 2)
        if tree is not None:
            self._walk(tree, n)
        self.index: dict = {}  # (function, key) -> sorted lines
        wanted = frozenset(wanted)
        for i, ln in enumerate(self.lines, 1):
            key = normalise_text(ln)
            # a trailing comment is left out of the key: the key is then a prefix of the text
            if key not in wanted and "#" in ln and any(key.startswith(w) for w in wanted):
                key = code_key(ln)
            if key in wanted:
                self.index.setdefault((self.function[i], key), []).append(i)

    def _walk(self, tree: ast.Module, n: int) -> None:
        spans: list = []
        stack: list = [(tree, "")]
        while stack:
            node, qual = stack.pop()
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    q = f"{qual}.{child.name}" if qual else child.name
                    for i in range(child.body[0].lineno, min(child.end_lineno, n) + 1):
                        self.function[i] = q  # inner definitions come later: they win
                    for d in child.decorator_list:
                        spans.append((d.lineno, d.end_lineno))
                    stack.append((child, q))
                    spans.append(_header(child))
                elif isinstance(child, ast.stmt):
                    spans.append(_header(child))
                    stack.append((child, qual))
                elif isinstance(child, _CLAUSES):  # except and case clauses hold statements
                    stack.append((child, qual))
        # innermost statement per line: the shortest span holding it
        for lo, hi in sorted(spans, key=lambda s: -(s[1] - s[0])):
            for i in range(lo, min(hi, n) + 1):
                self.span[i] = (lo, hi)

    def statement(self, line: int) -> tuple:
        """The lines of the statement (a compound statement's header) holding `line`."""
        s = self.span[line] if 0 < line < len(self.span) else None
        return tuple(range(s[0], s[1] + 1)) if s is not None else (line,)

    def column(self, line: int) -> int:
        """1-based column where `line`'s code starts."""
        if not 0 < line <= len(self.lines):
            return 1
        text = self.lines[line - 1]
        return len(text) - len(text.lstrip()) + 1 if text.strip() else 1

    def find(self, function: Optional[str], key: str) -> list:
        lines = self.index.get((function, key))
        if lines is None and function is not None and "." not in function and function != MODULE_FUNCTION:
            # only the code object's name was recorded (no co_qualname): any function of that name
            lines = sorted(ln for (f, k), ls in self.index.items() if k == key and f.rsplit(".", 1)[-1] == function
                           for ln in ls)
        return lines or []


_CLAUSES = (ast.excepthandler, ast.match_case) if hasattr(ast, "match_case") else (ast.excepthandler,)


def _header(node: ast.stmt) -> tuple:
    """A simple statement's lines, or a compound statement's header lines."""
    body = getattr(node, "body", None)
    if isinstance(body, list) and body and isinstance(body[0], ast.AST) and hasattr(body[0], "lineno"):
        end = body[0].lineno - 1 if body[0].lineno > node.lineno else node.lineno
        return (node.lineno, max(node.lineno, end))
    return (node.lineno, node.end_lineno or node.lineno)


# --- matching ----------------------------------------------------------------------------


@dataclass
class Matched:
    """An entry found in today's file: `line` the line it is on now, `lines` its
    statement's; `rewritten`: found in the unwrapped text, the line has been
    rewritten (wrapped) since the run."""

    entry: Entry
    line: int
    lines: tuple
    rewritten: bool = False
    column: int = 1  # where the line's code starts (1-based)


@dataclass
class Stale:
    entry: Entry
    reason: str


@dataclass
class FileEvidence:
    """What the run says about one file, matched to its text today."""

    matched: list = field(default_factory=list)
    stale: list = field(default_factory=list)
    #: line -> the site categories seen crossing on its statement (for the value layer)
    hot: dict = field(default_factory=dict)
    lines: int = 0  # the file's lines today


def _assign(entries: list, cands: list) -> list:
    """Lines for entries sharing one key: in order when there are as many
    distinct hints as lines, else each the nearest to its hint."""
    hints = sorted({e.line for e in entries})
    if len(hints) == len(cands):
        at = dict(zip(hints, cands))
        return [at[e.line] for e in entries]
    out = []
    for e in entries:
        k = bisect.bisect_left(cands, e.line)
        near = [c for c in (cands[k - 1] if k else None, cands[k] if k < len(cands) else None) if c is not None]
        out.append(min(near, key=lambda c: (abs(c - e.line), c)))
    return out


def _keys(entries: Iterable[Entry]) -> set:
    return {e.text for e in entries if e.text is not None}


def _match(entries: list, layout: _Layout) -> tuple:
    """([(entry, line)], [unmatched entries]) against one text."""
    groups: dict = {}
    found, missing = [], []
    for e in entries:
        if e.text is None:  # no key recorded: the line number is all there is
            (found if 0 < e.line <= len(layout.lines) else missing).append((e, e.line))
            continue
        groups.setdefault((static_function(e.function), e.text), []).append(e)
    for (function, text), group in groups.items():
        cands = layout.find(function, text)
        if not cands:
            missing.extend((e, 0) for e in group)
            continue
        found.extend(zip(group, _assign(group, cands)))
    return found, [e for e, _ in missing]


def _parse(text: str) -> Optional[ast.Module]:
    try:
        return ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def match_file(entries: Sequence[Entry], text: str, tree: Optional[ast.Module] = None,
               bare: Optional[Callable[[], Optional[str]]] = None) -> FileEvidence:
    """Match a file's entries to its text (`tree`: its parse, when the caller
    has it); `bare()` gives the file's unwrapped text (None: nothing to unwrap),
    asked only when an entry is not found as the file stands."""
    out = FileEvidence()
    if not entries:
        return out
    layout = _Layout(text, tree if tree is not None else _parse(text), _keys(entries))
    out.lines = len(layout.lines)
    found, missing = _match(list(entries), layout)
    if missing and any(e.name for e in missing):  # (a line whose text changed: its expression may not have)
        named, missing = _match_named(missing, text)
        found += named
    for e, line in found:
        out.matched.append(Matched(e, line, layout.statement(line), column=layout.column(line)))
    if missing and bare is not None:
        missing = _match_rewritten(missing, text, layout, bare, out)
    for e in missing:
        where = f"in {static_function(e.function)}" if e.function is not None else "in the file"
        out.stale.append(Stale(e, f"no line of that text {where} any more: it changed since the run"))
    for m in out.matched:
        cats = opforms.site_categories(m.entry.op, m.entry.direction)
        for ln in m.lines:
            out.hot[ln] = out.hot.get(ln, frozenset()) | cats
    return out


def _match_named(missing: list, text: str) -> tuple:
    """``(found, still missing)``: entries found by their name, the function
    and expression (:mod:`xferaudit.labels`), where the line's text changed
    around it (a reformatted file: ``w[ m ]`` became ``w[m]``)."""
    from ...labels import SourceLabels

    try:
        src = SourceLabels(text)
    except (SyntaxError, ValueError, RecursionError):
        return [], missing
    found, still = [], []
    for e in missing:
        label = _label_of(e)
        node = src.find(static_function(e.function) or MODULE_FUNCTION, label) if label else None
        if node is None:
            still.append(e)
        else:
            found.append((e, node.lineno))
    return found, still


def _label_of(e: Entry) -> str:
    """The expression part of `e`'s name (``loss.item`` of ``train.py:step:loss.item``)."""
    head = f"{e.path}:{static_function(e.function) or MODULE_FUNCTION}:"
    return e.name[len(head):] if e.name.startswith(head) else ""


def _match_rewritten(missing: list, text: str, layout: _Layout, bare: Callable, out: FileEvidence) -> list:
    """Entries found in the unwrapped text: the lines `wrap` made of them."""
    bare_text = bare()
    if bare_text is None or bare_text == text:
        return missing
    blayout = _Layout(bare_text, _parse(bare_text), _keys(missing))
    found, still = _match(missing, blayout)
    if not found:
        return missing
    now = [normalise_text(ln) for ln in layout.lines]
    was = [normalise_text(ln) for ln in blayout.lines]
    ops = difflib.SequenceMatcher(None, was, now, autojunk=False).get_opcodes()
    for e, bline in found:
        lines = _map_line(ops, bline)
        if not lines:
            still.append(e)
            continue
        stmt: set = set()
        for ln in lines:
            stmt.update(layout.statement(ln))
        out.matched.append(Matched(e, lines[0], tuple(sorted(stmt)), rewritten=True, column=layout.column(lines[0])))
    return still


def _map_line(ops: list, line: int) -> list:
    """The lines of the file today that line `line` of the unwrapped text became."""
    i = line - 1
    for tag, i1, i2, j1, j2 in ops:
        if i1 <= i < i2:
            if tag == "equal":
                return [j1 + (i - i1) + 1]
            if tag == "replace":
                return list(range(j1 + 1, j2 + 1))
            return []
    return []


# --- what became of each line --------------------------------------------------------------


def category_of(site: Any) -> str:
    """A static site's category, as the op table names them."""
    return opforms.site_category(site.implicit, site.op, site.kind)


def fitting(m: Matched, sites: Iterable) -> list:
    """The sites on `m`'s statement whose category can make its op."""
    cats = opforms.site_categories(m.entry.op, m.entry.direction)
    lines = set(m.lines)
    return [s for s in sites if s.line in lines and category_of(s) in cats]


def seen(e: Entry) -> str:
    """``the run (run.json) saw `text` crossing (op, down, 3 times, 12 bytes)``."""
    what = f"`{e.text}`" if e.text is not None else "this line"
    return f"the run ({e.source}) saw {what} crossing outside every wrapper ({e.describe()})"


def wrap_outcome(fe: FileEvidence, sites: Sequence, wrapped: Sequence) -> tuple:
    """What ``wrap --from`` did with each line of a file's evidence:
    ``(counts, left)``, counts a dict of ``wrapped`` / ``already`` / ``left`` /
    ``stale``, and ``left`` the ``(line, column, label, reason)`` of each line
    left as it is that no site's own reason explains (no construct of the op's
    categories, or stale evidence). `sites`: the file's sites before the rewrite;
    `wrapped`: those it wrapped."""
    counts = dict.fromkeys(("wrapped", "already", "left", "stale"), 0)
    left = []
    done = {id(s) for s in wrapped}
    for m in fe.matched:
        fit = fitting(m, sites)
        if any(id(s) in done for s in fit):
            counts["wrapped"] += 1
        elif fit and all(s.wrapped for s in fit):
            counts["already"] += 1
        else:
            counts["left"] += 1
            if not fit:  # (a site left has its own reason)
                left.append((m.line, m.column, m.entry.text or "",
                             f"{seen(m.entry)}; {opforms.no_form_reason(m.entry.op)}"))
    for st in fe.stale:
        counts["stale"] += 1
        left.append((st.entry.line, 1, st.entry.text or "", f"stale evidence: {seen(st.entry)}; {st.reason}; "
                     "record a new run"))
    return counts, left


def check_findings(fe: FileEvidence, sites: Sequence) -> tuple:
    """What ``check --evidence`` reports for one file: ``(notes, findings)``.

    `notes` maps ``id(site)`` of each unwrapped site that a run saw crossing to
    ``(the words added to its message, the run file)``; `findings` are ``(line, column, code,
    message, function)`` of the lines the run saw crossing with no unwrapped
    or wrapped site of the op's category (XFA501), and of stale lines (XFA502).
    """
    notes: dict = {}
    shared: dict = {}  # id(entry) -> how many sites of its line it may have come from
    findings = []
    for m in fe.matched:
        fit = fitting(m, sites)
        e = m.entry
        if not fit:
            findings.append((m.line, m.column, "XFA501", f"{run_message(e)}; no call on this line makes it: name "
                             "its statement (end it with `# xferaudit: site=...`, or run `xferaudit wrap --from "
                             f"{e.source}`); {opforms.no_form_reason(e.op)}",
                             static_function(e.function) or MODULE_FUNCTION))
            continue
        left = [s for s in fit if not s.wrapped]
        for s in left:
            notes.setdefault(id(s), []).append(e)
        shared[id(e)] = len(fit)
    for st in fe.stale:
        line = min(max(st.entry.line, 1), max(fe.lines, 1))  # the line it was on, as near as the file has
        findings.append((line, 1, "XFA502", stale_message(st), static_function(st.entry.function) or MODULE_FUNCTION))
    said = {k: ("; seen crossing at run time (" + " and ".join(f"{e.describe()}{_shared(e, shared)}; {e.source}"
                                                               for e in v) + ")", v[0].source)
            for k, v in notes.items()}
    return said, findings


def _shared(e: Entry, shared: dict) -> str:
    """A run counts a line, not a call on it: where several sites of a line
    could have made an entry's crossings, its figures are the line's, for all
    of them (two ``.to()`` of one line, 445 each, are one entry of 890)."""
    n = shared.get(id(e), 1)
    return f" on this line, for its {n} sites together" if n > 1 else ""


def run_message(e: Entry) -> str:
    """``text` was seen crossing at run time, outside every wrapper (...; run.json)``."""
    what = f"`{e.text}`" if e.text is not None else "this line"
    return f"{what} was seen crossing at run time, outside every wrapper ({e.describe()}; {e.source})"


def stale_message(st: Stale) -> str:
    return (f"stale evidence: {seen(st.entry)} at line {st.entry.line}; {st.reason}: record a new run "
            "(or drop the run file from `evidence`)")
