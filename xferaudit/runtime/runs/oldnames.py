"""Budgets written with the old names, which held line numbers, still check.

Until names held no line number, a run named a crossing no wrapper names by
its line: the user's line ``train.py:33``, and a library function's crossing
by the user's line that called it, ``lightning.pytorch.core.module:LightningModule.log
<- train.py:28``. A run now names them by the expression
(``train.py:train_step:loss.item``, ``... <- train.py:training_step:self.log``:
:mod:`xferaudit.labels`), and still records each one's line (the run file's
unwrapped entries carry ``line``; ``meta.lines`` gives the lines of the rows
named without a wrapper, and of the launch sites the run named, with their
old names: ``train.py:12:torch.compile``).

A budget that holds an old name is checked as it was written: per line. A
crossing of this run whose name the budget does not hold, and whose old name
(its line's) it does, counts under that old name; every crossing of a line
counts there, as it did when the budget was frozen. So a budget frozen before
is not broken by the new names; the lines it names still move with an edit
above them, as they did: freeze it again (``xferaudit budget --from``) to
get names that stay.
"""

from __future__ import annotations

import re
from typing import Any, Mapping, Optional

__all__ = ["fold_library", "is_line_name", "line_name", "lines_of", "old_library_names", "unwrapped_name"]

#: ``path:line``: the old name of a user's line.
_LINE = re.compile(r".+:[0-9]+")
#: The separator of a library row's name: ``module:function <- the user's call``.
CALLED = " <- "


def line_name(path: str, line: int) -> str:
    """A user's line by its old name: ``path:line``."""
    return f"{path}:{line}"


def is_line_name(name: str) -> bool:
    """Whether `name` is an old name holding a line number (``train.py:33``,
    ``mod:fn <- train.py:28``)."""
    return bool(_LINE.fullmatch(name.rpartition(CALLED)[2] if CALLED in name else name))


def unwrapped_name(key: tuple, held: Any) -> str:
    """The name a crossing no wrapper names counts under in a budget `held`
    (anything with ``in``): `key` is ``(path, line, op, direction[, name])``;
    its name, or its old name ``path:line`` where `held` holds that and not
    the name (a budget frozen before names had no line number; an entry of a
    run file from then has no name)."""
    name = key[4] if len(key) > 4 and key[4] else ""
    if name and name in held:
        return name
    old = line_name(key[0], key[1])
    return old if old in held or not name else name


def lines_of(meta: Any) -> dict:
    """A run file's ``meta.lines`` (``{site: [[path, line(, old name)], ...]}``),
    the entries of the right shape alone (a file is not trusted)."""
    raw = meta.get("lines") if isinstance(meta, Mapping) else None
    out: dict = {}
    if isinstance(raw, Mapping):
        for site, at in raw.items():
            if isinstance(site, str) and isinstance(at, list):
                good = [tuple(x) for x in at if isinstance(x, list) and len(x) in (2, 3)
                        and isinstance(x[0], str) and type(x[1]) is int and all(isinstance(o, str) for o in x[2:])]
                if good:
                    out[site] = good
    return out


def old_library_names(site: str, lines: Mapping[str, Any]) -> list:
    """The old names of `site`: a launch site's as recorded
    (``train.py:12:torch.compile``), a library row's (``mod:fn <- train.py:f:x.log``)
    ``mod:fn <- train.py:LINE`` for each line it was called from."""
    fn, sep, _ = site.partition(CALLED)
    out = []
    for at in lines.get(site, ()):
        if len(at) > 2:
            out.append(at[2])
        elif sep:
            out.append(f"{fn}{CALLED}{line_name(at[0], at[1])}")
    return out


def fold_library(held: Any, sites: Mapping[str, Any], lines: Optional[Mapping[str, Any]]) -> dict:
    """`sites` (``{site: counts}``) with each row the budget `held` does not
    hold counted under its old name where the budget holds that (several rows
    of one old name add up); `lines`: ``{site: [(path, line), ...]}``."""
    if not lines:
        return dict(sites)
    out: dict = {}
    for site, v in sites.items():
        if site not in held:
            old = next((o for o in old_library_names(site, lines) if o in held), None)
            if old is not None and old not in sites:
                site = old
        had = out.get(site)
        out[site] = v if had is None else _add(had, v)
    return out


def added(counts: Any, n: int) -> Any:
    """A site's counts (a number, or a tuple whose first is its crossings) with `n` more crossings."""
    return (counts[0] + n,) + tuple(counts[1:]) if isinstance(counts, tuple) else counts + n


def _add(a: Any, b: Any) -> Any:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return tuple(x + y for x, y in zip(a, b))
    return (a[0] if isinstance(a, tuple) else a) + (b[0] if isinstance(b, tuple) else b)
