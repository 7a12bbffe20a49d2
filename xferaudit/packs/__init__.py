"""The packs: one folder per library, registering itself by being there.

A pack is a folder ``xferaudit/packs/<name>/`` holding

* ``rules.toml``: its rows (which calls are sites, of which kind, and the
  wrapper that counts each), read by the finder, the codemod and the runtime;
* ``runtime.py``: its counting wrappers, named as the rows' ``wrapper`` fields
  (and listed in the module's ``__all__``);
* ``README.md``: what the pack covers and what "normal" looks like;

and its tests live under ``tests/packs/<name>/``. Nothing else names a pack:
``xferaudit.runtime`` finds a wrapper through :func:`runtime_attr`, which
imports the pack's ``runtime.py`` on first use (never at ``import
xferaudit.runtime``, so torch, JAX or ggml are imported only when called).
"""

from __future__ import annotations

import importlib
from functools import lru_cache
from pathlib import Path
from typing import Any, Optional

PACK_DIR = Path(__file__).parent

__all__ = ["PACK_DIR", "exported", "names", "runtime_attr", "runtime_module"]


def names() -> list:
    """The packs here: every folder with a ``rules.toml`` (torch first)."""
    found = sorted(p.parent.name for p in PACK_DIR.glob("*/rules.toml"))
    return sorted(found, key=lambda n: n != "torch")


def runtime_module(name: str) -> Any:
    """The pack's runtime module (``xferaudit.packs.<name>.runtime``), imported now."""
    return importlib.import_module(f"{__name__}.{name}.runtime")


@lru_cache(maxsize=None)
def _wrapper_packs() -> dict:
    """``{wrapper name: pack}`` from the rows of every pack."""
    from ..rules import load_pack

    out: dict = {}
    for name in names():
        for r in load_pack(name).rules:
            out.setdefault(r.wrapper, name)
    return out


def _has_runtime(name: str) -> bool:
    return (PACK_DIR / name / "runtime.py").is_file()


def runtime_attr(attr: str) -> Optional[Any]:
    """The object `attr` of the pack runtime that exports it, or None.

    A row's wrapper name points straight at its pack; other exported names
    (``TorchMissingError``, ``Launched``, the generic ``method``/``call``)
    are looked up in each pack's ``__all__``, the torch pack first.
    """
    if attr.startswith("_"):
        return None
    pack = _wrapper_packs().get(attr)
    if pack is not None and _has_runtime(pack):
        mod = runtime_module(pack)
        if attr in getattr(mod, "__all__", ()):
            return getattr(mod, attr)
    for name in names():
        if _has_runtime(name):
            mod = runtime_module(name)
            if attr in getattr(mod, "__all__", ()):
                return getattr(mod, attr)
    return None


def exported() -> list:
    """Every name the packs' runtimes export (imports each runtime module)."""
    out: list = []
    for name in names():
        if _has_runtime(name):
            out.extend(getattr(runtime_module(name), "__all__", ()))
    return sorted(set(out))
