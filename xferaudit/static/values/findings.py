"""What the implicit rules report, and what the explicit rules ask the values.

:class:`Finding` is one implicit site; :class:`Result` holds a file's findings
and the values of the receivers of method-row calls (for the explicit rules to
re-judge them: :mod:`.sites`); :func:`message` is ``check``'s text for an
implicit site.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from typing import Callable, Optional

from ...wrapform import IMPLICIT
from ..codes import IMPLICIT_CODES, IMPLICIT_OP_CODES
from .expressions import Evaluator
from .kinds import NOT_A_RECEIVER, Val, host_module

#: code -> (op, kind)
CODES = IMPLICIT_CODES
OP_CODES = IMPLICIT_OP_CODES
#: The runtime's wrappers of implicit sites (static/codemod/implicit.py writes them;
#: the wrap grammar, xferaudit.wrapform.IMPLICIT, has them): wrapper name -> the op of the site it counts.
WRAPPERS = {w: op for w, (op, _) in IMPLICIT.items()}

@dataclass
class Finding:
    """One implicit site: `node` is the offending expression, `at` the node
    whose position is the site's (the called name of a call, else `node`)."""

    code: str
    node: ast.AST
    at: ast.AST
    label: str
    #: how `wrap` rewrites it: "call" (float(t) -> xfer.float(t, ...)), "bool"
    #: (cond -> xfer.bool(cond, ...)), "index" / "read" (wrap the value), "reads"
    #: / "save" (wrap the call: xfer.reads(np.sin, t, ...)), or "" when no form
    #: behaves exactly like the original (why: `why`)
    wrap: str = ""
    why: str = ""
    function: str = "<module>"  # enclosing qualified name
    evidence: str = ""  # why the value is taken for a device value (.explain)

    @property
    def op(self) -> str:
        return CODES[self.code][0]

    @property
    def kind(self) -> str:
        return CODES[self.code][1]


class Result:
    """What the implicit pass found in one file."""

    def __init__(self) -> None:
        self.findings: list[Finding] = []
        self.receivers: dict[int, Val] = {}  # id(method call) -> its receiver's value
        #: id(`x.to(name)` call) -> "cpu" or "dev": the literal device `name` is bound to;
        #: "dtype": `name` holds a dtype (the call is a cast)
        self.directions: dict[int, str] = {}
        #: id(`dst.copy_(src)` call) -> the value of `src`, as the walk read it
        self.sources: dict[int, Val] = {}
        #: ids of `dst.copy_(src)` calls the code shows between values on one device (.copies)
        self.one_device: set = set()
        self.free: Optional[Evaluator] = None  # for calls in functions not walked

    def value(self, node: ast.AST, local: Callable[[str], bool], call: Optional[ast.Call] = None) -> Val:
        """The value of `node` (a call's receiver: as recorded by the walk), else read without flow."""
        v = self.receivers.get(id(call)) if call is not None else None
        if v is None:
            v = self._free(node, local)
        return v if v is not None else Val("unknown")

    def _free(self, node: ast.AST, local: Callable[[str], bool]) -> Optional[Val]:
        """`node` read without flow, in a function whose names `local` says are
        bound in it (unknown); None without a free evaluator."""
        if self.free is None:
            return None
        self.free.local_names = _Locals(local)
        self.free.env = {}
        self.free.memo.clear()
        return self.free.value(node)

    def _receiver(self, call: ast.Call, local: Callable[[str], bool]) -> Optional[Val]:
        """A method call's receiver, as the walk recorded it, else read without flow."""
        v = self.receivers.get(id(call))
        if v is None and isinstance(call.func, ast.Attribute):
            v = self._free(call.func.value, local)
        return v

    def unbound(self, call: ast.Call, local: Callable[[str], bool]) -> bool:
        """`torch.Tensor.cpu(x)`: a method of torch's Tensor class called on its first argument."""
        v = self._receiver(call, local)
        return v is not None and unbound_tensor(v) and bool(call.args)

    def on_host(self, call: ast.Call) -> bool:
        """The receiver of the method call is a host tensor (or a module shown on
        the host), as the walk read it."""
        v = self.receivers.get(id(call))
        return v is not None and (v.kind == "host" or host_module(v))

    def host_copy(self, call: ast.Call) -> bool:
        """`dst.copy_(src)` with both on the host (`src` a host tensor or numpy), as the walk read
        them, or both on one device, as the code shows (:mod:`.copies`): no crossing."""
        if id(call) in self.one_device:
            return True
        v = self.sources.get(id(call))
        return v is not None and (v.kind in ("host", "numpy") or host_module(v)) and self.on_host(call)

    def not_a_receiver(self, call: ast.Call, local: Callable[[str], bool]) -> Optional[Val]:
        """The receiver's value when the code shows it is no tensor (a module,
        a class, numpy or Python value): such a call is no transfer site.

        In a function the walk did not cover (no device evidence in it), the
        receiver is read without flow: a name `local(name)` says the function
        binds is unknown; imports, literals and call chains still count
        (``init.copy_``, ``np.linspace(...).tolist()``, ``x.numpy().tolist()``).
        """
        v = self._receiver(call, local)
        if v is not None and v.kind in NOT_A_RECEIVER:
            if v.kind == "class" and unbound_tensor(v):
                return None  # `torch.Tensor.cpu(x)`: the site of x
            return v
        return None


def unbound_tensor(v: Val) -> bool:
    """The class is torch's Tensor: `Tensor.cpu(x)` is the unbound form of `x.cpu()`."""
    return v.kind == "class" and (v.qual or "").endswith("Tensor")


_CUDA_TYPE = re.compile(r"(?:torch\.)?cuda\.\w*Tensor$")


def row_allows(rule_id: str, call: ast.Call, res: "Result", local: Callable[[str], bool]) -> bool:
    """Rows whose argument or receiver must be checked by value: `x.new(data)` (not
    sizes), `x.type(<a cuda tensor type>)`, `module.compile()` on a module."""
    if rule_id == "torch.new":
        a = call.args[0]
        if isinstance(a, (ast.List, ast.Tuple, ast.ListComp)):
            return True
        return res.value(a, local).kind in ("numpy", "host", "tensor", "dev", "devx", "devout")
    if rule_id == "torch.type":
        a = call.args[0]
        s = a.value if isinstance(a, ast.Constant) and isinstance(a.value, str) else None
        if s is None and res.free is not None:
            res.free.local_names = _Locals(local)
            res.free.memo.clear()
            s = res.free.qual(a)
        return s is not None and _CUDA_TYPE.search(s) is not None
    if rule_id == "torch.module_compile":
        recv = call.func.value if isinstance(call.func, ast.Attribute) else None
        return recv is not None and res.value(recv, local, call).kind in ("obj", "devmod", "devx")
    return True


class _Locals:
    """`name in locals` through the finder's scopes."""

    __slots__ = ("f",)

    def __init__(self, f: Callable[[str], bool]) -> None:
        self.f = f

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and self.f(name)


_WHAT = {
    "conversion": ("converts a device tensor to a Python number: an implicit read to the host and a sync (down)",
                   "`xferaudit wrap` counts it as `xfer.float(...)` / `xfer.index(...)`"),
    "truth": ("tests a device tensor for truth: an implicit read to the host and a sync (down)",
              "`xferaudit wrap` counts it as `xfer.bool(..., site=...)`"),
    "format": ("formats a device tensor as text: an implicit read to the host and a sync (down)",
               "`xferaudit wrap` counts it as `xfer.read(..., site=...)` or `xfer.reads(...)`"),
    "math": ("passes a device tensor to math/numpy (or compares it in max/min): an implicit read to the host (down)",
             "`xferaudit wrap` counts it as `xfer.reads(fn, ..., site=...)`"),
    "count": ("reads a data-dependent size back from the device: an implicit sync (down)",
              "keep shapes static, or name its statement (`xferaudit wrap` appends `# xferaudit: site=...`)"),
    "upload": ("copies a host index or value to the device inside indexing (up)",
               "make the index or value on the device once, outside the loop, or name its statement "
               "(`xferaudit wrap` appends `# xferaudit: site=...`)"),
    "download": ("copies a device value into a host tensor inside the assignment (down)",
                 "keep it on the device or read it explicitly with `.cpu()`, or name its statement "
                 "(`xferaudit wrap` appends `# xferaudit: site=...`)"),
    "save": ("saves device data: every storage is copied to the host (down)",
             "`xferaudit wrap` counts it as `xfer.save(torch.save, ..., site=...)`"),
    "hazard": ("is a non_blocking copy from pageable host memory: it runs synchronously",
               "pin the host side (`pin_memory=True`, `.pin_memory()`)"),
}


_STATEMENT_FORM = ("count", "upload", "download")


def message(op: str, text: str, wrapped: Optional[str] = None) -> str:
    """The `check` message of an implicit site (`text`: its source, one line;
    `wrapped`: what `wrap` writes instead, when it has a wrapped form)."""
    what, fix = _WHAT.get(op, ("is an implicit transfer", "run `xferaudit wrap`"))
    if wrapped and op in _STATEMENT_FORM:  # no call to wrap: its statement is named
        fix = (f"{fix.split(', or name', 1)[0]}; or name its statement: end it with `{wrapped}` "
               "or run `xferaudit wrap`")
    elif wrapped:  # the grammar's wrapped form, as `wrap` writes it
        fix = f"wrap it: `{wrapped}` or run `xferaudit wrap`"
    return f"`{text}` {what}; {fix}"
