"""What to do about each way a run broke its budget, and the commands that do it.

A gate that only says "broken" leaves the user to guess whether to remove
the crossing, name it, or take the new figure into the budget. Each problem
gets one line of what to do, and the verdict ends with the exact commands:

* a new crossing at a line nothing names: remove it, name it (``xferaudit
  wrap --from RUN.json`` writes a wrapper there), or allow it in the budget;
* a site over its allowance: cross less there, or raise the allowance (the
  figure to write is given);
* a name the budget does not hold (a new site, a new graph site): remove it,
  or add it (the line to write is given);
* pageable copies: pin the host memory, or drop ``non_blocking``;
* any of them, where the change is meant: freeze the budget again from this
  run (``xferaudit budget --from RUN.json -o BUDGET``).

Pure text: nothing here reads the run or the budget's file.
"""

from __future__ import annotations

import json
import os
import shlex
from typing import Any, Optional

from ..._text import printable

__all__ = ["advice", "commands"]


def number(x: Any) -> str:
    """A per-step figure as the messages write it: whole, else 3 significant digits."""
    if x is None:
        return "-"
    if float(x).is_integer():
        return str(int(x))
    return f"{x:.3g}"


def _key(site: str) -> str:
    """The site as a budget file's key (a TOML basic string), escaped for a terminal."""
    return printable(json.dumps(site, ensure_ascii=False))


def _where(budget_file: Optional[str]) -> str:
    return f"in {printable(budget_file)}" if budget_file else "in the budget"


def advice(p: Any, budget_file: Optional[str] = None, run_file: Optional[str] = None) -> str:
    """One line: what to do about problem `p` (a :class:`~.budget.Problem`)."""
    where = _where(budget_file)
    per = number(p.measured)
    if p.kind == "unseen":
        return printable(p.what)  # (unseen.py: what to do, in its own words)
    if p.kind == "unwrapped":
        name = (f"name the line (`xferaudit wrap --from {_arg(run_file)}` wraps it)" if run_file
                else "name the line (wrap it: `xferaudit wrap --from RUN.json` on a run of it)")
        return (f"remove the crossing, {name}, or allow it: "
                f"{_key(p.site)} = {per} {where}")
    if p.kind == "pageable":
        if p.site == "all sites":
            return "pin the host memory (tensor.pin_memory()) or drop non_blocking=True where these copies are made"
        return (f"pin the host memory (tensor.pin_memory()) or drop non_blocking=True, or allow them: "
                f"pageable = {per} at {_key(p.site)} {where}")
    if p.kind == "unexpected":
        if p.what == "launches":
            return (f"remove the compiled call or graph, or if it is meant add "
                    f"{_key(p.site)} = {{ launches = {per} }} {where}")
        return f"remove the crossing, or if it is meant add {_key(p.site)} = {per} {where}"
    what = p.what
    if what == "launches":
        return (f"launch it less often, or raise its allowance: "
                f"{_key(p.site)} = {{ launches = {per} }} {where}")
    if what == "copies":
        return f"copy less here, or raise its allowance: copies = {per} at {_key(p.site)} {where}"
    return f"cross less here, or raise its allowance: {_key(p.site)} = {per} {where}"


def _arg(path: Any) -> str:
    """A path as an argument to type (relative to the working folder where below it), escaped."""
    text = os.fspath(path)
    try:
        rel = os.path.relpath(text)
        if not rel.startswith(".."):
            text = rel
    except ValueError:  # pragma: no cover - another drive (Windows)
        pass
    return printable(shlex.quote(text))


def commands(problems: list, budget_file: Optional[str], in_pyproject: bool,
             run_file: Optional[str]) -> list:
    """The lines that end a broken verdict: the exact commands, for a run file."""
    if not problems or run_file is None:
        return []
    run = _arg(run_file)
    out = ["  what to do: fix each problem above as its line says; if every change is meant, freeze the "
           "budget again from this run:"]
    if budget_file and not in_pyproject:
        out.append(f"    xferaudit budget --from {run} -o {_arg(budget_file)}")
    else:
        out.append(f"    xferaudit budget --from {run} > budget.toml   "
                   "(then put its table in place of [tool.xferaudit.budget] of pyproject.toml)")
    if any(p.kind == "unwrapped" for p in problems):
        out.append(f"  to name the lines nothing names (then run and freeze again): xferaudit wrap --from {run}")
    return out
