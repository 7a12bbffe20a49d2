"""The value layer's walk of a module: its top-level code first (the globals
functions see), then each function and method it is asked for.

In a class, every method is walked once to learn what each ``self.attr`` is
(joined over all its assignments), then again with that known. Within a
function the walk is :class:`.flow.Walker`'s; a function whose callers or
framework place its parameters (:mod:`.summaries`) is walked again with them
known. The hook is called on every statement with the
:class:`~.expressions.Evaluator` in force before it.
"""

from __future__ import annotations

import ast
from typing import Optional

from ..front.nodes import walk as walk_nodes
from .classes import Classes
from .expressions import Evaluator, Resolver
from .flow import Hook, Walker, bound_names
from .kinds import ANNOTATED, DEVX, FUNC, OBJ, OTHER, SELF, TENSOR, UNKNOWN, Val, host_module, join
from .parametrize import filled, module_lists
from .placement import DTYPE
from .calls import HOST_DEVICE
from .summaries import Returns, call_seeds, framework, framework_seeds, host_class, is_module_class, summary
from .uses import Uses, masked_params
from .vocabulary import annot_kind, import_val


def module_imports(tree: ast.Module, qualname: Resolver) -> dict:
    """Module-level names bound by import statements -> Val, their qualified
    names as the file's resolver reads them (`qualname`, asked at the line after
    each import: a later import of the same name wins, as at run time)."""
    out: dict = {}
    for st in tree.body:
        if not isinstance(st, (ast.Import, ast.ImportFrom)):
            continue
        for a in st.names:
            if a.name == "*":
                continue
            if isinstance(st, ast.Import):
                name, kind = a.asname or a.name.split(".", 1)[0], "pymod"
            else:
                name, kind = a.asname or a.name, import_val(a.name).kind
            q = qualname(ast.Name(id=name, ctx=ast.Load(), lineno=st.end_lineno + 1, col_offset=0))
            out[name] = Val(kind, qual=q)
    return out




def _params(fn, method: bool) -> dict:
    """What each parameter of `fn` is on entry: `self`, a tensor by its annotation, else unknown."""
    env: dict = {}
    a = fn.args
    positional = a.posonlyargs + a.args if a.posonlyargs else a.args
    first_default = len(positional) - len(a.defaults)  # (defaults belong to the last positionals)
    i = 0
    for params, defaults, start in ((positional, a.defaults, first_default), (a.kwonlyargs, a.kw_defaults, 0)):
        for j, p in enumerate(params):
            if i == 0 and method and p.arg == "self":
                env["self"] = SELF
            elif p.annotation is None:
                env[p.arg] = UNKNOWN
            else:
                k = annot_kind(p.annotation)  # x: Tensor, masks: List[Tensor]
                d = defaults[j - start] if j >= start else None
                if type(d) is ast.Constant and d.value is not None:
                    k = None  # output_attentions: Tensor | None = False: the default says what it is
                env[p.arg] = ANNOTATED.get(k, UNKNOWN)
            i += 1
    for p in (a.vararg, a.kwarg):
        if p is not None:
            env[p.arg] = UNKNOWN
    return env


def analyse(tree: ast.Module, qualname: Resolver, hook: Optional[Hook] = None, gpu_first: bool = False,
            default_device: str = "cpu", imports: Optional[dict] = None, uses: Optional[Uses] = None,
            imported: Optional[dict] = None) -> None:
    """Walk `tree`: module-level code, then every function, class and method,
    calling `hook` on each statement with the environment before it.

    `gpu_first`: the reading in which a tensor the file does not place is on
    the accelerator (the evaluator reads device arguments so; the rules read
    the values so). `default_device`: where factories without ``device=`` put
    their results ("cpu"; "unknown" when the file calls ``torch.set_default_device``).
    `imports`: :func:`module_imports` of the tree, when the caller has it.
    `uses`: the file's tensor-only uses (:class:`.uses.Uses`): a parameter
    they show is a tensor is one from the function's start. `imported`: the
    names the file calls the project's placing helpers by (:mod:`.helpers`).
    """
    module = _Module(tree, qualname, hook, gpu_first, default_device, imports, uses, imported)
    try:
        module.run()
    finally:
        module.close()


class _Module:
    """One walk of a module: what its functions and classes share."""

    def __init__(self, tree: ast.Module, qualname: Resolver, hook: Optional[Hook], gpu_first: bool,
                 default_device: str, imports: Optional[dict] = None, uses: Optional[Uses] = None,
                 imported: Optional[dict] = None) -> None:
        self.tree = tree
        self.imported = imported or {}
        self.uses = uses
        self.qualname = qualname
        self.hook = hook
        self.gpu_first = gpu_first
        self.default_device = default_device
        self.imports = imports if imports is not None else module_imports(tree, qualname)
        self.globals: dict = {}
        self.calls: dict = {}
        self.summaries = Returns({}, self._summary_walk)
        self.defs: dict = {}  # id(def) -> (its local names, its parameters' values, walked as a method)
        self.module_classes: set = set()  # names of this file's classes that are torch modules
        self.reported: set = set()  # ids of the module functions walked reporting
        self.plain: dict = {}  # id(class) -> what its own methods bind to self.* (phase 1 of klass)
        self.classes = Classes(tree, self.plain_attrs, self._class_walk)
        self.lists: Optional[dict] = None  # (module_lists)
        self.calls_by_attr: Optional[dict] = None  # (attr_calls)

    def attr_calls(self) -> dict:
        """Attribute name -> how many calls of it (`x.name(...)`) the file makes, counted once."""
        if self.calls_by_attr is None:
            counts: dict = {}
            for node in walk_nodes(self.tree):
                if type(node) is ast.Call and type(node.func) is ast.Attribute:
                    counts[node.func.attr] = counts.get(node.func.attr, 0) + 1
            self.calls_by_attr = counts
        return self.calls_by_attr

    def module_lists(self) -> dict:
        """The module's names bound to list displays (:func:`.parametrize.module_lists`), read once."""
        if self.lists is None:
            self.lists = module_lists(self.tree)
        return self.lists

    def close(self) -> None:
        """Cut the walkers' hold on this module's bound methods (a cycle): the
        file's tree and values are then freed by their counts when the walk
        ends, not left to the cycle collector, which would walk them all."""
        self.summaries.walk = self.classes.walk = self.classes.plain = None

    def evaluator(self, globals_env: dict, attrs: dict) -> Evaluator:
        ev = Evaluator(self.qualname, self.imports, globals_env, attrs)
        ev.gpu_first = self.gpu_first
        ev.default_device = self.default_device
        ev.summaries = self.summaries
        ev.classes = self.classes
        ev.imported = self.imported
        return ev

    def run(self) -> None:
        self._round()
        if self.classes.seen and self.classes.changed():
            # calls of this file's classes' methods give their instances device
            # values: walked again, every instance and class method knowing it
            self.classes.next_round()
            self.summaries.done.clear()
            self.reported.clear()
            self.calls.clear()
            self._round()

    def _round(self) -> None:
        tree = self.tree
        # Module-level code first: its names are the globals functions see.
        mod_ev = self.evaluator({}, {})
        defs: list = []

        def later(fn, ev):  # module-level functions wait for the module's names
            defs.append(fn)

        mod_ev.calls = self.calls
        Walker(mod_ev, self.hook, later).body([s for s in tree.body if not isinstance(s, ast.ClassDef)])
        globals_env = self.globals = {k: v for k, v in mod_ev.env.items() if isinstance(k, str)}
        for fn in defs:
            if globals_env.get(fn.name) is OTHER:
                globals_env[fn.name] = FUNC
        self.summaries.functions = {fn.name: fn for fn in defs if globals_env.get(fn.name) is FUNC}
        for fn in defs:
            if id(fn) not in self.reported:
                self._report(fn)
        for st in tree.body:
            if isinstance(st, ast.ClassDef):
                self.klass(st, st.name)
        # classes nested under if/try at module level are rare: skipped
        # A function of this module called only with device values for a parameter
        # (evaluate(model, ...) with model moved to a device): walked again with it known.
        # (a walk with seeds records its own calls again, over what the first walk recorded of the same
        # calls: helper(a) calling inner(a) seeds inner in turn, a few levels deep)
        done: set = set()
        for _ in range(3):
            walked = False
            for name, sites in list(self.calls.items()):
                fn = self.summaries.functions.get(name)
                if fn is None or not sites:
                    continue
                seeds = call_seeds(fn, sites)
                key = (name, tuple(sorted((p, v.kind, v.device) for p, v in seeds.items())))
                if seeds and key not in done:
                    done.add(key)
                    walked = True
                    self.function(fn, {}, self.hook, method=False, where=fn.name, seeds=seeds, calls=self.calls,
                                  seeded=f"every call of {fn.name}() in this file passes a device value")
            if not walked:
                break

    def _report(self, fn) -> list:
        """The reporting walk of a module function, which gives what it returns
        too (remembered: a later call of it needs no walk of its own)."""
        self.reported.add(id(fn))
        returned: list = []
        self.function(fn, {}, self.hook, method=False, where=fn.name, calls=self.calls, returned=returned)
        self.summaries.done.setdefault((id(fn),), summary(returned, self.gpu_first, fn))
        return returned

    def _summary_walk(self, fn, caller: Evaluator, seeds: Optional[dict]) -> list:
        """The values `fn`'s return statements give (a method: in its caller's
        class), its parameters in `seeds` as given. A module function not yet
        walked is walked reporting, once for both."""
        if seeds is None and id(fn) not in self.reported and self.summaries.functions.get(fn.name) is fn:
            return self._report(fn)
        returned: list = []
        if fn.name in caller.methods and caller.methods[fn.name] is fn:
            self.function(fn, caller.class_attrs, None, method=True, methods=caller.methods, returned=returned,
                          seeds=seeds)
        else:
            self.function(fn, {}, None, method=False, returned=returned, seeds=seeds)
        return returned

    def _class_walk(self, fn, attrs: dict, methods: dict, seeds: Optional[dict], collect: bool):
        """A method of a class of this file, walked for :class:`.classes.Classes`:
        what it binds to ``self.*`` (`collect`), else the values it returns."""
        if collect:
            return self.function(fn, attrs, None, method=True, collect=True, seeds=seeds, methods=methods)
        returned: list = []
        self.function(fn, attrs, None, method=True, methods=methods, returned=returned, seeds=seeds)
        return returned

    def plain_attrs(self, cls: ast.ClassDef) -> dict:
        """What each `self.attr` of `cls` is, from its methods' assignments (joined)."""
        attrs = self.plain.get(id(cls))
        if attrs is None:
            attrs = self.plain[id(cls)] = self._attrs(cls, cls.name)
        return attrs

    def klass(self, cls: ast.ClassDef, where: str) -> None:
        self._class_body(cls, where)
        methods = [s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
        by_name = {fn.name: fn for fn in methods}
        attrs = self.plain_attrs(cls) if where == cls.name else self._attrs(cls, where)
        if cls.name in self.classes and where == cls.name:
            attrs = self.classes.state(cls.name, frozenset())  # (the second round: as the file's calls leave them)
        # 2: the methods again, reporting, with the attributes known
        contract = framework(cls, self.qualname)
        module = is_module_class(cls, self.qualname, self.module_classes)
        if module:
            self.module_classes.add(cls.name)
        host = host_class(cls)
        # parameters and layers made on the host: so only in `__init__` and what it alone calls (they
        # run before the instance can be moved); elsewhere as before (modules, places unknown)
        init = _init_only(methods, by_name, self.attr_calls) if any(_made_on_host(v) for v in attrs.values()) \
            else ()
        later_attrs = {k: OBJ if _made_on_host(v) else v for k, v in attrs.items()} if init else attrs
        for fn in methods:
            self.function(fn, attrs if fn.name in init else later_attrs, self.hook, method=True,
                          where=f"{where}.{fn.name}", calls=self.calls,
                          seeds=framework_seeds(contract, fn), methods=by_name, module=module,
                          seeded="the framework hands it over on the module's device", proven=host)
        for st in cls.body:
            if isinstance(st, ast.ClassDef):
                self.klass(st, f"{where}.{st.name}")

    def _attrs(self, cls: ast.ClassDef, where: str) -> dict:
        """Phase 1 of a class: what each `self.attr` is, from every method's assignments (joined)."""
        methods = [s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]
        attrs: dict = {fn.name: OTHER for fn in methods}  # self.method(...) is no module call
        body_ev = None
        for st in cls.body:  # mode_dict = {"min": torch.lt, "max": torch.gt}: what self.mode_dict is
            if type(st) is ast.Assign and len(st.targets) == 1 and type(st.targets[0]) is ast.Name:
                body_ev = body_ev or self.evaluator(self.globals, {})
                body_ev.memo.clear()
                attrs[st.targets[0].id] = body_ev.value(st.value)
        for fn in methods:
            if not _stores_self(fn.body):
                continue  # binds no attribute of the instance: nothing to learn
            env = self.function(fn, {}, None, method=True, collect=True, where=f"{where}.{fn.name}")
            for k, v in env.items():
                if isinstance(k, tuple):
                    attrs[k[1]] = join(attrs[k[1]], v) if k[1] in attrs else v
        return attrs

    def _local_seeds(self, fn, local: dict, calls: dict, attrs: dict, hook: Hook, where: str) -> None:
        """A function defined in `fn` whose every call (`calls`: name -> {id(call):
        [argument values]}) passes a device value for a parameter, and whose name
        `fn` uses only to call it (not handed on as a callback): walked again
        reporting, knowing it (``should_stop(sequences[-1], eos)``)."""
        for name, sites in calls.items():
            got = local.get(name)
            if got is None or not sites:
                continue
            inner, closure = got
            seeds = call_seeds(inner, sites)
            if seeds and _loads(fn, name) == len(sites):
                self.function(inner, attrs, hook, method=False, outer=closure, where=f"{where}.{name}", seeds=seeds,
                              seeded=f"every call of {name}() in {fn.name}() passes a device value")

    def _used(self, fn, open_: list) -> dict:
        """The parameters of `fn` that its uses show are tensors (:mod:`.uses`):
        name -> (line, the use)."""
        if self.uses is None:
            return {}
        return self.uses.of(fn, open_) if open_ else {}

    def _class_body(self, cls: ast.ClassDef, where: str) -> None:
        """The class body's own statements (``scale = float(t)``), run once when
        the class is made, with the module's names: their reads are sites too."""
        body = [s for s in cls.body if not isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))]
        if not body or self.hook is None:
            return
        ev = self.evaluator(dict(self.globals), {})
        ev.where = where
        Walker(ev, self.hook, lambda fn, outer_ev: None).body(body)

    def function(self, fn, attrs: dict, hook: Optional[Hook], method: bool, collect: bool = False,
                 outer: Optional[dict] = None, where: str = "<module>", calls: Optional[dict] = None,
                 seeds: Optional[dict] = None, methods: Optional[dict] = None,
                 returned: Optional[list] = None, module: bool = False, seeded: str = "",
                 proven: bool = False, masked: Optional[dict] = None) -> dict:
        """Walk one def; the environment after it (with `collect`: only what it
        binds to ``self.*``). `returned` collects its return values. `masked`:
        parameters known to be device values by a mask that indexes them
        (:func:`.uses.masked_params`), from an earlier walk of the same def."""
        ev = self.evaluator(self.globals if outer is None else {**self.globals, **outer}, attrs)
        ev.where = where
        ev.calls = calls
        ev.methods = methods or {}
        ev.self_module = module
        ev.returned = returned
        if proven:
            ev.gpu_first = False  # a processor's, a dataset's method: read proven (.summaries.host_class)
        known = self.defs.get(id(fn))
        if known is None or known[2] != method:  # the same def is walked up to three times: read it once
            names = bound_names(fn.body) | {p.arg for p in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs}
            params = _params(fn, method)
            if fn.decorator_list:  # @pytest.mark.parametrize("wtype", [torch.float32, ...]): a dtype
                params.update((p, DTYPE if what == "dtype" else HOST_DEVICE)
                              for p, what in filled(fn, self.module_lists()).items())
            open_ = _open_params(fn, params)
            used = self._used(fn, open_)
            star = {a.arg for a in (fn.args.vararg, fn.args.kwarg) if a is not None}  # (a tuple, a dict: no
            entered = [p for p in open_ if p not in star]  # mask indexes them; the rest start at `ev.entry`)
            known = self.defs[id(fn)] = (names, params, method, used, entered)
        ev.local_names = known[0]
        ev.function = fn
        ev.env.update(known[1])
        if known[3]:  # parameters that the function's uses show are tensors
            ev.env.update(dict.fromkeys(known[3], TENSOR))
            ev.param_uses = known[3]
        if seeds:
            ev.env.update(seeds)
            if seeded:
                ev.seeded = dict.fromkeys(seeds, seeded)
        if masked:  # parameters the last walk saw indexed by a device mask
            ev.env.update(dict.fromkeys(masked, DEVX))
            ev.mask_uses = masked
        entry = ev.entry = Val("unknown")  # (equal to UNKNOWN, but this walk's own: see Evaluator.entry)
        for p in known[4]:
            if ev.env.get(p) is UNKNOWN:
                ev.env[p] = entry

        local: dict = {}  # name -> (def, the names it sees) of the functions defined in this one

        def nested(inner, outer_ev):
            if collect or hook is None:
                return
            closure = {k: v for k, v in outer_ev.env.items() if isinstance(k, str)}
            local[inner.name] = (inner, closure)
            self.function(inner, attrs, hook, method=False, outer=closure, where=f"{where}.{inner.name}")

        if hook is not None and not collect:
            ev.local_calls = {}
        Walker(ev, None if collect else hook, nested).body(fn.body)
        if local and ev.local_calls:
            self._local_seeds(fn, local, ev.local_calls, attrs, hook, where)
        if ev.masked and masked is None:
            found = masked_params(fn, ev.masked)
            if found:
                # `boxes[keep]`, keep on the device: boxes was one from the start; walked again so
                # (what the first walk found stays found: the second only knows more)
                if returned is not None:
                    del returned[:]
                return self.function(fn, attrs, hook, method, collect, outer, where, calls, seeds, methods,
                                     returned, module, seeded, proven, masked=found)
        if collect:
            # Only the assignments to self.* matter; the walk is the same.
            return {k: v for k, v in ev.env.items() if isinstance(k, tuple)}
        return ev.env


def _loads(fn, name: str) -> int:
    """How many times the body of `fn` reads the name `name` (nested defs included)."""
    return sum(1 for n in walk_nodes(fn) if type(n) is ast.Name and n.id == name and type(n.ctx) is ast.Load)


def _made_on_host(v: Val) -> bool:
    """A parameter or layer made on the host (:data:`.kinds.HOST_PARAM`, :data:`.kinds.HOSTMOD`)."""
    return v.device == "cpu" and (v.kind == "host" or host_module(v))


def _init_only(methods: list, by_name: dict, attr_calls) -> frozenset:
    """`__init__` and the methods only it calls (``self.initialize_weights()``, and
    what those call): code that runs before the instance can be moved. A method
    called anywhere else in the file (`attr_calls()`: attribute name -> calls of
    it in the file) is not one."""
    if "__init__" not in by_name:
        return frozenset()
    counts = attr_calls()
    banned: set = set()
    while True:
        out = {"__init__"}
        calls: dict = {}  # method name -> its calls from the methods in `out`
        todo = [by_name["__init__"]]
        while todo:
            for node in walk_nodes(todo.pop()):
                if type(node) is ast.Call and type(node.func) is ast.Attribute and \
                        type(node.func.value) is ast.Name and node.func.value.id == "self":
                    name = node.func.attr
                    if name in by_name and name not in banned:
                        calls[name] = calls.get(name, 0) + 1
                        if name not in out:
                            out.add(name)
                            todo.append(by_name[name])
        called_elsewhere = {n for n in out if n != "__init__" and counts.get(n, 0) != calls.get(n, 0)}
        if not called_elsewhere:
            return frozenset(out)
        banned |= called_elsewhere


def _open_params(fn, params: dict) -> list:
    """The parameters of `fn` nothing says anything of (no annotation, no
    constant default: ``x=0`` is a number whatever its uses)."""
    a = fn.args
    defaults = {p.arg for p, d in zip(a.args[len(a.args) - len(a.defaults):], a.defaults)
                if type(d) is ast.Constant and d.value is not None}
    return [p for p, v in params.items() if v is UNKNOWN and p not in defaults]


def _stores_self(body: list) -> bool:
    """A statement of `body` (at any depth, not in nested defs) assigns
    ``self.<attr>``."""
    stack = list(body)
    while stack:
        st = stack.pop()
        t = type(st)
        if t is ast.Assign:
            for tg in st.targets:
                if type(tg) is not ast.Name and _self_target(tg):  # (a plain name is no attribute)
                    return True
        elif t is ast.AugAssign or t is ast.AnnAssign:
            if _self_target(st.target):
                return True
        elif t in (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef):
            continue
        elif t is ast.Expr:
            v = st.value  # self.net.to(dev), self.net.cuda(): a move in place rebinds it
            if type(v) is ast.Call and type(v.func) is ast.Attribute and v.func.attr in ("to", "cuda", "cpu"):
                return True
        elif t not in _NO_BODY:
            for f in ("body", "orelse", "finalbody", "handlers", "cases"):
                stack.extend(getattr(st, f, ()))
    return False


#: Statements with no statements inside them (other than those tested above).
_NO_BODY = frozenset({ast.Return, ast.Raise, ast.Pass, ast.Assert, ast.Break, ast.Continue, ast.Import,
                      ast.ImportFrom, ast.Global, ast.Nonlocal, ast.Delete})


def _self_target(t: ast.AST) -> bool:
    if type(t) is ast.Attribute:
        return type(t.value) is ast.Name and t.value.id == "self"
    if type(t) in (ast.Tuple, ast.List):
        return any(_self_target(e) for e in t.elts)
    if type(t) is ast.Starred:
        return _self_target(t.value)
    return False
