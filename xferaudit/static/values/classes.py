"""This file's classes, as their instances are used elsewhere in the file.

``top1 = AverageMeter("Acc@1")`` makes an instance of a class of this file
(a :class:`~.kinds.Val` of kind ``obj`` whose ``cls`` is ``(name, calls)``).
What its attributes hold depends on what its methods were given::

    top1.update(acc1[0], n)   # acc1[0] a device value: self.val, self.sum, self.avg become device values
    return top1.avg           # so validate() returns a device value

:class:`Classes` answers for such instances, seeded from the calls of their
methods: an instance's own calls walked so far in the function (``calls``),
else every call of the class's methods in the file (as the first round of
the module's walk saw them: :attr:`Classes.frozen`). The class's own methods
are walked, in the second round, with the attributes the file's calls give
them (``fmtstr.format(**self.__dict__)`` in ``__str__`` formats device values).
Methods and properties called on an instance give what they return.
"""

from __future__ import annotations

import ast
from typing import Any, Callable, Optional

from .kinds import KEPT_BY_NONE, OTHER, UNKNOWN, Val, join

#: Argument kinds that seed a method's parameter.
_SEEDING = frozenset({"dev", "devx", "devout", "devmod", "tensor", "tensors", "host"})


def is_property(fn: ast.AST) -> bool:
    """The method is a property (``@property``, ``@functools.cached_property``)."""
    for d in fn.decorator_list:
        name = d.id if type(d) is ast.Name else d.attr if type(d) is ast.Attribute else ""
        if name in ("property", "cached_property"):
            return True
    return False


class Classes:
    """The top-level classes of one file and what their instances hold.

    `plain(cls)` gives a class's attributes from its own methods alone;
    `walk(fn, attrs, methods, seeds, collect)` walks one method (collecting
    what it binds to ``self.*``, or the values it returns)."""

    def __init__(self, tree: ast.Module, plain: Callable, walk: Callable) -> None:
        self.defs = {st.name: st for st in tree.body if type(st) is ast.ClassDef}
        self.methods = {name: {fn.name: fn for fn in cls.body if type(fn) in (ast.FunctionDef, ast.AsyncFunctionDef)}
                        for name, cls in self.defs.items()}
        self.plain: Any = plain
        self.walk: Any = walk
        self.seen: dict = {}  # class -> {(method, argument kinds)}: every call this round read
        self.frozen: dict = {}  # the same, as the first round left it (the second round reads it)
        self.states: dict = {}
        self.results: dict = {}
        self.busy: set = set()

    def __contains__(self, name: str) -> bool:
        return name in self.defs

    def instance(self, name: str, node: ast.Call, ev) -> Val:
        """`name(...)`: an instance, seeded by what its ``__init__`` is given."""
        calls: frozenset = frozenset()
        if "__init__" in self.methods[name]:
            kinds = _kinds(node, ev)
            if kinds:
                self.seen.setdefault(name, set()).add(("__init__", kinds))
                calls = frozenset({("__init__", kinds)})
        return Val("obj", cls=(name, calls))

    def called(self, inst: Val, m: str, node: ast.Call, ev) -> Val:
        """`inst.m(...)`: recorded as a call of the class's method; what it returns."""
        name, calls = inst.cls
        fn = self.methods[name].get(m)
        if fn is None:
            return UNKNOWN  # a base class's method
        kinds = _kinds(node, ev)
        if kinds is None:
            return UNKNOWN
        if kinds:
            self.seen.setdefault(name, set()).add((m, kinds))
        return self._returns(name, calls, fn, kinds)

    def after_call(self, inst: Val, m: str, node: ast.Call, ev) -> Val:
        """The instance after the statement `inst.m(...)`: its calls grown by this one."""
        name, calls = inst.cls
        kinds = _kinds(node, ev) if m in self.methods[name] else None
        if not kinds:
            return inst
        return Val("obj", cls=(name, calls | {(m, kinds)}))

    def attr(self, inst: Val, a: str) -> Val:
        """`inst.a`: what the class's methods bind to it (seeded), or what a property returns."""
        name, calls = inst.cls
        fn = self.methods[name].get(a)
        if fn is not None:
            return self._returns(name, calls, fn, ()) if is_property(fn) else OTHER
        if a == "__dict__":
            return attributes(self.state(name, calls))
        return self.state(name, calls).get(a, UNKNOWN)

    def state(self, name: str, calls: frozenset) -> dict:
        """What `self.<attr>` holds in an instance of `name` whose methods got
        `calls` (none seen: the file's calls of them)."""
        calls = calls or frozenset(self.frozen.get(name, ()))
        key = (name, calls)
        out = self.states.get(key)
        if out is not None:
            return out
        plain = self.plain(self.defs[name])
        if not calls or key in self.busy:
            return plain
        self.busy.add(key)
        try:
            per_method: dict = {}
            for m, kinds in calls:
                fn = self.methods[name].get(m)
                if fn is None:
                    continue
                params = [p.arg for p in fn.args.posonlyargs + fn.args.args][1:]
                seeds = per_method.setdefault(m, {})
                for p, k in zip(params, kinds):
                    if k in _SEEDING:
                        old = seeds.get(p)
                        seeds[p] = Val(k) if old is None or k in ("dev", "devout") else old  # a device value wins
            out = dict(plain)
            for m, seeds in per_method.items():
                if not seeds:
                    continue
                env = self.walk(self.methods[name][m], plain, self.methods[name], seeds, True)
                for k, v in env.items():
                    if type(k) is tuple and v.kind in KEPT_BY_NONE:
                        out[k[1]] = v  # (an attribute updated with a device value holds one after the call)
        finally:
            self.busy.discard(key)
        self.states[key] = out
        return out

    def changed(self) -> bool:
        """The calls seen give some class attributes its own methods alone do not."""
        for name, calls in self.seen.items():
            plain = self.plain(self.defs[name])
            state = self.state(name, frozenset(calls))
            if any(v.kind in KEPT_BY_NONE and plain.get(a) != v for a, v in state.items()):
                return True
        return False

    def _returns(self, name: str, calls: frozenset, fn: ast.AST, kinds: tuple) -> Val:
        key = (name, calls, fn.name, kinds)
        out = self.results.get(key)
        if out is not None:
            return out
        if key in self.busy:
            return UNKNOWN
        self.busy.add(key)
        try:
            params = [p.arg for p in fn.args.posonlyargs + fn.args.args][1:]
            seeds = {p: Val(k) for p, k in zip(params, kinds) if k in _SEEDING} or None
            returned = self.walk(fn, self.state(name, calls), self.methods[name], seeds, False)
        finally:
            self.busy.discard(key)
        vals = [v for v in returned if v is not None]
        out = vals[0] if vals else UNKNOWN
        for v in vals[1:]:
            out = join(out, v)
        self.results[key] = out
        return out

    def next_round(self) -> None:
        """The second round reads the calls the first one saw."""
        self.frozen = {k: set(v) for k, v in self.seen.items()}
        self.states.clear()
        self.results.clear()


def attributes(attrs: dict) -> Val:
    """``self.__dict__``: a dict of the instance's attributes (device values
    in it make it a container of them)."""
    out = "py"
    for v in attrs.values():
        if v.kind in ("dev", "devout"):
            return Val("devout", container=True)
        if v.kind in ("tensor", "tensors"):
            out = "tensors"
    return Val(out, container=True)


def _kinds(node: ast.Call, ev) -> Optional[tuple]:
    """The kinds of a call's positional arguments (None with ``*args``, which
    this reading does not map to parameters; keywords seed nothing)."""
    if any(type(a) is ast.Starred for a in node.args):
        return None
    return tuple(ev.value(a).kind for a in node.args)
