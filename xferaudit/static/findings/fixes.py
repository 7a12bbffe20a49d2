"""Fixes as data: the edit ``xferaudit wrap`` would make for one finding.

``check --format json`` and ``sarif``, and the editor server, carry with each
finding that ``wrap`` can rewrite the exact edits that rewrite it, in ruff's
shape (:class:`Fix`: applicability, message, edits). The edits are not written
by a second writer: they are the difference between the file and the
codemod's output for it (:func:`~xferaudit.static.codemod.wrap_source`), so a
fix is what ``wrap`` writes, and follows it when ``wrap`` changes.

One codemod run serves a whole file: its output is split into runs of changed
lines (:func:`~xferaudit.static.findings.edits.hunks`). A run that holds no site is
shared by every fix (the ``import xferaudit.runtime as xfer`` line and the
blank lines around it); a run that holds exactly one site is that site's. A
site that shares its run with another (two sites in one statement, or on
adjacent lines) is wrapped on its own, in a run of the codemod for that site
alone. Applied alone, a fix gives what ``wrap`` writes when it wraps that
site alone; applied together (an identical edit once, overlapping ones
skipped, as ruff applies fixes), the fixes of a file give what ``wrap`` writes
for all of them, or a part of it that a second round completes.

Applicability, per kind of finding (ruff's meaning: *safe* keeps what the code
does and may be applied without review; *unsafe* may change it and is applied
only on request):

- ``XFA201``-``XFA203`` (up, down, move): **safe**. The wrapper makes the bare
  call and returns what it returns, raises what it raises; ``unwrap`` gives
  back the original bytes.
- ``XFA204`` (graph): **unsafe**. The compiled function or graph comes back
  inside a counting callable: its identity, and attributes beyond those
  ``functools.update_wrapper`` copies, are the wrapper's.
- ``XFA4xx`` (implicit): **unsafe**. The rewrite rests on the value layer's
  reading of what an expression holds (a "gpu-first" reading assumes the
  model's parameters live on the device), and it puts a call where the code
  had none (``if t:`` becomes ``if xfer.bool(t, site=...):``).
- ``XFA405``-``XFA407`` (a count read back, an upload or a download inside
  indexing): **safe**. No call makes them, so the fix names their statement
  with a site comment (``  # xferaudit: site="..."``), which changes nothing
  Python runs, and needs no import.
- ``XFA302`` (a site name made in another file): **unsafe**. Renaming the site
  changes the key its counts are kept under: budgets, baselines and saved
  reports keyed by the old name stop matching it.

No fix is *display*-only: every fix offered is an exact edit. A site ``wrap``
leaves as it is (not safely wrappable), a notebook (its edits would be to the
cells' JSON) and a file that changed since it was read get no fix.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Iterable, Optional, Sequence

from .edits import Edit, Hunk, Positions, changed_runs, hunks, split_leading, trimmed
from ..front.notebook import is_notebook
from ..front.source import split_lines

if TYPE_CHECKING:  # pragma: no cover
    from ...config import Config
    from ...rules import RuleTable
    from .diagnostics import Diagnostic
    from ..site import Site

SAFE, UNSAFE, DISPLAY = "safe", "unsafe", "display"

#: Codes whose fix may change what the code does (the module docstring says why).
UNSAFE_CODES = ("XFA204", "XFA302", "XFA4", "XFA601")
#: Codes whose fix is a comment (the statement form): it changes nothing Python runs.
COMMENT_CODES = ("XFA405", "XFA406", "XFA407")


@dataclass(frozen=True)
class Fix:
    applicability: str
    message: str
    edits: tuple[Edit, ...] = field(default_factory=tuple)

    def to_json(self) -> dict:
        """ruff's shape: ``{"applicability", "message", "edits": [...]}``."""
        return {
            "applicability": self.applicability,
            "message": self.message,
            "edits": [e.to_json() for e in self.edits],
        }


def applicability(code: str) -> str:
    return UNSAFE if code.startswith(UNSAFE_CODES) and code not in COMMENT_CODES else SAFE


#: id(site) -> the last line of its statement, for sites named by a site comment
#: there (the wrap grammar's statement form): set by :func:`wrap_fixes` per file.
_STATEMENT_END: dict = {}


def _lines_of(s: "Site") -> tuple[int, int]:
    """The lines the rewrite of `s` may touch: from the first line of the call's
    text (a receiver may start lines above the called name) to its end (for a
    site whose statement is named, the statement's end, where the comment goes)."""
    return min(s.line, s.end_line - s.call.count("\n")), max(s.line, s.end_line, _STATEMENT_END.get(id(s), 0))


def _needs_import(s: "Site") -> bool:
    """Whether the wrapped form of `s` calls the runtime (a statement named by
    a comment does not: its fix is the comment alone)."""
    from ...opforms import NO_CALL_FORM

    return not (s.implicit and s.op in NO_CALL_FORM)


def _is_runtime_import(line: str) -> bool:
    from ...wrapform import RUNTIME_MODULE

    return line.lstrip().startswith(("import " + RUNTIME_MODULE + " ", "from xferaudit import runtime "))


def _runtime_import_lines(text: str) -> int:
    return sum(1 for ln in text.splitlines() if _is_runtime_import(ln))


def _runs(old: str, new: str, sites: Sequence["Site"] = ()) -> list[Hunk]:
    """The changed runs of lines from `old` to `new`, an added runtime import
    (and the blank lines after it) a run of its own even where it lands right
    above a changed line. A run that keeps its number of lines, each changed
    line of it holding one of `sites`, is a run per changed line: sites on
    adjacent lines are then apart, as sites a kept line separates are."""
    pos = Positions(old)
    a, b = split_lines(old), split_lines(new)

    def apart(line: str, k: int) -> bool:
        return _is_runtime_import(line) if k == 0 else (not line.strip() or _is_runtime_import(line))

    out: list[Hunk] = []
    for run in changed_runs(a, b):
        for i1, i2, j1, j2 in _by_line(a, b, run, sites) or (run,):
            pieces = _by_site(a[i1], b[j1], pos.bounds[i1], pos, [x for x in sites if _on_line(x, i1 + 1)]) \
                if i2 - i1 == 1 == j2 - j1 else None
            if pieces is not None:
                out.extend(pieces)
                continue
            h = Hunk(i1, i2, trimmed(pos, pos.bounds[i1], pos.bounds[i2], "".join(b[j1:j2])))
            out.extend(split_leading(h, pos, apart))
    return out


@dataclass(frozen=True)
class _SiteHunk(Hunk):
    """A part of one changed line that only `site` holds (its call's characters)."""

    site: Optional["Site"] = None


def _on_line(s: "Site", line: int) -> bool:
    return s.line == s.end_line == line and "\n" not in s.call


def _by_site(was: str, now: str, base: int, pos: Positions, sites: list) -> Optional[list]:
    """One changed line holding several calls (``a = x.cpu(); b = y.cpu()``,
    ``f(x.cpu(), y.cpu())``) as a part per call: each changed stretch of the
    line lies inside one call's characters (else None: the line stays whole)."""
    if len(sites) < 2:
        return None
    import difflib

    spans = [(s.end_column - 1 - len(s.call), s.end_column - 1, s) for s in sites]
    mine: dict = {}
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, was, now, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        holders = [sp for sp in spans if sp[0] <= i1 and i2 <= sp[1]]
        if len(holders) != 1:
            return None
        lo, hi, jlo, jhi = mine.get(id(holders[0][2]), (i1, i2, j1, j2))
        mine[id(holders[0][2])] = (min(lo, i1), max(hi, i2), min(jlo, j1), max(jhi, j2))
    line = pos.position(base)[0] - 1
    return [_SiteHunk(line, line + 1, trimmed(pos, base + lo, base + hi, now[jlo:jhi]), s)
            for lo_, hi_, s in spans if id(s) in mine
            for lo, hi, jlo, jhi in (mine[id(s)],)]


def _by_line(a: list, b: list, run: tuple, sites: Sequence["Site"]) -> Optional[list]:
    """`run` as one run per changed line, where it keeps its number of lines
    and every changed line holds a site (a line no site holds, as a long line
    broken differently, keeps the run whole); else None."""
    i1, i2, j1, j2 = run
    if i2 - i1 != j2 - j1 or i2 - i1 < 2 or not sites:
        return None
    spans = [_lines_of(s) for s in sites]
    out = []
    for k in range(i2 - i1):
        if a[i1 + k] == b[j1 + k]:
            continue
        line = i1 + k + 1
        if not any(lo <= line <= hi for lo, hi in spans):
            return None
        out.append((i1 + k, i1 + k + 1, j1 + k, j1 + k + 1))
    return out


def source_bytes(text: str) -> Optional[bytes]:
    """An editor's text as the bytes of the file it would save (its coding
    declaration's encoding), for the codemod, which reads bytes."""
    import io
    import tokenize

    try:
        enc, _ = tokenize.detect_encoding(io.BytesIO(text.encode("utf-8", "surrogatepass")).readline)
        return text.encode(enc)
    except (SyntaxError, UnicodeError, LookupError):
        return None


def source_text(data: bytes) -> Optional[str]:
    """A file's bytes as text by its coding declaration; None when they do not decode."""
    from ..front.source import decode_source

    try:
        return decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError):
        return None


class Stopped(Exception):
    """The caller's `stop()` said the fixes are no longer wanted (the editor's
    document changed): none are set."""


def wrap_fixes(data: bytes, path: str, relpath: str, cfg: "Config", rules: "RuleTable",
               sites: Iterable["Site"], style=None,
               stop: Optional[Callable[[], bool]] = None,
               scripted: Optional[dict] = None,
               placed: Optional[dict] = None,
               compiled: Optional[dict] = None) -> dict[tuple[int, int, str], tuple[Edit, ...]]:
    """{(line, column, code) of a site: the edits that wrap it} for the sites of
    one file's bytes that ``wrap`` rewrites (the others are left out). `stop()`
    is asked before each codemod run: True raises :class:`Stopped`; `scripted`:
    the file's functions TorchScript compiles from another file, left as ``wrap``
    leaves them (:mod:`..project.scripted`); `placed`: the helpers elsewhere that place
    what they return (:mod:`..values.project`); `compiled`: the file's entry of what
    ``torch.compile`` compiles (its reads there are ``XFA601``, :mod:`..project.compiled`)."""
    from ..codemod import CodemodError, code_style, wrap_source

    style = style or code_style(cfg.root)

    def codes_ok(code: str) -> bool:
        return cfg.code_enabled(code, relpath)

    def run(only: Optional[list]) -> Optional[str]:
        """The file's text after wrap, of every site or of the sites `only`."""
        if stop is not None and stop():
            raise Stopped
        site_ok = None if only is None else (lambda x: any(_same(x, s) for s in only))
        try:
            res = wrap_source(data, path, rules, relpath, codes_ok, style, site_ok=site_ok, scripted=scripted,
                              placed=placed, compiled=compiled)
        except (CodemodError, RecursionError):
            return None
        if only is None:
            skipped.update((k.line, k.column) for k in res.skipped)
        return source_text(res.new) if res.new is not None else None

    wanted = [s for s in sites if not s.wrapped and not s.suppressed and codes_ok(s.rule)]
    old = source_text(data)
    _STATEMENT_END.clear()
    if old is not None and any(not _needs_import(s) for s in wanted):
        from ...wrapform import statement_spans
        from ..front.statements import statement_of

        spans = statement_spans(old)
        for s in wanted:
            span = statement_of(spans, s.line) if not _needs_import(s) else None
            if span is not None:
                _STATEMENT_END[id(s)] = span[1]
    skipped: set = set()
    new = run(None) if wanted and old is not None else None
    if new is None:
        return {}
    wanted = [s for s in wanted if (s.line, s.column) not in skipped]
    out: dict[tuple[int, int, str], tuple[Edit, ...]] = {}
    shared, groups = _resolve(old, new, wanted, None, out)
    left = [s for s in wanted if _fix_key(s) not in out]
    # Sites that shared a run of lines (adjacent statements, one statement) are
    # wrapped again in a few batches, no two such sites in one batch, and
    # split there; what still shares a run is wrapped alone.
    while left:
        done = len(out)
        batches = _batches(left, groups)
        groups = []
        for batch in batches:
            text = run(batch)
            if text is not None:
                groups += _resolve(old, text, batch, shared, out)[1]
        left = [s for s in left if _fix_key(s) not in out]
        if len(out) == done or len(batches) == len(left):
            break
    for s in left:
        text = run([s])
        if text is not None:
            own = _runs(old, text, [s])
            out[_fix_key(s)] = _ordered(_prefer_shared(own, s, shared))
    return out


def _fix_key(s: "Site") -> tuple[int, int, str]:
    return (s.line, s.column, s.rule)


def _resolve(old: str, new: str, sites: list["Site"], shared: Optional[list[Edit]],
             out: dict) -> tuple[list[Edit], list[list["Site"]]]:
    """Split one codemod output over `sites`: each site alone in its runs of
    changed lines gets a fix (into `out`): its runs, and the runs no site
    holds (the import), taken from `shared` where they are the same change.
    Returns the runs no site holds and the groups of sites that shared a run."""
    runs = _runs(old, new, sites)
    owners: list[list["Site"]] = [[] for _ in runs]
    for s in sites:
        lo, hi = _lines_of(s)
        for i, h in enumerate(runs):
            held = getattr(h, "site", None)
            if (held is s) if held is not None else h.touches(lo, hi):
                owners[i].append(s)
    free = [h.edit for h, o in zip(runs, owners) if not o]
    if shared is not None and sorted(free, key=_key) == sorted(shared, key=_key):
        free = shared
    import_apart = _runtime_import_lines("".join(e.content for e in free)) > 0 or (
        _runtime_import_lines(new) == _runtime_import_lines(old))
    groups = [o for o in owners if len(o) > 1]
    for s in sites:
        mine = [i for i, o in enumerate(owners) if any(x is s for x in o)]
        if mine and import_apart and all(len(owners[i]) == 1 for i in mine):
            out[_fix_key(s)] = _ordered((free if _needs_import(s) else []) + [runs[i].edit for i in mine])
        elif mine and not import_apart:
            groups.append([s])
    return free, groups


def _batches(sites: list["Site"], groups: list[list["Site"]]) -> list[list["Site"]]:
    """`sites` in batches where no two of a group meet (a greedy colouring)."""
    apart: dict[int, set] = {id(s): set() for s in sites}
    for g in groups:
        for a in g:
            for b in g:
                if a is not b and id(a) in apart:
                    apart[id(a)].add(id(b))
    batches: list[list["Site"]] = []
    for s in sites:
        for batch in batches:
            if not any(id(x) in apart[id(s)] for x in batch):
                batch.append(s)
                break
        else:
            batches.append([s])
    return batches


def _same(a: "Site", b: "Site") -> bool:
    return (a.line, a.column, a.rule, a.implicit) == (b.line, b.column, b.rule, b.implicit)


def _prefer_shared(runs: list[Hunk], s: "Site", shared: list[Edit]) -> list[Edit]:
    """A lone site's edits, with the edits it shares with the others taken
    from the file's run when they are the same change: identical edits are
    applied once when several fixes are applied together."""
    lo, hi = _lines_of(s)
    own = [h.edit for h in runs if h.touches(lo, hi)]
    rest = [h.edit for h in runs if not h.touches(lo, hi)]
    if not _needs_import(s):
        return own
    return (shared if sorted(rest, key=_key) == sorted(shared, key=_key) else rest) + own


def _key(e: Edit):
    return (e.start, e.end, e.content)


def _ordered(edits: list[Edit]) -> tuple[Edit, ...]:
    return tuple(sorted(edits, key=_key))


def rename_fixes(data: bytes, path: str, relpath: str, rules: "RuleTable",
                 sites: Iterable["Site"]) -> dict[tuple[int, int, str], tuple[Edit, ...]]:
    """{(line, column): edits} renaming the site names of wrapped calls made in
    another file (XFA302), as ``wrap --rename-sites`` renames them."""
    from ..codemod import CodemodError
    from ..codemod.rename import rename_sites_source

    old = source_text(data)
    try:
        renamed = rename_sites_source(data, path, rules, relpath)
    except CodemodError:
        return {}
    new = source_text(renamed) if renamed is not None else None
    if old is None or new is None:
        return {}
    runs = hunks(old, new)
    out = {}
    for s in sites:
        mine = [h.edit for h in runs if h.touches(*_lines_of(s))]
        if mine:
            out[(s.line, s.column, "XFA302")] = _ordered(mine)
    return out


def attach(diags: list["Diagnostic"], scan, cfg: "Config", rules: "RuleTable",
           sources: Optional[dict] = None, jobs: Optional[int] = None,
           stop: Optional[Callable[[], bool]] = None) -> None:
    """Set ``fix`` on each reported finding that ``wrap`` can rewrite.

    `scan` is the :class:`~xferaudit.static.project.scan.Scan` the findings came from
    (its sites); `sources` maps a displayed path to the source that was
    checked (standard input's bytes, an editor's text), else each file is
    read again. Many files are done on every core (`jobs` processes), as
    ``wrap`` does them. `stop()` (the editor server's: the document changed)
    is asked before each codemod run; True raises :class:`Stopped`, no fix set.
    """
    from .diagnostics import fix_message

    by_path: dict[str, list] = {}
    for d in diags:
        if d.suppressed is None and (d.code.startswith(("XFA2", "XFA4")) or d.code == "XFA302"):
            by_path.setdefault(d.path, []).append(d)
    if not by_path:
        return
    todo = []  # (file result, relpath, its findings, its bytes)
    for res, rel in zip(scan.results, scan.relpaths):
        found = by_path.get(res.path)
        if not found or res.error is not None or is_notebook(res.path):
            continue
        data = (sources or {}).get(res.path)
        if isinstance(data, str):
            data = source_bytes(data)
        if data is None:
            try:
                with open(res.path, "rb") as fh:
                    data = fh.read()
            except OSError:
                continue
        todo.append((res, rel, found, data))
    scripted = getattr(scan, "scripted", None) or {}
    from ..values.project import for_file

    placed = getattr(scan, "placed", None) or {}
    compiled = getattr(scan, "compiled", None) or {}
    items = [(data, res.path, rel, res.sites, any(d.code == "XFA302" for d in found),
              scripted.get(os.path.abspath(res.path)), for_file(placed, res.path),
              compiled.get(os.path.abspath(res.path)))
             for res, rel, found, data in todo]
    by_id = {r.id: r for r in rules.rules}
    for (res, rel, found, _), edits in zip(todo, _file_edits_all(items, cfg, rules, jobs, stop)):
        at = {(s.line, s.column, "XFA302" if s.wrapped else s.rule): s for s in res.sites}
        for d in found:
            e = edits.get((d.line, d.column, d.code))
            s = at.get((d.line, d.column, d.code))
            if e and s is not None:
                d.fix = Fix(applicability(d.code), fix_message(s, by_id.get(s.rule_id), d.code, rel), e)


#: From this many files on, fixes are made on a process pool (wrap's threshold: the same work).
PARALLEL_MIN_FILES = 16
_STATE: list = []  # a worker's (config, rules, style)


def _init(cfg: "Config", rules: "RuleTable") -> None:
    from ..codemod import code_style

    _STATE[:] = [(cfg, rules, code_style(cfg.root))]


def _worker_init(cfg: "Config", rules: "RuleTable", run_pid: int) -> None:
    from ..._workers import die_with_parent  # end with the run, leave Ctrl-C to it

    die_with_parent(run_pid)
    _init(cfg, rules)


def _file_edits(item: tuple, stop: Optional[Callable[[], bool]] = None) -> dict:
    data, path, rel, sites, rename, scripted, placed, compiled = item
    cfg, rules, style = _STATE[0]
    edits = wrap_fixes(data, path, rel, cfg, rules, sites, style, stop, scripted, placed, compiled)
    if rename:
        edits.update(rename_fixes(data, path, rel, rules, [s for s in sites if s.wrapped]))
    return edits


def _file_edits_all(items: list, cfg: "Config", rules: "RuleTable", jobs: Optional[int],
                    stop: Optional[Callable[[], bool]] = None) -> list[dict]:
    import os

    from ..project.scan import _start_method, worker_count

    workers = max(1, min(jobs if jobs is not None else worker_count(), len(items)))
    if workers == 1 or (jobs is None and len(items) < PARALLEL_MIN_FILES):
        _init(cfg, rules)
        return [_file_edits(item, stop) for item in items]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context(_start_method())
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_worker_init,
                             initargs=(cfg, rules, os.getpid())) as ex:
        return list(ex.map(_file_edits, items, chunksize=1))
