"""The packs' registry: which packs there are, and their wrapper modules.

A pack is a folder ``xferaudit/packs/<name>/`` holding ``rules.toml`` (its
rows), ``runtime.py`` (its counting wrappers, and the other modules of them it
names in ``RUNTIME_PARTS``) and ``README.md`` (see :mod:`xferaudit.packs`).

This module stands beside both halves and below them: the runtime takes every
pack's wrappers from :func:`runtime_modules`, and reaches a pack's other
modules by name (:func:`pack_module`), so nothing in ``xferaudit.runtime``
imports a pack. Packs are found by folder and imported by their names
(``importlib``), never by an import statement here; importing this module
imports no pack and no library (a pack's ``runtime.py`` imports none at import
either: torch, JAX, ggml or CuPy is imported on a wrapper's first call).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

PACKAGE = "xferaudit.packs"
PACK_DIR = Path(__file__).parent / "packs"

__all__ = ["PACK_DIR", "names", "pack_module", "pack_runtime_modules", "runtime_module", "runtime_modules"]


def names() -> list:
    """The packs here: every folder with a ``rules.toml`` (torch first)."""
    found = sorted(p.parent.name for p in PACK_DIR.glob("*/rules.toml"))
    return sorted(found, key=lambda n: n != "torch")


def pack_module(name: str, module: str) -> Any:
    """One module of a pack (``xferaudit.packs.<name>.<module>``), imported now."""
    return importlib.import_module(f"{PACKAGE}.{name}.{module}")


def runtime_module(name: str) -> Any:
    """The pack's runtime module (``xferaudit.packs.<name>.runtime``), imported now."""
    return pack_module(name, "runtime")


def _has_runtime(name: str) -> bool:
    return (PACK_DIR / name / "runtime.py").is_file()


def pack_runtime_modules(name: str) -> list:
    """The modules of one pack's wrappers, imported now: ``runtime.py``, then the
    parts it names in ``RUNTIME_PARTS`` (none when the pack has no runtime)."""
    if not _has_runtime(name):
        return []
    rt = runtime_module(name)
    return [rt] + [pack_module(name, part) for part in getattr(rt, "RUNTIME_PARTS", ())]


def runtime_modules() -> list:
    """The modules of every pack's wrappers (torch first), imported now."""
    return [m for name in names() for m in pack_runtime_modules(name)]
