"""Pack wrappers reach ``xferaudit.runtime`` through one registry: each pack
folder's rows name its wrappers; nothing is listed by hand."""

from __future__ import annotations

import subprocess
import sys

import xferaudit.runtime as xfer
from xferaudit import packs
from xferaudit.rules import available_packs, load_pack


def test_every_pack_is_a_folder_with_rows_runtime_and_doc():
    assert set(packs.names()) == set(available_packs()) >= {"torch", "ggml", "cupy", "jax"}
    for name in packs.names():
        folder = packs.PACK_DIR / name
        for f in ("rules.toml", "runtime.py", "README.md", "__init__.py"):
            assert (folder / f).is_file(), (name, f)


def test_each_rows_wrapper_resolves_in_its_own_pack():
    for name in packs.names():
        mods = packs.pack_runtime_modules(name)  # runtime.py and the parts it names
        for rule in load_pack(name).rules:
            owners = [m for m in mods if rule.wrapper in getattr(m, "__all__", ())]
            assert len(owners) == 1 and getattr(xfer, rule.wrapper) is getattr(owners[0], rule.wrapper), rule.id


def test_user_code_names_keep_working():
    for name in ("cpu", "to", "item", "method", "call", "graph", "replay", "cuda_graph_nodes",
                 "jax_jit", "ggml_backend_tensor_set", "cupy_asnumpy", "TorchMissingError"):
        assert hasattr(xfer, name), name
    assert "jax_jit" in dir(xfer) and "cpu" in xfer.__all__ and "guard" in xfer.__all__


def test_unknown_names_are_attribute_errors():
    import pytest

    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        xfer.nope  # noqa: B018
    assert not hasattr(xfer, "_private")


def test_star_import_and_lazy_torch():
    code = ("import sys\nfrom xferaudit.runtime import *\n"
            "assert callable(cpu) and callable(jax_jit) and callable(guard)\n"
            "assert 'torch' not in sys.modules and 'jax' not in sys.modules, sorted(sys.modules)\n")
    subprocess.run([sys.executable, "-c", code], check=True)
