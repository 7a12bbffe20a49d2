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
    pageable (made by torch.tensor, from_numpy, a factory without pin_memory).
    A tuple's value may also know its parts, position by position (``parts``),
    and a dict's the value of each constant key (``items``; a dict, iterated,
    gives its keys). ``container``: a list, tuple or dict made in the code or
    annotated (not a module's output, which may be a tensor). ``dims``: 0 for a
    tensor known to have no dimensions (``t.argmax()``, ``order[0]`` of a
    vector), 1 for a vector (``scores.argsort()``), else None. ``device``:
    what a value names when handed over as a device ("cpu" or "dev": the
    literal ``"cuda"``, ``torch.device("cuda")``); "cpu" for a module or a
    parameter shown on the host (:data:`HOSTMOD`, :data:`HOST_PARAM`), else None. ``cls``: the
    name of this file's class a value is an instance of. ``opaque``: a
    module's output read from a call of a value the file does not know
    (``make(x)``): no attribute of it is a tensor by that alone."""

    __slots__ = ("kind", "boolean", "pageable", "qual", "parts", "items", "container", "dims", "device", "cls",
                 "opaque")

    def __init__(self, kind: str, boolean: bool = False, pageable: bool = False, qual: Optional[str] = None,
                 parts: Optional[tuple] = None, items: Optional[dict] = None, container: bool = False,
                 dims: Optional[int] = None, device: Optional[str] = None, cls=None, opaque: bool = False):
        self.kind = kind
        self.boolean = boolean
        self.pageable = pageable
        self.qual = qual
        self.parts = parts
        self.items = items
        self.container = container
        self.dims = dims
        self.device = device
        self.cls = cls
        self.opaque = opaque

    def __eq__(self, other) -> bool:
        return isinstance(other, Val) and (self.kind, self.boolean, self.pageable, self.parts, self.dims,
                                           self.device, self.cls, self.opaque) == (
            other.kind, other.boolean, other.pageable, other.parts, other.dims, other.device, other.cls,
            other.opaque)

    def __hash__(self) -> int:
        return hash((self.kind, self.boolean, self.pageable))

    def __repr__(self) -> str:
        flags = ("+bool" if self.boolean else "") + ("+pageable" if self.pageable else "")
        parts = "" if self.parts is None else "(" + ", ".join(map(repr, self.parts)) + ")"
        return f"Val({self.kind}{flags}{parts})"

    def with_bool(self, b: bool) -> "Val":
        return self if self.boolean == b else Val(self.kind, b, self.pageable, self.qual, dims=self.dims)

    def with_dims(self, dims: Optional[int]) -> "Val":
        """The same value with `dims` known (see the class's doc)."""
        return self if self.dims == dims else Val(self.kind, self.boolean, self.pageable, dims=dims)


#: Kinds. DEV: a device tensor. DEVX: moved to a device, tensor or module unknown.
#: DEVOUT: what a module on a device returned (a tensor, tuple, dict or output
#: object of device tensors), or a container holding device values. HOST: a host
#: tensor. TENSOR: a tensor whose device the file does not show. TENSORS: the
#: same for a container or a module's output (DEVOUT's twin). EITHER: a tensor
#: on the host on some path (host evidence met another tensor where paths join).
#: NUMPY, PY (Python scalar/str/dict/...), PYLIST (a Python list or range: an
#: index that uploads), PYMOD (an imported module, function or constant), CLASS,
#: OBJ (an instance of a class, a module maybe), DEVMOD (a module moved to a
#: device), DEVSTATE (its state_dict), CPUDEV (the host as a device), DEVICE
#: (some device object), DEVLIKE (the device of an unplaced value), OTHER, UNKNOWN.
KINDS = ("dev", "devx", "devout", "host", "tensor", "tensors", "either", "numpy", "py", "pylist", "pymod",
         "class", "obj", "devmod", "devstate", "cpudev", "device", "devlike", "other", "unknown")

DEV = Val("dev")
DEV_BOOL = Val("dev", boolean=True)
DEVX = Val("devx")
DEVOUT = Val("devout")
HOST = Val("host")
HOST_PAGEABLE = Val("host", pageable=True)
TENSOR = Val("tensor")
TENSORS = Val("tensors")
EITHER = Val("either")
NUMPY = Val("numpy")
PY = Val("py")
PYLIST = Val("pylist")
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
NONE = Val("unknown")  # `x = None`: nothing yet (compared by identity)

#: A module shown on the host: a torch.nn layer made here without `device=`, or
#: any module moved with `.cpu()` / `.to("cpu")` (its parameters and state are
#: host tensors, its output is where its inputs are).
HOSTMOD = Val("obj", device="cpu")
#: A parameter made here of a host tensor (`nn.Parameter(torch.zeros(n))`): a
#: host tensor until its module is moved (see .walk: `__init__` and what it calls).
HOST_PARAM = Val("host", device="cpu")
#: What a host module's `parameters()`, `buffers()`, `state_dict()`, `.values()`
#: give: host tensors (`for p in m.parameters()`, `sd["w"]`)...
HOST_SEQ = Val("host", container=True)
#: ...and its `named_parameters()`, `state_dict().items()`: (name, host tensor)
#: pairs (compared by identity: :meth:`.expressions.Evaluator.element`).
HOST_PAIRS = Val("host", container=True)
HOST_PAIR = Val("py", parts=(Val("py"), HOST), container=True)


def host_module(v: Val) -> bool:
    """A module shown on the host (:data:`HOSTMOD`)."""
    return v.kind == "obj" and v.device == "cpu"


A_LIST = Val("py", qual="builtins.list")  # a Python list of values the file does not show (`list(x)`)
SELF = Val("obj", qual=None)  # the `self` parameter of a method (compared by identity)
FUNC = Val("other", qual=None)  # a function defined at the module's top level (compared by identity)
LOCAL_FUNC = Val("other", qual=None)  # a function defined in the function walked (compared by identity)

#: What an annotation (:func:`.vocabulary.annot_kind`) makes a parameter or a name.
ANNOTATED = {"tensor": TENSOR, "tensors": Val("tensors", container=True),
             "dict": Val("tensors", items={}, container=True), "pylist": PYLIST, "numpy": NUMPY}

DEVICE_KINDS = frozenset({"dev", "devx", "devout", "devmod", "devstate"})
TENSORISH = frozenset({"dev", "devx", "devout", "host", "tensor", "either"})
ON_DEVICE = frozenset({"dev", "devx", "devout"})
#: Not a tensor, evidently: a method call on one of these is no transfer site.
NOT_A_RECEIVER = frozenset({"numpy", "py", "pylist", "pymod", "class", "cpudev", "device", "devlike"})
#: What the gpu-first reading takes to be on the accelerator: a tensor the file
#: does not place, and a container or output of such tensors.
GPU_FIRST = {"tensor": DEV, "tensors": DEVOUT}


def is_dev(v: Val) -> bool:
    """A device tensor, evidently (the only value implicit rules report)."""
    return v.kind == "dev"


#: What an unknown path leaves standing where paths meet, in the gpu-first
#: reading: a value the code shows on a device (only host evidence cancels it)...
KEPT_BY_UNKNOWN = frozenset({"dev", "devx", "devout", "devmod"})
#: ...and what a path where the name is None or unbound leaves: any tensor too
#: (`best = None` before the loop that sets it); an unknown value of another
#: path may be numpy (`x.permute(...) if is_torch else x.transpose(...)`).
KEPT_BY_NONE = KEPT_BY_UNKNOWN | {"tensor", "tensors"}


def join(a: Val, b: Val, gpu_first: bool = False) -> Val:
    """What a name is after two paths meet (if/else, a loop run or not).

    Host evidence wins: a host tensor met by any other tensor is EITHER (no
    device value, in either reading). A device value met by a Python value is
    no device value (see :func:`join_loop` for accumulators). In the gpu-first
    reading (`gpu_first`) an unknown path (``x = None`` on one branch, a value
    nothing places) cancels nothing: only evidence does."""
    if a == b:
        return a
    ka, kb = a.kind, b.kind
    if gpu_first and (ka == "unknown" or kb == "unknown"):
        other, unknown = (b, a) if ka == "unknown" else (a, b)
        if other.kind in (KEPT_BY_NONE if unknown is NONE else KEPT_BY_UNKNOWN):
            return other
    if ka == "obj" and kb == "obj" and a.cls is not None and b.cls is not None and a.cls[0] == b.cls[0]:
        return Val("obj", cls=(a.cls[0], a.cls[1] | b.cls[1]))  # an instance of this file's class: all its calls
    if ka == kb:
        parts = None
        if a.parts is not None and b.parts is not None and len(a.parts) == len(b.parts):
            parts = tuple(join(x, y, gpu_first) for x, y in zip(a.parts, b.parts))
        return Val(ka, a.boolean and b.boolean, a.pageable and b.pageable, parts=parts,
                   container=a.container and b.container, opaque=a.opaque or b.opaque)
    s = {ka, kb}
    if s <= TENSORISH:
        if "host" in s or "either" in s:
            return EITHER
        if s == {"dev", "devx"}:
            return DEVX
        return TENSOR
    if s <= {"py", "pylist"}:
        return PY
    if s <= {"devout", "tensors"}:
        return TENSORS
    return UNKNOWN


def join_loop(before: Val, after: Val, gpu_first: bool = False) -> Val:
    """A name before a loop met by the same name after its body: `total = 0`
    then `total += loss` in the loop is an accumulator of device values (the
    loop is taken to run), else as :func:`join`."""
    if before.kind == "py" and after.kind == "dev":
        return after
    if before.parts == () and before.container and after.container and after.kind in ("devout", "tensors"):
        return after  # keep = [] then keep.append(t) in the loop: a list of tensors
    return join(before, after, gpu_first)


def combine(a: Val, b: Val) -> Val:
    """The value of a binary op on `a` and `b` (a device operand wins)."""
    ka, kb = a.kind, b.kind
    if ka in ("dev", "devout") or kb in ("dev", "devout"):
        return DEV
    if ka == "devx" or kb == "devx":
        # `x.cuda() + 1`: arithmetic makes it a tensor (a module cannot be added to).
        return DEV if {ka, kb} <= {"devx", "py", "dev", "host", "tensor", "either"} else UNKNOWN
    if ka == "either" or kb == "either":
        return EITHER if {ka, kb} <= {"either", "host", "tensor", "py", "unknown"} else UNKNOWN
    if ka == "host" and kb in ("host", "py", "unknown") or kb == "host" and ka in ("py", "unknown"):
        return HOST  # a host tensor with an unknown scalar stays on the host
    if ka in ("py", "pylist") and kb in ("py", "pylist"):
        return PYLIST if "pylist" in (ka, kb) else PY  # [0] + idx, idx * 2
    if (ka == "numpy" and kb in ("numpy", "py")) or (kb == "numpy" and ka == "py"):
        return NUMPY
    if ka == "tensor" or kb == "tensor":
        # a tensor op with a value nothing places is still a tensor op
        return TENSOR if {ka, kb} <= {"tensor", "host", "py", "unknown"} else UNKNOWN
    return UNKNOWN
