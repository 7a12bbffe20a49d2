"""What a value is: a kind plus two facts, and how kinds meet.

:class:`Val` is the value layer's answer for one expression. Two paths that
meet (an ``if``/``else``, a loop run or not) :func:`join`; a binary tensor op
:func:`combine`\\ s its operands. Everything else in :mod:`..values` builds on
these.
"""

from __future__ import annotations

from typing import Optional


class Val:
    """A value's kind plus two facts: a bool tensor (a mask), host memory that is
    pageable (made by torch.tensor, from_numpy, a factory without pin_memory)."""

    __slots__ = ("kind", "boolean", "pageable", "qual")

    def __init__(self, kind: str, boolean: bool = False, pageable: bool = False, qual: Optional[str] = None):
        self.kind = kind
        self.boolean = boolean
        self.pageable = pageable
        self.qual = qual

    def __eq__(self, other) -> bool:
        return isinstance(other, Val) and (self.kind, self.boolean, self.pageable) == (
            other.kind, other.boolean, other.pageable)

    def __hash__(self) -> int:
        return hash((self.kind, self.boolean, self.pageable))

    def __repr__(self) -> str:
        flags = ("+bool" if self.boolean else "") + ("+pageable" if self.pageable else "")
        return f"Val({self.kind}{flags})"

    def with_bool(self, b: bool) -> "Val":
        return self if self.boolean == b else Val(self.kind, b, self.pageable, self.qual)


#: Kinds. DEV: a device tensor. DEVX: moved to a device, tensor or module unknown.
#: DEVOUT: what a module on a device returned (a tensor, tuple, dict or output
#: object of device tensors). HOST: a host tensor. TENSOR: a tensor, device
#: unknown. NUMPY, PY (Python scalar/str/list/...), PYMOD (an imported module,
#: function or constant), CLASS, OBJ (an instance of a class, a module maybe),
#: DEVMOD (a module moved to a device), DEVSTATE (its state_dict), CPUDEV (the
#: host as a device), DEVICE (some device object), OTHER, UNKNOWN.
KINDS = ("dev", "devx", "devout", "host", "tensor", "numpy", "py", "pymod", "class", "obj", "devmod",
         "devstate", "cpudev", "device", "devlike", "other", "unknown")

DEV = Val("dev")
DEV_BOOL = Val("dev", boolean=True)
DEVX = Val("devx")
DEVOUT = Val("devout")
HOST = Val("host")
HOST_PAGEABLE = Val("host", pageable=True)
TENSOR = Val("tensor")
NUMPY = Val("numpy")
PY = Val("py")
PYMOD = Val("pymod")
CLASS = Val("class")
OBJ = Val("obj")
DEVMOD = Val("devmod")
DEVSTATE = Val("devstate")
CPUDEV = Val("cpudev")
DEVLIKE = Val("devlike")  # the device of a value the code does not place (`x.device`)
DEVICE = Val("device")
OTHER = Val("other")
UNKNOWN = Val("unknown")

SELF = Val("obj", qual=None)  # the `self` parameter of a method (compared by identity)
FUNC = Val("other", qual=None)  # a function defined at the module's top level (compared by identity)

DEVICE_KINDS = frozenset({"dev", "devx", "devout", "devmod", "devstate"})
TENSORISH = frozenset({"dev", "devx", "devout", "host", "tensor"})
ON_DEVICE = frozenset({"dev", "devx", "devout"})
#: Not a tensor, evidently: a method call on one of these is no transfer site.
NOT_A_RECEIVER = frozenset({"numpy", "py", "pymod", "class", "cpudev", "device", "devlike"})


def is_dev(v: Val) -> bool:
    """A device tensor, evidently (the only value implicit rules report)."""
    return v.kind == "dev"


def join(a: Val, b: Val) -> Val:
    """What a name is after two paths meet (if/else, a loop run or not)."""
    if a == b:
        return a
    ka, kb = a.kind, b.kind
    if ka == kb:
        return Val(ka, a.boolean and b.boolean, a.pageable and b.pageable)
    s = {ka, kb}
    if s == {"dev", "py"}:  # total = 0; total += loss: an accumulator of device values
        return DEV
    if s == {"dev", "devx"}:
        return DEVX
    if s <= TENSORISH:
        return TENSOR
    return UNKNOWN


def combine(a: Val, b: Val) -> Val:
    """The value of a binary tensor op on `a` and `b` (a device operand wins)."""
    ka, kb = a.kind, b.kind
    if ka in ("dev", "devout") or kb in ("dev", "devout"):
        return DEV
    if ka == "devx" or kb == "devx":
        # `x.cuda() + 1`: arithmetic makes it a tensor (a module cannot be added to).
        return DEV if {ka, kb} <= {"devx", "py", "dev", "host", "tensor"} else UNKNOWN
    if ka == "host" and kb in ("host", "py") or kb == "host" and ka == "py":
        return HOST
    if ka == "py" and kb == "py":
        return PY
    if (ka == "numpy" and kb in ("numpy", "py")) or (kb == "numpy" and ka == "py"):
        return NUMPY
    if ka == "tensor" or kb == "tensor":
        return TENSOR if {ka, kb} <= {"tensor", "host", "py"} else UNKNOWN
    return UNKNOWN
