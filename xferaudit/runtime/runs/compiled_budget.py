"""Budgets of compiled regions: calls, graphs per call, graph breaks, CUDA-graph skips.

A compiled site's budget entry (the same table as its ``launches``) may hold::

    "train.py:<module>:torch.compile" = { launches = 3, calls = 1, graphs = 3,
        breaks = ["train.py:forward:s = h.sum().item()"], cudagraph_skips = [] }

* ``launches``: graph launches per step: a compiled call is as many launches as
  the graphs it ran (its own and its resume functions');
* ``calls``: calls of the compiled site per step. A budget written before
  launches counted graphs has no ``calls``: its ``launches`` (calls per step,
  then) is still checked against the run's calls of the site, as it was;
* ``graphs``: the most graphs one call may run (a break adds one: a resume
  function's graph);
* ``breaks``: the graph breaks allowed, by name (``path:function:text`` of the
  line, :func:`xferaudit.runtime.counted.compiled.break_name`). A break at any
  other line fails, naming its line and reason; ``breaks = []``: none allowed
  (a step that had none keeps none). A compiled site the budget does not name
  may break nowhere, once the budget names the breaks of any site;
* ``cudagraph_skips``: the CUDA-graph skips allowed, by ``reason: input or
  line`` (``CPU input: arg0_1``); any other fails.

Breaks, skips and recompiles happen when a site compiles (the first calls),
so ``expect`` checks them over its whole block, warm-up included; graphs per
call over the measured steps. ``xferaudit budget --from RUN.json`` freezes
them from a run's ``meta["compiled"]`` (:func:`freeze`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Mapping, Optional

from ..._text import printable

__all__ = ["KEYS", "CompiledProblem", "as_budgeted", "check", "freeze", "split", "toml_items"]

KEYS = ("calls", "graphs", "breaks", "cudagraph_skips")


@dataclass(frozen=True)
class CompiledProblem:
    """One way a compiled site broke its budget (as :class:`~.budget.Problem`: kind, site, message)."""

    kind: str  # "graph break" | "graphs" | "calls" | "cudagraph skip"
    site: str
    measured: float
    budget: Optional[float]
    what: str = ""  # the break's or skip's name

    @property
    def message(self) -> str:
        site, what = printable(self.site), printable(self.what)
        if self.kind == "graphs":
            return (f"over budget: {site}: {self.measured:g} graphs in one call, budget "
                    f"{self.budget:g} (a new graph break or an eager fallback)")
        if self.kind == "calls":
            return (f"over budget: {site}: {self.measured:g} calls per step, budget {self.budget:g} "
                    "(the compiled site is called more often)")
        if self.kind == "graph break":
            return f"new graph break: {site}: {what} (not in the budget's breaks)"
        return f"new CUDA-graph skip: {site}: {what} (not in the budget's cudagraph_skips)"


def split(v: Mapping, where: str, error: type) -> tuple:
    """``(the rest of the table or None, the compiled entry or None)`` of one
    site's table; `error` (BudgetError) for a malformed value."""
    if not any(k in v for k in KEYS):
        return v, None
    entry: dict = {}
    for k in KEYS:
        if k not in v:
            continue
        x = v[k]
        if k == "graphs":
            if isinstance(x, bool) or not isinstance(x, int) or x < 0:
                raise error(f"{where}.graphs: a whole number of graphs per call, not {x!r}")
        elif k == "calls":
            try:
                ok = not isinstance(x, bool) and isinstance(x, (int, float, str)) and Fraction(x) >= 0
            except (ValueError, ZeroDivisionError):
                ok = False
            if not ok:
                raise error(f"{where}.calls: calls per step (a number >= 0, or \"a/b\"), not {x!r}")
        elif not isinstance(x, list) or not all(isinstance(s, str) for s in x):
            raise error(f"{where}.{k}: a list of names (strings), not {x!r}")
        entry[k] = x
    rest = {k: x for k, x in v.items() if k not in KEYS}
    return (rest or None), entry


def _most_graphs(region: Mapping) -> int:
    counts = [int(k) for k, n in (region.get("graphs_per_call") or {}).items() if n]
    return max(counts, default=0)


def freeze(regions: Any, per_step: Any = None) -> dict:
    """site -> its budget entry, from a run's ``meta["compiled"]``; `per_step`
    turns the run's calls of a site into its allowance per step (default: as they are)."""
    out: dict = {}
    for r in regions if isinstance(regions, list) else ():
        if not isinstance(r, dict) or not isinstance(r.get("site"), str):
            continue
        calls = r.get("calls") if isinstance(r.get("calls"), int) else 0
        out[r["site"]] = {
            "calls": per_step(calls) if per_step is not None else calls,
            "graphs": _most_graphs(r),
            "breaks": sorted({b["name"] for b in r.get("breaks") or () if isinstance(b, dict)}),
            "cudagraph_skips": sorted({s["name"] for s in r.get("skips") or () if isinstance(s, dict)}),
        }
    return out


def toml_items(entry: Mapping) -> str:
    """The entry as the items of a TOML inline table (``graphs = 3, breaks = [...]``)."""
    return ", ".join(f"{k} = {json.dumps(entry[k])}" for k in KEYS if k in entry)


def as_budgeted(launches: Mapping, allowed: Mapping, regions: Any) -> dict:
    """`launches` (site -> launches) as the budget counts them: a site whose
    entry has no ``calls`` (a budget written when a compiled call was one
    launch) is held to its calls (from `regions`, the same steps' compiled
    regions), not to the graphs they ran."""
    out = dict(launches)
    for r in regions if isinstance(regions, list) else ():
        site = r.get("site") if isinstance(r, dict) else None
        entry = allowed.get(site)
        if site in out and (entry is None or "calls" not in entry) and isinstance(r.get("calls"), int):
            out[site] = r["calls"]
    return out


def check(allowed: Mapping, regions: Any, measured: Any = None, steps: float = 1) -> list:
    """Problems of `regions` (a run's, or ``expect``'s whole block) against
    `allowed` (site -> entry); calls per step (over `steps`) and graphs per
    call from `measured` (the measured steps' regions; default `regions`)."""
    problems: list = []
    if not allowed:
        return problems
    named_breaks = any("breaks" in e for e in allowed.values())
    for r in regions if isinstance(regions, list) else ():
        site = r.get("site")
        entry = allowed.get(site)
        if entry is None and not named_breaks:
            continue
        ok = set((entry or {}).get("breaks", ())) if entry is None or "breaks" in entry else None
        if ok is not None:
            for b in r.get("breaks") or ():
                if b["name"] not in ok:
                    what = f"{b['path']}:{b['line']} {b['reason']}: {b.get('text') or b['name']}"
                    problems.append(CompiledProblem("graph break", site, b["count"], None, what))
        if entry is None:
            continue
        if "cudagraph_skips" in entry:
            for s in r.get("skips") or ():
                if s["name"] not in entry["cudagraph_skips"]:
                    problems.append(CompiledProblem("cudagraph skip", site, s["count"], None, s["name"]))
    for r in measured if isinstance(measured, list) else (regions if isinstance(regions, list) else ()):
        entry = allowed.get(r.get("site"))
        if entry is not None and "graphs" in entry and _most_graphs(r) > entry["graphs"]:
            problems.append(CompiledProblem("graphs", r["site"], _most_graphs(r), entry["graphs"]))
        if entry is not None and "calls" in entry and r.get("calls", 0) > Fraction(entry["calls"]) * Fraction(steps):
            problems.append(CompiledProblem("calls", r["site"], r["calls"] / steps, float(Fraction(entry["calls"]))))
    return problems
