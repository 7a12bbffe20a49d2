"""Code that ``torch.compile`` compiles, found across the files of a project.

Dynamo traces the function or module ``torch.compile`` is given and, from it,
every Python function it calls (``forward``, its submodules' ``forward``, the
helpers they call, in whatever file). A host read there (``.item()``,
``int(t)``, ``if t:``, ``print(t)``, ``t[mask]``) cannot go into the graph:
Dynamo breaks the graph at it, runs the read in Python and starts another
graph after it. ``check`` reports such a read under a code of its own
(``XFA601``, :mod:`..front.graph_breaks`) instead of the read's usual one.

:func:`compiled_in_project` finds that code, one pass over the project's
files, importing nothing, by the walk the TorchScript pass uses
(:mod:`.reach`):

1. every file is read once; only the files whose text names ``compile`` where
   a call or a decorator can be (and then those defining a name being
   followed) are parsed;
2. the roots: ``torch.compile(f)`` and ``torch.compile(model)`` (``model`` read
   through the assignments of the function or module holding the call:
   ``model = Net(); torch.compile(model)``, ``torch.compile(Net(3).to(dev))``;
   ``self.model`` through the class's own, ``self.model = Net()``),
   ``model.compile()`` (the same reading of ``model``), ``@torch.compile`` and
   ``@torch.compile(...)`` on a function or a method;
3. from the roots, the names the reached code uses are followed to their defs
   (:meth:`.reach.Reach.follow`). A module class (one with ``forward``, its
   own or a base's in the project) brings ``forward`` (and a ``__call__`` of
   its own), the methods they call on ``self`` (its bases' too) and the
   classes its ``__init__`` makes (its submodules); any other class the
   ``__call__`` it defines. Functions marked ``@torch.compiler.disable`` (or
   ``torch._dynamo.disable``) run eagerly: they are not followed. Of an
   ``if torch.compiler.is_compiling():`` only the branch Dynamo reads is
   followed (``torch.jit.is_scripting()`` reads as false).

Not followed: torch's own modules, names the imports do not lead to a def of
the project, and methods called on objects other than ``self`` (which class
they belong to is not shown). Where the reach is not shown nothing is
reported: a read there keeps its usual code.

For each function reached the pass also lists the spans inside it where a
read of one kind does not break the graph (:data:`EXEMPT`), as Dynamo 2.x
traces them: an ``assert`` on a tensor, an f-string field or ``str.format``
of one, a numpy call (``np.asarray(t)``, traced through ``torch._numpy``),
``torch.tensor([a, b])`` of tensors, and the branch of a compiling test that
Dynamo does not read.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from typing import Callable, Iterable, Optional

from ..front.source import collector_paused, line_numbers
from .reach import FUNCS, SKIPS, Module, Reach, Sources, project_sources, remembered, statements
from .scripted import Project

#: ``torch.compile``'s own names (a call, or a decorator with or without arguments).
COMPILE = frozenset({"torch.compile"})
#: Defs Dynamo does not trace into: their body runs eagerly.
_EAGER = ("compiler.disable", "_dynamo.disable", "_dynamo.skip")
#: Dynamo's mode tests: true while it traces (``torch.jit.is_scripting()`` is false then).
_COMPILING = {"compiler.is_compiling": True, "_dynamo.is_compiling": True,
              "compiler.is_dynamo_compiling": True, "jit.is_scripting": False}
#: The kinds of span :attr:`Compiled.exempt` lists: which reads Dynamo keeps in the graph there.
EXEMPT = ("truth", "format", "math", "conversion", "all")
# a file that may compile: `compile(` or `.compile(` not of `re`, or a decorator naming `compile`
# where a file may hand code to torch.compile (the others are not parsed for roots): `torch.compile`
# called or a decorator (`T.compile` after `import torch as T`; not named in a docstring), a method `.compile()` given no
# positional argument (`model.compile(backend=...)`; not `re.compile(p)`), and `compile` imported from torch
_TORCH_AS = re.compile(r"i(?<!\wi)mport[ \t]+torch[ \t]+as[ \t]+(\w+)")
_IMPORTED = re.compile(r"f(?<!\wf)rom[ \t]+torch[ \t]+import[^\n]*?\bcompile\b(?:[ \t]+as[ \t]+(\w+))?")
_METHOD = re.compile(r"\.[ \t]*compile\s*\(\s*(?:\)|\w+\s*=[^=])")


_WORD = re.compile(r"c(?<!\wc)ompile\b")  # (`\bcompile`: a pattern starting with a letter is the faster search)
_CALLED = re.compile(r"[ \t]*\(")


def _back(text: str, i: int, chars: str = " \t") -> int:
    """The offset before the run of `chars` that ends at `i`."""
    while i and text[i - 1] in chars:
        i -= 1
    return i


def _hits(text: str) -> list:
    """(offset, whether a decorator) of each place in `text` that may hand code to ``torch.compile``."""
    names = {"torch", *_TORCH_AS.findall(text)} if "import torch" in text and " as " in text else {"torch"}
    bare = {m.group(1) or "compile" for m in _IMPORTED.finditer(text)} if "torch import" in text else set()
    out = []
    for m in _WORD.finditer(text):
        i = m.start()
        j = _back(text, i)
        if j and text[j - 1] == ".":  # `owner.compile`
            k = _back(text, j - 1)
            start = k
            while start and (text[start - 1].isalnum() or text[start - 1] == "_"):
                start -= 1
            if text[start:k] in names:
                at = _back(text, start)
                if at and text[at - 1] == "@":
                    out.append((at - 1, True))
                elif _CALLED.match(text, m.end()):
                    out.append((start, False))
            elif _METHOD.match(text, j - 1):
                out.append((i, False))
        elif "compile" in bare and not (j and (text[j - 1].isalnum() or text[j - 1] == "_")):
            if j and text[j - 1] == "@":
                out.append((j - 1, True))
            elif _CALLED.match(text, m.end()):
                out.append((i, False))
    for alias in bare - {"compile"}:  # `from torch import compile as tc`: `tc(...)`, `@tc`
        for m in re.finditer(rf"(@[ \t]*)?(?<![\w.]){re.escape(alias)}\b", text):
            if m.group(1) or _CALLED.match(text, m.end()):
                out.append((m.start(), m.group(1) is not None))
    return [h for h in out if not _in_prose(text, h[0])]


def _in_prose(text: str, at: int) -> bool:
    """Offset `at` is, evidently, in a comment or a docstring (after a ``#`` on
    its line, or inside a triple-quoted string by the count of quotes before
    it): a mention of ``torch.compile(model)`` in prose is no reason to parse
    the file. (A ``#`` or quotes inside a string may hide a real call: a miss,
    never a false finding.)"""
    line_start = text.rfind("\n", 0, at) + 1
    if "#" in text[line_start:at]:
        return True
    return text.count('"""', 0, at) % 2 == 1 or text.count("\'\'\'", 0, at) % 2 == 1


def _compile_argument(m: Module, call: ast.Call) -> Optional[ast.AST]:
    """What a call hands to ``torch.compile``: X of ``torch.compile(X)`` (or
    ``model=X``), `model` of ``model.compile(...)`` (a receiver that is no
    import: not ``re.compile``)."""
    f = call.func
    if m.qualname(f) in COMPILE:
        if call.args:
            return call.args[0]
        return next((k.value for k in call.keywords if k.arg == "model"), None)
    if isinstance(f, ast.Attribute) and f.attr == "compile" and not call.args:
        root = f.value
        while isinstance(root, (ast.Attribute, ast.Call)):
            root = root.func if isinstance(root, ast.Call) else root.value
        if isinstance(root, ast.Name) and root.id not in m.imports:
            return f.value
    return None


def _decorators(node: ast.AST, m: Module) -> list:
    """What each decorator of `node` names (``torch.compile`` of ``@torch.compile(mode=...)``)."""
    return [m.qualname(d.func if isinstance(d, ast.Call) else d) or "" for d in getattr(node, "decorator_list", ())]


class _Compiled(Reach):
    """What Dynamo traces: the roots of every file that compiles, and the walk from them."""

    TESTS = _COMPILING

    def __init__(self, sources: Sources) -> None:
        super().__init__(sources)
        self.out: dict = defaultdict(lambda: {"functions": {}, "exempt": []})

    def roots(self) -> None:
        for ap, text in self.src.texts.items():
            if "compile" not in text:
                continue
            hits = _hits(text)
            if not hits:
                continue
            m = self.src.module(ap)
            if m is None:
                continue
            lines = line_numbers(text, sorted(at for at, _ in hits))
            for line, refs in m.call_arguments(lines, _compile_argument, through_self=True):
                self.follow(m, refs, f"{m.rel}:{line}")
            if any(decorator for _, decorator in hits):
                for node in _defs(m.tree):
                    if node.decorator_list and any(q in COMPILE for q in _decorators(node, m)) \
                            and not _skipped(node, m):
                        self.take(m, node, f"{m.rel}:{node.decorator_list[0].lineno}")

    def stops_at(self, m: Module, fn: ast.AST) -> bool:
        return any(q.endswith(_EAGER) for q in _decorators(fn, m))

    def class_methods(self, methods: list, module_class: bool) -> tuple:
        own_call = {"__call__"} if any(f.name == "__call__" for _, f in methods) else set()
        return ({"forward"} | own_call if module_class else own_call), False

    def reached(self, m: Module, fn: ast.AST, origin: str) -> None:
        entry = self.out[m.path]
        q = m.qualnames()[id(fn)]
        if q in entry["functions"]:
            return
        entry["functions"][q] = origin
        entry["exempt"].extend(_exempt(m, fn))


def _defs(tree: ast.Module):
    """Every function of `tree` (methods and nested ones too: defs are statements)."""
    return (n for n in statements(tree) if isinstance(n, FUNCS))


def _skipped(node: ast.AST, m: Module) -> bool:
    return any(q.endswith(SKIPS) for q in _decorators(node, m))


def _span(kind: str, node: ast.AST) -> list:
    return [kind, node.lineno, node.col_offset, node.end_lineno, node.end_col_offset]


def _exempt(m: Module, fn: ast.AST) -> list:
    """The spans of `fn` where a read of a kind stays in Dynamo's graph (:data:`EXEMPT`)."""
    out = []
    printed: set = set()  # the f-strings print or logging is given: the call itself breaks the graph
    for n in ast.walk(fn):  # (breadth first: a call before its arguments)
        t = type(n)
        if t is ast.Assert:
            out.append(_span("truth", n.test))
        elif t is ast.JoinedStr:
            if id(n) not in printed:
                out.append(_span("format", n))
        elif t is ast.If:
            taken = m.mode_test(n.test, _COMPILING)
            if taken is not None:
                out.extend(_span("all", s) for s in (n.orelse if taken else n.body))
        elif t is ast.Call:
            f = n.func
            if _prints(m, f):
                printed.update(id(a) for a in n.args)
                continue
            if isinstance(f, ast.Attribute) and f.attr == "format" and isinstance(f.value, ast.Constant):
                out.append(_span("format", n))
                continue
            q = m.qualname(f) or ""
            if q.startswith("numpy."):
                out.append(_span("math", n))
            elif q in ("torch.tensor", "torch.as_tensor", "torch.asarray"):
                out.append(_span("conversion", n))
    return out


_LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log"})


def _prints(m: Module, func: ast.AST) -> bool:
    """`func` is ``print`` or a logging call (Dynamo breaks the graph at it, whatever it is given)."""
    if isinstance(func, ast.Name):
        return func.id == "print" and func.id not in m.imports and func.id not in m.top
    if isinstance(func, ast.Attribute) and func.attr in _LOG_METHODS:
        owner = (m.qualname(func) or "").split(".")[:-1]  # `logging`, `logger`, `self.log`...
        return bool(owner) and (owner[0] == "logging" or "log" in owner[-1].lower())
    return False


def compiled_in_project(files: Iterable[str], relpath: Callable[[str], str] = lambda p: p,
                        sources: Optional[Sources] = None) -> dict:
    """``{absolute path: {"functions": {qualified name: "file:line" of the
    compile call}, "exempt": [[kind, line, col, end line, end col], ...]}}``:
    the functions and methods of `files` (the project's Python files) that
    ``torch.compile`` compiles, from a call or decorator in any of them, and
    the spans in them where a read of `kind` stays in the graph (0-based byte
    columns, as ``ast`` gives). `sources`: the files already read (one
    :class:`~.reach.Sources` for both project passes)."""
    with collector_paused():
        walk = _Compiled(sources if sources is not None else Sources(files, relpath)).run()
    return {path: {"functions": e["functions"], "exempt": e["exempt"]} for path, e in walk.out.items()}


def for_wrap(project: Project, cfg, sources: Optional[Callable[[], Sources]] = None) -> dict:
    """:func:`compiled_in_project` over the whole project's files."""
    return compiled_in_project(project.files, sources=(sources or project_sources(project, cfg))())


#: this process's maps, by the project's state
_MEMO: dict = {}


def for_check(project: Project, cfg, cache=None, sources: Optional[Callable[[], Sources]] = None) -> dict:
    """:func:`for_wrap`'s map, remembered until a file of the project changes
    (``project.state``): in this process, and beside the findings cache
    (`cache`), as :func:`.scripted.for_check` keeps its own. The findings
    cache itself never holds it: the code is applied to each file's findings
    after the cache (:func:`..front.graph_breaks.mark`), so a compile call
    added or removed in another file changes them without a parse."""
    return remembered(_MEMO, "compiled", project.state, cache, lambda: for_wrap(project, cfg, sources), checked)


def checked(value) -> Optional[dict]:
    """A saved map, if it has the shape :func:`compiled_in_project` gives."""
    if not isinstance(value, dict):
        return None
    for path, entry in value.items():
        if not (isinstance(path, str) and isinstance(entry, dict)):
            return None
        names, spans = entry.get("functions"), entry.get("exempt")
        if not (isinstance(names, dict) and isinstance(spans, list)):
            return None
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in names.items()):
            return None
        if not all(isinstance(s, list) and len(s) == 5 and s[0] in EXEMPT
                   and all(type(x) is int for x in s[1:]) for s in spans):
            return None
    return value
