"""Parameters known to be tensors by their uses in the function.

A parameter nobody annotates (``def loss(scores, gt_classes)``) is no evidence
of anything, unless the function uses it as only a tensor can be used:

* a method only a tensor has: ``gt_classes.numel()``, ``x.masked_fill(...)``
  (numpy arrays, Python values, modules, pandas objects and meters lack them:
  :data:`.tensor_names.TENSOR_ONLY_METHODS`, plus ``numel``/``nelement``/
  ``ndimension``/``element_size``); ``argmax`` or ``sum`` alone are not (numpy
  has them), with ``dim=`` or ``keepdim=`` they are (numpy says ``axis=``),
  and so is ``descending=`` (``scores.argsort(descending=True)``: numpy's
  sorts take none);
* the tensor argument of a torch function that takes none but a tensor there:
  ``torch.unique(gt_classes)``, ``torch.isfinite(scores)``, ``F.softmax(x)``
  (not ``torch.tensor(x)``, ``torch.cat(x)``, ``torch.pow(2, x)``...).

The uses are found in the file's text, once per file (:class:`Uses`), and
count for a parameter when they come before any rebinding of it (but a
rebinding to a slice or a masked part of itself, ``x = x[:, 0]``,
``boxes = boxes[keep]``, keeps what it is), and when the
function never tests what it is (``isinstance(x, ...)``, ``hasattr(x, ...)``)
nor binds the name again in a comprehension, a lambda or an inner def.
"""

from __future__ import annotations

import ast
import bisect
import functools
import itertools
import re
from typing import Any, Optional

from ..front.prefilter import _trie
from ..front.source import line_numbers, split_lines
from .tensor_names import TENSOR_ONLY_METHODS

#: Methods whose call shows the receiver is a tensor (not what the call gives:
#: numel() gives an int, yet only a tensor has it).
EVIDENCE_METHODS = TENSOR_ONLY_METHODS | frozenset({"numel", "nelement", "ndimension", "element_size"})
#: torch's top-level functions that take a tensor first and nothing else there
#: (the rest of torch's namespace: factories, lists of tensors, Python scalars).
_NOT_TENSOR_FIRST = frozenset("""tensor as_tensor asarray from_numpy frombuffer zeros ones empty full rand randn
    randint randperm arange linspace logspace eye stack cat concat concatenate hstack vstack dstack column_stack
    row_stack block_diag broadcast_tensors meshgrid cartesian_prod einsum save load device dtype is_tensor
    is_storage manual_seed set_printoptions pow float_power remainder fmod bitwise_and bitwise_or bitwise_xor
    bitwise_left_shift bitwise_right_shift xlogy where compile no_grad set_grad_enabled Size Generator
    get_default_dtype set_default_dtype result_type promote_types can_cast full_like""".split())
#: Namespaces of torch whose functions take a tensor first.
_TENSOR_NAMESPACES = ("torch.nn.functional.", "torch.linalg.", "torch.fft.", "torch.special.")
_NAME = r"[A-Za-z_]\w*"
# (each pattern starts with a literal, which the regex engine skips to: a tenth of the time of `\bname\.`)
#: `.numel(`, `.masked_fill(`...: a call of an evidence method (a trie of their names: the engine
#: tests only those at each `.`, not every method call of the file)
_DOT_CALL = re.compile(r"\.\s*(" + _trie(EVIDENCE_METHODS) + r")\s*\(")
_DIM_KW = re.compile(r"(?:dim|descending)\s*=")
_RECEIVER = re.compile(r"(" + _NAME + r")\s*$")
_DIM_CALL = re.compile(r"(" + _NAME + r")\s*\.\s*" + _NAME + r"\s*\([^()\n]*$")
#: What makes a use of a name no evidence in its function: a test of its type, or a
#: binding of the name in a comprehension, a lambda or an inner def.
#: Calls that test what a value is: a function that makes them takes more than tensors.
_TYPE_TESTS = frozenset({"isinstance", "is_tensor", "hasattr", "type", "callable", "getattr"})
_TESTS = re.compile(r"\b(?:" + "|".join(sorted(_TYPE_TESTS)) + r")\(\s*(" + _NAME + r")"
                    r"|\bfor\s+([^\n:]*?)\s+in\b|\blambda\b([^:\n]*):|\bdef\s+\w+\(([^)]*)\)")


_TORCH_MODULES = frozenset({"torch", "torch.nn", "torch.nn.functional", "torch.linalg", "torch.fft", "torch.special"})


@functools.lru_cache(maxsize=256)
def _torch_calls(alias: str) -> re.Pattern:
    """`alias.f(name` and `alias.ns.f(name`, for a name the file gives a torch module."""
    return re.compile(re.escape(alias) + r"((?:\s*\.\s*" + _NAME + r")*)\s*\(\s*(" + _NAME + r")\s*[,)]")


def _word_before(text: str, pos: int) -> bool:
    return pos > 0 and (text[pos - 1].isalnum() or text[pos - 1] in "_.")


class Uses:
    """The tensor-only uses of names in one file's text: (line, name, use)
    sorted by line, and what each function's parameters are by them."""

    def __init__(self, text: str, imports: dict) -> None:
        self.text = text
        found: list = []  # (position, name, use)
        for m in _DOT_CALL.finditer(text):  # (only evidence methods: the pattern names them)
            r = _RECEIVER.search(text, max(0, m.start() - 80), m.start())
            if r is not None:
                found.append((r.start(), r.group(1), f"{r.group(1)}.{m.group(1)}(...)"))
        for m in _DIM_KW.finditer(text):
            if _word_before(text, m.start()) and text[m.start() - 4:m.start()] != "keep":
                continue
            ls = text.rfind("\n", 0, m.start()) + 1
            r = _DIM_CALL.search(text, ls, m.start())
            if r is not None:
                found.append((r.start(), r.group(1), " ".join(text[r.start():m.end()].split()) + "...)"))
        for alias, qual in imports.items():
            if qual.qual not in _TORCH_MODULES:
                continue  # (a name of torch's module or namespaces: `torch`, `F`, `nn`; not each function imported)
            for m in _torch_calls(alias).finditer(text):
                if _word_before(text, m.start()):
                    continue
                q = qual.qual + re.sub(r"\s+", "", m.group(1))
                if _tensor_first(q):
                    found.append((m.start(), m.group(2), f"{alias}{m.group(1)}({m.group(2)}, ...)"))
        found.sort()
        self.hits = [(line, name, use) for line, (_, name, use) in
                     zip(line_numbers(text, [pos for pos, _, _ in found]), found)]  # (line, name, use)
        self.lines = [h[0] for h in self.hits]
        self._starts: list = []

    def of(self, fn: ast.AST, names: list) -> dict:
        """`names` (parameters of `fn` nothing else says anything of) -> the
        use that shows each is a tensor, as ``(line, text)``."""
        body = fn.body
        if not body:
            return {}
        first = body[0]
        lo = first.end_lineno + 1 if _docstring(first) else first.lineno
        hi = fn.end_lineno
        i, j = bisect.bisect_left(self.lines, lo), bisect.bisect_right(self.lines, hi)
        if i == j:
            return {}
        wanted = set(names)
        found: dict = {}
        for ln, name, use in self.hits[i:j]:
            if name in wanted and name not in found:
                found[name] = (ln, use)
        if not found:
            return {}
        rebound = _first_bindings(body, found)
        tested = self._tested(lo, hi)
        return {name: (ln, use) for name, (ln, use) in found.items()
                if ln <= rebound.get(name, ln) and name not in tested}

    def _tested(self, lo: int, hi: int) -> set:
        """The names lines `lo`..`hi` test the type of, or bind in a comprehension, lambda or def."""
        if not self._starts:  # (where each line starts, as ast numbers them)
            self._starts = [0, *itertools.accumulate(map(len, split_lines(self.text)))]
        starts = self._starts
        a = starts[lo - 1] if lo - 1 < len(starts) else len(self.text)
        b = starts[hi] if hi < len(starts) else len(self.text)
        out: set = set()
        for m in _TESTS.finditer(self.text, a, b):
            for g in m.groups():
                if g:
                    out.update(re.findall(_NAME, g))
        return out


def _tensor_first(q: str) -> bool:
    """The torch function `q` takes only a tensor as its first argument."""
    if q.startswith(_TENSOR_NAMESPACES):
        return True
    head, _, last = q.rpartition(".")
    return head == "torch" and last not in _NOT_TENSOR_FIRST and not last[:1].isupper() and \
        not last.startswith(("is_", "get_", "set_", "_"))


def _docstring(st: ast.stmt) -> bool:
    return type(st) is ast.Expr and type(st.value) is ast.Constant and type(st.value.value) is str


def _first_bindings(body: list, names: dict) -> dict:
    """name -> the first line a statement of `body` (nested defs left out)
    binds it on, a rebinding to a part of itself that keeps what it is left
    out (:func:`_keeps_kind`)."""
    out: dict = {}
    masks: list = []  # (the names bound to a mask, found when first asked)

    def mask_names() -> set:
        if not masks:
            masks.append(_mask_names(body))
        return masks[0]

    def note(target: Optional[ast.AST], line: int) -> None:
        if target is None:
            return
        for n in ast.walk(target):
            if type(n) is ast.Name and n.id in names and line < out.get(n.id, line + 1):
                out[n.id] = line

    stack = list(body)
    while stack:
        st = stack.pop()
        t = type(st)
        if t is ast.Assign:
            v = st.value
            for tg in st.targets:
                if type(tg) is ast.Tuple and type(v) is ast.Tuple and len(tg.elts) == len(v.elts):
                    for e, part in zip(tg.elts, v.elts):  # boxes, scores = boxes[keep], scores[keep]
                        if not _keeps_kind(e, part, mask_names):
                            note(e, st.lineno)
                elif not _keeps_kind(tg, v, mask_names):
                    note(tg, st.lineno)
        elif t in (ast.AugAssign, ast.AnnAssign):
            note(st.target, st.lineno)
        elif t in (ast.For, ast.AsyncFor):
            note(st.target, st.lineno)
        elif t in (ast.With, ast.AsyncWith):
            for item in st.items:
                note(item.optional_vars, st.lineno)
        elif t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda):
            continue
        if t is ast.NamedExpr:
            note(st.target, st.lineno)
        for f in ("body", "orelse", "finalbody", "handlers", "cases"):
            stack.extend(getattr(st, f, ()))
    return out


def _keeps_kind(target: ast.AST, value: ast.AST, mask_names) -> bool:
    """`x = x[...]` where the part is what `x` is: a slice (``x[1:]``: a
    list's is a list, numpy's numpy, a tensor's a tensor), several indices
    (``x[:, 0]``, ``x[i, j]``: a list takes none), or a mask (``x[keep]``,
    ``keep = scores > t``, or ``x[~m]``), so a later use still shows what the
    parameter was. An index of one value (``x[i]``) may take an item of a list."""
    if type(target) is not ast.Name or type(value) is not ast.Subscript or type(value.value) is not ast.Name \
            or value.value.id != target.id:
        return False
    s = value.slice
    if type(s) is ast.Slice or type(s) is ast.Tuple:
        return True
    unmasked: Any = _uninverted(s)  # (a name of its own: mypyc checks a name's one type at run time)
    s = unmasked
    return type(s) is ast.Compare or type(s) is ast.Name and s.id in mask_names()


def _mask_names(body: list) -> set:
    """Names `body` binds to a comparison (``keep = scores > t``), its
    inverse, or ``&``/``|`` of such: masks, where they index a tensor."""
    out: set = set()
    for n in ast.walk(ast.Module(body=body, type_ignores=[])):
        if type(n) is ast.Assign and len(n.targets) == 1 and type(n.targets[0]) is ast.Name:
            v = _uninverted(n.value)
            if type(v) is ast.Compare or type(v) is ast.BinOp and type(v.op) in (ast.BitAnd, ast.BitOr):
                out.add(n.targets[0].id)
    return out


def _uninverted(node: ast.AST) -> ast.AST:
    """`node` without the ``~`` in front of it (``~m``, ``~~m``: a mask's inverse is a mask)."""
    while type(node) is ast.UnaryOp and type(node.op) is ast.Invert:
        node = node.operand
    return node


def masked_params(fn: ast.AST, masked: dict) -> dict:
    """The parameters a walk of `fn` saw indexed by a mask on the device
    (`masked`: name -> (line, ``x[m]``, the mask's kind), from
    :attr:`.expressions.Evaluator.masked`) that are device values from the
    function's start: the use comes before any rebinding of the name, and the
    function never tests what it is. name -> (line, ``x[m]``, kind)."""
    rebound = _first_bindings(fn.body, masked)
    tested: set = set()
    for n in ast.walk(fn):
        if type(n) is ast.Call and n.args and type(n.args[0]) is ast.Name:
            f = n.func
            name = f.id if type(f) is ast.Name else f.attr if type(f) is ast.Attribute else ""
            if name in _TYPE_TESTS:
                tested.add(n.args[0].id)
    return {name: use for name, use in masked.items()
            if use[0] <= rebound.get(name, use[0]) and name not in tested}
