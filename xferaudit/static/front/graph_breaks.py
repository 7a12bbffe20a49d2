"""Host reads inside code that ``torch.compile`` compiles: each breaks the graph.

The project pass :mod:`..project.compiled` finds the functions Dynamo traces
and, in them, the spans where a read of some kind stays in the graph. This
module applies that map to one file's sites, after the finder and after the
findings cache (the map is the project's, the cache the file's): a read that
breaks the graph there takes the code ``XFA601`` instead of its usual one
(``XFA202``, ``XFA401``-``XFA405``), with the call that compiles it
(``Site.compiled``). It is still a site: ``wrap`` counts it as before (a
wrapper in compiled code is traced like the bare read, and breaks the graph
at the same line), and ``--ignore XFA601`` leaves it, in ``check`` and in
``wrap`` alike. Cheap: a look-up per site, no parse.

Which reads break, as Dynamo (torch 2.x) traces them on any device, by the
reason its counters give:

========================  ==============================================================
``.item()``, ``int(t)``,  a scalar read (``Tensor.item()``); ``capture_scalar_outputs``
``float(t)``, ``bool(t)``, keeps it in the graph
``range(t)``, ``seq[t]``,
``math.*(t)``
``.tolist()``             a scalar read of each element (``capture_scalar_outputs``:
                          integer tensors only)
``if t:``, ``while t:``,  data-dependent branching (no setting helps: ``torch.where``,
``not t``, ``and``/``or`` ``torch.cond``)
``print(t)``, ``str(t)``, a builtin Dynamo does not trace (``print``: unless it is in
``repr(t)``, logging,     ``reorderable_logging_functions``)
``"%s" % t``
``t[mask]``, ``nonzero``, an output size that depends on the data
``unique``...             (``capture_dynamic_output_shape_ops``)
========================  ==============================================================

Not breaks, so they keep their usual code: ``.cpu()``, ``.to("cpu")``,
``.numpy()`` (copies traced into the graph), ``assert t``, an f-string field
or ``"...".format(t)`` (but not one given to ``print`` or a logging call,
which breaks the graph itself), numpy calls (``np.asarray(t)``),
``torch.tensor([a, b])`` of tensors, and code in the branch of
``if torch.compiler.is_compiling():`` that Dynamo does not read.
"""

from __future__ import annotations

from typing import Optional

from ..site import Site
from .unwrappable import scripted_from

CODE = "XFA601"
#: the explicit rows whose read breaks the graph -> the reason class
_ROWS = {"torch.item": "scalar", "torch.tolist": "list"}
#: the implicit categories whose read breaks the graph -> the reason class
_OPS = {"conversion": "scalar", "truth": "branch", "format": "print", "math": "scalar", "count": "shape"}

#: reason class -> (what Dynamo meets, what to do instead)
REASONS = {
    "scalar": ("a scalar read (Dynamo: `Tensor.item()`)",
               "keep it a tensor (`torch.where`, `torch.cond`), move it out of the compiled code, or set "
               "`torch._dynamo.config.capture_scalar_outputs = True`"),
    "list": ("a read of every element (Dynamo: `Tensor.tolist()`)",
             "keep it a tensor, move it out of the compiled code, or (integer tensors) set "
             "`torch._dynamo.config.capture_scalar_outputs = True`"),
    "branch": ("a branch on device data (Dynamo: data-dependent branching)",
               "keep it a tensor (`torch.where`, `torch.cond`) or move the test out of the compiled code"),
    "print": ("formatting a tensor in Python (Dynamo: a builtin it does not trace)",
              "move it out of the compiled code (or, for `print`, add it to "
              "`torch._dynamo.config.reorderable_logging_functions`)"),
    "shape": ("an output size that depends on device data (Dynamo: a dynamic shape operator)",
              "keep the size fixed (`torch.where(mask, x, 0)`), move it out of the compiled code, or set "
              "`torch._dynamo.config.capture_dynamic_output_shape_ops = True`"),
}


def reason(s: Site) -> Optional[str]:
    """The reason class of a read that breaks Dynamo's graph, or None (no break)."""
    if s.implicit:
        return _OPS.get(s.op)
    return _ROWS.get(s.rule_id)


def _exempt(s: Site, kind: str, spans: list) -> bool:
    at = (s.line, s.byte_col)
    for k, line, col, end_line, end_col in spans:
        if (k == kind or k == "all") and (line, col) <= at < (end_line, end_col):
            return True
    return False


def mark(sites: list, compiled: Optional[dict], suppressions=None) -> int:
    """Give ``XFA601`` to the unwrapped `sites` whose read breaks the graph of
    code ``torch.compile`` compiles (`compiled`: the file's entry of
    :func:`..project.compiled.compiled_in_project`), with ``Site.compiled``
    naming the call; `suppressions` (the file's ``(line, codes)``), when
    given, set ``Site.suppressed`` again for the new code. The number marked."""
    if not compiled or not sites:
        return 0
    names, spans = compiled.get("functions") or {}, compiled.get("exempt") or []
    sup = dict(suppressions) if suppressions is not None else None
    n = 0
    for s in sites:
        if s.wrapped or s.compiled:
            continue
        why = reason(s)
        if why is None:
            continue
        origin = scripted_from(s.function, names)
        if origin is None:
            continue
        kind = s.op if s.implicit else "explicit"
        if spans and _exempt(s, kind, spans):
            continue
        s.rule, s.compiled = CODE, origin
        if sup is not None:
            codes = sup.get(s.line)
            s.suppressed = codes is not None and (codes == () or CODE in codes)
        n += 1
    return n


def message(s: Site, text: str, wrapped: Optional[str]) -> str:
    """The ``check`` message of an ``XFA601`` site (`text`: its source, one
    line; `wrapped`: what ``wrap`` writes for it)."""
    what, fix = REASONS.get(reason(s) or "scalar", REASONS["scalar"])
    head = (f"`{text}` reads device data to the host inside code that `torch.compile` compiles "
            f"(`torch.compile` at {s.compiled} reaches it): {what} breaks the graph here, a sync and "
            f"another graph after it; {fix}")
    if s.no_wrap:
        return f"{head}; `xferaudit wrap` leaves it: {s.no_wrap}"
    return head + (f"; `xferaudit wrap` counts it: `{wrapped}`" if wrapped else "; `xferaudit wrap` counts it")
