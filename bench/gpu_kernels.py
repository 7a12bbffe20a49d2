"""A Triton kernel file, bare and wrapped, on a GPU: the same results (issue 42).

``tests/static/codemod_fixtures/triton_ops.in.py`` holds Triton kernels in the
shapes real libraries write them (casts ``x.to(tl.float32)``,
``acc.to(out_ptr.dtype.element_ty)``, loads, stores, ``tl.where``, an
autotuned one, ``@triton.heuristics`` over ``triton.jit(do_not_specialize=)``,
a kernel made by ``triton.jit(fn)``) and host functions that move tensors and
launch them; ``triton_ops.out.py`` is what ``xferaudit wrap`` writes for it
(committed: the GPU image has no libcst; test_codemod.py checks it byte for
byte). This runs each host function of both files on the same inputs, the
wrapped one with counting off and on, and compares the results exactly; with
counting on it also reads the wrapped sites' rows (one up per ``x.to(dev)``,
one down per ``.cpu()``/``.item()`` on CUDA).

    python bench/gpu_kernels.py OUT_DIR        # writes gpu_kernels.json and gpu_kernels.txt

Needs torch with CUDA and triton; exits 2 (and says why) without them.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
FIX = ROOT / "tests" / "static" / "codemod_fixtures"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _one_config(mod) -> dict:
    """Each autotuned kernel of `mod` held to its first config: the autotuner
    picks a config by timing it, so the bare and the wrapped module could each
    pick another block size, and a float sum reduced in another order differs
    in its last bits (seen on an H100: ``rowsum`` differed, bare against
    wrapped, counting off and on). Kernel name -> the config kept."""
    from triton.runtime.autotuner import Autotuner

    kept = {}
    for name, obj in vars(mod).items():
        if isinstance(obj, Autotuner) and len(obj.configs) > 1:
            obj.configs = obj.configs[:1]
            kept[name] = str(obj.configs[0])
    return kept


def _run(mod, torch, dev: str) -> dict:
    g = torch.Generator().manual_seed(0)
    x = torch.randn(1000, generator=g)
    m = torch.randn(16, 300, generator=g)
    h = (torch.randn(777, generator=g) * 10).to(torch.float16)
    total, sp = mod.softplus(x, dev)
    return {
        "scale": mod.scale(x, 0.5, dev),
        "rowsum": mod.rowsum(m, dev),
        "cast": mod.cast(h, dev),
        "softplus": sp,
        "softplus_total": torch.tensor(total),
    }


def main(argv: list) -> int:
    out = Path(argv[0] if argv else "bench/results")
    out.mkdir(parents=True, exist_ok=True)
    try:
        import torch
        import triton  # noqa: F401
    except ImportError as e:
        print(f"gpu_kernels: needs torch and triton: {e}")
        return 2
    if not torch.cuda.is_available():
        print("gpu_kernels: needs CUDA")
        return 2
    import xferaudit.runtime as xfer

    report: dict = {"torch": torch.__version__, "device": torch.cuda.get_device_name(0), "checks": {}}
    ok = True
    try:
        bare_mod = _load("triton_ops_bare", FIX / "triton_ops.in.py")
        wrapped = _load("triton_ops_wrapped", FIX / "triton_ops.out.py")
        report["autotune_held_to"] = _one_config(bare_mod)
        if _one_config(wrapped) != report["autotune_held_to"]:
            raise RuntimeError("the wrapped file's autotuned kernels differ from the bare file's")
        bare = _run(bare_mod, torch, "cuda")
        off = _run(wrapped, torch, "cuda")
        with xfer.counting():
            on = _run(wrapped, torch, "cuda")
            rows = {r.site.rsplit(":", 2)[-2] + ":" + r.site.rsplit(":", 1)[-1]: r for r in xfer.snapshot().rows}
        for name, want in bare.items():
            for label, got in (("off", off[name]), ("on", on[name])):
                same = got.dtype == want.dtype and got.device == want.device and torch.equal(got, want)
                report["checks"][f"{name} counting {label}"] = "AGREE" if same else "DISAGREE"
                ok &= same
        for fn in ("scale", "rowsum", "cast", "softplus"):
            up = rows.get(f"{fn}:x.to")
            got = (up.calls, up.crossings) if up is not None else None
            report["checks"][f"{fn}: x.to counted up once"] = "AGREE" if got == (1, 1) else f"DISAGREE {got}"
            ok &= got == (1, 1)
    except Exception:  # noqa: BLE001 - the failure is the report
        report["error"] = traceback.format_exc()
        ok = False
    report["result"] = "AGREE" if ok else "DISAGREE"
    (out / "gpu_kernels.json").write_text(json.dumps(report, indent=1) + "\n")
    text = "\n".join([f"torch {report['torch']} on {report['device']}"]
                     + [f"{k}: {v}" for k, v in report["checks"].items()]
                     + ([report["error"]] if "error" in report else []) + [f"result: {report['result']}"])
    (out / "gpu_kernels.txt").write_text(text + "\n")
    print(text)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
