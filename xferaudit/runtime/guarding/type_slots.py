"""torch.Tensor stays no sequence while the guard hooks its indexing.

Why: a Python ``__getitem__`` set on a class fills two C slots, the mapping
one (``t[i]``) and the sequence one. torch.Tensor has only the mapping one, so
to C code a tensor is no sequence (``PySequence_Check`` is false). Once the
guard's hook was set, it was one, for good (taking the hook off leaves the
sequence slot filled), and ``torch.tensor([a, b])`` of 0-dim tensors raised
``TypeError: len() of a 0-d tensor``: PyTorch's C++ took each element for a
list to measure. The guard must not change what a program does, so
:class:`SequenceSlots` keeps the class's sequence slots (``sq_item``,
``sq_ass_item``) as they were before any hook, after each install and
removal; indexing still reaches the hook through the mapping slot.

Only on CPython with the GIL, where the layout of a type object is known; the
layout is checked against the class itself (its name and where its slot table
lies) before anything is written, else nothing is done.
"""

from __future__ import annotations

import ctypes
import sys
import sysconfig
from typing import Any, Optional

_WORD = ctypes.sizeof(ctypes.c_void_p)
#: PyTypeObject: ob_refcnt, ob_type, ob_size, tp_name, tp_basicsize, tp_itemsize,
#: tp_dealloc, tp_vectorcall_offset, tp_getattr, tp_setattr, tp_as_async, tp_repr,
#: tp_as_number, tp_as_sequence (CPython 3.8 on, builds with the GIL)
_TP_NAME = 3 * _WORD
_TP_AS_SEQUENCE = 13 * _WORD


class _SequenceMethods(ctypes.Structure):
    _fields_ = [("sq_length", ctypes.c_void_p), ("sq_concat", ctypes.c_void_p), ("sq_repeat", ctypes.c_void_p),
                ("sq_item", ctypes.c_void_p), ("was_sq_slice", ctypes.c_void_p),
                ("sq_ass_item", ctypes.c_void_p)]


def _methods(cls: type) -> Optional[_SequenceMethods]:
    """`cls`'s sequence slot table, where the layout checks out (a heap type
    embeds its table: it lies inside the type object)."""
    if sys.implementation.name != "cpython" or sysconfig.get_config_var("Py_GIL_DISABLED"):
        return None
    try:
        name = ctypes.c_char_p.from_address(id(cls) + _TP_NAME).value
        table = ctypes.c_void_p.from_address(id(cls) + _TP_AS_SEQUENCE).value
    except (ValueError, OSError):  # pragma: no cover - an unreadable address
        return None
    if name is None or name.decode("utf-8", "replace").rpartition(".")[2] != cls.__name__:
        return None
    if not table or not id(cls) < table < id(cls) + type(cls).__basicsize__:
        return None
    return _SequenceMethods.from_address(table)


class SequenceSlots:
    """`cls`'s sequence slots as they are now, put back by :meth:`restore`, in
    `cls` and in its subclasses (``nn.Parameter``, a tensor subclass of a
    library's or the user's: setting a slot on a class sets it in every class
    inheriting it) that take them from `cls`: those with no ``__getitem__``
    (``__setitem__``) of their own, or of a class between them and `cls`."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.table = _methods(cls)
        self.saved = (self.table.sq_item, self.table.sq_ass_item) if self.table is not None else None

    def restore(self) -> None:
        if self.table is None:
            return
        item, assign = self.saved
        self.table.sq_item, self.table.sq_ass_item = item, assign
        seen: set = set()
        todo = list(type.__subclasses__(self.cls))
        while todo:
            sub = todo.pop()
            if sub in seen:
                continue
            seen.add(sub)
            todo.extend(type.__subclasses__(sub))
            own_get = own_set = False
            for k in sub.__mro__:
                if k is self.cls:
                    break
                own_get = own_get or "__getitem__" in k.__dict__
                own_set = own_set or "__setitem__" in k.__dict__
            table = None if own_get and own_set else _methods(sub)
            if table is not None:
                if not own_get:
                    table.sq_item = item
                if not own_set:
                    table.sq_ass_item = assign


#: the slots of each class as the first guard found them (before any hook of ours)
_FIRST: dict = {}


def first_slots(cls: Any) -> SequenceSlots:
    got = _FIRST.get(cls)
    if got is None:
        got = _FIRST[cls] = SequenceSlots(cls)
    return got


__all__ = ["SequenceSlots", "first_slots"]
