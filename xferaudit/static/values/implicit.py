"""Implicit transfers: crossings with no transfer call of their own.

``float(loss)``, ``if hits > 0.99:``, ``print(loss)``, ``t[mask]``,
``torch.save(model.state_dict(), f)`` each read a device value back to the
host (and wait for the device), yet none is a call of ``cpu``/``item``/``to``.
They are found here with the value layer (this package), and reported only
where it shows the value is a device tensor: an unknown value is never
reported (the runtime guard sees those). One finding per offending expression,
each under a code of the ``XFA4xx`` family:

==========  ===========  ====  ==================================================
code        op           kind  what
==========  ===========  ====  ==================================================
XFA401      conversion   down  ``float/int/bool/complex(t)``, ``operator.index(t)``,
                               ``range(t)``, ``seq[t]``, slice bounds ``x[:t]``
XFA402      truth        down  ``if t:``, ``while t``, ``assert t``, ``not t``,
                               ``and``/``or``, ``if loss > 100:``, ``if t.any():``
XFA403      format       down  ``print(t)``, ``str/repr/format(t)``, f-strings,
                               ``%``, ``.format()``, logging calls
XFA404      math         down  ``math.*(t)``, ``np.asarray(t)``, ``np.array(t)``
XFA405      count        down  ``t[mask]``, ``nonzero``, ``unique``,
                               ``masked_select``, one-argument ``torch.where``,
                               ``repeat_interleave`` without ``output_size``
XFA406      upload       up    ``t[[0, 5]]``, ``t[:, host_idx]``, ``t[i] = np_array``
XFA407      download     down  ``host_t[i] = t``
XFA408      save         down  ``torch.save(t, f)``, ``torch.save(model.state_dict(), f)``
XFA451      hazard       up    ``non_blocking=True`` upload of pageable host memory
==========  ===========  ====  ==================================================

Not transfers, and not reported: Python scalars combined with device tensors
(``t * 2.0``), shapes and sizes (``t.shape[0]``, ``len(t)``, ``t.numel()``),
writing a Python scalar through a device mask (``t[mask] = 0.0``).
"""

from __future__ import annotations

import ast
import bisect
import itertools
import re
from typing import Callable, Optional

from .checks import Checker
from .expressions import Evaluator, Resolver
from .findings import CODES, OP_CODES, Finding, Result, message
from .walk import analyse, module_imports

#: A device tensor can only exist where the text moves or makes something on a
#: device: files (and top-level functions and classes) without one of these are
#: not walked for implicit transfers.
EVIDENCE = re.compile(r"\.(?:cuda|to)\s*\(|\bdevice\s*=")

_AFTER_TO = re.compile(r"\s*\(")
_AFTER_DEVICE = re.compile(r"\s*=(?!=)")
_ANY = re.compile("")  # a class based on a framework class that places its values (.summaries)


_RECEIVER_NEEDLES = (".copy_(", ".tolist(", ".compile(", ".new(", ".type(")


def _lines_of(text: str, needles) -> list:
    pos = []
    for needle in needles:
        i = text.find(needle)
        while i >= 0:
            pos.append(i)
            i = text.find(needle, i + len(needle))
    return _line_numbers(text, pos)


def _line_numbers(text: str, pos: list) -> list:
    """Sorted, distinct 1-based numbers of the lines holding the offsets `pos`."""
    if not pos:
        return []
    pos.sort()
    starts = list(itertools.accumulate(len(ln) + 1 for ln in text.split("\n")))
    out: list = []
    for p in pos:
        ln = bisect.bisect_right(starts, p) + 1
        if not out or out[-1] != ln:
            out.append(ln)
    return out


def evidence_lines(text: str) -> list:
    """Sorted numbers of the lines matching :data:`EVIDENCE`, found with str.find
    (the regex has no literal prefix for the engine to skip on: 5x slower)."""
    pos: list = []
    for needle, after in ((".to", _AFTER_TO), (".cuda", _AFTER_TO), ("device", _AFTER_DEVICE),
                          ("LightningModule)", _ANY), ("Callback)", _ANY)):
        n = len(needle)
        i = text.find(needle)
        while i >= 0:
            j = i + n
            if after.match(text, j) and (needle != "device" or i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
                pos.append(i)
            i = text.find(needle, j)
    return _line_numbers(text, pos)


def find(tree: ast.Module, text: str, qualname: Resolver, methods: frozenset = frozenset(),
         wanted: Optional[Callable[[ast.AST], bool]] = None, ev_lines: Optional[list] = None) -> Result:
    """The implicit findings of one parsed file, and the values of the receivers
    of method calls named in `methods` (for the explicit rules).

    `wanted(stmt)` says which top-level functions and classes hold a line the
    explicit rules look at; those are walked in any case, the others only
    where the text shows evidence of a device (:data:`EVIDENCE`).
    """
    res = Result()
    res.free = Evaluator(qualname, module_imports(tree, qualname))
    if ev_lines is None:
        ev_lines = evidence_lines(text)
    has_evidence = bool(ev_lines)
    # Calls whose receiver decides whether they are sites at all: walked for it.
    sp_lines = _lines_of(text, _RECEIVER_NEEDLES) if wanted is not None else []
    if not has_evidence and not sp_lines:
        # Receivers are read without flow (Result.not_a_receiver), with module-level
        # names made by a call (`model = Net()`) known.
        g = res.free.globals = {}
        for st in tree.body:
            if type(st) is ast.Assign and type(st.value) is ast.Call and len(st.targets) == 1 and \
                    type(st.targets[0]) is ast.Name:
                g[st.targets[0].id] = res.free.value(st.value)
        return res

    def evident(node: ast.AST) -> bool:
        lo = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", ())])
        for lines in (ev_lines, sp_lines):
            k = bisect.bisect_left(lines, lo)
            if k < len(lines) and lines[k] <= node.end_lineno:
                return True
        return False

    def want(node: ast.AST) -> bool:
        if isinstance(node, ast.Module):
            return True
        return evident(node)

    def spans(node: ast.AST, lines: list) -> bool:
        k = bisect.bisect_left(lines, node.lineno)
        return k < len(lines) and lines[k] <= node.end_lineno

    def worth(st: ast.stmt, ev: Evaluator) -> bool:
        """A statement can hold a finding once a device value is in scope or made
        on it, and a receiver worth recording where the explicit rules look."""
        return (ev.dev_seen and has_evidence) or (has_evidence and spans(st, ev_lines)) or (
            wanted is not None and wanted(st))

    checker = Checker(res, methods, worth)
    analyse(tree, qualname, checker, want)
    return res


__all__ = ["CODES", "EVIDENCE", "Finding", "OP_CODES", "Result", "find", "message"]
