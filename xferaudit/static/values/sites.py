"""The value layer, plugged into the finder as a per-file analysis.

The finder matches calls by name; what a name holds is the value layer's
question (this package: :mod:`.expressions`, :mod:`.walk`, :mod:`.implicit`). Registered in
the finder's :data:`~.finder.ANALYSES` (by ``xferaudit.static``), it does two
things to each file's sites:

* adds the *implicit* sites, crossings with no transfer call of their own
  (``float(loss)``, ``if loss > 100:``, ``print(loss)``, ``t[mask]``,
  ``torch.save``...), reported as ``XFA4xx`` where the code shows a device
  tensor;
* re-judges the method-row sites the finder found unwrapped: a receiver shown
  to be a module, a class, a numpy or Python value is no tensor, so its call is
  no site (``np.asarray(x).tolist()``, ``re.compile(p)``); the unbound
  ``torch.Tensor.cpu(x)`` is the site of ``x`` (its arguments after ``x``,
  wrapped as ``xfer.call(torch.Tensor.cpu, x, site=...)``); and the rows whose
  argument or receiver must be checked by value (``x.new(data)``,
  ``x.type(<cuda type>)``, ``module.compile()``) keep only what qualifies.

Names are resolved by the file's one resolver (``ctx.resolver.qualname``); a
value-layer failure never stops a scan (the file keeps the finder's sites).
"""

from __future__ import annotations

import ast
from typing import Any, Callable, Optional

from ...config import path_matches
from ...rules import KIND_CODES
from ...wrapform import IMPLICIT
from ..front import finder as _finder
from ..front.classify import Classifier
from ..front.finder import FileContext, implicit_site
from ..site import Site
from . import findings as _findings
from . import implicit as _implicit

def _local_in(scope) -> Callable[[str], bool]:
    """`name` is bound in the function (or lambda, comprehension) of `scope`."""

    def local(name: str) -> bool:
        s = scope
        while s is not None and not s.is_module:
            if not s.is_class and name in s.bindings:
                return True
            s = s.parent
        return False

    return local


def analyse(ctx: FileContext) -> list[Site]:
    """The implicit sites of the file; the method-row sites re-judged in place."""
    if ctx.tree is None:
        return []
    methods = [s for s in ctx.sites if id(s) in ctx.nodes and ctx.rules.methods.get(_attr(ctx.nodes[id(s)][0]) or "")]
    qualname = _lazy_qualname(ctx)
    try:
        res = _implicit.find(ctx.tree, ctx.source.text, qualname, frozenset(ctx.rules.methods), gpu_first(ctx),
                             ctx.evidence,  # lines a recorded run saw crossing (static/front/evidence.py)
                             getattr(ctx, "placed", None))  # other modules' placing helpers (.helpers)
        if methods:
            _rejudge(ctx, res, methods)
    except RecursionError:
        raise
    except Exception:  # pragma: no cover - a value-layer bug must not stop the scan
        return []
    return [implicit_site(ctx.path, ctx.source, ctx.colmap, fd.node, fd.at, fd.op, fd.label, fd.function,
                          no_wrap=fd.why if fd.op in _CALL_FORMS else "", wrapper=fd.wrap, evidence=fd.evidence)
            for fd in res.findings]


#: The categories whose sites have wrapped call forms (the wrap grammar's implicit
#: wrappers): the value layer's reason why one has none is the site's `no_wrap`
#: (`t = t or zero`); the others (counts, uploads, downloads) are named by their
#: statement, and a hazard is no site (codemod/implicit.py says so).
_CALL_FORMS = frozenset(cat for cat, _ in IMPLICIT.values())


def gpu_first(ctx: FileContext) -> bool:
    """The file is read gpu-first: the table's reading is, and the file is not
    under a ``gpu-first-exclude`` path (tests, which run on the CPU)."""
    rules = ctx.rules
    return rules.implicit == "gpu-first" and not path_matches(ctx.relpath or ctx.path, rules.gpu_first_exclude)


def _attr(node) -> Optional[str]:
    func = getattr(node, "func", None)
    return getattr(func, "attr", None)


def _lazy_qualname(ctx: FileContext) -> Callable:
    """The resolver's `qualname` at module level (all the value layer asks: it
    follows the names functions bind itself). The finder's resolver has every
    module-level binding when the finder ran; else the module's names are bound
    on first use, without entering any function or class (binding every scope
    of every file would cost a tenth of a scan). Each node's answer is
    remembered for the file."""
    r = ctx.finder_resolver
    box: list = []
    # id(node) -> (node, its name): the walk asks again of the same node in every
    # walk of its function (the node is kept, so its id is not another's later)
    known: dict = {}
    unbound: dict = {}  # name -> its answer, for the names the module never binds

    def qualname(node) -> Optional[str]:
        if not box:
            if r.binder is None:
                r.bind(walrus=ctx.source.lines_with(":="), hits=_no_scope)
            r.scope = r.binder.module
            box.append(r.qualname)
            box.append(r.scope)
        if r.scope is not box[1]:
            return box[0](node)  # (asked inside another scope: not what the memo holds)
        got = known.get(id(node))
        if got is None:
            if type(node) is ast.Name and node.id not in box[1].bindings:
                # a name the module never binds (`len`, `isinstance`, a star import's): the resolver's
                # answer is the same wherever it stands (no binding before its line to choose), so per name
                q = unbound.get(node.id, unbound)
                if q is unbound:
                    q = unbound[node.id] = box[0](node)
                return q
            got = known[id(node)] = (node, box[0](node))
        return got[1]

    return qualname


def _no_scope(node) -> bool:
    return False


def _rejudge(ctx: FileContext, res, methods: list) -> None:
    """Drop the method-row sites the values rule out; re-read the unbound ones."""
    by_id = {r.id: r for r in ctx.rules.rules}
    drop: set = set()
    fr = ctx.finder_resolver
    cls = Classifier(ctx.rules, fr.qualname, ctx.source.segment)
    for s in methods:
        node, scope = ctx.nodes[id(s)]
        local = _local_in(scope)
        rule = by_id.get(s.rule_id)
        if rule is None or rule.call != "method":
            continue
        if res.not_a_receiver(node, local) is not None:
            drop.add(id(s))
            continue
        lit = res.directions.get(id(node))
        if (s.kind == "down" or lit == "cpu" and rule.kind == "device") and res.on_host(node):
            # torch.zeros(3).sum().item(): a host tensor read on the host crosses nothing; nor does
            # torch.nn.Linear(4, 4).to(device), device = torch.device("cpu"): a host module kept there
            drop.add(id(s))
            continue
        if rule.id == "torch.copy_" and res.host_copy(node):
            drop.add(id(s))  # q.copy_(p), both parameters of modules made on the host
            continue
        if not _findings.row_allows(rule.id, node, res, local):
            drop.add(id(s))
            continue
        if lit == "dtype" and rule.kind == "device":
            drop.add(id(s))  # x.to(wtype), wtype = torch.float16 (or a parametrize list of dtypes): a cast
            continue
        if lit is not None and rule.kind == "device" and s.kind == "move":
            # device = torch.device("cuda") above: `.to(device)` goes up, not "either way"
            kind: Any = "down" if lit == "cpu" else "up"
            s.kind, s.rule = kind, KIND_CODES[kind]
        if res.unbound(node, local):
            outer, fr.scope = fr.scope, scope
            try:
                kind = cls.kind_of(rule, list(node.args[1:]), {k.arg: k.value for k in node.keywords})
            finally:
                fr.scope = outer
            if kind is None:
                drop.add(id(s))
                continue
            s.kind, s.rule, s.op = kind, KIND_CODES[kind], "unbound"
    if drop:
        ctx.sites[:] = [s for s in ctx.sites if id(s) not in drop]


def register() -> None:
    """Plug the value layer into the finder (once)."""
    if analyse not in _finder.ANALYSES:
        _finder.ANALYSES.append(analyse)


register()  # (once imported, plugged in: `xferaudit.static` imports this module when the finder is imported)

__all__ = ["analyse", "register"]
