"""Warnings raised inside a wrapper, reported at the caller's line.

A warning raised by the bare call a wrapper makes (torch's "To copy construct
from a tensor..." from ``torch.tensor(t)``, its complex-to-real cast warning
from ``.to``, a library's ``warnings.warn(..., stacklevel=2)``) is placed by
Python on the innermost Python frame (a C++ ``TORCH_WARN`` uses
``stacklevel=1``): the wrapper's, in ``xferaudit/packs/torch/functions.py`` or
``runtime.py``, not the user's line. Its filename, line, module (what
``filterwarnings(module=...)`` matches) and once-per-location registry would
all be the wrapper's.

What this does, at no cost to a call that warns nothing (the wrappers are not
touched, nothing runs per call):

* one filter at the front of :data:`warnings.filters`, ``"always"`` for the
  wrapper modules only (:data:`WRAPPERS`: every pack's wrapper modules, the
  recorder, whose ``timed_call`` makes the bare call while counting, the
  guard's hooks, in which a bare call runs under the guard, and the runner's
  launch hooks), hands
  every warning placed in a wrapper to :func:`_showwarnmsg`, installed as
  ``warnings._showwarnmsg`` (what the interpreter calls to show a warning);
* :func:`_showwarnmsg` walks out of the wrapper frames to the caller's and
  issues the warning again with :func:`warnings.warn_explicit`, as Python would
  have placed it on that frame: its filename and line, its module's
  ``__name__``, its module's ``__warningregistry__`` (created if missing, as
  Python does); the source line is read as for any warning (``linecache``, by
  filename). The user's filters, ``"error"`` included, then decide as they
  decide for the bare call, in their order; every other warning goes to the
  original hook untouched;
* a wrapper module's registry is set to None at its first routed warning, so
  no once-per-location bookkeeping is kept at a wrapper's line (a filter
  added in front of the router would otherwise merge warnings from two
  callers' lines); a ``"once"`` that the first pass took is handed back to
  the second, made on the caller's context;
* ``filterwarnings``/``simplefilter`` (``warnings._add_filter``) put the router
  back in front after adding theirs, and ``resetwarnings`` leaves it (alone);
  it also goes into the interpreter's own list besides the one in force
  (``catch_warnings`` swaps in a copy and puts the saved list back at its
  end: a first import inside pytest's collection would otherwise lose it).
  Installed when the torch pack's wrappers are imported.

Not covered: a warning placed more than one frame above the bare call
(``stacklevel=3`` in a library's Python code) lands one frame off, as before;
none of torch's ``.to``/``tensor``/``cpu`` paths does that. The C counted path
(``float``, ``int``, ``bool``, ``index``, ``item``) has no Python frame: its
warnings are the caller's already.
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from typing import Any, Optional

#: The modules whose frames make the bare calls: every pack's wrappers, the
#: recorder's timed call, the guard's hooks and counted printing (a bare
#: ``x.cpu()`` under the guard runs in its hook), the runner's launch hooks
#: (a frame of one of these is never the user's).
WRAPPERS = (r"xferaudit\.(?:packs\.[A-Za-z0-9_]+\.[A-Za-z0-9_]+|runtime\.(?:counted|guarding)\.[A-Za-z0-9_]+"
            r"|runtime\.runs\.run_hooks)\Z")
_WRAPPERS = re.compile(WRAPPERS)
_PKG = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
_FILTER = ("always", None, Warning, _WRAPPERS, 0)
_original: Any = None


def _ours(filename: str) -> bool:
    return isinstance(filename, str) and filename.startswith(_PKG)


def _module_of(f: Any) -> str:
    name = f.f_globals.get("__name__")
    return name if isinstance(name, str) else "<string>"


def _placed(filename: str, lineno: int) -> Any:
    """The wrapper frame the warning was placed on (`filename`, `lineno`), or
    None (placed on a frame that is no wrapper's: the user's own, kept)."""
    f = sys._getframe(2)
    while f is not None and not (f.f_code.co_filename == filename and f.f_lineno == lineno):
        f = f.f_back
    return f if f is not None and _WRAPPERS.match(_module_of(f)) else None


def _outside(f: Any) -> Any:
    """The first frame out of `f` that is no wrapper's: the caller's."""
    while f is not None and _WRAPPERS.match(_module_of(f)):
        f = f.f_back
    return f


def _first_action(msg: Any, module: str) -> Optional[str]:
    """The action the filters gave the warning placed on the wrapper frame
    (the interpreter's choice, as ``_warnings.c`` makes it)."""
    text = str(msg.message)
    for action, rx, cat, mod, ln in warnings.filters:
        if (rx is None or rx.match(text)) and issubclass(msg.category, cat) and \
                (mod is None or mod.match(module)) and (ln == 0 or ln == msg.lineno):
            return action
    return getattr(warnings, "defaultaction", "default")


def _showwarnmsg(msg: Any) -> None:
    """``warnings._showwarnmsg``: a warning placed on a wrapper frame is issued
    again on the caller's; any other is shown as before."""
    if _ours(msg.filename):
        placed = _placed(msg.filename, msg.lineno)
        f = _outside(placed) if placed is not None else None
        if f is not None:
            pg = placed.f_globals
            if pg.get("__warningregistry__", 0) is not None:
                pg["__warningregistry__"] = None  # (no once-per-location at a wrapper's line: see below)
            if _first_action(msg, _module_of(placed)) == "once":
                # the once-registry took the warning as shown at the wrapper: it is shown (or not) at the caller's
                warnings.onceregistry.pop((str(msg.message), msg.category), None)
            g = f.f_globals
            registry = g.get("__warningregistry__")
            if not isinstance(registry, dict) and registry is not None:
                registry = None
            elif registry is None and "__warningregistry__" not in g:
                registry = g["__warningregistry__"] = {}
            _front(warnings.filters)
            warnings.warn_explicit(msg.message, msg.category, f.f_code.co_filename, f.f_lineno,
                                   _module_of(f), registry, None, msg.source)
            return
    (_original or warnings._showwarnmsg_impl)(msg)


def _front(filters: Any) -> None:
    if isinstance(filters, list) and (not filters or filters[0] is not _FILTER):
        try:
            filters.remove(_FILTER)
        except ValueError:
            pass
        filters.insert(0, _FILTER)


def _add_filter(*item: Any, append: bool) -> None:
    """``warnings._add_filter`` (what ``filterwarnings``/``simplefilter`` call),
    then the router back in front: it matches the wrapper modules alone, so
    every decision about a user's warning is still made by the user's filters,
    in their order, on the caller's module."""
    _original_add(*item, append=append)
    _front(warnings.filters)


_original_add: Any = None
_original_reset: Any = None


def _resetwarnings() -> None:
    """``warnings.resetwarnings``: every filter goes, the router stays (it
    decides nothing about a warning: the user's filters do, on the caller's
    context)."""
    _original_reset()
    _front(warnings.filters)


def install() -> None:
    """Put the router in place (idempotent: at most one filter, at the front)."""
    global _original, _original_add
    if warnings._showwarnmsg is not _showwarnmsg:
        _original = warnings._showwarnmsg
        warnings._showwarnmsg = _showwarnmsg
    add = getattr(warnings, "_add_filter", None)
    if add is not None and add is not _add_filter:
        _original_add = add
        warnings._add_filter = _add_filter
    global _original_reset
    if warnings.resetwarnings is not _resetwarnings:
        _original_reset = warnings.resetwarnings
        warnings.resetwarnings = _resetwarnings
    changed = warnings.filters[:1] != [_FILTER]
    _front(warnings.filters)
    base = getattr(sys.modules.get("_warnings"), "filters", None)
    if base is not None and base is not warnings.filters:
        changed = changed or base[:1] != [_FILTER]
        _front(base)
    mutated = getattr(warnings, "_filters_mutated", None)
    if changed and mutated is not None:
        mutated()


def installed() -> bool:
    return warnings._showwarnmsg is _showwarnmsg and _FILTER in warnings.filters
