"""Parameters known to be tensors by their uses in the function.

A parameter nobody annotates (``def loss(scores, gt_classes)``) is no evidence
of anything, unless the function uses it as only a tensor can be used:

* a method only a tensor has: ``gt_classes.numel()``, ``x.masked_fill(...)``
  (numpy arrays, Python values, modules, pandas objects and meters lack them:
  :data:`.tensor_names.TENSOR_ONLY_METHODS`, plus ``numel``/``nelement``/
  ``ndimension``/``element_size``); ``argmax`` or ``sum`` alone are not (numpy
  has them), with ``dim=`` or ``keepdim=`` they are (numpy says ``axis=``);
* the tensor argument of a torch function that takes none but a tensor there:
  ``torch.unique(gt_classes)``, ``torch.isfinite(scores)``, ``F.softmax(x)``
  (not ``torch.tensor(x)``, ``torch.cat(x)``, ``torch.pow(2, x)``...).

The uses are found in the file's text, once per file (:class:`Uses`), and
count for a parameter when they come before any rebinding of it, and when the
function never tests what it is (``isinstance(x, ...)``, ``hasattr(x, ...)``)
nor binds the name again in a comprehension, a lambda or an inner def.
"""

from __future__ import annotations

import ast
import bisect
import re
from typing import Optional

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
_METHOD = re.compile(r"\b(" + _NAME + r")\s*\.\s*(" + "|".join(sorted(EVIDENCE_METHODS, key=len, reverse=True))
                     + r")\s*\(")
_DIM = re.compile(r"\b(" + _NAME + r")\s*\.\s*" + _NAME + r"\s*\([^()\n]*\b(?:dim|keepdim)\s*=")


def _type_tests(name: str) -> re.Pattern:
    return re.compile(r"\b(?:isinstance|is_tensor|hasattr|type|callable|getattr)\(\s*" + name + r"\b"
                      r"|\bfor\b[^\n:]*\b" + name + r"\b[^\n:]*\bin\b|\blambda\b[^:\n]*\b" + name
                      + r"\b|\bdef\s+\w+\([^)]*\b" + name + r"\b")


class Uses:
    """The tensor-only uses of names in one file's text: (line, name, use)
    sorted by line, and what each function's parameters are by them."""

    def __init__(self, text: str, imports: dict) -> None:
        self.text = text
        self.hits: list = []
        starts = [0]
        for m in re.finditer("\n", text):
            starts.append(m.end())
        self.starts = starts

        def line(pos: int) -> int:
            return bisect.bisect_right(starts, pos)

        for m in _METHOD.finditer(text):
            self.hits.append((line(m.start()), m.group(1), f"{m.group(1)}.{m.group(2)}(...)"))
        for m in _DIM.finditer(text):
            self.hits.append((line(m.start()), m.group(1), m.group(0).strip() + "..."))
        aliases = {n: v.qual for n, v in imports.items() if v.qual and (v.qual == "torch" or
                                                                          v.qual.startswith("torch."))}
        if aliases:
            rx = re.compile(r"\b(" + "|".join(map(re.escape, sorted(aliases, key=len, reverse=True)))
                            + r")((?:\s*\.\s*" + _NAME + r")*)\s*\(\s*(" + _NAME + r")\s*[,)]")
            for m in rx.finditer(text):
                q = aliases[m.group(1)] + re.sub(r"\s+", "", m.group(2))
                if _tensor_first(q):
                    self.hits.append((line(m.start()), m.group(3), f"{m.group(1)}{m.group(2)}({m.group(3)}, ...)"))
        self.hits.sort()
        self.lines = [h[0] for h in self.hits]

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
        segment = self.text[self.starts[lo - 1]:self.starts[hi] if hi < len(self.starts) else len(self.text)]
        out = {}
        for name, (ln, use) in found.items():
            if ln > rebound.get(name, ln) or _type_tests(name).search(segment):
                continue
            out[name] = (ln, use)
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
    """name -> the first line a statement of `body` (nested defs left out) binds it on."""
    out: dict = {}

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
            for tg in st.targets:
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
