"""Import a pack's library on first use, or say how to install it."""

from __future__ import annotations

import importlib
import sys
from typing import Any, Optional


def library(name: str, error: type, install: str, probe: Optional[str] = None) -> Any:
    """The module `name`, imported now if need be; `error` (an ImportError
    subclass) with the install hint when it is missing. `probe` is an attribute
    the real module has (a stub or a half-imported module does not)."""
    mod = sys.modules.get(name)
    if mod is not None and (probe is None or hasattr(mod, probe)):
        return mod
    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise error(f"xferaudit.runtime: this wrapper calls {name}, but {install}") from e
