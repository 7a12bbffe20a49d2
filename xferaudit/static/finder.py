"""Find transfer and graph sites in Python source.

One pass of the standard library's ``ast`` over each file (its C parser is
several times faster than libcst's, which matters on a 2,000-file tree), with
every rule of the table tested at each call. The codemod rewrites with libcst
but asks this finder which calls are sites, matching them by position, so there
is one classifier whatever the pass.

Positions are 1-based lines and 1-based character columns of the called name
(``ast`` counts UTF-8 bytes; we convert).
"""

from __future__ import annotations

import ast
import copy
import bisect
import io
import itertools
import re
import sys
import tokenize
import warnings
from dataclasses import asdict, dataclass, field
from typing import Iterable, Iterator, Optional

from ..rules import KIND_CODES, Rule, RuleTable, table as default_table
from . import implicit as _implicit
from .implicit import WRAPPERS as _IMPLICIT_WRAPPERS

RUNTIME_MODULE = "xferaudit.runtime"

#: Device types whose string literal means "an accelerator" (`x.to("cuda:1")`).
ACCELERATOR_TYPES = frozenset(
    """cuda mps xpu hpu npu xla mtia ipu vulkan privateuseone lazy ve fpga
    maia ort mkldnn opengl opencl ideep fakegpu""".split()
)
#: Device types that hold no data: `x.to("meta")` copies nothing, so it is no site.
NO_DATA_TYPES = frozenset({"meta"})
#: ``torch.<name>`` values that are dtypes or layouts, never devices.
TORCH_NOT_DEVICE = frozenset(
    """float float16 half bfloat16 float32 float64 double complex64 complex128
    cfloat cdouble complex32 chalf uint8 uint16 uint32 uint64 int8 int16 int
    int32 int64 long short bool qint8 quint8 qint32 quint4x2 quint2x4
    float8_e4m3fn float8_e5m2 float8_e4m3fnuz float8_e5m2fnuz float8_e8m0fnu
    float4_e2m1fn_x2 bits8 bits16 channels_last channels_last_3d
    contiguous_format preserve_format strided sparse_coo sparse_csr
    get_default_dtype""".split()
)
#: Names that are dtypes in every array library (`np.float32`, `tl.int64`,
#: `jnp.bfloat16`): an attribute or name ending in one is never a device.
DTYPE_NAMES = frozenset(
    """float16 bfloat16 float32 float64 complex64 complex128 uint8 uint16 uint32
    uint64 int8 int16 int32 int64 float8_e4m3fn float8_e5m2 float8_e4m3fnuz
    float8_e5m2fnuz float8_e8m0fnu float4_e2m1fn_x2""".split()
)


@dataclass
class Site:
    """One site: a call that moves data between host and device, or makes/launches a graph."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    kind: str
    rule: str  # the XFA code reported for it when unwrapped
    call: str  # the call's source text
    wrapped: bool
    site: Optional[str]  # the wrapper's site name, or the name `wrap` would give it
    suppressed: bool = False
    rule_id: str = ""  # row of the table, e.g. "torch.to"
    function: str = "<module>"  # enclosing qualified name
    decorator: bool = False  # the call is a decorator (`@torch.compile(...)`)
    label: str = ""  # receiver text and method (`loss.item`), or the function's name
    byte_col: int = 0  # 0-based UTF-8 column of the called name (ast's), for the codemod
    implicit: bool = False  # a crossing with no transfer call of its own (static/implicit.py)
    op: str = ""  # for an implicit site, its category: conversion, truth, format, ...

    def to_json(self) -> dict:
        d = asdict(self)
        del d["byte_col"], d["label"]
        if not self.implicit:
            del d["implicit"], d["op"]
        return d


@dataclass
class FileResult:
    path: str
    sites: list[Site] = field(default_factory=list)
    error: Optional[str] = None  # parse or read error; the file yields no sites
    error_line: int = 1
    error_column: int = 1
    suppressions: list[tuple[int, tuple[str, ...]]] = field(default_factory=list)
    #: Lines with a bare `xferaudit: ignore` comment (ours, so reported when
    #: unused; a bare noqa comment may serve another linter and is not).
    bare_own: list[int] = field(default_factory=list)
    #: The file does not parse (``error`` says why) but read as old Python
    #: (``print "x"``, ``x.cuda(async=True)``) it did: ``sites`` are from that
    #: reading (:mod:`.repair`).
    repaired: bool = False


# --- name resolution ---------------------------------------------------------


class _Scope:
    __slots__ = ("parent", "bindings", "is_class", "is_module", "stars")

    def __init__(self, parent: Optional["_Scope"], is_class=False, is_module=False):
        self.parent = parent
        # name -> list of (line, qualified import target or None for "something else")
        self.bindings: dict[str, list[tuple[int, Optional[str]]]] = {}
        self.is_class = is_class
        self.is_module = is_module
        self.stars: list[str] = []  # modules star-imported here (`from torch import *`)

    def bind(self, name: str, line: int, qual: Optional[str]) -> None:
        self.bindings.setdefault(name, []).append((line, qual))


def _target_names(t: ast.AST) -> Iterator[str]:
    if isinstance(t, ast.Name):
        yield t.id
    elif isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            yield from _target_names(e)
    elif isinstance(t, ast.Starred):
        yield from _target_names(t.value)


def _bind_args(args: ast.arguments, scope: _Scope, line: int) -> None:
    for a in args.posonlyargs + args.args + args.kwonlyargs:
        scope.bind(a.arg, line, None)
    if args.vararg:
        scope.bind(args.vararg.arg, line, None)
    if args.kwarg:
        scope.bind(args.kwarg.arg, line, None)


_COMPOUND_BODIES = ("body", "orelse", "finalbody")


class _Binder:
    """Collect each scope's bindings before any use is resolved (Python's rule:
    a name bound anywhere in a function is local throughout it).

    It walks statements only, not expressions: a statement binds through its
    targets (assignment, ``for``, ``with ... as``, ``except ... as``, imports,
    ``def``/``class`` names, ``del``, ``match`` captures). Lambdas and
    comprehensions get their scopes from the finder when it enters them, and a
    file that uses ``:=`` anywhere gets its expressions walked for it too. The
    body of a ``def`` or ``class`` holding no candidate line is not entered:
    no name is looked up there.
    """

    def __init__(self, walrus=(), hits=None) -> None:
        self.hits = hits  # predicate on a def/class: does its body need scopes?
        #: sorted lines holding ":=" (statements spanning one get their
        #: expressions walked for walrus targets)
        self.walrus = list(walrus)
        self.module = _Scope(None, is_module=True)
        self.scope_of: dict[int, _Scope] = {}  # id(def/class node) -> scope
        self.globals: set[str] = set()
        self.imported: set[str] = set()  # modules imported anywhere (turns packs on)

    def run(self, tree: ast.Module) -> None:
        self._stmts(tree.body, self.module)

    def _target(self, t: ast.AST, scope: _Scope, line: int) -> None:
        for n in _target_names(t):
            scope.bind(n, line, None)

    def _stmts(self, body: list, scope: _Scope) -> None:
        for st in body:
            self._stmt(st, scope)

    def _stmt(self, st: ast.stmt, scope: _Scope) -> None:
        t = type(st)
        line = st.lineno
        if self.walrus:
            k = bisect.bisect_left(self.walrus, line)
            if k < len(self.walrus) and self.walrus[k] <= st.end_lineno:
                self._walrus(st, scope)
        if t is ast.Assign:
            for tg in st.targets:
                self._target(tg, scope, line)
        elif t is ast.AugAssign or t is ast.AnnAssign:
            if isinstance(st.target, ast.Name):
                scope.bind(st.target.id, line, None)
        elif t is ast.FunctionDef or t is ast.AsyncFunctionDef:
            scope.bind(st.name, line, None)
            if self.hits is None or self.hits(st):
                child = _Scope(scope)
                self.scope_of[id(st)] = child
                _bind_args(st.args, child, line)
                self._stmts(st.body, child)
        elif t is ast.ClassDef:
            scope.bind(st.name, line, None)
            if self.hits is None or self.hits(st):
                child = _Scope(scope, is_class=True)
                self.scope_of[id(st)] = child
                self._stmts(st.body, child)
        elif t is ast.Import:
            for a in st.names:
                self.imported.add(a.name)
                if a.asname:
                    scope.bind(a.asname, line, a.name)
                else:
                    top = a.name.split(".", 1)[0]
                    scope.bind(top, line, top)
        elif t is ast.ImportFrom:
            if st.level or not st.module:
                for a in st.names:
                    scope.bind(a.asname or a.name, line, None)
                return
            self.imported.add(st.module)
            for a in st.names:
                if a.name == "*":
                    scope.stars.append(st.module)
                    continue
                scope.bind(a.asname or a.name, line, f"{st.module}.{a.name}")
        elif t is ast.For or t is ast.AsyncFor:
            self._target(st.target, scope, line)
            self._stmts(st.body, scope)
            self._stmts(st.orelse, scope)
        elif t is ast.With or t is ast.AsyncWith:
            for item in st.items:
                if item.optional_vars is not None:
                    self._target(item.optional_vars, scope, line)
            self._stmts(st.body, scope)
        elif t is ast.Delete:
            for tg in st.targets:
                self._target(tg, scope, line)
        elif t is ast.Global:
            self.globals.update(st.names)
        elif hasattr(st, "handlers"):  # Try, TryStar
            self._stmts(st.body, scope)
            for h in st.handlers:
                if h.name:
                    scope.bind(h.name, h.lineno, None)
                self._stmts(h.body, scope)
            self._stmts(st.orelse, scope)
            self._stmts(st.finalbody, scope)
        elif hasattr(st, "cases"):  # match (3.10+)
            for case in st.cases:
                for n in ast.walk(case.pattern):
                    name = getattr(n, "name", None) or getattr(n, "rest", None)
                    if isinstance(name, str):
                        scope.bind(name, line, None)
                self._stmts(case.body, scope)
        elif t is ast.If or t is ast.While:
            self._stmts(st.body, scope)
            self._stmts(st.orelse, scope)

    def _walrus(self, st: ast.stmt, scope: _Scope) -> None:
        """`(n := ...)` binds in the enclosing function scope; only for files that use it."""
        for field_name, value in ast.iter_fields(st):
            if field_name in _COMPOUND_BODIES or field_name in ("handlers", "cases"):
                continue
            nodes = value if isinstance(value, list) else [value]
            for node in nodes:
                if isinstance(node, ast.AST):
                    for n in ast.walk(node):
                        if isinstance(n, ast.NamedExpr) and isinstance(n.target, ast.Name):
                            scope.bind(n.target.id, n.lineno, None)


def _resolve_in(scope: _Scope, name: str, line: int, own: bool) -> tuple[bool, Optional[str]]:
    """(bound?, qualified import target) of `name` in `scope`."""
    b = scope.bindings.get(name)
    if not b:
        return False, None
    if scope.is_module and own:
        # At module level order matters: the last binding before this line.
        before = [q for ln, q in b if ln <= line]
        return True, (before[-1] if before else b[0][1])
    return True, b[-1][1]


# --- classification ------------------------------------------------------------


def _const_str(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _string_head(node: ast.AST) -> Optional[str]:
    """The literal start of a string built by formatting (f-string, `%`, `+`,
    `.format`), or None when `node` builds no string that way."""
    if isinstance(node, ast.JoinedStr):
        return _const_str(node.values[0]) or "" if node.values else ""
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.Add)):
        left = node.left
        if _const_str(left) is not None:
            return _const_str(left)
        return _string_head(left)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "format"):
        inner = node.func.value
        return _const_str(inner) if _const_str(inner) is not None else _string_head(inner)
    return None


def _device_type(s: str) -> Optional[str]:
    t = s.split(":", 1)[0].strip().lower()
    if t == "cpu":
        return "down"
    if t in ACCELERATOR_TYPES:
        return "up"
    return None


class _Classifier:
    """Decides whether one ast.Call is a site, by the rows of a RuleTable."""

    def __init__(self, finder: "_FileFinder") -> None:
        self.f = finder

    def is_cpu(self, node: ast.AST) -> bool:
        """True when the expression is evidently the host ("cpu", torch.device("cpu"))."""
        s = _const_str(node)
        if s is not None:
            return _device_type(s) == "down"
        if isinstance(node, ast.Call) and self.f.qualname(node.func) == "torch.device" and node.args:
            s = _const_str(node.args[0])
            return s is not None and _device_type(s) == "down"
        return False

    def device_kind(self, node: ast.AST) -> Optional[str]:
        """The direction a `.to(node)` takes: up, down, move, or None (not a device)."""
        if isinstance(node, ast.Constant):
            v = node.value
            if isinstance(v, str):
                return _device_type(v)
            if isinstance(v, int) and not isinstance(v, bool):
                return "up"
            return None
        head = _string_head(node)
        if head is not None:
            # f"cuda:{rank}", "cuda:%d" % rank, "cuda:{}".format(rank), "cuda:" + str(rank)
            return _device_type(head) or "move"
        if isinstance(node, ast.IfExp):
            a, b = self.device_kind(node.body), self.device_kind(node.orelse)
            if a == b:
                return a
            if a is None and b is None:
                return None
            return "move"
        if isinstance(node, (ast.Name, ast.Attribute)):
            if self._is_dtype_name(node):
                return None
            return "move"
        if isinstance(node, ast.Subscript):
            if self._is_dtype_name(node.value):
                return None
            return "move"
        if isinstance(node, ast.Call):
            q = self.f.qualname(node.func)
            if q == "torch.device":
                return self._torch_device(node)
            last = _last_name(node.func)
            if last and (last.lower().endswith("dtype") or last in TORCH_NOT_DEVICE and q and q.startswith("torch.")):
                return None
            return "move"
        if isinstance(node, ast.Starred):
            return "move"
        return "move"

    def _torch_device(self, node: ast.Call) -> Optional[str]:
        arg = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg == "type"), None)
        if arg is None:
            return "move"
        s = _const_str(arg)
        if s is not None and s.split(":", 1)[0].strip().lower() in NO_DATA_TYPES:
            return None
        if isinstance(arg, ast.Constant) and isinstance(arg.value, int) and not isinstance(arg.value, bool):
            return "up"  # torch.device(0) is cuda:0
        if isinstance(arg, ast.Constant) or _string_head(arg) is not None or isinstance(arg, ast.IfExp):
            return self.device_kind(arg) or "move"
        return "move"

    def _is_dtype_name(self, node: ast.AST) -> bool:
        last = _last_name(node)
        if last is None:
            return False
        if last.lower().endswith("dtype") or last.lower().endswith("dtypes"):
            return True
        if last in DTYPE_NAMES:
            return True
        q = self.f.qualname(node)
        if q and q.startswith("torch.") and q.count(".") == 1 and last in TORCH_NOT_DEVICE:
            return True
        return False

    def kind_of(self, rule: Rule, args: list[ast.AST], kwargs: dict[Optional[str], ast.AST]) -> Optional[str]:
        """The kind of a call matched by `rule` (args exclude the receiver), or None."""
        if rule.truthy is not None:
            v = kwargs.get(rule.truthy)
            if v is None:
                return None
            if isinstance(v, ast.Constant) and not v.value:
                return None
        if rule.needs is not None:
            v = kwargs.get(rule.needs)
            if v is None and rule.device_pos is not None and len(args) > rule.device_pos:
                v = args[rule.device_pos]
                if isinstance(v, ast.Starred):
                    v = None
            if v is None:
                return None
            if rule.host_is_cpu and self.is_cpu(v):
                return None
        if rule.kind != "device":
            return rule.kind
        # Device-decided (x.to(...)): positional device first, then the keyword.
        dev = None
        if rule.device_pos is not None and len(args) > rule.device_pos:
            dev = args[rule.device_pos]
            for a in args[: rule.device_pos + 1]:
                if isinstance(a, ast.Starred):
                    return "move"
            if rule.device_kw and rule.device_kw in kwargs and self.device_kind(dev) is None:
                # `x.to(y.dtype, device=y.device)`: the positional is the dtype.
                dev = None
        elif args and isinstance(args[0], ast.Starred):
            return "move"
        if dev is None and rule.device_kw:
            dev = kwargs.get(rule.device_kw)
        if rule.no_device is not None and isinstance(dev, ast.Constant) and dev.value is None:
            dev = None  # `jax.device_put(x, None)`: the default device
        if dev is None:
            if None in kwargs:  # **kwargs may carry a device
                return "move"
            return rule.no_device
        return self.device_kind(dev)

    def allows(self, rule: Rule, call: ast.Call) -> bool:
        """The narrowing fields of a row (min_args, max_args, keywords,
        not_receiver, arg_from): False when they rule this call out."""
        n = len(call.args)  # the receiver of a method row is not among them
        if rule.min_args is not None and n < rule.min_args:
            return False
        if rule.max_args is not None and n > rule.max_args:
            return False
        if rule.keywords is not None:
            if any(k.arg is not None and k.arg not in rule.keywords for k in call.keywords):
                return False
        if rule.not_receiver and isinstance(call.func, ast.Attribute):
            recv = _WS.sub("", self.f._segment(call.func.value))
            if any(re.fullmatch(rx, recv) for rx in rule.not_receiver):
                return False
        if rule.arg_from:
            if not call.args or not self.rooted_in(call.args[0], rule.arg_from):
                return False
        return True

    def rooted_in(self, node: ast.AST, prefixes: tuple[str, ...]) -> bool:
        """True when `node` is (an attribute, item or method result of) a call of
        a function whose qualified name is under one of `prefixes`:
        ``jnp.dot(a, b).T`` is rooted in ``jax.numpy``; a plain name is not."""
        while True:
            if isinstance(node, (ast.Attribute, ast.Subscript)):
                node = node.value
            elif isinstance(node, ast.Call):
                q = self.f.qualname(node.func)
                if q is not None and any(q == p or q.startswith(p + ".") for p in prefixes):
                    return True
                if not isinstance(node.func, ast.Attribute):
                    return False
                node = node.func.value
            else:
                return False


def _fallback_kind(rule: Rule) -> str:
    """The kind of a wrapped call whose arguments no longer say (`xfer.to(x, d, site=)`
    where `d` looks like a dtype): the row's own kind, `move` when device-decided."""
    if rule.kind in KIND_CODES:
        return rule.kind
    return rule.no_device or "move"


def _last_name(node: ast.AST) -> Optional[str]:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


# --- the per-file pass ---------------------------------------------------------------

_NOQA = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]+(?:[\s,]+[A-Z]+[0-9]+)*))?", re.I)
_OWN = re.compile(r"#\s*xferaudit:\s*ignore(?:\[(?P<codes>[A-Z0-9,\s]+)\])?", re.I)


def parse_suppressions(lines: list[str]) -> dict[int, tuple[str, ...]]:
    """line -> codes suppressed there (an empty tuple means every code)."""
    out: dict[int, tuple[str, ...]] = {}
    for i, text in enumerate(lines, 1):
        if "#" not in text:
            continue
        for rx in (_NOQA, _OWN):
            m = rx.search(text)
            if not m:
                continue
            codes = m.group("codes")
            if not codes or out.get(i) == ():
                out[i] = ()  # a bare suppression covers every code
            else:
                new = tuple(c.upper() for c in re.split(r"[\s,]+", codes.strip()) if c)
                out[i] = out.get(i, ()) + new
    return out


_ANY_SUPPRESSION = re.compile(r"#.*?(?:noqa|xferaudit\s*:\s*ignore)", re.I)


def _comments(text: str) -> dict[int, str]:
    """line -> the text of the comment ending it, from the tokenizer (so a
    `# noqa` inside a string is no comment)."""
    out: dict[int, str] = {}
    try:
        for tok in tokenize.generate_tokens(io.StringIO(text).readline):
            if tok.type == tokenize.COMMENT:
                out[tok.start[0]] = tok.string
    except (tokenize.TokenError, SyntaxError, IndentationError):  # pragma: no cover - parsed already
        return {}
    return out


def _bare_own(line: str) -> bool:
    m = _OWN.search(line)
    return m is not None and not m.group("codes")


def file_suppressions(text: str, lines: list[str], site_lines: set) -> dict[int, tuple[str, ...]]:
    """The suppression comments of a file: line -> codes (empty tuple: every code).

    Candidates are found by a cheap scan of the lines; the tokenizer confirms
    them (a `"# noqa"` inside a string is not one) only when one matters: it
    sits on a site's line, or names an XFA code or is our own form (it may be
    reported as unused).
    """
    if not _ANY_SUPPRESSION.search(text):
        return {}
    cand = parse_suppressions(lines)
    if not cand:
        return {}
    relevant = [
        ln for ln, codes in cand.items()
        if ln in site_lines or any(c.startswith("XFA") for c in codes) or _OWN.search(lines[ln - 1])
    ]
    if not relevant:
        return {}
    comments = _comments(text)
    out: dict[int, tuple[str, ...]] = {}
    for ln in relevant:
        c = comments.get(ln)
        if c is None:
            continue
        parsed = parse_suppressions([c])
        if parsed:
            out[ln] = parsed[1]
    return out


_LINE_END = re.compile(r"(?<=\n)|(?<=\r)(?!\n)")


def split_lines(text: str) -> list[str]:
    """Lines with their endings, split where Python's tokenizer splits them."""
    if "\r" not in text:
        lines = text.split("\n")
        out = [ln + "\n" for ln in lines[:-1]]
        if lines[-1]:
            out.append(lines[-1])
        return out
    return [ln for ln in _LINE_END.split(text) if ln]


def decode_source(data: bytes) -> str:
    """Text of a Python file by its declared encoding (BOM and coding cookies honoured)."""
    enc, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    text = data.decode(enc)
    if text.startswith("\ufeff"):
        text = text[1:]
    return text


_IMPORT_LINE = re.compile(r"^[ \t]*(?:from[ \t]+([\w.]+)[ \t]+import\b|import[ \t]+([^\n#;]+))", re.M)


def _imported_modules(text: str, rules: RuleTable) -> set[str]:
    """Modules the file imports (``import a.b as c``, ``from a.b import c``),
    read off the text; only asked when a pack that turns on by import could."""
    if rules.always is None or not rules.pack_imports:
        return set()
    words = {m.split(".", 1)[0] for mods in rules.pack_imports.values() for m in mods}
    if not any(w in text for w in words):
        return set()
    out: set[str] = set()
    for m in _IMPORT_LINE.finditer(text):
        if m.group(1):
            out.add(m.group(1))
        else:
            for part in m.group(2).split(","):
                name = part.strip().split(" ", 1)[0].strip("()\\ \t")
                if name:
                    out.add(name)
    return out


def _trie(words: Iterable[str]) -> str:
    """An alternation of literal words as a trie (`c(?:pu|uda)`): the regex engine
    then tests one branch per character instead of every word."""
    root: dict = {}
    for w in words:
        node = root
        for ch in w:
            node = node.setdefault(ch, {})
        node[""] = {}

    def emit(node: dict) -> str:
        alts = [re.escape(k) + emit(v) for k, v in sorted(node.items()) if k]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        if "" in node:
            return "(?:" + body + ")?" if len(alts) == 1 else body[:-1] + ")?"
        return body

    return emit(root)


_IMPLICIT_CALLS = re.compile(r"\.(?:" + "|".join(sorted(_IMPLICIT_WRAPPERS)) + r")\s*\(")
_CANDIDATE_RX: dict[tuple, tuple] = {}  # (id(table), packs on) -> (table, patterns)
_AS = re.compile(r" as[ \t]+(\w+)")
_WORD_BEFORE = re.compile(r"(\w+)[ \t]*$")


def _table_patterns(rules: RuleTable, active: Optional[frozenset]) -> tuple:
    """(calls, bare, aliasable names) for the rows on in a file, compiled once."""
    key = (id(rules), active)
    hit = _CANDIDATE_RX.get(key)
    if hit is not None and hit[0] is rules:
        return hit[1]
    words: set[str] = set()
    fnames: set[str] = set()
    bare: set[str] = set()
    # The runtime's generic wrappers exist whatever the table holds: `wrap` writes
    # xfer.call(T.tensor, ...) for a function row it cannot re-spell on unwrap.
    words.update(("call", "method"))
    for r in rules.rules:
        words.add(r.wrapper)  # a wrapped site is found whatever the file imports
        fnames.add(r.wrapper)
        if active is not None and r.pack not in active:
            continue
        names = {r.method} | {a.rsplit(".", 1)[-1] for a in r.aliases}
        words |= names
        if r.call == "function":
            fnames |= names
            if r.kind == "graph":
                bare |= names
    # Separate patterns, no leading \b: either would stop the engine's
    # first-character skip (measured: 3-5x slower); the boundary is checked
    # on each match instead (see _candidate_lines).
    calls = re.compile("(?:" + _trie(words) + r")\s*\(") if words else None
    # A graph function named without a call: only a decorator makes it a site.
    bare_rx = re.compile("@[^\n]*?(?:" + _trie(bare) + r")\b") if bare else None
    pats = (calls, bare_rx, frozenset(fnames))
    if len(_CANDIDATE_RX) > 64:
        _CANDIDATE_RX.clear()
    _CANDIDATE_RX[key] = (rules, pats)
    return pats


def _lines_with(text: str, lines: list[str], needle: str) -> list[int]:
    """Sorted numbers of the lines holding `needle` (a superset: strings too)."""
    if needle not in text:
        return []
    return [i for i, ln in enumerate(lines, 1) if needle in ln]


def _candidate_lines(text: str, lines: list[str], rules: RuleTable, active: Optional[frozenset] = None) -> list[int]:
    """Sorted line numbers where a rule's name (or an import alias of one) is
    called, or a graph function is named on a decorator line: the only lines a
    site can be on.

    A superset (a match in a string or comment only costs a closer look); the
    finder skips every statement that spans none of these lines.
    """
    calls, bare, fnames = _table_patterns(rules, active)
    positions: list[int] = []
    if calls is not None:
        positions = [p for p in (m.start() for m in calls.finditer(text))
                     if p == 0 or not (text[p - 1].isalnum() or text[p - 1] == "_")]
    if bare is not None and "@" in text:
        positions.extend(m.start() for m in bare.finditer(text))
    if " as" in text:
        names = set()
        for m in _AS.finditer(text):
            w = _WORD_BEFORE.search(text, max(0, m.start() - 80), m.start())
            if w is not None and w.group(1) in fnames:
                names.add(m.group(1))
        if names:
            alias_rx = re.compile("(?:" + _trie(names) + r")\s*\(")
            positions.extend(p for p in (m.start() for m in alias_rx.finditer(text))
                             if p == 0 or not (text[p - 1].isalnum() or text[p - 1] == "_"))
    if "xferaudit" in text:  # wrapped implicit sites: xfer.float(...), xfer.bool(...), ... (implicit_wrap.py)
        positions.extend(m.start() for m in _IMPLICIT_CALLS.finditer(text))
    if not positions:
        return []
    positions.sort()
    starts = list(itertools.accumulate(map(len, lines)))  # offset after each line
    out: list[int] = []
    for p in positions:
        ln = bisect.bisect_right(starts, p) + 1
        if not out or out[-1] != ln:
            out.append(ln)
    return out


class _FileFinder(ast.NodeVisitor):
    def __init__(self, path: str, text: str, rules: RuleTable, display_path: str) -> None:
        self.path = display_path
        self.text = text
        # Lines as the parser counts them (\n, \r\n, \r only: not str.splitlines,
        # which also splits at form feeds and U+2028 and would shift lines).
        self.lines = split_lines(text)
        self.rules = rules
        self.cls = _Classifier(self)
        self.sites: list[Site] = []
        self.scope: Optional[_Scope] = None
        self.binder: Optional[_Binder] = None
        self.qual: list[str] = []
        self.covered: set[int] = set()  # ids of calls wrapped by an enclosing xfer.graph(...)
        self.decorators: set[int] = set()
        self.active: Optional[frozenset] = None  # packs on in this file (None: all)
        self.cand: list[int] = []  # lines where a site may be (see _candidate_lines)
        self.colmap = None  # repair.ColumnMap when the text is a repaired reading
        self.implicit_on = True  # run the value layer (implicit sites, receivers that are no tensors)
        self.values: Optional[_implicit.Result] = None

    # positions -------------------------------------------------------------
    def _char_col(self, line: int, byte_col: int) -> int:
        if line - 1 >= len(self.lines):
            return byte_col
        s = self.lines[line - 1]
        if s.isascii():
            return byte_col
        return len(s.encode("utf-8")[:byte_col].decode("utf-8", "replace"))

    def _segment(self, node: ast.AST) -> str:
        """Source text of a node (ast.get_source_segment re-splits the whole file
        on every call: quadratic on big files)."""
        try:
            l0, c0, l1, c1 = node.lineno, node.col_offset, node.end_lineno, node.end_col_offset
        except AttributeError:
            return ""
        if l1 is None or c1 is None or l1 > len(self.lines):
            return ""
        if l0 == l1:
            return self.lines[l0 - 1].encode("utf-8")[c0:c1].decode("utf-8", "replace")
        first = self.lines[l0 - 1].encode("utf-8")[c0:].decode("utf-8", "replace")
        last = self.lines[l1 - 1].encode("utf-8")[:c1].decode("utf-8", "replace")
        return first + "".join(self.lines[l0:l1 - 1]) + last

    # names ------------------------------------------------------------------
    def _lookup(self, name: str, line: int) -> tuple[bool, Optional[str]]:
        s = self.scope
        own = True
        first = True
        while s is not None:
            if s.is_class and not first:
                s = s.parent
                continue
            bound, q = _resolve_in(s, name, line, own and s.is_module)
            if bound:
                return True, q
            first = False
            own = False
            s = s.parent
        return False, None

    def _star(self, name: str) -> Optional[str]:
        """`name` as brought in by a star import (`from torch import *` then
        `tensor(...)`), when the table or the classifier knows that name."""
        s = self.scope
        while s is not None:
            for mod in s.stars:
                q = f"{mod}.{name}"
                if q in self.rules.functions or q == "torch.device" or (
                    mod == "torch" and name in TORCH_NOT_DEVICE
                ):
                    return q
            s = s.parent
        return None

    def qualname(self, node: ast.AST) -> Optional[str]:
        """The imported qualified name an expression refers to (``T.tensor`` -> ``torch.tensor``)."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name):
            return None
        bound, q = self._lookup(node.id, node.lineno)
        if not bound:
            # `torch` used without an import we can see (a star import, a notebook
            # cell): still torch.
            if node.id == "torch":
                q = "torch"
            else:
                q = self._star(node.id)
                if q is None:
                    return None
        if q is None:
            return None
        parts.append(q)
        return ".".join(reversed(parts))

    # traversal ----------------------------------------------------------------
    def run(self, tree: ast.Module) -> None:
        self.active = self.rules.active_packs(_imported_modules(self.text, self.rules))
        self.cand = _candidate_lines(self.text, self.lines, self.rules, self.active)
        # --- value layer hook (static/values.py, static/implicit.py) ---
        evidence = _implicit.evidence_lines(self.text) if self.implicit_on else []
        if not self.cand and not evidence:
            return  # no rule's name is called anywhere: nothing to visit
        b = _Binder(walrus=_lines_with(self.text, self.lines, ":="), hits=self._hits)
        b.run(tree)
        self.binder = b
        self.scope = b.module
        if self.implicit_on:
            try:
                self.values = _implicit.find(tree, self.text, self.qualname, frozenset(self.rules.methods),
                                             self._hits if self.cand else None, evidence)
            except RecursionError:
                raise
            except Exception:  # pragma: no cover - a value-layer bug must not stop the scan
                self.values = None
            for fd in self.values.findings if self.values is not None else ():
                self._add_implicit(fd)
        # --- end hook ---
        if self.cand:
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
            if name in _COMPOUND_BODIES:
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
        outer = self.scope
        self.scope = self.binder.scope_of.get(id(node), outer)
        if name is not None:
            self.qual.append(name)
        return outer

    def _function(self, node) -> None:
        for d in node.decorator_list:
            if isinstance(d, ast.Call):
                self.decorators.add(id(d))
            self._bare_decorator(d)
            self.visit(d)
        for d in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
            self.visit(d)
        if node.returns:
            self.visit(node.returns)
        outer = self._enter(node, node.name)
        self._body(node.body)
        self.qual.pop()
        self.scope = outer

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
        self._body(node.body)
        self.qual.pop()
        self.scope = outer

    def visit_Lambda(self, node: ast.Lambda) -> None:
        for d in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
            self.visit(d)
        outer = self.scope
        self.scope = _Scope(outer)
        _bind_args(node.args, self.scope, node.lineno)
        self.visit(node.body)
        self.scope = outer

    def _comp(self, node) -> None:
        # The first iterable is evaluated in the enclosing scope.
        self.visit(node.generators[0].iter)
        outer = self.scope
        self.scope = _Scope(outer)
        for g in node.generators:
            for n in _target_names(g.target):
                self.scope.bind(n, node.lineno, None)
        for i, g in enumerate(node.generators):
            if i:
                self.visit(g.iter)
            for c in g.ifs:
                self.visit(c)
        for part in ("elt", "key", "value"):
            if hasattr(node, part):
                self.visit(getattr(node, part))
        self.scope = outer

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
        if q is not None and q.startswith(RUNTIME_MODULE + "."):
            self._wrapper_call(node, q[len(RUNTIME_MODULE) + 1:])
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
            # value layer: a module, class, numpy or Python value is no tensor; the
            # unbound `torch.Tensor.cpu(x)` is the site of x (its arguments after x)
            skip = 0
            if self.values is not None and self.rules.methods.get(func.attr):
                if self.values.not_a_receiver(node, self._local) is not None:
                    return
                skip = 1 if self.values.unbound(node, self._local) else 0
            for rule in self.rules.methods.get(func.attr, ()):
                if q is not None and self._on(self.rules.functions.get(q)) is not None:
                    break
                if self._on(rule) is None or not self.cls.allows(rule, node):
                    continue
                if self.values is not None and not _implicit.row_allows(rule.id, node, self.values, self._local):
                    continue
                args, kwargs = self._split(node, skip)
                kind = self.cls.kind_of(rule, args, kwargs)
                if kind is not None:
                    self._add(node, func, rule, kind, wrapped=False, site=None)
                    if skip:
                        self.sites[-1].op = "unbound"  # wrapped as xfer.call(Tensor.m, x, ...)
                    return

    def _wrapper_call(self, node: ast.Call, wrapper: str) -> None:
        """A call of the runtime's wrapper with `site=`: a wrapped site.

        ``xfer.cpu(x, site=...)`` names its row by the wrapper; the generic
        wrappers name it by their arguments: ``xfer.method(recv, "name", ...)``,
        ``xfer.call(fn, ...)``, ``xfer.graph(torch.compile(m), ...)`` (or
        ``xfer.graph(torch.compile, ..., decorator=True)`` for a bare decorator).
        """
        site_kw = next((k.value for k in node.keywords if k.arg == "site"), None)
        if site_kw is None:
            return
        site = _const_str(site_kw)
        if wrapper in _IMPLICIT_WRAPPERS and not self.rules.wrappers.get(wrapper):
            # a wrapped implicit site: xfer.float(t, site=...), xfer.bool(cond, site=...), ...
            op = _IMPLICIT_WRAPPERS[wrapper]
            fd = _implicit.Finding(_implicit.OP_CODES[op], node, node.func, wrapper,
                                   function=".".join(self.qual) or "<module>")
            self._add_implicit(fd, site)
            return
        kwargs = {k.arg: k.value for k in node.keywords if k.arg not in ("site", "decorator")}
        decorator = id(node) in self.decorators
        inner = node.args[0] if node.args else None
        if wrapper == "method":
            name = _const_str(node.args[1]) if len(node.args) > 1 else None
            rows = [r for r in self.rules.methods.get(name or "", ()) if r.wrap == "receiver"]
            if rows:
                rule = rows[0]
                kind = self.cls.kind_of(rule, list(node.args[2:]), kwargs)
                self._add(node, node.func, rule, kind or _fallback_kind(rule), wrapped=True, site=site)
            return
        if wrapper == "call" and inner is not None:
            q = self.qualname(inner)
            rule = self.rules.functions.get(q) if q else None
            if rule is not None:
                kind = self.cls.kind_of(rule, list(node.args[1:]), kwargs)
                self._add(node, node.func, rule, kind or _fallback_kind(rule), wrapped=True, site=site)
            elif q and isinstance(inner, ast.Attribute) and q[: -len(inner.attr) - 1].endswith("Tensor"):
                # the unbound form, wrapped: xfer.call(torch.Tensor.cpu, x, ..., site=...)
                rows = [r for r in self.rules.methods.get(inner.attr, ()) if r.wrap == "receiver"]
                if rows:
                    kind = self.cls.kind_of(rows[0], list(node.args[2:]), kwargs)
                    self._add(node, node.func, rows[0], kind or _fallback_kind(rows[0]), wrapped=True, site=site)
            return
        rows = self.rules.wrappers.get(wrapper, ())
        if not rows:
            return
        if any(r.wrap == "result" for r in rows):
            # The graph wrapper: the site is the inner call (or the bare decorator).
            if isinstance(inner, ast.Call):
                q = self.qualname(inner.func)
                r2 = self.rules.functions.get(q) if q else None
                if r2 is not None and r2.wrap == "result":
                    self.covered.add(id(inner))
                    self._add(inner, inner.func, r2, r2.kind, wrapped=True, site=site, decorator=decorator)
                    return
            elif isinstance(inner, (ast.Name, ast.Attribute)):
                q = self.qualname(inner)
                r2 = self.rules.functions.get(q) if q else None
                if r2 is not None and r2.wrap == "result":
                    self._add(inner, inner, r2, r2.kind, wrapped=True, site=site, decorator=decorator)
                    return
            rule = next(r for r in rows if r.wrap == "result")
            self._add(node, node.func, rule, rule.kind, wrapped=True, site=site, decorator=decorator)
            return
        rule = rows[0]
        skip = 1 if rule.wrap == "receiver" else 0
        kind = self.cls.kind_of(rule, list(node.args[skip:]), kwargs)
        self._add(node, node.func, rule, kind or _fallback_kind(rule), wrapped=True, site=site)

    def _local(self, name: str) -> bool:
        """`name` is bound in the function (or lambda, comprehension) being visited."""
        s = self.scope
        while s is not None and not s.is_module:
            if not s.is_class and name in s.bindings:
                return True
            s = s.parent
        return False

    def _add_implicit(self, fd, wrapped_as: Optional[str] = None) -> None:
        """An implicit site found by the value layer (static/implicit.py)."""
        at, node = fd.at, fd.node
        if isinstance(at, ast.Attribute):
            line, bcol = at.end_lineno, at.end_col_offset - len(at.attr)
        else:
            line, bcol = at.lineno, at.col_offset
        col = self._char_col(line, bcol)
        end_line = node.end_lineno
        end_col = self._char_col(end_line, node.end_col_offset)
        if self.colmap is not None:
            col = self.colmap.col(line, col)
            end_col = self.colmap.col(end_line, end_col)
        self.sites.append(Site(
            path=self.path, line=line, column=col + 1, end_line=end_line, end_column=end_col + 1,
            kind=fd.kind, rule=fd.code, call=self._segment(node), wrapped=wrapped_as is not None, site=wrapped_as,
            rule_id="implicit." + fd.op, function=fd.function or "<module>", label=fd.label,
            byte_col=bcol, implicit=True, op=fd.op,
        ))

    def _add(self, call: ast.Call, func: ast.AST, rule: Rule, kind: str, wrapped: bool,
             site: Optional[str], decorator: Optional[bool] = None) -> None:
        # Position of the called name: the attribute's name ends where the
        # Attribute node ends; a bare Name starts where it starts.
        if isinstance(func, ast.Attribute):
            line = func.end_lineno
            bcol = func.end_col_offset - len(func.attr)
        else:
            line, bcol = func.lineno, func.col_offset
        col = self._char_col(line, bcol)
        end_line = call.end_lineno
        end_col = self._char_col(end_line, call.end_col_offset)
        if self.colmap is not None:
            col = self.colmap.col(line, col)
            end_col = self.colmap.col(end_line, end_col)
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
            )
        )

    def _label(self, func: ast.AST, rule: Rule) -> str:
        """`receiver.method` for naming: the receiver as code (comments and layout
        dropped), with any wrapper calls in it read back as the bare calls, so a
        site keeps its name whether its inner sites were wrapped first or not."""
        if rule.call == "function" or not isinstance(func, ast.Attribute):
            return rule.target
        recv = func.value
        if any(isinstance(n, ast.Call) and any(k.arg == "site" for k in n.keywords) for n in ast.walk(recv)):
            recv = _Unwrapper(self).visit(copy.deepcopy(recv))
        return short_label(recv, func.attr)


class _Unwrapper(ast.NodeTransformer):
    """Rewrites `xfer.m(recv, a, site=...)` back to `recv.m(a)` (on a copy), for names."""

    def __init__(self, finder: "_FileFinder") -> None:
        self.f = finder

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        q = self.f.qualname(node.func)
        if q is None or not q.startswith(RUNTIME_MODULE + ".") or not node.args:
            return node
        wrapper = q[len(RUNTIME_MODULE) + 1:]
        kws = [k for k in node.keywords if k.arg not in ("site", "decorator")]
        a = node.args
        if wrapper == "method" and len(a) > 1 and _const_str(a[1]):
            return ast.Call(ast.Attribute(a[0], _const_str(a[1]), ast.Load()), a[2:], kws)
        if wrapper == "call":
            return ast.Call(a[0], a[1:], kws)
        rows = self.f.rules.wrappers.get(wrapper, ())
        if not rows:
            return node
        rule = rows[0]
        if rule.wrap == "result":
            return a[0]
        if rule.wrap == "receiver":
            return ast.Call(ast.Attribute(a[0], rule.method, ast.Load()), a[1:], kws)
        return ast.Call(_dotted_name(rule.target), a, kws)


def _dotted_name(target: str) -> ast.AST:
    parts = target.split(".")
    node: ast.AST = ast.Name(parts[0], ast.Load())
    for p in parts[1:]:
        node = ast.Attribute(node, p, ast.Load())
    return node


# --- naming ----------------------------------------------------------------------------

_WS = re.compile(r"\s+")
LABEL_LIMIT = 40


def _unparse(node: ast.AST) -> str:
    try:
        return _WS.sub(" ", ast.unparse(node))
    except (ValueError, RecursionError, AttributeError):  # pragma: no cover - odd trees
        return "<expr>"


class _ElideArgs(ast.NodeTransformer):
    """`x.view(b * t, -1)` -> `x.view(...)`; short argument lists stay."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if node.args or node.keywords:
            inner = _unparse(ast.Call(ast.Name("f", ast.Load()), node.args, node.keywords))[2:-1]
            if len(inner) > 3:
                node.args, node.keywords = [ast.Constant(...)], []
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if len(_unparse(node.slice)) > 3:
            node.slice = ast.Constant(...)
        return node


def short_label(recv: ast.AST, method: str, limit: int = LABEL_LIMIT) -> str:
    """A readable, single-line, bounded `receiver.method`.

    Long argument lists become `(...)`; if that is still too long, the start of
    the receiver's chain is cut at an attribute, keeping its end:
    `...float().mean().item`.
    """
    full = _unparse(ast.Attribute(recv, method, ast.Load()))
    if len(full) <= limit:
        return full
    recv = _ElideArgs().visit(copy.deepcopy(recv))
    full = _unparse(ast.Attribute(recv, method, ast.Load()))
    if len(full) <= limit:
        return full
    best = None
    node = recv
    while isinstance(node, (ast.Attribute, ast.Call, ast.Subscript)):
        nxt = node.func if isinstance(node, ast.Call) else node.value
        if isinstance(node, ast.Attribute):
            head = _unparse(nxt)
            for h in (head, f"({head})"):
                if full.startswith(h + "."):
                    tail = full[len(h) + 1:]
                    if len(tail) + 3 <= limit and (best is None or len(tail) > len(best)):
                        best = tail
        node = nxt
    if len(method) + 3 <= limit and best is None:
        best = method
    return "..." + best if best is not None else "..." + full[-(limit - 3):]


def short_receiver(text: str, limit: int = LABEL_LIMIT) -> str:
    """The bounded form of a label given as text (a label is already bounded)."""
    text = _WS.sub(" ", text.strip())
    return text if len(text) <= limit else "..." + text[-(limit - 3):]


def name_sites(sites: list[Site], relpath: str) -> None:
    """Give each unwrapped site the name `xferaudit wrap` would write.

    ``relpath:qualname:receiver.method``, with ``#2``, ``#3`` for repeats; names
    already taken by wrapped sites in the file are not reused. No line numbers,
    so names survive edits elsewhere.
    """
    taken = {s.site for s in sites if s.wrapped and s.site}
    seen: dict[str, int] = {}
    for s in sites:
        if s.wrapped:
            continue
        base = f"{relpath}:{s.function}:{short_receiver(s.label or s.call)}"
        n = seen.get(base, 0)
        while True:
            n += 1
            name = base if n == 1 else f"{base}#{n}"
            if name not in taken:
                break
        seen[base] = n
        taken.add(name)
        s.site = name


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
) -> FileResult:
    """All sites of one file's text, in source order, named and with suppressions applied."""
    rules = rules or _default_rules()
    res = FileResult(path=path)
    colmap = None
    try:
        with warnings.catch_warnings():
            # Invalid escapes etc. are the file's business, not this report's.
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=path)
    except SyntaxError as e:
        res.error = f"{type(e).__name__}: {e.msg}"
        res.error_line = e.lineno or 1
        res.error_column = e.offset or 1
        from .repair import repair

        fixed = repair(split_lines(text))
        if fixed is None:
            return res
        text, colmap = fixed
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            tree = ast.parse(text, filename=path)
        res.repaired = True
    except (ValueError, RecursionError, MemoryError) as e:
        res.error = f"{type(e).__name__}: {e}"
        return res
    f = _FileFinder(path, text, rules, path)
    f.colmap = colmap
    limit = sys.getrecursionlimit()
    try:
        # A 2,000-term `a + b + ...` is a 2,000-deep tree: the visit recurses.
        sys.setrecursionlimit(max(limit, 50_000))
        f.run(tree)
    except RecursionError:
        res.error = "RecursionError: an expression too deeply nested to analyse"
        return res
    finally:
        sys.setrecursionlimit(limit)
    f.sites.sort(key=lambda s: (s.line, s.column))
    name_sites(f.sites, relpath if relpath is not None else path)
    sup = file_suppressions(text, f.lines, {s.line for s in f.sites})
    res.suppressions = sorted(sup.items())
    res.bare_own = [ln for ln, codes in res.suppressions if _bare_own(f.lines[ln - 1])]
    for s in f.sites:
        codes = sup.get(s.line)
        if codes is not None and (codes == () or s.rule in codes):
            s.suppressed = True
    res.sites = f.sites
    return res
