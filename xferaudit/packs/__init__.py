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
``xferaudit.runtime`` takes every pack's wrappers from the registry
(:mod:`xferaudit.registry`, re-exported here), which finds the packs by folder
and imports them by name, so the runtime imports no pack (a pack's
``runtime.py`` imports no library at import: torch, JAX, ggml or CuPy is
imported on a wrapper's first call).
"""

from __future__ import annotations

from ..registry import PACK_DIR, names, pack_module, pack_runtime_modules, runtime_module, runtime_modules

__all__ = ["PACK_DIR", "names", "pack_module", "pack_runtime_modules", "runtime_module", "runtime_modules"]
