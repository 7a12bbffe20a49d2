"""The packs: one folder per library, registering itself by being there.

A pack is a folder ``xferaudit/packs/<name>/`` holding

* ``rules.toml``: its rows (which calls are sites, of which kind, and the
  wrapper that counts each), read by the finder, the codemod and the runtime;
* ``runtime.py``: its counting wrappers, named as the rows' ``wrapper`` fields
  (and listed in the module's ``__all__``); a pack whose wrappers fill more
  than one module names the others in ``runtime.py``'s ``RUNTIME_PARTS``
  (they import ``runtime.py``, never the reverse);
* ``README.md``: what the pack covers and what "normal" looks like;

and its tests live under ``tests/packs/<name>/``. Nothing else names a pack:
``xferaudit.runtime`` takes every pack's wrappers from
:func:`runtime_modules` (a pack's ``runtime.py`` imports no library at import:
torch, JAX, ggml or CuPy is imported on a wrapper's first call).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

PACK_DIR = Path(__file__).parent

__all__ = ["PACK_DIR", "names", "pack_runtime_modules", "runtime_module", "runtime_modules"]


def names() -> list:
    """The packs here: every folder with a ``rules.toml`` (torch first)."""
    found = sorted(p.parent.name for p in PACK_DIR.glob("*/rules.toml"))
    return sorted(found, key=lambda n: n != "torch")


def runtime_module(name: str) -> Any:
    """The pack's runtime module (``xferaudit.packs.<name>.runtime``), imported now."""
    return importlib.import_module(f"{__name__}.{name}.runtime")


def _has_runtime(name: str) -> bool:
    return (PACK_DIR / name / "runtime.py").is_file()


def pack_runtime_modules(name: str) -> list:
    """The modules of one pack's wrappers, imported now: ``runtime.py``, then the
    parts it names in ``RUNTIME_PARTS`` (none when the pack has no runtime)."""
    if not _has_runtime(name):
        return []
    rt = runtime_module(name)
    return [rt] + [importlib.import_module(f"{__name__}.{name}.{part}") for part in getattr(rt, "RUNTIME_PARTS", ())]


def runtime_modules() -> list:
    """The modules of every pack's wrappers (torch first), imported now."""
    return [m for name in names() for m in pack_runtime_modules(name)]
