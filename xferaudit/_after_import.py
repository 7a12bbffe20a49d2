"""Call a function the moment a module has been imported: :class:`AfterImport`.

A finder put first on ``sys.meta_path`` that lets Python find and import the
module as usual and calls ``ready(module)`` once the module has finished
executing (its loader is its own again afterwards). ``xferaudit run`` puts the
guard on when the program's ``import torch`` has finished; ``run --simulate``
sets the simulated device up then, and hooks Lightning and Triton as they are
imported; the C counted path registers its Python stand-ins with Dynamo once
``torch._dynamo`` is imported, and the torch pack its TorchScript overloads
once ``torch`` is (:func:`after_import`: now if the module is imported
already). Finders of several such hooks chain: each wraps the loader the next
one found. This is the one post-import hook of the package.
"""

from __future__ import annotations

import importlib.util
import sys
from typing import Any, Callable

__all__ = ["AfterImport", "after_import"]


class AfterImport:
    """A finder for the first import of one of `names`; `failed(exc)` is told
    of an exception `ready` raised (the program's import goes on)."""

    def __init__(self, names: tuple, ready: Callable[[Any], None], failed: Callable[[Exception], None]) -> None:
        self.names, self.ready, self.failed = names, ready, failed
        self.busy = False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in self.names or self.busy:
            return None
        self.busy = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return None
        self.remove()
        spec.loader = _ReadyLoader(spec.loader, self.ready, self.failed)
        return spec

    def invalidate_caches(self) -> None:
        pass

    def remove(self) -> None:
        if self in sys.meta_path:
            sys.meta_path.remove(self)


class _ReadyLoader:
    def __init__(self, loader: Any, ready: Callable, failed: Callable) -> None:
        self.loader, self.ready, self.failed = loader, ready, failed

    def create_module(self, spec: Any) -> Any:
        return self.loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        module.__loader__ = self.loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        try:
            self.ready(module)
        except Exception as e:  # (the program's import must not fail for our sake)
            self.failed(e)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.loader, name)


def _ignore(exc: Exception) -> None:
    pass


def after_import(names: Any, ready: Callable[[Any], None],
                 failed: Callable[[Exception], None] = _ignore) -> None:
    """``ready(module)`` once the first of `names` (a module name or a tuple of
    them) has been imported: now, if one is imported already, else right after
    its import ends. `failed(exc)` is told of an exception `ready` raised (the
    program's import goes on; default: ignored). The same `ready` asked for
    the same names twice before the import is one hook."""
    names = (names,) if isinstance(names, str) else tuple(names)
    for name in names:
        mod = sys.modules.get(name)
        if mod is not None:
            try:
                ready(mod)
            except Exception as e:  # (as after the import: the caller goes on)
                failed(e)
            return
    for f in sys.meta_path:
        if isinstance(f, AfterImport) and f.names == names and f.ready is ready:
            return
    sys.meta_path.insert(0, AfterImport(names, ready, failed))
