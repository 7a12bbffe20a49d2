"""What do the ggml, CuPy-free and JAX packs cost? (CPU; ggml-python and jax needed)

Runtime: per-call time of a bare library call and of its wrapper, counting
off (the default) and on, interleaved in one run (each round times every
variant once, in rotating order) so the machine's noise hits all alike.
Figures are medians over the rounds, in microseconds per call, with ratios to
the bare call.

* ggml: ggml_backend_tensor_set of a 4 KB input, ggml_backend_graph_compute of
  the two-layer model in tests/packs/ggml_model.py (launches are counted
  always, so "off" includes the launch counter and ggml_graph_n_nodes);
* jax: a jitted call with a 200-leaf pytree argument (the launch counter looks
  at first leaves only), jax.device_put of a small array, np.asarray of a
  jax Array.

Static: the finder over the installed jax package's sources (files that import
jax, so the JAX pack is on in most of them) with every pack in the table (on
by import) versus the torch pack alone.

    python bench/packs.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import importlib.util
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import numpy as np  # noqa: E402

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.runtime.counted import recorder  # noqa: E402


def per_call(fn, n):
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    return (time.perf_counter() - t0) / n * 1e6


def race(cases, rounds, n):
    """cases: name -> (callable, counting on?). Returns name -> median µs/call."""
    names = list(cases)
    times = {k: [] for k in names}
    for r in range(rounds):
        order = names[r % len(names):] + names[: r % len(names)]
        for k in order:
            fn, on = cases[k]
            recorder.STATE.on = on
            times[k].append(per_call(fn, n))
            recorder.STATE.on = False
            xfer.reset()
    return {k: statistics.median(v) for k, v in times.items()}


def show(title, med, base):
    print(f"\n{title}")
    for k, v in med.items():
        print(f"  {k:<28} {v:9.2f} us/call   {v / med[base]:5.2f}x")


def bench_ggml(rounds):
    import ggml

    spec = importlib.util.spec_from_file_location("m", HERE.parent / "tests/packs/ggml_model.py")
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    rng = np.random.default_rng(0)
    model = m.TwoLayer(rng.standard_normal((256, 1024)), rng.standard_normal(256),
                       rng.standard_normal((16, 256)), rng.standard_normal(16), batch=1)
    model.load()
    x = np.ones((1, 1024), np.float32)
    p = m._ptr(x)
    set_cases = {
        "tensor_set bare": (lambda: ggml.ggml_backend_tensor_set(model.x, p, 0, x.nbytes), False),
        "tensor_set wrapped, off": (lambda: xfer.ggml_backend_tensor_set(model.x, p, 0, x.nbytes, site="s"), False),
        "tensor_set wrapped, on": (lambda: xfer.ggml_backend_tensor_set(model.x, p, 0, x.nbytes, site="s"), True),
    }
    show("ggml: ggml_backend_tensor_set (4 KB)", race(set_cases, rounds, 2000), "tensor_set bare")
    comp = {
        "graph_compute bare": (lambda: ggml.ggml_backend_graph_compute(model.backend, model.gf), False),
        "graph_compute wrapped": (lambda: xfer.ggml_backend_graph_compute(model.backend, model.gf, site="g"), False),
    }
    show("ggml: ggml_backend_graph_compute (2 layers, 1024->256->16)", race(comp, rounds, 200),
         "graph_compute bare")
    model.close()


def bench_jax(rounds):
    import jax
    import jax.numpy as jnp

    params = [jnp.ones(4) for _ in range(200)]
    f = jax.jit(lambda ps, x: ps[0] * x)
    w = xfer.jax_jit(f, site="f")
    x = jnp.ones(4)
    f(params, x).block_until_ready()
    jit_cases = {
        "jitted call bare": (lambda: f(params, x), False),
        "jitted call wrapped": (lambda: w(params, x), False),
    }
    show("jax: jitted call, 200-leaf argument", race(jit_cases, rounds, 300), "jitted call bare")
    h = np.ones(16, np.float32)
    put = {
        "device_put bare": (lambda: jax.device_put(h), False),
        "device_put wrapped, off": (lambda: xfer.jax_device_put(h, site="p"), False),
        "device_put wrapped, on": (lambda: xfer.jax_device_put(h, site="p"), True),
    }
    show("jax: device_put of 64 bytes", race(put, rounds, 500), "device_put bare")
    a = jnp.ones(16)
    rd = {
        "np.asarray bare": (lambda: np.asarray(a), False),
        "np.asarray wrapped, off": (lambda: xfer.jax_np_asarray(a, site="a"), False),
        "np.asarray wrapped, on": (lambda: xfer.jax_np_asarray(a, site="a"), True),
    }
    show("jax: np.asarray of a jax Array", race(rd, rounds, 2000), "np.asarray bare")


def bench_static(rounds):
    import jax

    from xferaudit.rules import table
    from xferaudit.static.front.finder import find_in_source

    root = Path(jax.__file__).parent
    texts = [(str(p), p.read_text(encoding="utf-8")) for p in sorted(root.rglob("*.py"))]
    tables = {"torch pack only": table(("torch",), by_import=False), "every pack, by import": table()}
    counts = {k: sum(len(find_in_source(t, p, tb).sites) for p, t in texts) for k, tb in tables.items()}
    times = {k: [] for k in tables}
    for r in range(max(3, rounds // 3)):
        for k in (list(tables) if r % 2 == 0 else list(tables)[::-1]):
            t0 = time.perf_counter()
            for p, t in texts:
                find_in_source(t, p, tables[k])
            times[k].append(time.perf_counter() - t0)
    print(f"\nstatic: finder over jax's own sources ({len(texts)} files, "
          f"{sum(len(t) for _, t in texts) / 1e6:.1f} MB)")
    base = statistics.median(times["torch pack only"])
    for k, v in times.items():
        med = statistics.median(v)
        print(f"  {k:<28} {med:8.3f} s   {med / base:5.2f}x   {counts[k]} sites")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    a = ap.parse_args()
    bench_ggml(a.rounds)
    bench_jax(a.rounds)
    bench_static(a.rounds)


if __name__ == "__main__":
    main()
