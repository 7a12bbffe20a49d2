"""Import a pack's library on first use, or say how to install it."""

from __future__ import annotations

import importlib
import sys
from typing import Any, Optional


def library(name: str, error: type, install: str, probe: Optional[str] = None) -> Any:
    """The module `name`, imported now if need be; `error` (an ImportError
    subclass) with the install hint when it is missing. `probe` is an attribute
    the real module has: a stub, a half-imported module or a folder of the
    same name that Python imports as a namespace package (a test folder
    ``tests/packs/cupy/`` on ``sys.path``) does not, and counts as missing."""
    mod = sys.modules.get(name)
    if mod is not None and (probe is None or hasattr(mod, probe)):
        return mod
    try:
        mod = importlib.import_module(name)
    except ImportError as e:
        raise error(f"xferaudit.runtime: this wrapper calls {name}, but {install}") from e
    if probe is not None and not hasattr(mod, probe):
        raise error(f"xferaudit.runtime: this wrapper calls {name}, but {install} "
                    f"(the module found, {getattr(mod, '__path__', mod)!s}, is not it)")
    return mod
