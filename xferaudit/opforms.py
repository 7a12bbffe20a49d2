"""What construct makes a crossing the guard saw, and the form ``wrap`` gives it.

The guard names a crossing by the op it saw at the dispatcher
(``aten._local_scalar_dense``, ``aten._to_copy``, ``aten.nonzero``...) or by
its print layer (``Tensor.__format__``); the static half names a site by the
construct in the source (``x.cpu()``, ``float(t)``, ``if t:``, ``t[mask]``).
This table links the two, once, for everything that needs both:

* ``wrap --from RUN.json`` and ``check --evidence RUN.json`` keep, on a line a
  run saw crossing, the sites whose category can make that op
  (:func:`site_categories`; a scalar read is a conversion, a truth test, a
  formatting or math read, or an explicit ``.item()``; a count read-back is
  ``t[mask]``, ``nonzero``, ``unique``...), and say why a line has no wrapped
  form (:func:`no_form_reason`);
* the guard's message suggests the form ``wrap`` writes for that op
  (:func:`advice`), through the wrap grammar (:mod:`xferaudit.wrapform`) and
  the rule table's rows, so the suggestion is what ``wrap`` writes.

An op with no call of its own to wrap (a mask read, ``nonzero``, ``unique``,
an upload by a list index, an op given host and device tensors, the
constants a compiled call uploads) is named by the wrap grammar's statement
form, a site comment on its statement (``kept = boxes[keep]  # xferaudit:
site="..."``): its category is ``statement``, and it names every crossing of
any op on that statement outside a wrapper (:func:`site_categories`).

Categories of a site (:func:`site_category`): ``explicit`` (a row's call:
``x.cpu()``, ``x.to(dev)``, ``torch.tensor(d, device=dev)``), ``graph`` (a
graph made or launched), and the implicit ones of the value layer
(``conversion``, ``truth``, ``format``, ``math``, ``count``, ``upload``,
``download``, ``save``). Pure: the standard library and the wrap grammar; the
rule table is read only to spell a suggestion.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from .wrapform import INNER, RECEIVER, VALUE, form, form_of, statement_comment, suggestion

__all__ = [
    "COUNT_OPS", "NO_CALL_FORM", "OpCategory", "SITE_CATEGORIES", "STATEMENT", "advice", "category", "is_crossing",
    "no_form_reason", "site_categories", "site_category", "wrapped_forms",
]

#: The category of a statement named by its site comment (the wrap grammar's statement form).
STATEMENT = "statement"
#: Every category a static site can have.
SITE_CATEGORIES = frozenset({"explicit", "graph", "conversion", "truth", "format", "math", "count",
                             "upload", "download", "save", STATEMENT})
#: The implicit categories that have no call to wrap: ``wrap`` names their statement instead.
NO_CALL_FORM = frozenset({"count", "upload", "download"})

#: aten ops (overload packets) that read a size back before they return: the
#: guard classifies them as crossings, this table as count read-backs.
COUNT_OPS = ("nonzero", "masked_select", "unique", "_unique", "_unique2", "unique_dim",
             "unique_consecutive", "unique_dim_consecutive")


@dataclass(frozen=True)
class Form:
    """One construct and its wrapped form: `ref` names a row of the rule table
    (``torch.cpu``) or an implicit wrapper (``implicit:float``); `head` and
    `args` are the text of the wrapper's head argument and of the call's own."""

    construct: str
    ref: str
    head: Optional[str] = None
    args: Optional[str] = None
    direction: str = "*"  # the crossing's direction this form makes ("*": any)


@dataclass(frozen=True)
class OpCategory:
    """What makes an op: the site categories that can, the wrapped forms, or
    why no wrapped form counts it."""

    name: str
    sites: frozenset
    forms: tuple = ()
    why: str = ""  # no form: why, and what to do instead
    crossing: bool = True  # False: a flag on a crossing (a pageable copy), not a crossing of its own


_SCALAR_FORMS = (
    Form("float(x)", "implicit:float", None, "x"),
    Form("if x:", "implicit:bool", "x"),
    Form("x.item()", "torch.item", "x"),
)

SCALAR = OpCategory("scalar read", frozenset({"explicit", "conversion", "truth", "math", "format"}), _SCALAR_FORMS)
SYNC_INSIDE = OpCategory(
    "read inside the op", frozenset(), (),
    "the op reads the device back itself and returns a Python value (torch.equal, torch.allclose); to avoid "
    "it, compare on the device (torch.eq(a, b).all()) and read the result once")
COPY = OpCategory("copy", frozenset({"explicit", "save", "math", "upload", "download"}), (
    Form("x.cpu()", "torch.cpu", "x", None, "down"),
    Form('x.to("cpu")', "torch.to", "x", '"cpu"', "down"),
    Form("x.to(device)", "torch.to", "x", "device", "up"),
    Form("x.cuda()", "torch.cuda", "x", None, "up"),
    Form("x.to(device)", "torch.to", "x", "device", "d2d"),
))
COPY_INTO = OpCategory("copy into a tensor", frozenset({"explicit", "save", "upload", "download"}), (
    Form("dst.copy_(src)", "torch.copy_", "dst", "src"),
))
LIFT = OpCategory("new data put on the device", frozenset({"explicit", "upload"}), (
    Form("torch.tensor(data, device=dev)", "torch.tensor", None, "data, device=dev"),
))
COUNT = OpCategory(
    "count read-back", frozenset({"count"}), (
        Form("x.nonzero()", STATEMENT),
        Form("torch.unique(x)", STATEMENT),
    ),
    "a data-dependent size is read back inside the op itself; to avoid the sync, keep shapes static "
    "(torch.where(mask, x, 0))")
INDEX = OpCategory(
    "indexing", frozenset({"count", "upload", "download"}), (
        Form("x[x > 0]", STATEMENT, direction="down"),
        Form("x[[0, 1]]", STATEMENT, direction="up"),
    ),
    "the crossing happens inside the indexing itself (a device mask read back, or a host index or value "
    "copied); to avoid it, make the index on the device once, outside the loop")
MIXED = OpCategory(
    "host and device tensors in one op", frozenset({"upload", "download"}), (),
    "an op given host and device tensors copies inside itself; to avoid it, put the host tensor on the "
    "device once, outside the loop")
FORMAT = OpCategory("formatting", frozenset({"format"}), (Form("print(x)", "implicit:read", "x"),))
LAUNCH = OpCategory(
    "graph launch", frozenset({"graph"}), (Form("torch.compile(fn)", "torch.compile", "torch.compile(fn)"),),
    "a call of a compiled function or a graph replay is counted where the graph is made: wrap that call")
HAZARD = OpCategory("pageable copy", frozenset(), (), "a hazard, not a site: pin the host side",
                    crossing=False)
UNKNOWN = OpCategory("an op xferaudit does not know", SITE_CATEGORIES, (),
                     "xferaudit does not know which construct makes this op")

_PACKETS = {
    "_local_scalar_dense": SCALAR, "equal": SYNC_INSIDE, "allclose": SYNC_INSIDE,
    "_to_copy": COPY, "copy_": COPY_INTO, "copy": COPY_INTO,
    "lift_fresh": LIFT, "lift_fresh_copy": LIFT,
    "repeat_interleave": COUNT,
    "index": INDEX, "index_put_": INDEX, "index_put": INDEX, "_index_put_impl_": INDEX,
    **{name: COUNT for name in COUNT_OPS},
}
_PRINTERS = ("Tensor.__repr__", "Tensor.__format__", "Tensor.__str__")
_LAUNCH_WORDS = ("replay", "launch", "compiled", "graphed")


def _packet(op: str) -> str:
    """``aten.index.Tensor`` -> ``index``; ``aten._to_copy`` -> ``_to_copy``."""
    name = op[len("aten."):] if op.startswith("aten.") else op
    return name.split(".", 1)[0]


def category(op: str) -> OpCategory:
    """The category of an op as the guard names it (``aten._to_copy``,
    ``aten.index.Tensor``, ``Tensor.__format__``, ``pageable aten.copy_``)."""
    op = op.strip()
    if op.startswith("pageable "):
        return HAZARD
    if op in _PRINTERS:
        return FORMAT
    if op.startswith("aten."):
        return _PACKETS.get(_packet(op), MIXED)  # any other op the guard reports mixes host and device
    low = op.lower()
    if any(w in low for w in _LAUNCH_WORDS):
        return LAUNCH
    return UNKNOWN


def is_crossing(op: str) -> bool:
    """Whether an event of `op` is a crossing of its own (a pageable flag is not)."""
    return category(op).crossing


_NAMED = frozenset({STATEMENT})


def site_categories(op: str, direction: str = "") -> frozenset:
    """The site categories that can make a crossing of `op` in `direction`
    (a statement named by its site comment names every crossing on it)."""
    cat = category(op)
    if not cat.crossing:
        return cat.sites
    if cat is MIXED or cat is INDEX:
        if direction == "up":
            return (cat.sites - {"download", "count"}) | _NAMED
        if direction == "down":
            return (cat.sites - {"upload"}) | _NAMED
    return cat.sites | _NAMED


def site_category(implicit: bool, op: str, kind: str) -> str:
    """The category of a static site: its implicit category, else ``graph``
    (a graph made or launched) or ``explicit``."""
    if implicit and op:
        return op
    return "graph" if kind == "graph" else "explicit"


def no_form_reason(op: str) -> str:
    """Why a line that crossed by `op` has no wrapped form (or what to wrap instead)."""
    cat = category(op)
    return cat.why or f"no construct on this line has a wrapped form for a {cat.name}"


def _default_rules() -> Any:
    from .rules import table

    return table(("torch",))


def _spell(f: Form, rules: Any) -> Optional[str]:
    """`f`'s wrapped form as ``wrap`` writes it (through the grammar and the row)."""
    if f.ref == STATEMENT:
        return f.construct + statement_comment("...")
    if f.ref.startswith("implicit:"):
        w = f.ref.split(":", 1)[1]
        shape = form("implicit", w)
        return suggestion(shape, w, {VALUE: f.head or ""}, f.args)
    rule = next((r for r in rules.rules if r.id == f.ref), None)
    if rule is None:
        return None
    shape = form_of(rule)
    heads = {RECEIVER: f.head or "", INNER: f.head or ""}
    return suggestion(shape, rule.wrapper, heads, f.args)


def wrapped_forms(op: str, direction: str = "", rules: Any = None) -> list:
    """``[(construct, wrapped form), ...]`` ``wrap`` writes for the constructs
    that make `op` in `direction`."""
    cat = category(op)
    if not cat.forms:
        return []
    rules = rules if rules is not None else _default_rules()
    out = []
    for f in cat.forms:
        if f.direction != "*" and direction and f.direction != direction:
            continue
        text = _spell(f, rules)
        if text is not None and (f.construct, text) not in out:
            out.append((f.construct, text))
    return out


def advice(op: str, direction: str = "", rules: Any = None) -> str:
    """What the guard tells a user about an unwrapped crossing of `op`: the
    form ``wrap`` writes for it, or why none counts it."""
    try:
        forms = wrapped_forms(op, direction, rules)
    except Exception:  # pragma: no cover - a broken rule table must not hide the guard's message
        forms = []
    calls = [(c, t) for c, t in forms if not t.startswith(c + statement_comment(""))]
    if calls:
        shown = ", ".join(f"`{text}` for `{construct}`" for construct, text in calls)
        return (f"Wrap it in a named site if it is meant (`xferaudit wrap` writes {shown}), "
                "or move it out of the guarded step.")
    cat = category(op)
    if cat.crossing and cat is not UNKNOWN and cat is not LAUNCH:
        shown = ", ".join(f"`{text}`" for _, text in forms) or f"`<statement>{statement_comment('...')}`"
        return (f"Name its statement if it is meant (`xferaudit wrap` writes {shown}; `xferaudit wrap --from "
                f"RUN.json` for any line a run saw), or move it out of the guarded step: {no_form_reason(op)}.")
    return f"Move it out of the guarded step: {no_form_reason(op)}."
