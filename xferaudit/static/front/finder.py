"""Find transfer and graph sites in Python source.

One pass of the standard library's ``ast`` over each file (its C parser is
several times faster than libcst's, which matters on a 2,000-file tree), with
every rule of the table tested at each call. The codemod rewrites with libcst
but asks this finder which calls are sites, matching them by position, so there
is one classifier whatever the pass.

The static front end, one module per job::

    source.py     text, lines, character columns, the one ast parse
    prefilter.py  the lines a site can be on (a regex pass over the text)
    resolver.py   imports and scopes: what ``T.tensor`` refers to
    classify.py   is this call a site, of which kind (the rows, the device vocabulary)
    wrapped.py    wrapper calls read back as sites (through xferaudit.wrapform)
    suppress.py   ``# noqa`` / ``# xferaudit: ignore`` comments
    naming.py     site names
    site.py       the Site record itself (every part names it without importing this module)
    finder.py     this module: the visitor, :func:`analyse`, :func:`find_in_source`

and, plugged in through :data:`ANALYSES` (below), the value layer, a package
of its own (``values/``: see :mod:`..values`): what an expression holds (a
device tensor, a module, numpy...), followed through each function; it adds
the implicit transfers (``float(t)``, ``if t:``, ``print(t)``...) and re-judges
method-row sites (``values/sites.py``, the analysis).

Positions are 1-based lines and 1-based character columns of the called name
(``ast`` counts UTF-8 bytes; :func:`~.source.char_col` converts).

Adding a per-file analysis (the seam): write a function taking the
:class:`FileContext` of a parsed file (its ``tree``, the ``ast.Module``; its
``resolver``, whose ``qualname(node)`` gives the fully qualified import name
of a Name/Attribute, ``"torch.tensor"``, ``"numpy.linspace"``; its ``source``
for positions and text; the ``rules``; the ``sites`` found so far) and
returning more :class:`Site` objects, and append it to :data:`ANALYSES`::

    from xferaudit.static.front import finder
    finder.ANALYSES.append(my_analysis)   # def my_analysis(ctx) -> list[Site]

An analysis may also drop or amend the sites found so far (``ctx.sites``, in
place): ``ctx.nodes[id(site)]`` gives an unwrapped site's ``ast`` node and the
resolver scope it was found in. The value layer (:mod:`..values.sites`,
registered by ``xferaudit.static``) is one: it adds the implicit sites and
drops method calls whose receiver is shown to be no tensor.

The resolver answers in the scope it is in: walk functions with
``with ctx.resolver.entered(def_node): ...``. The analysis's sites are
sorted, named and matched against suppressions with the finder's own. (The
finder itself, during its pass, offers ``_FileFinder.qualname`` and
``_FileFinder.tree`` the same way.)
"""

from __future__ import annotations

import ast
import bisect
import copy
import sys
from dataclasses import dataclass, field
from typing import Callable, Optional

from ...rules import KIND_CODES, Rule, RuleTable, table as default_table
from ...wrapform import RUNTIME_MODULE, wrapper_infos
from .classify import Classifier
from ..codes import IMPLICIT_CODES, IMPLICIT_OP_CODES
from .naming import LABEL_LIMIT, name_sites, short_label, short_receiver
from .nodes import Visitor
from .prefilter import candidate_lines, imported_modules
from .resolver import COMPOUND_BODIES, Resolver, arg_names, target_names
from ..site import FileResult, Site  # (FileResult: a record the cache reads without this module)
from .source import Source, decode_source, is_stub, parse, split_lines
from .suppress import bare_own, file_suppressions, parse_suppressions
from .kernels import drop_kernel_sites, kernel_spans, may_hold_kernels
from .unwrappable import arguments_may_have_effects, mark as mark_unwrappable
from .wrapped import Unwrapper, read_wrapped

_RUNTIME_DOT = RUNTIME_MODULE + "."



def _position(source: Source, colmap, node: ast.AST, at: ast.AST,
              expression: bool = False) -> tuple[int, int, int, int, int]:
    """(line, 1-based column, end line, end column, byte column) of a site whose
    node is `node` and whose called name is `at` (an attribute's name ends where
    the Attribute ends; anything else starts where it starts)."""
    if isinstance(at, ast.Attribute) and not (expression and at is node):
        line = at.end_lineno
        bcol = at.end_col_offset - len(at.attr)
    else:
        line, bcol = at.lineno, at.col_offset
    col = source.char_col(line, bcol)
    end_line = node.end_lineno
    end_col = source.char_col(end_line, node.end_col_offset)
    if colmap is not None:
        col = colmap.col(line, col)
        end_col = colmap.col(end_line, end_col)
    return line, col + 1, end_line, end_col + 1, bcol


def implicit_site(path: str, source: Source, colmap, node: ast.AST, at: ast.AST, op: str, label: str,
                  function: str, wrapped_as: Optional[str] = None, no_wrap: str = "", wrapper: str = "",
                  evidence: str = "") -> Site:
    """The :class:`Site` of an implicit crossing of category `op` (see
    ``static/codes.py``, ``IMPLICIT_CODES``): its rule is that category's code;
    `no_wrap`, why no wrapped form keeps it as written ("" when one does);
    `wrapper`, the form that does (:attr:`Site.wrapper`); `evidence`, why its value
    is taken for a device value."""
    code = IMPLICIT_OP_CODES[op]
    # a site that is an expression of its own (`ctx.flag` read as a truth value)
    # starts where it starts: its span is the whole value that crosses
    line, col, end_line, end_col, bcol = _position(source, colmap, node, at, expression=True)
    return Site(path=path, line=line, column=col, end_line=end_line, end_column=end_col,
                kind=IMPLICIT_CODES[code][1], rule=code, call=source.segment(node),
                wrapped=wrapped_as is not None, site=wrapped_as, rule_id="implicit." + op,
                function=function or "<module>", label=label, byte_col=bcol, implicit=True, op=op,
                no_wrap=no_wrap, wrapper=wrapper, evidence=evidence)


@dataclass
class FileContext:
    """One parsed file, as the front end holds it: what an analysis plugged
    into :data:`ANALYSES` reads, and what the codemod reuses instead of
    parsing again."""

    path: str
    source: Source
    tree: Optional[ast.Module]
    rules: RuleTable
    finder_resolver: Resolver  # bound only around the finder's candidate lines
    sites: list = field(default_factory=list)
    #: id(site) -> (its ast node, the resolver scope it was found in), for the
    #: sites the finder found unwrapped (an analysis may re-judge them).
    nodes: dict = field(default_factory=dict)
    colmap: object = None  # repair.ColumnMap when the text is a repaired reading
    candidates: list = field(default_factory=list)  # the prefilter's lines (where a row's name is called)
    whole: bool = False  # `resolver` binds every scope (analyses may look anywhere)
    relpath: str = ""  # the path relative to the project root (settings by path: gpu-first-exclude)
    #: run evidence: line -> the site categories a recorded run saw crossing
    #: on its statement (static/front/evidence.py); the value layer reads it
    evidence: dict = field(default_factory=dict)
    #: the helpers of other modules of the project that place what they return,
    #: handed to this file by the project pass (values/project.py), or None
    placed: Optional[dict] = None
    _full: Optional[Resolver] = None

    @property
    def resolver(self) -> Resolver:
        """The file's resolver (with every scope bound when analyses run: built
        on first use, so an analysis that does not ask costs nothing)."""
        if not self.whole or self.tree is None:
            return self.finder_resolver
        if self._full is None:
            self._full = Resolver(self.tree, self.rules)
            self._full.bind(walrus=self.source.lines_with(":="))
        return self._full

    def position(self, node: ast.AST, at: ast.AST) -> tuple[int, int, int, int, int]:
        """(line, column, end line, end column, byte column) of a site at `node`
        whose called name is `at` (columns 1-based, in characters)."""
        return _position(self.source, self.colmap, node, at)


#: Extra per-file analyses: ``fn(ctx: FileContext) -> list[Site]``, run after
#: the finder's own pass on every file that parses (see the module docstring).
ANALYSES: list[Callable[[FileContext], list]] = []


def _future_annotations(tree: ast.Module) -> bool:
    """``from __future__ import annotations``: no annotation is evaluated."""
    for st in tree.body:
        if isinstance(st, ast.ImportFrom) and st.module == "__future__":
            if any(a.name == "annotations" for a in st.names):
                return True
        elif not (isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant)):
            return False
    return False


class _FileFinder(Visitor):
    """The per-file pass: visits the statements the prefilter points at, asks
    the classifier about each call, and collects :class:`Site` objects."""

    def __init__(self, path: str, text: str, rules: RuleTable, display_path: str,
                 tree: Optional[ast.Module] = None, source: Optional[Source] = None) -> None:
        self.path = display_path
        self.source = source if source is not None else Source(text)
        self.text = self.source.text
        self.lines = self.source.lines
        self.rules = rules
        self.tree = tree
        self.resolver = Resolver(tree if tree is not None else ast.Module(body=[], type_ignores=[]), rules)
        self.infos = wrapper_infos(rules)
        self.cls = Classifier(rules, self.resolver.qualname, self.source.segment)
        self.sites: list[Site] = []
        self.qual: list[str] = []
        self.functions = 0  # > 0 inside a function body (local annotations are never evaluated)
        self.lazy_annotations = False  # `from __future__ import annotations`: none is evaluated
        self.covered: set[int] = set()  # ids of calls wrapped by an enclosing xfer.graph(...)
        self.decorators: set[int] = set()
        self.active: Optional[frozenset] = None  # packs on in this file (None: all)
        self.cand: list[int] = []  # lines where a site may be (see prefilter.candidate_lines)
        self.colmap = None  # repair.ColumnMap when the text is a repaired reading
        self.nodes: dict = {}  # id(site) -> (node, scope): see FileContext.nodes
        self.relpath = display_path  # the file's name in site names (short literals are named after it)

    def _segment(self, node: ast.AST) -> str:
        return self.source.segment(node)

    def qualname(self, node: ast.AST) -> Optional[str]:
        """The imported qualified name an expression refers to in the scope being
        visited (``T.tensor`` -> ``torch.tensor``); see :class:`~.resolver.Resolver`."""
        return self.resolver.qualname(node)

    # traversal ----------------------------------------------------------------
    def run(self, tree: ast.Module) -> None:
        self.tree = tree
        self.resolver.tree = tree
        self.active = self.rules.active_packs(imported_modules(self.text, self.rules))
        self.cand = candidate_lines(self.text, self.lines, self.rules, self.active)
        if not self.cand:
            return  # no rule's name is called anywhere: nothing to visit
        self.lazy_annotations = _future_annotations(tree)
        self.resolver.bind(walrus=self.source.lines_with(":="), hits=self._hits)
        self._body(tree.body)

    def _hits(self, node: ast.AST) -> bool:
        """Whether a statement spans a candidate line (one where a rule's name is
        called): statements that do not are skipped whole."""
        lo = node.lineno
        decos = getattr(node, "decorator_list", None)
        if decos:
            lo = min(lo, decos[0].lineno)
        cand = self.cand
        k = bisect.bisect_left(cand, lo)
        return k < len(cand) and cand[k] <= node.end_lineno

    def _body(self, body: list) -> None:
        for st in body:
            if self._hits(st):
                self.visit(st)

    def _compound(self, node: ast.stmt) -> None:
        """if/for/while/with/try/match: the header's expressions in full, the
        bodies statement by statement."""
        for name, value in ast.iter_fields(node):
            if name in COMPOUND_BODIES:
                self._body(value)
            elif name == "handlers":
                for h in value:
                    if h.type is not None:
                        self.visit(h.type)
                    self._body(h.body)
            elif name == "cases":
                for c in value:
                    if c.guard is not None:
                        self.visit(c.guard)
                    self._body(c.body)
            elif isinstance(value, list):
                for v in value:
                    if isinstance(v, ast.AST):
                        self.visit(v)
            elif isinstance(value, ast.AST):
                self.visit(value)

    visit_If = visit_For = visit_AsyncFor = visit_While = visit_With = visit_AsyncWith = _compound
    visit_Try = visit_Match = _compound
    if hasattr(ast, "TryStar"):
        visit_TryStar = _compound

    def visit_Constant(self, node: ast.Constant) -> None:
        """Nothing to see (and NodeVisitor's own visit_Constant is a slow shim)."""

    def _on(self, rule: Optional[Rule]) -> Optional[Rule]:
        """`rule` if its pack is on in this file (the torch pack and the user's
        rows always; another pack where the file imports its library)."""
        if rule is None or self.active is None or rule.pack in self.active:
            return rule
        return None

    def _bare_decorator(self, d: ast.AST) -> None:
        """`@jax.jit` / `@torch.compile` without a call: the graph is made there.

        The site's node is the Name/Attribute itself (``decorator=True``); the
        wrapped form is ``@xfer.<wrapper>(jax.jit, site=..., decorator=True)``,
        the same as for a decorator call, and `_wrapper_call` reads it back as
        a wrapped site. ``@functools.partial(jax.jit, ...)`` is handled in
        `_check_call` (the partial call is the site)."""
        if isinstance(d, (ast.Name, ast.Attribute)):
            q = self.qualname(d)
            rule = self._on(self.rules.functions.get(q)) if q else None
            if rule is not None and rule.kind == "graph" and rule.wrap == "result":
                self._add(d, d, rule, rule.kind, wrapped=False, site=None, decorator=True)

    def _enter(self, node, name: Optional[str]):
        r = self.resolver
        outer = r.scope
        r.scope = r.scope_of(node, outer)
        if name is not None:
            self.qual.append(name)
        return outer

    def _annotation(self, node: Optional[ast.AST]) -> None:
        """Annotations run where they are written (a parameter's and the return's
        when the ``def`` runs), unless ``from __future__ import annotations``
        keeps every annotation a string that nothing evaluates."""
        if node is not None and not self.lazy_annotations:
            self.visit(node)

    def _function(self, node) -> None:
        for d in node.decorator_list:
            if isinstance(d, ast.Call):
                self.decorators.add(id(d))
            self._bare_decorator(d)
            self.visit(d)
        a = node.args
        for d in a.defaults + [d for d in a.kw_defaults if d is not None]:
            self.visit(d)
        for arg in a.posonlyargs + a.args + [a.vararg] + a.kwonlyargs + [a.kwarg]:
            if arg is not None:
                self._annotation(arg.annotation)
        self._annotation(node.returns)
        outer = self._enter(node, node.name)
        self.functions += 1
        self._body(node.body)
        self.functions -= 1
        self.qual.pop()
        self.resolver.scope = outer

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        """``x: A = v``: `A` is evaluated at module and class level only (never
        in a function body, never under postponed annotations)."""
        if not isinstance(node.target, ast.Name):
            self.visit(node.target)
        if not self.functions:
            self._annotation(node.annotation)
        if node.value is not None:
            self.visit(node.value)

    visit_FunctionDef = visit_AsyncFunctionDef = _function

    def visit_ClassDef(self, node: ast.ClassDef) -> None:
        for d in node.decorator_list:
            if isinstance(d, ast.Call):
                self.decorators.add(id(d))
            self._bare_decorator(d)
            self.visit(d)
        for d in node.bases + [k.value for k in node.keywords]:
            self.visit(d)
        outer = self._enter(node, node.name)
        functions, self.functions = self.functions, 0  # a class body's annotations run, even in a function
        self._body(node.body)
        self.functions = functions
        self.qual.pop()
        self.resolver.scope = outer

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for d in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
            self.visit(d)
        outer = self.resolver.scope
        self.resolver.child(node.lineno, arg_names(node.args))
        self.visit(node.body)
        self.resolver.scope = outer

    def _comp(self, node) -> None:
        # The first iterable is evaluated in the enclosing scope.
        self.visit(node.generators[0].iter)
        outer = self.resolver.scope
        self.resolver.child(node.lineno, [n for g in node.generators for n in target_names(g.target)])
        for i, g in enumerate(node.generators):
            if i:
                self.visit(g.iter)
            for c in g.ifs:
                self.visit(c)
        for part in ("elt", "key", "value"):
            if hasattr(node, part):
                self.visit(getattr(node, part))
        self.resolver.scope = outer

    visit_ListComp = visit_SetComp = visit_GeneratorExp = visit_DictComp = _comp

    def visit_Call(self, node: ast.Call) -> None:
        self._check_call(node)
        self.generic_visit(node)

    # the heart ---------------------------------------------------------------------
    def _split(self, call: ast.Call, skip: int = 0):
        args = list(call.args[skip:])
        kwargs: dict[Optional[str], ast.AST] = {}
        for k in call.keywords:
            kwargs[k.arg] = k.value
        return args, kwargs

    def _check_call(self, node: ast.Call) -> None:
        func = node.func
        q = self.qualname(func)
        if q is not None and q.startswith(_RUNTIME_DOT):
            read_wrapped(self, node, q[len(_RUNTIME_DOT):])
            return
        if id(node) in self.covered:
            return
        # Function rows: resolved through imports.
        if q is not None:
            rule = self._on(self.rules.functions.get(q))
            if rule is not None:
                args, kwargs = self._split(node)
                kind = self.cls.kind_of(rule, args, kwargs) if self.cls.allows(rule, node) else None
                if kind is not None:
                    self._add(node, func, rule, kind, wrapped=False, site=None)
                return
            # `@functools.partial(jax.jit, static_argnums=0)`: a graph decorator.
            if q == "functools.partial" and id(node) in self.decorators and node.args:
                q0 = self.qualname(node.args[0])
                r0 = self._on(self.rules.functions.get(q0)) if q0 else None
                if r0 is not None and r0.kind == "graph" and r0.wrap == "result":
                    self._add(node, func, r0, r0.kind, wrapped=False, site=None)
                    return
        # Method rows: any receiver.
        if isinstance(func, ast.Attribute):
            for rule in self.rules.methods.get(func.attr, ()):
                if q is not None and self._on(self.rules.functions.get(q)) is not None:
                    break
                if self._on(rule) is None or not self.cls.allows(rule, node):
                    continue
                args, kwargs = self._split(node)
                kind = self.cls.kind_of(rule, args, kwargs)
                if kind is not None:
                    self._add(node, func, rule, kind, wrapped=False, site=None)
                    return

    def position(self, node: ast.AST, at: ast.AST) -> tuple[int, int, int, int, int]:
        return _position(self.source, self.colmap, node, at)

    def _add(self, call: ast.Call, func: ast.AST, rule: Rule, kind: str, wrapped: bool,
             site: Optional[str], decorator: Optional[bool] = None) -> None:
        line, col1, end_line, end_col1, bcol = self.position(call, func)
        col, end_col = col1 - 1, end_col1 - 1
        op = ""
        if not wrapped:
            self.nodes[len(self.sites)] = (call, self.resolver.scope)
            if rule.wrap == "receiver" and isinstance(func, ast.Attribute) and isinstance(call, ast.Call) \
                    and arguments_may_have_effects(call):
                op = "bound"  # wrapped around its bound method: xfer.call(x.to, next(it), site=...)
        self.sites.append(
            Site(
                path=self.path,
                line=line,
                column=col + 1,
                end_line=end_line,
                end_column=end_col + 1,
                kind=kind,
                rule=KIND_CODES[kind],
                call=self._segment(call),
                wrapped=wrapped,
                site=site,
                rule_id=rule.id,
                function=".".join(self.qual) or "<module>",
                decorator=bool(decorator) if decorator is not None else id(call) in self.decorators,
                label=self._label(func, rule),
                byte_col=bcol,
                op=op,
            )
        )

    def add_implicit(self, node: ast.AST, at: ast.AST, op: str, label: str,
                     wrapped_as: Optional[str] = None) -> None:
        """An implicit site (no transfer call of its own): `node` the offending
        expression, `at` the node whose position is the site's."""
        self.sites.append(implicit_site(self.path, self.source, self.colmap, node, at, op, label,
                                        ".".join(self.qual) or "<module>", wrapped_as))

    def _label(self, func: ast.AST, rule: Rule) -> str:
        """`receiver.method` for naming: the receiver as code (comments and layout
        dropped), with any wrapper calls in it read back as the bare calls, so a
        site keeps its name whether its inner sites were wrapped first or not."""
        if rule.call == "function" or not isinstance(func, ast.Attribute):
            return rule.target
        recv = func.value
        if any(isinstance(n, ast.Call) and any(k.arg == "site" for k in n.keywords) for n in ast.walk(recv)):
            recv = Unwrapper(self).visit(copy.deepcopy(recv))
        return short_label(recv, func.attr)


_DEFAULT_RULES: list[RuleTable] = []


def _default_rules() -> RuleTable:
    if not _DEFAULT_RULES:
        _DEFAULT_RULES.append(default_table())
    return _DEFAULT_RULES[0]


def find_in_source(
    text: str,
    path: str = "<string>",
    rules: Optional[RuleTable] = None,
    relpath: Optional[str] = None,
    evidence: Optional[dict] = None,
    tree: Optional[ast.Module] = None,
    scripted: Optional[dict] = None,
    placed: Optional[dict] = None,
) -> FileResult:
    """All sites of one file's text, in source order, named and with suppressions
    applied (`scripted`, `placed`: as for :func:`analyse`). A stub (``.pyi``)
    runs no code, so it holds no site: it is parsed only, for its syntax errors."""
    if is_stub(relpath if relpath is not None else path):
        res = FileResult(path=path)
        if tree is None:
            try:
                parse(text, path)
            except SyntaxError as e:
                _syntax_error(res, e)
            except (ValueError, RecursionError, MemoryError) as e:
                res.error = f"{type(e).__name__}: {e}"
        return res
    return analyse(text, path, rules, relpath, evidence, tree, scripted, placed)[0]


def _syntax_error(res: FileResult, e: SyntaxError) -> None:
    res.error = f"{type(e).__name__}: {e.msg}"
    res.error_line = e.lineno or 1
    res.error_column = e.offset or 1


def analyse(
    text: str,
    path: str = "<string>",
    rules: Optional[RuleTable] = None,
    relpath: Optional[str] = None,
    evidence: Optional[dict] = None,
    tree: Optional[ast.Module] = None,
    scripted: Optional[dict] = None,
    placed: Optional[dict] = None,
) -> tuple[FileResult, Optional[FileContext]]:
    """:func:`find_in_source`, plus the parsed file (None when it does not parse)
    for a caller that needs more of it than the sites (the codemod). `evidence`:
    the lines a recorded run saw crossing (:attr:`FileContext.evidence`); `tree`:
    the text's parse, when the caller has made it; `scripted`: the file's
    functions that TorchScript compiles from another file (:mod:`..project.scripted`);
    `placed`: the helpers of other modules of the project that place what
    they return (:mod:`..values.project`)."""
    rules = rules or _default_rules()
    res = FileResult(path=path)
    colmap = None
    try:
        tree = parse(text, path) if tree is None else tree
    except SyntaxError as e:
        _syntax_error(res, e)
        from .repair import repair

        fixed = repair(split_lines(text))
        if fixed is None:
            return res, None
        text, colmap = fixed
        tree = parse(text, path)
        res.repaired = True
    except (ValueError, RecursionError, MemoryError) as e:
        res.error = f"{type(e).__name__}: {e}"
        return res, None
    f = _FileFinder(path, text, rules, path, tree)
    f.colmap = colmap
    f.relpath = relpath if relpath is not None else path
    limit = sys.getrecursionlimit()
    try:
        # A 2,000-term `a + b + ...` is a 2,000-deep tree: the visit recurses.
        sys.setrecursionlimit(max(limit, 50_000))
        f.run(tree)
        nodes = {id(f.sites[i]): v for i, v in f.nodes.items()}
        # The finder bound names only around its candidate lines; an analysis
        # may look anywhere, so it gets every scope (`whole`).
        ctx = FileContext(path, f.source, tree, rules, f.resolver, f.sites, nodes, colmap, f.cand,
                          whole=bool(ANALYSES), relpath=relpath if relpath is not None else path,
                          evidence=evidence or {}, placed=placed)
        if ANALYSES:
            for extra in ANALYSES:
                f.sites.extend(extra(ctx))
    except RecursionError:
        res.error = "RecursionError: an expression too deeply nested to analyse"
        return res, None
    finally:
        sys.setrecursionlimit(limit)
    # (the kernels' test first: asking ctx.resolver binds every scope of the file)
    spans = kernel_spans(tree, text, ctx.resolver, rules.kernels) \
        if f.sites and may_hold_kernels(text, rules.kernels) else []
    if spans:  # code a kernel language compiles is not PyTorch: no site there
        f.sites = drop_kernel_sites(f.sites, spans)
    f.sites.sort(key=lambda s: (s.line, s.column))
    mark_unwrappable(f.sites, text, tree, f.lines, nodes, f.resolver.qualname, scripted)
    if "xferaudit:" in text:  # statements named by a site comment (the wrap grammar's statement form)
        from .statements import name_statements

        f.sites = name_statements(f.sites, text, tree, path, relpath if relpath is not None else path)
    name_sites(f.sites, relpath if relpath is not None else path)
    sup = file_suppressions(text, f.lines, {s.line for s in f.sites} | set(evidence or ()))
    res.suppressions = sorted(sup.items())
    res.bare_own = [ln for ln, codes in res.suppressions if bare_own(f.lines[ln - 1])]
    for s in f.sites:
        codes = sup.get(s.line)
        if codes is not None and (codes == () or s.rule in codes):
            s.suppressed = True
    res.sites = f.sites
    return res, ctx


__all__ = [
    "ANALYSES", "FileContext", "implicit_site", "FileResult", "LABEL_LIMIT", "RUNTIME_MODULE", "Site", "analyse",
    "decode_source", "find_in_source", "name_sites", "parse_suppressions", "short_label", "short_receiver",
    "split_lines",
]
