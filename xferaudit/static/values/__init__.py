"""The value layer: what each expression is, as far as the code shows.

The finder reads calls; some crossings have no call of their own (``float(loss)``,
``if hits > 0.99:``, ``print(loss)``, ``t[mask]``), and some calls that look
like sites are on things that are no tensors (``init.copy_(w, v)`` with ``init``
an imported module, ``np.linspace(0, 1, 5).tolist()``). Both need to know what
a value is. This package says it, per expression, from evidence in the file:

* imports (modules, classes), factories with and without ``device=`` /
  ``pin_memory=``, legacy constructors (``torch.LongTensor``), ``from_numpy``;
* results of ``.to(device)``, ``.cuda()``, ``.cpu()``, ``.numpy()``, ``.item()``,
  ``.tolist()``;
* modules moved to a device (``model = Net().to(dev)``, ``model.cuda()``,
  ``self.net = ...`` in ``__init__``) and what calling them returns; losses
  (a torch module instance called on device tensors);
* tensor ops, which keep their operands' device (``a + b``, ``a.sum()``,
  ``torch.cat([a, b])``, indexing, comparisons, which also make a bool mask);
* numpy functions, Python literals and builtins;
* assignments, flow-sensitively within a function (a rebinding changes what a
  name is; branches are joined), ``self.attr`` set anywhere in the class,
  parameters annotated as tensors.

It is conservative: a value it cannot place is ``unknown``, and only ``dev``
(a device tensor, evidently) makes an implicit finding. A value that was moved
with ``.cuda()`` / ``.to(dev)`` but might be a module (the receiver is
unknown) is ``devx``: tensor methods on it give ``dev``, calling it gives a
module's output, but it is not itself reported.

One module per concern::

    kinds.py        Val, the kinds, join and combine
    vocabulary.py   the torch vocabulary: which names give tensors, Python values, modules
    placement.py    device arguments and moves: where a value is
    expressions.py  the Evaluator: the value of any expression under one environment
    calls.py        what a call gives (torch functions, methods, wrappers, modules called)
    flow.py         the walk through one function body, flow-sensitively
    walk.py         the walk of a module: top level, functions, classes
    summaries.py    what a function receives from its callers and frameworks
    checks.py       the implicit rules, a hook on every statement
    findings.py     what the rules report (Finding, Result), check's messages
    implicit.py     one file's implicit findings (find)
    sites.py        the finder analysis: implicit sites added, method-row sites re-judged
"""
