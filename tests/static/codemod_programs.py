"""Programs for the codemod's differential test (test_codemod_differential.py).

A program is a class ``Case`` whose methods each put tensor expressions in one
context where a site can stand: a truth test, ``and``/``or`` as a value, an
f-string, ``%``, ``.format``, a subscript, a dict key, numpy and ``math``
calls, a class body, a default argument, ``match``, ``async``... Each method
returns what it computed; :func:`outcome` runs every method of a program on
given inputs and records, per method, the result (value and type), or the
exception (type and message), with the printed output, the log lines and the
order in which the program's helper calls ran, and the warnings (category,
message, filename and line). Running the bare program and
its wrapped form must give the same outcome, on host tensors and on the
simulated device, with counting off and on.

The tensors come in as parameters annotated ``torch.Tensor`` (``t``: a float
tensor, ``u``: an integer one) and as attributes of ``self`` set from them, so
the value layer's gpu-first reading takes them for device tensors and reports
the sites; ``obj`` holds the same values where the code does not show them
(sites only under run evidence, which the test gives every line too).
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import warnings
from typing import Any

from hypothesis import strategies as st

#: Float-valued tensor expressions (device tensors by the code's evidence, or `obj`'s).
E = ["t", "t.sum()", "self.loss", "obj.loss", "note(t)", "(t * 2)", "t.mean()", "self.box.loss",
     "(self.loss)", "t.abs().max()", "t.cpu()", "t.sum().item()", "t.to('cpu').sum()", "obj.loss.cpu()",
     "note(t).detach().cpu()"]
#: Truth-tested ones (bool tensors, and the float ones).
B = ["self.flag", "obj.flag", "(t > 0)", "(t > 0).any()", "t", "self.loss > 0.1", "note(t > 0)",
     "self.box.flag", "t.sum() != 0", "t.sum().item() > 0", "(t.cpu() > 0).all()"]
#: Integer ones (read as Python ints by range, sequences, slices).
N = ["u", "self.n", "obj.n", "(u + 1)", "note(u)", "u.sum()", "self.box.n", "u.sum().item()", "u.cpu()"]

#: Each context: the body of a method (indented by 8), its result in `r`.
#: {E}, {E2}: float expressions; {B}: a truth-tested one; {N}: an integer one.
CONTEXTS = {
    "if": "if {B}:\n    r = 1\nelse:\n    r = 2",
    "if_attr_not": "if not {B}:\n    r = 'no'\nelse:\n    r = 'yes'",
    "if_multiline": "def inner():\n    if torch.logical_and(\n        {B},\n        {B},\n    ).any():\n        return 1\n    return 0\nr = inner()",
    "elif": "r = 0\nif r:\n    r = 9\nelif {B}:\n    r = 3",
    "while": "r = 0\nwhile {B}:\n    r += 1\n    break",
    "while_not": "r = 0\nwhile not {B}:\n    r += 1\n    break",
    "assert": "assert {B}, 'failed'\nr = 'ok'",
    "assert_msg": "assert {B}, f\"bad {{{E}}}\"\nr = 'ok'",
    "not_value": "r = not {B}",
    "or_value": "zero = None\nr = {E} or zero",
    "or_value_rebind": "threshold = {E}\nthreshold = threshold or 0.5\nr = threshold",
    "and_value": "r = {E} and {E2}",
    "and_return": "return {E} and {E2}",
    "or_return": "return {B} or {E}",
    "and_test": "if {B} and {E}:\n    r = 1\nelse:\n    r = 0",
    "or_test": "r = 1 if {B} or {E} else 0",
    "boolop_nested": "r = ({B} and {E}) or {E2}",
    "ifexp": "r = {E} if {B} else {E2}",
    "ifexp_value": "r = ({B} if flagged else {E})",
    "compare": "r = 1 if {E} > 0.5 else 0",
    "compare_if": "if {E} >= 0.25:\n    r = 'hi'\nelse:\n    r = 'lo'",
    "chained": "if 0 < {E} < 1:\n    r = True\nelse:\n    r = False",
    "chained_value": "r = 0 <= {E} < 2",
    "listcomp_if": "r = [i for i in range(3) if {B}]",
    "listcomp_elt": "r = [float({E}) for _ in range(2)]",
    "genexp": "r = sum(1 for _ in range(2) if {B})",
    "dictcomp": "r = {{i: bool({B}) for i in range(2)}}",
    "lambda": "g = lambda: {E}\nr = float(g())",
    "lambda_default": "g = lambda z={E}: z\nr = g()",
    "fstring": "r = f\"{{{E}}}\"",
    "fstring_spec": "r = f\"{{{E}:.3f}}\"",
    "fstring_conv": "r = f\"{{{E}!r:>30}}\"",
    "fstring_eq": "r = f\"{{{E}=}}\"",
    "fstring_eq_spec": "r = f\"{{{E} = :.2f}}\"",
    "fstring_nested_spec": "w = 12\nr = f\"{{{E}:>{{w}}}}\"",
    "fstring_single": "r = f'{{{N}:>4}} {{{B}!s}}'",
    "fstring_many": "r = f\"{{{E}}} {{{E2}:.1f}}\"",
    "percent": "r = '%s' % {E}",
    "percent_float": "r = '%.2f' % {E}",
    "percent_tuple": "r = '%s and %.1f' % ({E}, {E2})",
    "percent_int": "r = '%d' % {N}",
    "percent_none": "r = 'plain' % {E}",
    "percent_key": "r = '%(a)s' % {E}",
    "format_call": "r = '{{}}'.format({E})",
    "format_attr": "r = '{{0.shape}}'.format({E})",
    "format_index": "r = '{{0[0]}}'.format({E})",
    "format_spec": "r = '{{:.2f}}'.format({E})",
    "format_kw": "r = '{{v:.1f}}'.format(v={E})",
    "print": "print({E})\nr = None",
    "print_many": "print('loss', {E}, sep='|')\nr = None",
    "print_star": "print(*[{E}])\nr = None",
    "str": "r = str({E})",
    "str_enc": "r = str({E}, 'utf-8')",
    "repr": "r = repr({E})",
    "ascii": "r = ascii({E})",
    "format_builtin": "r = format({E}, '.3f')",
    "log": "LOG.warning('loss %s', {E})\nr = None",
    "log_fstring": "LOG.warning(f\"loss {{{E}}}\")\nr = None",
    "float": "r = float({E})",
    "int": "r = int({E})",
    "bool": "r = bool({B})",
    "complex": "r = complex({E})",
    "index": "r = operator.index({N})",
    "round": "r = round({E}, ndigits=2)",
    "range": "r = list(range({N}))",
    "range_many": "r = list(range(0, {N}, 1))",
    "list_index": "r = lst[{N}]",
    "tuple_index": "r = (10, 20, 30, 40)[{N}]",
    "str_index": "r = 'abcd'[{N}]",
    "slice_upper": "r = lst[:{N}]",
    "slice_lower": "r = lst[{N}:]",
    "slice_step": "r = lst[::{N} or 1]",
    "slice_tensor": "r = t.reshape(-1)[:{N}]",
    "tensor_index": "r = t.reshape(-1)[{N}]",
    "tensor_index_float": "r = t.reshape(-1)[{E}]",
    "mask_index": "v = t.reshape(-1)\nr = v[v > 0]",
    "mask_param": "def inner(x):\n    kept = x[t > 0]\n    return float(x.sum()) + float(kept.sum())\nr = inner(t)",
    "host_tensor_of_values": "vals = [{E}.sum(), {E}.sum()]\nr = torch.tensor(vals)",
    "host_tensor_display": "r = torch.tensor([{E}.sum(), 1.0])",
    "list_display_index": "r = [10, 20, 30][{N}]",
    "slice_custom": "r = Probe()[:{N}]",
    "index_custom": "r = Probe()[{N}]",
    "dict_key_missing": "names = {{0: 'a', 1: 'b'}}\nr = names[{N}]",
    "dict_key_hit": "cache = {{u: 'hit'}}\nr = cache[u]",
    "dict_key_tensor": "d = {{}}\nd[{E}] = 1\nr = len(d)",
    "dict_get": "names = {{0: 'a'}}\nr = names.get({N}, 'none')",
    "dict_param": "r = mapping[{N}]",
    "walrus_if": "if (w := {B}):\n    r = float(w)\nelse:\n    r = -1.0",
    "walrus_value": "r = [(w := {E}), float(w)]",
    "starred": "r = [*range({N})]",
    "starred_call": "r = max(*[{E}, 0.0])",
    "keyword": "r = torch.full((2,), float({E}), device=t.device).tolist()",
    "keyword_call": "r = kw(x={E})",
    "decorator": "@deco({E})\ndef inner():\n    return 1\nr = inner()",
    "decorator_bool": "@deco(bool({B}))\ndef inner():\n    return 1\nr = inner()",
    "class_body": "class K:\n    v = float({E})\n    flag = bool({B})\nr = (K.v, K.flag)",
    "class_body_if": "class K:\n    if {B}:\n        v = 1\n    else:\n        v = 2\nr = K.v",
    "default_arg": "def inner(z={E}):\n    return z\nr = inner()",
    "default_float": "def inner(z=float({E})):\n    return z\nr = inner()",
    "global": "global G\nG = float({E})\nr = G",
    "nonlocal": "acc = 0.0\ndef inner():\n    nonlocal acc\n    acc = float({E})\ninner()\nr = acc",
    "match": "match float({E}):\n    case 0.0:\n        r = 'zero'\n    case _:\n        r = 'other'",
    "match_guard": "match 1:\n    case 1 if {B}:\n        r = 'guard'\n    case _:\n        r = 'none'",
    "match_subject": "match {E}:\n    case _:\n        r = 'any'",
    "async": "async def inner():\n    return float({E})\nr = drive(inner())",
    "async_if": "async def inner():\n    if {B}:\n        return 1\n    return 0\nr = drive(inner())",
    "await": "async def val():\n    return {E}\nasync def inner():\n    return bool(await val())\nr = drive(inner())",
    "del": "lst2 = list(lst)\ndel lst2[{N}]\nr = lst2",
    "del_dict": "d = {{u: 1}}\ndel d[u]\nr = len(d)",
    "augassign": "r = 1.0\nr += float({E})",
    "augassign_index": "lst2 = list(lst)\nlst2[{N}] += 1\nr = lst2",
    "augassign_tensor": "acc = 0\nacc += {E}\nr = acc",
    "str_annotation": "def inner(z: 'torch.Tensor'):\n    return float(z)\nr = inner({E})",
    "ann_assign": "z: 'torch.Tensor' = {E}\nr = bool(z)",
    "np_sin": "r = np.sin({E})",
    "np_round": "r = np.round({E}, 2)",
    "np_asarray": "r = np.asarray({E})",
    "np_array": "r = np.array({E})",
    "np_dlpack": "r = np.from_dlpack({E})",
    "math_isnan": "r = math.isnan({E})",
    "math_prod": "r = math.prod({E})",
    "math_floor": "r = math.floor({E})",
    "math_copysign": "r = math.copysign({E}, -1.0)",
    "math_hypot": "r = math.hypot({E}, {E2})",
    "math_kw": "r = math.isclose({E}, 0.3, rel_tol=1e-6)",
    "attr_call": "r = float(self.loss.item())",
    "with_cm": "with contextlib.nullcontext({E}) as c:\n    r = bool(c)",
    "explicit": "r = t.cpu().tolist()",
    "explicit_to": "r = float(t.to('cpu').sum())",
    # a warning raised inside the site (torch's "To copy construct from a tensor"): the same record
    "warn_inside": "r = torch.tensor({E}, device=t.device)",
    # a function TorchScript compiles at run time, scripted by a loop variable (no pass can see it)
    "script_loop": "def inner(z: torch.Tensor) -> float:\n    if z.sum() > 0:\n        return float(z.sum().cpu())\n"
                   "    return float(z.mean())\nr = [torch.jit.script(fn)(t.sum()) for fn in (inner,)][0]",
}

HEADER = '''\
import contextlib
import logging
import math
import operator

import numpy as np
import torch

LOG = logging.getLogger("xferaudit.differential")
G = None


class Probe:
    def __getitem__(self, key):
        if isinstance(key, slice):
            return ("slice", type(key.start).__name__, type(key.stop).__name__, type(key.step).__name__)
        return ("item", type(key).__name__)


def deco(arg):
    def apply(fn):
        fn.arg = type(arg).__name__
        return fn
    return apply


def kw(x=None):
    return type(x).__name__


def drive(coro):
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value
    raise RuntimeError("the coroutine did not finish")


class Case:
'''

METHOD = '''\
    def {name}(self, t: torch.Tensor, u: torch.Tensor, obj, lst, mapping, flagged, note):
        self.loss = t.sum()
        self.flag = t.sum() > 0
        self.n = u.sum()
        self.box = obj
        r = None
{body}
        return r
'''


def render(cases: list) -> str:
    """The source of a program of `cases`: (context name, {hole: expression})."""
    parts = [HEADER]
    for i, (ctx, fill) in enumerate(cases):
        body = CONTEXTS[ctx].format(**fill)
        parts.append(METHOD.format(name=f"c{i}_{ctx}", body="\n".join("        " + ln for ln in body.split("\n"))))
    return "\n".join(parts)


@st.composite
def programs(draw, contexts=tuple(CONTEXTS), most: int = 4) -> str:
    n = draw(st.integers(1, most))
    cases = []
    for _ in range(n):
        ctx = draw(st.sampled_from(contexts))
        fill = {"E": draw(st.sampled_from(E)), "E2": draw(st.sampled_from(E)), "B": draw(st.sampled_from(B)),
                "N": draw(st.sampled_from(N))}
        cases.append((ctx, fill))
    return render(cases)


#: Inputs: (t's data, u's data). 0-dim values mostly (the conversions read one
#: element); a 1-dim one makes them raise, which must raise the same way.
T_VALUES = [0.3, 0.0, -1.5, 2.0, float("nan"), [1.0, 2.0], True]
U_VALUES = [1, 0, 2, -1, [1, 2]]
inputs = st.tuples(st.sampled_from(T_VALUES), st.sampled_from(U_VALUES))


class Obj:
    """What `obj` is: the same tensors as `self`'s, where the code does not show them."""

    def __init__(self, t, u) -> None:
        self.loss = t.sum()
        self.flag = t.sum() > 0
        self.n = u.sum()


_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _clean(s: str) -> str:
    return _ADDRESS.sub(" at 0x?", s)


def normal(v: Any, torch: Any, np: Any) -> Any:
    """A value as compared: its type with its content (a tensor's dtype, device
    type and data, read after the run; floats by repr, so nan equals nan)."""
    if isinstance(v, torch.Tensor):
        return ("tensor", type(v).__name__, str(v.dtype), v.device.type, tuple(v.shape),
                repr(v.detach().cpu().tolist()))
    if isinstance(v, np.ndarray):
        return ("ndarray", str(v.dtype), repr(v.tolist()))
    if isinstance(v, np.generic):
        return ("np", type(v).__name__, repr(v.item()))
    if isinstance(v, (list, tuple)):
        return (type(v).__name__, tuple(normal(x, torch, np) for x in v))
    if isinstance(v, dict):
        return ("dict", tuple((normal(k, torch, np), normal(x, torch, np)) for k, x in v.items()))
    if isinstance(v, (int, float, complex, str, bool, type(None))):
        return (type(v).__name__, repr(v))
    return (type(v).__name__, _clean(repr(v)))


def outcome(source: str, tv: Any, uv: Any, dev: Any, count: bool, guard: str = "") -> list:
    """Run every method of the program `source` on tensors made from `tv`,
    `uv` on `dev`; per method: (name, result or exception, printed, logged,
    helper-call order, warnings). `guard`: under ``xfer.guard("log", mode=guard)``
    (its own warnings left out: what it says is not the program's doing)."""
    import numpy as np
    import torch

    import xferaudit.runtime as xfer

    import linecache

    code = compile(source, "m.py", "exec", dont_inherit=True)
    # (TorchScript reads a function's source through linecache: the program's, under its name)
    linecache.cache["m.py"] = (len(source), None, source.splitlines(True), "m.py")
    ns: dict = {"__name__": "xferaudit_differential_m", "__file__": "m.py"}
    exec(code, ns)
    log = logging.getLogger("xferaudit.differential")
    log.propagate = False
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(filename)s:%(funcName)s %(message)s"))
    log.handlers[:] = [handler]
    case = ns["Case"]
    out = []
    for name in sorted(n for n in vars(case) if n.startswith("c")):
        t = torch.tensor(tv).to(dev)
        u = torch.tensor(uv).to(dev)
        order: list = []

        def note(x, order=order):
            order.append(type(x).__name__)
            return x

        obj = Obj(t, u)
        mapping = {0: "zero", 1: "one"}
        printed = io.StringIO()
        stream.seek(0)
        stream.truncate()
        with contextlib.ExitStack() as stack:
            if count:
                stack.enter_context(xfer.counting())
            seen = stack.enter_context(warnings.catch_warnings(record=True))
            warnings.simplefilter("always")
            if guard:
                stack.enter_context(xfer.guard("log", mode=guard))
            stack.enter_context(contextlib.redirect_stdout(printed))
            try:
                res = ("value", getattr(case(), name)(t, u, obj, [5, 6, 7, 8], mapping, True, note))
            except Exception as e:  # noqa: BLE001 - every exception is an outcome to compare
                res = ("raised", type(e).__name__, _clean(str(e)))
        if res[0] == "value":
            res = ("value", normal(res[1], torch, np))
        out.append((name, res, _clean(printed.getvalue()), _clean(stream.getvalue()), tuple(order),
                    tuple((w.category.__name__, _clean(str(w.message)), w.filename, w.lineno) for w in seen
                          if w.category.__name__ != "UnexpectedTransferWarning")))
    return out
