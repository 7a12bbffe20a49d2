"""Static side of the ggml, CuPy and JAX packs.

The rows' own match/ignore examples are the first cases (read from the TOML,
under each pack's prelude of imports); the rest pin the behaviour the rows rely
on: the per-file switch (a pack is on where its library is imported, or where
the config turns it on), the narrowing fields of `.get()`/`.set()`, the kinds
of jax.device_put, the np.asarray evidence rule and jit decorators.
"""

from __future__ import annotations

import textwrap

import pytest

from xferaudit.config import load_config
from xferaudit.rules import RuleError, load_pack, table, user_rules
from xferaudit.static.front.finder import find_in_source

PACKS = ("ggml", "cupy", "jax")
TABLE = table()


def sites(src: str, rules=TABLE, path: str = "m.py"):
    res = find_in_source(textwrap.dedent(src), path, rules)
    assert res.error is None, res.error
    return res.sites


def _examples(field: str):
    for name in PACKS:
        pack = load_pack(name)
        for rule in pack.rules:
            for ex in getattr(rule, field):
                yield pytest.param(pack, rule, ex, id=f"{rule.id}:{ex}")


@pytest.mark.parametrize("pack,rule,example", list(_examples("match")))
def test_row_matches_its_examples(pack, rule, example):
    found = sites(pack.prelude + "\n" + example + "\n")
    assert [s.rule_id for s in found] == [rule.id], found
    (s,) = found
    assert s.line == pack.prelude.count("\n") + 2  # the example's own line
    assert not s.wrapped


@pytest.mark.parametrize("pack,rule,example", list(_examples("ignore")))
def test_row_ignores_its_examples(pack, rule, example):
    found = sites(pack.prelude + "\n" + example + "\n")
    assert rule.id not in [s.rule_id for s in found]


def test_every_row_has_examples_and_a_distinct_wrapper():
    seen = {}
    for name in PACKS:
        pack = load_pack(name)
        assert pack.imports and pack.prelude
        for rule in pack.rules:
            assert rule.match and rule.ignore, rule.id
            assert rule.wrapper not in seen, (rule.id, seen.get(rule.wrapper))
            seen[rule.wrapper] = rule.id


# --- the per-file switch -----------------------------------------------------------


@pytest.mark.parametrize(
    "header,on",
    [
        ("", False),
        ("import numpy as np", False),
        ("import cupy", True),
        ("import cupy as cp", True),
        ("from cupy import asnumpy", True),
        ("import cupyx.scipy", False),  # another library whose name starts alike
        ("def f():\n    import cupy\n", True),  # an import anywhere in the file
    ],
)
def test_cupy_pack_is_on_where_cupy_is_imported(header, on):
    found = sites(header + "\ny = x.get()\n")
    assert [s.rule_id for s in found] == (["cupy.get"] if on else [])


def test_config_packs_turn_a_pack_on_without_the_import(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.xferaudit]\npacks = ["cupy"]\n')
    rules = load_config(tmp_path).table()
    assert [s.rule_id for s in sites("y = x.get()\n", rules)] == ["cupy.get"]
    # torch stays on whatever packs says; jax and ggml still turn on by import
    assert [s.rule_id for s in sites("y = x.cpu()\n", rules)] == ["torch.cpu"]
    assert sites("import numpy as np\nnp.asarray(jnp.ones(3))\n", rules) == []
    found = sites("import jax.numpy as jnp, numpy as np\nnp.asarray(jnp.ones(3))\n", rules)
    assert [s.rule_id for s in found] == ["jax.np_asarray"]


def test_default_config_table_holds_every_pack_by_import(tmp_path):
    rules = load_config(tmp_path).table()
    assert sites("y = x.get()\n", rules) == []
    assert [s.rule_id for s in sites("import cupy\ny = x.get()\n", rules)] == ["cupy.get"]
    g = "import ggml\nggml.ggml_backend_graph_compute(b, gf)\n"
    assert [s.kind for s in sites(g, rules)] == ["graph"]


def test_a_table_without_pack_info_keeps_every_row_on():
    from xferaudit.rules import RuleTable

    rules = RuleTable.of(load_pack("cupy").rules)
    assert [s.rule_id for s in sites("y = x.get()\n", rules)] == ["cupy.get"]
    assert "get" in rules.words()


def test_words_of_packs_on_by_import_are_their_import_and_wrapper_names():
    words = set(TABLE.words())
    assert {"cupy", "jax", "ggml", "cupy_get", "jax_jit"} <= words
    assert "get" not in words and "set" not in words  # a common word proves nothing


# --- ggml ---------------------------------------------------------------------------


def test_ggml_model_sites_kinds_and_names():
    src = """
    import ctypes
    import ggml
    from ggml import ggml_backend_tensor_get as tget

    class Model:
        def step(self, x_np, out):
            ggml.ggml_backend_tensor_set(self.x, ctypes.c_void_p(x_np.ctypes.data), 0, x_np.nbytes)
            ggml.ggml_backend_graph_compute(self.backend, self.gf)
            tget(self.y, ctypes.c_void_p(out.ctypes.data), 0, out.nbytes)
            ggml.ggml.ggml_backend_tensor_set_2d(self.x, p, 0, 16, 4, 32, 16)
    """
    found = sites(src, path="model.py")
    assert [(s.kind, s.rule, s.rule_id) for s in found] == [
        ("up", "XFA201", "ggml.tensor_set"),
        ("graph", "XFA204", "ggml.graph_compute"),
        ("down", "XFA202", "ggml.tensor_get"),
        ("up", "XFA201", "ggml.tensor_set_2d"),
    ]
    assert found[0].site == "model.py:Model.step:ggml.ggml_backend_tensor_set"
    assert found[0].line == 8 and found[0].column == 14  # the called name
    assert found[2].site == "model.py:Model.step:ggml.ggml_backend_tensor_get"


def test_ggml_local_function_of_the_same_name_is_no_site():
    src = """
    import ggml

    def ggml_backend_tensor_set(*a):
        pass

    ggml_backend_tensor_set(1, 2, 3, 4)
    """
    assert sites(src) == []


# --- CuPy ---------------------------------------------------------------------------


def test_cupy_kinds():
    src = """
    import cupy as cp
    import numpy as np

    def step(batch, w):
        x = cp.asarray(batch)
        y = cp.array(np.ones(3))
        w.set(np.zeros(3))
        loss = (x @ w).get()
        return cp.asnumpy(y), loss, {"a": 1}.get("a"), cp.zeros(3)
    """
    found = sites(src)
    assert [(s.rule_id, s.kind) for s in found] == [
        ("cupy.asarray", "up"),
        ("cupy.array", "up"),
        ("cupy.set", "up"),
        ("cupy.get", "down"),
        ("cupy.asnumpy", "down"),
    ]
    assert found[3].site == "m.py:step:(x@w).get"


def test_cupy_get_narrowing_in_a_cupy_file():
    src = """
    import cupy, queue, os
    q = queue.Queue()
    item = q.get()
    home = os.environ.get("HOME")
    v = cfg.get("lr", 0.1)
    b = jobs.get(timeout=1)
    await_like = results_queue.get()
    y = arr.get(stream=s)
    """
    assert [s.call for s in sites(src)] == ["arr.get(stream=s)"]


# --- JAX ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "call,kind",
    [
        ("jax.device_put(x)", "up"),
        ("jax.device_put(x, None)", "up"),
        ("jax.device_put(x, device=None)", "up"),
        ("jax.device_put(x, dev)", "move"),
        ("jax.device_put(x, device=dev)", "move"),
        ("jax.device_put(x, jax.devices('cpu')[0])", "move"),
        ("jax.device_put(x, **kw)", "move"),
        ("jax.device_get(x)", "down"),
    ],
)
def test_jax_device_put_kind_is_decided_by_its_device_argument(call, kind):
    (s,) = sites(f"import jax\n{call}\n")
    assert s.kind == kind


def test_jax_np_asarray_needs_evidence_of_a_jax_value():
    src = """
    import jax
    import numpy as np
    from jax import numpy as jnp, random

    def evaluate(params, x, key):
        logits = predict(params, x)
        a = np.asarray(logits)              # a plain name: not reported
        b = np.asarray(jnp.argmax(logits, -1))
        c = np.array(random.normal(key, (2,)).sum())
        d = np.asarray([1.0, 2.0])
        e = np.asarray(jax.device_get(logits))  # the device_get is the site
        return a, b, c, d, e
    """
    found = sites(src)
    assert [(s.rule_id, s.kind, s.line) for s in found] == [
        ("jax.np_asarray", "down", 9),
        ("jax.np_array", "down", 10),
        ("jax.device_get", "down", 12),
    ]


def test_np_asarray_is_no_site_without_jax():
    assert sites("import numpy as np\nimport jaxlike as jnp\nnp.asarray(jnp.ones(3))\n") == []


def test_jit_calls_and_decorators_are_graph_sites():
    src = """
    import functools
    from functools import partial
    import jax

    @jax.jit
    def f(x):
        return x * 2

    @partial(jax.jit, static_argnums=0)
    def g(n, x):
        return x * n

    @functools.partial(jax.jit, static_argnames="n")
    def h(x, n):
        return x

    @jax.jit(static_argnames="n")
    def k(x, n):
        return x

    class Trainer:
        def __init__(self, fn):
            self.step = jax.jit(fn, donate_argnums=0)

    @jax.vmap
    def v(x):
        return x
    """
    found = sites(src)
    assert [(s.line, s.kind, s.decorator, s.call) for s in found] == [
        (6, "graph", True, "jax.jit"),
        (10, "graph", True, "partial(jax.jit, static_argnums=0)"),
        (14, "graph", True, 'functools.partial(jax.jit, static_argnames="n")'),
        (18, "graph", True, 'jax.jit(static_argnames="n")'),
        (24, "graph", False, "jax.jit(fn, donate_argnums=0)"),
    ]
    assert found[0].column == 6  # `jit` in `@jax.jit`
    assert found[1].column == 2  # `partial`, the called name
    assert found[4].site == "m.py:Trainer.__init__:jax.jit"


def test_partial_of_something_else_is_no_site():
    src = """
    from functools import partial
    import jax

    @partial(jax.vmap, in_axes=0)
    def f(x):
        return x

    step = partial(jax.jit, static_argnums=0)  # not a decorator: not followed
    """
    assert sites(src) == []


# --- wrapped forms: what `xferaudit wrap` writes is recognised as wrapped ------------------


@pytest.mark.parametrize(
    "src,rule_id,kind",
    [
        ("xfer.ggml_backend_tensor_set(x, p, 0, n, site='s')", "ggml.tensor_set", "up"),
        ("xfer.ggml_backend_tensor_get_2d_async(b, y, p, 0, n, 2, 8, 8, site='s')",
         "ggml.tensor_get_2d_async", "down"),
        ("xfer.ggml_backend_graph_compute(backend, gf, site='s')", "ggml.graph_compute", "graph"),
        ("xfer.cupy_asarray(batch, site='s')", "cupy.asarray", "up"),
        ("xfer.cupy_asnumpy(y, site='s')", "cupy.asnumpy", "down"),
        ("xfer.cupy_get(y, site='s')", "cupy.get", "down"),
        ("xfer.cupy_set(y, host, site='s')", "cupy.set", "up"),
        ("xfer.jax_device_put(x, site='s')", "jax.device_put", "up"),
        ("xfer.jax_device_put(x, dev, site='s')", "jax.device_put", "move"),
        ("xfer.jax_device_get(x, site='s')", "jax.device_get", "down"),
        ("xfer.jax_np_asarray(y, site='s')", "jax.np_asarray", "down"),
        ("xfer.jax_jit(jax.jit(f), site='s')", "jax.jit", "graph"),
    ],
)
def test_wrapped_calls_are_wrapped_sites(src, rule_id, kind):
    found = sites(f"import jax\nimport xferaudit.runtime as xfer\n{src}\n")
    assert [(s.rule_id, s.kind, s.wrapped, s.site) for s in found] == [(rule_id, kind, True, "s")]


def test_wrapped_jit_decorators_are_wrapped_sites():
    src = """
    from functools import partial
    import jax
    import xferaudit.runtime as xfer

    @xfer.jax_jit(jax.jit, site="m.py:<module>:jax.jit", decorator=True)
    def f(x):
        return x

    @xfer.jax_jit(partial(jax.jit, static_argnums=0), site="m.py:<module>:jax.jit#2", decorator=True)
    def g(n, x):
        return x
    """
    found = sites(src)
    assert [(s.wrapped, s.site, s.kind) for s in found] == [
        (True, "m.py:<module>:jax.jit", "graph"),
        (True, "m.py:<module>:jax.jit#2", "graph"),
    ]


def test_wrapped_sites_are_found_without_the_library_import():
    found = sites("import xferaudit.runtime as xfer\ny = xfer.cupy_get(x, site='s')\n")
    assert [(s.rule_id, s.wrapped) for s in found] == [("cupy.get", True)]


# --- the new row fields ------------------------------------------------------------------


def test_user_rows_can_use_the_narrowing_fields():
    rows = [
        {"call": "method", "target": "fetch", "kind": "down", "max_args": 0,
         "keywords": ["non_blocking"], "not_receiver": ["(?i)(.*\\.)?\\w*cache"]},
        {"call": "function", "target": "mylib.upload", "kind": "up", "min_args": 2,
         "aliases": ["mylib.io.upload"]},
    ]
    rules = table(extra=user_rules(rows))
    src = """
    import mylib
    import mylib.io
    a = x.fetch()
    b = x.fetch(1)
    c = x.fetch(non_blocking=True)
    d = x.fetch(timeout=2)
    e = self.cache.fetch()
    f = mylib.upload(x, dev)
    g = mylib.upload(x)
    h = mylib.io.upload(x, dev)
    """
    found = sites(src, rules)
    assert [s.line for s in found] == [4, 6, 9, 11]


@pytest.mark.parametrize(
    "row,msg",
    [
        ({"max_args": -1}, "max_args must be a non-negative integer"),
        ({"min_args": "1"}, "min_args must be a non-negative integer"),
        ({"keywords": "stream"}, "keywords must be a list of strings"),
        ({"not_receiver": ["(q"]}, r"not_receiver '\(q' is not a regex"),
        ({"no_device": "sideways"}, "no_device must be one of"),
        ({"aliases": [1]}, "aliases must be a list of strings"),
    ],
)
def test_bad_new_fields_are_named_in_the_error(row, msg):
    base = {"id": "r", "call": "method", "target": "get", "kind": "down"}
    with pytest.raises(RuleError, match=msg) as e:
        user_rules([{**base, **row}], where="pyproject.toml")
    assert "pyproject.toml: rule 'r'" in str(e.value)
