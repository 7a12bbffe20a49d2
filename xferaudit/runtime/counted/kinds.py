"""Each wrapper's static kind, read from the rule table: never written twice.

A wrapped call records the kind of the row it came from (``up``, ``down``,
``move``, ``graph``): the rows of every pack (``xferaudit/packs/*/rules.toml``)
and the user's own rows (``[[tool.xferaudit.rule]]`` in the pyproject.toml of
the project the program runs in, found from the working directory). A user row
``kind = "down"`` wrapped through the generic ``xfer.method`` / ``xfer.call``
is reported as ``down`` at run time, as ``check`` reports it.

Keys, as wrappers pass them:

* ``"cpu"``: a wrapper of its own (one row, or rows of one kind);
* ``"method:send"`` / ``"call:pkg.mod.send_to_device"``: a generic wrapper,
  with the method name or the called function's qualified name, so the row is
  found among the user's rows;
* ``"jax_device_put:"`` (an empty name): a row of kind ``device`` called
  without its device argument (its ``no_device`` kind applies).

A row of kind ``device`` records ``move`` (the direction taken is recorded
beside it). The wrappers of implicit sites (``xfer.float``, ``xfer.bool``,
``xfer.read``, ``xfer.save``...), which no row names, record the kind the wrap
grammar gives them (:data:`xferaudit.wrapform.IMPLICIT`). Any other key no row
names records ``move``.

:data:`KINDS` is a dict filled on first use (one dict lookup per recorded
call); :func:`reload` forgets it, e.g. after changing directory or rows.
"""

from __future__ import annotations

from typing import Any, Iterable, Optional

from ...wrapform import IMPLICIT

__all__ = ["KINDS", "kind_of", "reload", "use_rules"]

_rules: Any = None  # the RuleTable in force, or None: load on first use


def _table() -> Any:
    global _rules
    if _rules is None:
        from ...rules import table

        try:
            from ...config import load_config

            _rules = load_config().table()
        except Exception as e:  # a broken pyproject: the packs alone, and say so once
            import warnings

            from ..._text import printable

            warnings.warn(f"xferaudit.runtime: the rule rows of this project could not be read "
                          f"({printable(e)}); wrapped calls of your own rows are recorded as kind 'move'",
                          RuntimeWarning, stacklevel=2)
            _rules = table(("torch",))
    return _rules


def _runtime_kind(rule: Any, device_given: bool = True) -> str:
    if rule.kind != "device":
        return rule.kind
    if not device_given and rule.no_device:
        return rule.no_device
    return "move"


def _pick(rows: Iterable[Any], name: Optional[str]) -> Optional[Any]:
    rows = list(rows)
    if name is None:
        return rows[0] if rows else None
    for r in rows:  # a qualified name, or a method name
        if r.target == name or name in r.aliases:
            return r
    last = name.rsplit(".", 1)[-1]
    for r in rows:
        if r.method == last:
            return r
    return None


def kind_of(key: Any) -> str:
    """The kind recorded for `key` (see the module docstring)."""
    tab = _table()
    wrapper, sep, name = str(key).partition(":")
    rows = tab.wrappers.get(wrapper, ())
    if sep and not name:  # a device row called without its device
        r = _pick(rows, None)
        return "move" if r is None else _runtime_kind(r, device_given=False)
    r = _pick(rows, name or None)
    if r is None:
        implicit = IMPLICIT.get(wrapper)
        return implicit[1] if implicit is not None and not sep else "move"
    return _runtime_kind(r)


class _Kinds(dict):
    """``KINDS[key]``: a dict lookup once a key has been seen, the table on a miss."""

    def __missing__(self, key: Any) -> str:
        k = self[key] = kind_of(key)
        return k


KINDS: dict = _Kinds()


def reload() -> None:
    """Forget the table and every kind looked up (re-read on next use)."""
    global _rules
    _rules = None
    KINDS.clear()


def use_rules(rules: Any) -> None:
    """Record kinds from `rules` (a RuleTable, e.g. ``load_config(path).table()``)."""
    global _rules
    KINDS.clear()
    _rules = rules
