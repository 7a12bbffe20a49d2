"""``xferaudit wrap`` / ``unwrap``: rewrite sites into counting wrappers and back.

Data flow: file bytes -> the ast finder (:mod:`xferaudit.static.front.finder`), which
decides what is a site, its kind, its rule row and its name -> one libcst parse
and ONE transformer pass per file that rewrites the calls whose called-name
position matches a site. Files without a site (wrap) or a wrapper call (unwrap)
are never parsed by libcst.

One module per job::

    __init__.py   wrap_source / unwrap_source: the per-file flow
    imports.py    the runtime's alias, where its import goes, how the file spells a name
    layout.py     which statements hold a site (positions over a skeleton)
    shapes.py     the wrapped form in libcst nodes, written and undone
    wrap.py       the wrap transformer
    unwrap.py     the unwrap transformer
    nodes.py      small libcst helpers; results.py: what a file's run reports
    style.py      the project's line length and import sorting (ruff/black/isort config)
    placement.py  where the runtime import goes (isort's section and order) and back
    breaking.py   over-long wrapped lines broken as black breaks them, and back
    render.py     the new bytes: unchanged statements copied, changed ones generated
    rename.py     ``wrap --rename-sites``: site names made in another file
    skeleton.py   what libcst parses: the statements holding no site blanked, put back after
    files.py      over files: read, rewrite, write atomically, report (wrap and unwrap)

The finder's parse serves the codemod too (:func:`~xferaudit.static.front.finder.analyse`
returns the ``ast`` tree and the resolver with the sites). libcst then parses
only the file's *skeleton* (:mod:`.skeleton`): every statement that holds no
site is one placeholder of the same height, so libcst reads a small part of a
large file at the same lines and columns; the placeholders' original lines are
put back in the result, which is compiled once as a check. Any doubt (a
placeholder moved or lost, a skeleton that cannot be made) and the whole file
is parsed instead. Writing the result generates only the statements that
changed; the rest are copied from the bytes (:mod:`.render`).

Code a maintainer accepts: the import goes where isort / ruff's I001 puts it
(:mod:`.placement`), and a wrapped line longer than the project's line
length is broken the way black breaks it (:mod:`.breaking`); ``unwrap``
recognises both and restores the bytes.

The wrapped form, per wrap style of the rule row (the table is
:mod:`xferaudit.wrapform`'s; this is what it says)::

    receiver   recv.m(args)        ->  xfer.m(recv, args, site="...")
               recv.m(args)        ->  xfer.method(recv, "m", args, site="...")   (user rows)
    function   torch.tensor(args)  ->  xfer.tensor(args, site="...")
               mylib.put(args)     ->  xfer.call(mylib.put, args, site="...")     (user rows)
    result     torch.compile(m)    ->  xfer.graph(torch.compile(m), site="...")
               @torch.compile(...) ->  @xfer.graph(torch.compile(...), site="...", decorator=True)

Reversibility: ``unwrap(wrap(src)) == src`` byte for byte. Everything inside
the rewritten call keeps its own whitespace and comments; what the wrapped form
cannot hold directly is encoded in whitespace it does have, so ``unwrap`` can
put it back:

* whitespace before the ``.`` (``x  # note\\n  .cpu()``) -> before the comma
  after the receiver (``xfer.cpu(x  # note\\n  , site=...)``);
* whitespace after the ``.`` and before ``(`` -> the same places in ``xfer.m (``;
* whitespace before ``)`` -> after the ``site=`` argument; a trailing comma ->
  a trailing comma after ``site=`` (its whitespace after it);
* parentheses around the whole call -> around the wrapper call;
* the dropped callee of a function row (``torch.tensor``) is re-spelled from the
  file's imports; a call spelled differently (``tensor(...)`` beside
  ``import torch``) is reported rather than wrapped.

Every rewrite is checked at the time it is made: unwrapping the new call must
give back the old call's exact text, or the site is left alone and reported.

Positions: a site is the call whose called name sits at the finder's (line,
character column); libcst's PositionProvider (through MetadataWrapper) gives
the libcst side, in characters, like the finder's columns (tabs count one).
PositionProvider costs more than the parse, so it runs over a skeleton of the
module: the statements holding a site line as they are, every other one a
placeholder of the same height (heights from ast line numbers), so the kept
nodes get exactly the positions they have in the whole module. Any doubt (ast
and libcst disagree on statements, a site not placed) falls back to the whole
module.
"""

from __future__ import annotations

import ast
import copy
from collections import Counter
from typing import Callable, Iterable, Optional

import re

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from ...opforms import STATEMENT
from ...rules import RuleTable
from ...wrapform import ALIAS, site_literal, wrapper_infos
from ..front.evidence import category_of, wrap_outcome
from ..front.finder import analyse, find_in_source
from ..front.graph_breaks import mark as mark_compiled
from ..site import Site
from ..front.source import char_col, collector_paused, decode_source, is_stub
from .imports import (
    _alias_import, choose_alias, import_bindings, import_index,
    spell,
)
from .breaking import break_long_lines
from .implicit import ImplicitWrap
from .layout import _ast, _count_lines, _Layout, _layout, _LayoutError  # noqa: F401 - tests and bench patch these
from .nodes import _code, site_arg, string_literal
from .placement import insert_import, remove_import
from .render import _NotReproduced, fast_render
from .style import DEFAULT_STYLE, CodeStyle, code_style
from .results import CodemodError, CodemodResult, Skipped
from .shapes import _Shapes
from .skeleton import skeleton
from .statements import add as add_statements, plan as plan_statements, split_headers, strip as strip_statements
from .unwrap import _UnwrapTransformer, shaped_calls, unrestorable
from .wrap import _WrapTransformer


_IDENT_AT = re.compile(r"\w+")
SKELETON = True  # parse only the statements that hold sites (tests and bench/ turn it off to compare)


def _decode(data: bytes, path: str) -> str:
    try:
        return decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError) as e:
        raise CodemodError(f"cannot decode: {e}") from None


def _parse(data: bytes, path: str) -> cst.Module:
    try:
        with collector_paused():
            return cst.parse_module(data)
    except cst.ParserSyntaxError as e:
        raise CodemodError(f"libcst cannot parse it: {str(e).splitlines()[0]} (line {e.raw_line})") from None
    except (ValueError, UnicodeDecodeError, RecursionError) as e:  # pragma: no cover
        raise CodemodError(f"libcst cannot parse it: {type(e).__name__}: {e}") from None


def _render(module: cst.Module, data: bytes) -> bytes:
    """The module's bytes. libcst drops a final lone ``\r`` (old Mac newlines);
    put it back."""
    out = module.bytes
    if data.endswith(b"\r") and not out.endswith(b"\r") and module.default_newline == "\r":
        out += b"\r"
    return out


def _output(new_module: cst.Module, module: cst.Module, data: bytes, layout) -> bytes:
    """The rewritten bytes: unchanged statements copied from `data`, the rest
    generated (:mod:`.render`); the whole module generated when that cannot be."""
    try:
        out = fast_render(new_module, module, data, layout)
    except _NotReproduced:
        raise CodemodError("libcst does not reproduce this file byte for byte; left as it is") from None
    if out is None:
        if layout is not None:  # not checked before: the layout was to check per statement
            _reproduces(module, data)
        out = _render(new_module, data)
    return out


def _reproduces(module: cst.Module, data: bytes) -> None:
    """libcst must give back the unmodified file exactly, or nothing is rewritten."""
    if _render(module, data) != data:
        raise CodemodError("libcst does not reproduce this file byte for byte; left as it is")


def _eligible(sites: Iterable[Site], codes_ok, hot: Optional[dict] = None,
              site_ok=None) -> tuple[list[Site], int, int]:
    """The sites to wrap; with `hot` (``wrap --from``: line -> the categories a
    run saw crossing there), only those on such lines, of such a category;
    with `site_ok`, only the sites it accepts."""
    out, suppressed, not_selected = [], 0, 0
    for s in sites:
        if s.wrapped:
            continue
        if hot is not None and category_of(s) not in hot.get(s.line, ()):
            continue
        if s.suppressed:
            suppressed += 1
        elif not codes_ok(s.rule) or (site_ok is not None and not site_ok(s)):
            not_selected += 1
        else:
            out.append(s)
    return out, suppressed, not_selected


def wrap_source(
    data: bytes,
    path: str = "<string>",
    rules: Optional[RuleTable] = None,
    relpath: Optional[str] = None,
    codes_ok=None,
    style: Optional[CodeStyle] = None,
    evidence=None,
    site_ok: Optional[Callable[[Site], bool]] = None,
    scripted: Optional[dict] = None,
    placed: Optional[dict] = None,
    compiled: Optional[dict] = None,
) -> CodemodResult:
    """Wrap every eligible unwrapped site of one file's bytes.

    With `evidence` (``wrap --from``: the file's :class:`~..front.evidence.FileEvidence`),
    only the sites on the lines a recorded run saw crossing, in the categories
    its ops can come from, with values the file does not place taken for device
    tensors there; each evidenced line without such a site, and each stale one,
    is reported in ``skipped`` with the reason.

    `codes_ok(code) -> bool` filters sites by rule code (``--select`` and the
    config's select/ignore/per-file-ignores), `site_ok(site) -> bool` by site
    (``check``'s fixes wrap one site at a time); `scripted` names the file's
    functions that a ``torch.jit.script`` in another file compiles (left, with
    the reason: :mod:`..project.scripted`); `placed`: the helpers of other modules
    that place what they return (:mod:`..values.project`); `compiled`: the file's entry
    of what ``torch.compile`` compiles (:mod:`..project.compiled`: the reads there that
    break the graph are ``XFA601`` sites, which `codes_ok` selects by that code); suppressed sites are never wrapped
    (wrapping them would leave their suppression unused). `style` (the
    project's line length and import sorting, :func:`code_style`) decides
    where the runtime import goes and which long lines are broken. Raises
    :class:`CodemodError` for a file that cannot be decoded or parsed.
    """
    from ...rules import table as default_table

    rules = rules or default_table()
    style = style or DEFAULT_STYLE
    res = CodemodResult(path=path)
    text = _decode(data, path)
    hot = evidence.hot if evidence is not None else None
    rel = relpath if relpath is not None else path
    if is_stub(rel):
        found = find_in_source(text, path, rules, rel)
        if found.error:
            raise CodemodError(f"cannot parse: {found.error} (line {found.error_line})")
        return res  # a stub runs no code: no site to wrap (check reports none either)
    found, ctx = analyse(text, path, rules, rel, hot, scripted=scripted, placed=placed)
    if found.error or ctx is None:
        raise CodemodError(f"cannot parse: {found.error} (line {found.error_line})")
    if compiled:
        mark_compiled(found.sites, compiled, found.suppressions)
    codes_ok = codes_ok or (lambda code: True)
    sites, res.suppressed, res.not_selected = _eligible(found.sites, codes_ok, hot, site_ok)
    # crossings with no call to wrap (t[mask], t[[0, 5]], lines a run saw with none): their
    # statements named by a site comment first (moves no line or column), then read back
    named = plan_statements(found, sites, evidence, text, rel, codes_ok, site_ok, ctx.tree)
    commented = None
    if named:
        commented, left = add_statements(data, named, rel)
        for n, reason in left:
            for s in n.sites:
                res.skipped.append(Skipped(s.line, s.column, s.rule, s.label or s.call, reason))
        if commented != data:
            data, text = commented, _decode(commented, path)
            found, ctx = analyse(text, path, rules, rel, hot, scripted=scripted, placed=placed)
            if found.error or ctx is None:  # pragma: no cover - a comment never breaks a parse
                raise CodemodError(f"cannot parse: {found.error} (line {found.error_line})")
            if compiled:
                mark_compiled(found.sites, compiled, found.suppressions)
            sites, res.suppressed, res.not_selected = _eligible(found.sites, codes_ok, hot, site_ok)
            firsts = {n.first for n in named if not any(n is k for k, _ in left)}
            unnamed = {(s.line, s.column, s.rule) for n, _ in left for s in n.sites}
            sites = [s for s in sites if (s.line, s.column, s.rule) not in unnamed]  # (said why above)
            done = [s for s in found.sites if s.op == STATEMENT and s.wrapped and s.line in firsts]
        else:
            commented = None
            unnamed = {id(s) for n, _ in left for s in n.sites}
            sites = [s for s in sites if id(s) not in unnamed]
    # implicit sites (float(t), if t:, print(t)...) are expressions: codemod/implicit.py
    implicit = [s for s in sites if s.implicit]
    sites = [s for s in sites if not s.implicit]
    if sites or implicit:
        lines = [s.line for s in sites] + [ln for s in implicit for ln in range(s.line, s.end_line + 1)]
        job = _WrapJob(text, ctx, found, sites, implicit, lines, rules, style, rel)
        res = _through_skeleton(res, data, ctx.tree, lines, job.run)
    if commented is not None:
        if res.new is None:
            res.new = commented
        res.wrapped.update(s.kind for s in done)
        res.wrapped_sites.extend(done)
        # a one-line compound statement whose header crosses: its body on a line of its own, as a formatter
        # puts it, so the comment stays on the header (last: no line of the rest moves before it)
        res.new = split_headers(res.new, [n for n in named if n.split and not any(n is k for k, _ in left)], rel)
    if evidence is not None:
        res.evidence, left = wrap_outcome(evidence, found.sites, res.wrapped_sites)
        res.skipped.extend(Skipped(ln, col, "", label, reason) for ln, col, label, reason in left)
        res.skipped.sort(key=lambda k: (k.line, k.column))
    return res


def _through_skeleton(res: CodemodResult, data: bytes, tree, lines: list[int], run) -> CodemodResult:
    """`run(res, data, text, tree)` over the file's skeleton (:mod:`.skeleton`)
    when it has one, the original lines put back; over the whole file when
    the skeleton cannot be used or its result cannot be put back."""
    skel = skeleton(data, tree, lines) if SKELETON else None
    if skel is not None:
        tried = copy.copy(res)
        tried.skipped = list(res.skipped)
        try:
            out = run(tried, skel.data, skel.text, _ast(skel.text))
        except CodemodError:
            out = None
        if out is not None and out.new is not None:
            new = skel.restore(out.new)
            if new is None:
                out = None
            else:
                out.new = new
        if out is not None and (out.new is None or _parse_error(out.new, res.path) is None):
            return out
    out = run(res, data, None, tree)
    if out.new is not None:
        _must_compile(out.new, res.path)
    return out


class _WrapJob:
    """The rewrite of one analysed file, run over the text libcst parses (the
    file, or its skeleton: same lines and columns for every site)."""

    def __init__(self, text, ctx, found, sites, implicit, lines, rules, style, relpath) -> None:
        self.text, self.ctx, self.found, self.sites, self.implicit = text, ctx, found, sites, implicit
        self.lines = lines  # the lines holding a site (an implicit one's every line)
        self.rules, self.style = rules, style
        self.relpath = relpath  # the file's name in site names

    def run(self, res: CodemodResult, data: bytes, parsed_text: Optional[str], tree) -> CodemodResult:
        text, ctx, found, sites, implicit = self.text, self.ctx, self.found, self.sites, self.implicit
        rules, style = self.rules, self.style
        parsed_text = text if parsed_text is None else parsed_text
        module = _parse(data, res.path)
        layout = _layout(module, tree, parsed_text, self.lines)
        if layout is None:
            _reproduces(module, data)  # else checked per regenerated statement (render.py)
        lines = ctx.source.lines
        keyed: dict[tuple[int, int], Site] = {}
        names: dict[tuple[int, int], str] = {}
        for s in sites:
            key = (s.line, char_col(lines, s.line, s.byte_col))
            keyed[key] = s
            m = _IDENT_AT.match(lines[s.line - 1], key[1]) if 0 < s.line <= len(lines) else None
            names[key] = m.group(0) if m else ""
        alias, existing = choose_alias(text, module, ctx.resolver)
        have_import = existing is not None
        index = import_index(module)
        if not have_import:
            index = insert_import(module, alias, index, style)[1]  # where isort would put it
        shapes = _Shapes(rules, ctx.resolver.import_bindings)
        taken = {s.site for s in found.sites if s.site}
        imp = ImplicitWrap(implicit, alias, shapes.unwrap) if implicit else None
        tr = None
        if layout is not None:
            # Code run at import time above the runtime import cannot use its alias.
            tops = layout.top_first
            at = existing if have_import else index
            first_line = tops[at] if at < len(tops) else _count_lines(parsed_text) + 1
            tr = _WrapTransformer(keyed, rules, shapes, alias, module.encoding, first_line, taken,
                                  layout.positions(), layout, names, imp, self.relpath)
            new_module = module.visit(tr)
            if len(tr.done) < len(keyed) or (imp is not None and imp.missed()):
                tr = None  # a site the skeleton did not place: redo with whole-module positions
                imp = ImplicitWrap(implicit, alias, shapes.unwrap) if implicit else None
        if tr is None:
            positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
            first_line = 0
            if have_import:
                first_line = positions[module.body[existing]].start.line
            elif index > 0:
                first_line = positions[module.body[index - 1]].end.line + 1
            tr = _WrapTransformer(keyed, rules, shapes, alias, module.encoding, first_line, taken, positions, None,
                                  names, imp, self.relpath)
            new_module = module.visit(tr)
        for s, reason in tr.skipped:
            res.skipped.append(Skipped(s.line, s.column, s.rule, s.label or s.call, reason))
        if imp is not None:
            for s, reason in imp.skipped:
                res.skipped.append(Skipped(s.line, s.column, s.rule, s.label or s.call, reason))
            for s in imp.missed():
                if not any(s is k for k, _ in imp.skipped):
                    res.skipped.append(Skipped(s.line, s.column, s.rule, s.label or s.call,
                                               "no expression of libcst's has this site's span (not safely wrappable)"))
            tr.wrapped.extend(imp.wrapped)
        missed = [s for k, s in keyed.items() if k not in tr.done]
        for s in missed:
            res.skipped.append(
                Skipped(s.line, s.column, s.rule, s.label or s.call,
                        "libcst has no call whose name sits at this position (not safely wrappable)")
            )
        res.skipped.sort(key=lambda k: (k.line, k.column))
        if not tr.wrapped:
            return res
        if not have_import:
            new_module = insert_import(new_module, alias, import_index(new_module), style)[0]
        new = _output(new_module, module, data, layout)
        if _has_long_line(new, alias, style.line_length, module.encoding):
            made = {site_literal(s.site, self.relpath) for s in tr.wrapped}  # the literals written

            def is_new(call: cst.Call) -> bool:
                w = _wrapper_name(call, alias, shapes)
                if w is None:
                    return False
                site = site_arg(call)
                return site is not None and isinstance(site.value, cst.SimpleString) and _literal(site.value.value) in made

            def same_back(old: cst.Call, exploded: cst.Call) -> bool:
                w = _wrapper_name(old, alias, shapes)
                a, b = shapes.unwrap(old, w), shapes.unwrap(exploded, w)
                return a is not None and b is not None and _code(a) == _code(b)

            def bare(call: cst.Call):
                w = _wrapper_name(call, alias, shapes)
                return shapes.unwrap(call, w) if w is not None else None

            broken_module, n = break_long_lines(new_module, is_new, style.line_length, same_back, tr.pruned, bare)
            if n:
                new_module = broken_module
                new = _output(new_module, module, data, layout)
        res.new = new
        res.wrapped = Counter(s.kind for s in tr.wrapped)
        res.wrapped_sites = list(tr.wrapped)
        res.generic = tr.generic
        return res


def _has_long_line(new: bytes, alias: str, limit: int, encoding: str) -> bool:
    """Whether a line holding the runtime's alias or a ``site=`` is longer than
    `limit` (cheap test before the pass that breaks such lines)."""
    marks = ((alias + ".").encode("ascii"), b"site=")
    for line in new.splitlines():
        if len(line) > limit and (marks[0] in line or marks[1] in line):
            try:
                if len(line.decode(encoding).expandtabs(4)) > limit:
                    return True
            except (UnicodeDecodeError, LookupError):
                return True
    return False


def _wrapper_name(call: cst.Call, alias: str, shapes: _Shapes) -> Optional[str]:
    func = call.func
    if (
        isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == alias
        and func.attr.value in shapes.infos
    ):
        return func.attr.value
    return None


def _literal(value: str):
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError):  # pragma: no cover
        return None


def _parse_error(new: bytes, path: str) -> Optional[str]:
    """Why the rewritten bytes would not parse; None when they do."""
    try:
        compile(new, path, "exec", flags=ast.PyCF_ONLY_AST, dont_inherit=True)
    except (SyntaxError, ValueError) as e:
        return str(e)
    return None


def _must_compile(new: bytes, path: str) -> None:
    err = _parse_error(new, path)
    if err is not None:  # pragma: no cover - a bug, never a user error
        raise CodemodError(f"internal error: the rewritten file would not parse ({err}); left as it is")



def unwrap_source(
    data: bytes,
    path: str = "<string>",
    rules: Optional[RuleTable] = None,
    style: Optional[CodeStyle] = None,
) -> CodemodResult:
    """Restore the bare calls of every wrapper call of one file, and drop the
    runtime import when nothing else uses it (putting back the blank lines
    ``wrap`` moved for it: `style` must be the one ``wrap`` ran with)."""
    from ...rules import table as default_table

    rules = rules or default_table()
    res = CodemodResult(path=path)
    text = _decode(data, path)
    if "xferaudit" not in text:
        return res
    found, ctx = analyse(text, path, rules, path)
    if found.error or ctx is None:
        raise CodemodError(f"cannot parse: {found.error} (line {found.error_line})")
    wrapped = [s for s in found.sites if s.wrapped and s.op != STATEMENT]
    named = sum(1 for s in found.sites if s.wrapped and s.op == STATEMENT)
    prefixes = ctx.resolver.runtime_prefixes()
    shaped = shaped_calls(ctx.tree, prefixes, wrapper_infos(rules)) if prefixes else []
    if wrapped or shaped:
        job = _UnwrapJob(ctx, wrapped, rules, style)
        lines = sorted({s.line for s in wrapped} | {ln for n in shaped for ln in range(n.lineno, n.end_lineno + 1)})
        res = _through_skeleton(res, data, ctx.tree, lines, job.run)
        if res.skipped or sum(res.unwrapped.values()) != len(shaped):
            # a wrapper call it cannot restore: an error at its line, and nothing written
            # (a file half unwrapped would keep calls of a runtime whose import it lost)
            failed = unrestorable(_parse(data, path), prefixes, _Shapes(rules, ctx.resolver.import_bindings))
            if failed or res.skipped:
                res.new, res.unwrapped = None, Counter()
                res.skipped = [Skipped(ln, col, "", text, why) for ln, col, text, why in failed] or res.skipped
                return res
    if named:  # the site comments of the statement form, taken off last (wrap wrote them first)
        stripped, n = strip_statements(res.new if res.new is not None else data)
        if stripped is not None:
            res.new = stripped
            res.unwrapped[STATEMENT] += n
    return res


class _UnwrapJob:
    """The unwrap of one analysed file, over the text libcst parses (the file
    or its skeleton)."""

    def __init__(self, ctx, wrapped, rules, style) -> None:
        self.ctx, self.wrapped, self.rules, self.style = ctx, wrapped, rules, style

    def run(self, res: CodemodResult, data: bytes, parsed_text: Optional[str], tree) -> CodemodResult:
        ctx, wrapped, rules, style = self.ctx, self.wrapped, self.rules, self.style
        module = _parse(data, res.path)
        layout = _layout(module, tree, parsed_text if parsed_text is not None else ctx.source.text,
                         [s.line for s in wrapped])
        if layout is None:
            _reproduces(module, data)  # else checked per regenerated statement (render.py)
        prefixes = ctx.resolver.runtime_prefixes()
        shapes = _Shapes(rules, ctx.resolver.import_bindings)
        tr = _UnwrapTransformer(prefixes, shapes, layout=layout)
        new_module = module.visit(tr)
        if Counter(tr.found) != Counter(s.site for s in wrapped):
            # The file binds the runtime's name somewhere else too: trust positions.
            lines = ctx.source.lines
            keys = {(s.line, char_col(lines, s.line, s.byte_col)) for s in wrapped}
            mw = MetadataWrapper(module, unsafe_skip_copy=True)
            tr = _UnwrapTransformer(prefixes, shapes, mw.resolve(PositionProvider), keys)
            new_module = module.visit(tr)
        for call, w in tr.failed:  # (named by line in unwrap_source)
            res.skipped.append(Skipped(0, 0, "", _code(call)[:60], f"`{w}(...)` is not in a form unwrap can restore"))
        if not tr.done:
            return res
        # Drop `import xferaudit.runtime as NAME` once nothing uses NAME (counted in the whole file).
        whole = ctx.tree
        for i, stmt in enumerate(new_module.body):
            a = _alias_import(stmt)
            if a is not None:
                refs = sum(1 for n in ast.walk(whole) if type(n) is ast.Name and n.id == a) if whole else 1 << 30
                if refs - tr.by_prefix[a] <= 0:
                    new_module = remove_import(new_module, i, import_index, style or DEFAULT_STYLE, a)
                break
        res.new = _output(new_module, module, data, layout)
        res.unwrapped = tr.done
        return res


__all__ = [
    "ALIAS", "CodeStyle", "CodemodError", "CodemodResult", "Skipped", "choose_alias", "code_style", "import_bindings",
    "import_index", "spell", "string_literal", "unwrap_source", "wrap_source", "wrapper_infos",
]
