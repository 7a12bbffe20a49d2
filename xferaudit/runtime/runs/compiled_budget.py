"""Budgets of compiled regions: graphs per call, graph breaks, CUDA-graph skips.

A compiled site's budget entry (the same table as its ``launches``) may hold::

    "train.py:12:torch.compile" = { launches = 1, graphs = 3,
        breaks = ["train.py:forward:s = h.sum().item()"], cudagraph_skips = [] }

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
from typing import Any, Mapping, Optional

from ..._text import printable

__all__ = ["KEYS", "CompiledProblem", "check", "freeze", "split", "toml_items"]

KEYS = ("graphs", "breaks", "cudagraph_skips")


@dataclass(frozen=True)
class CompiledProblem:
    """One way a compiled site broke its budget (as :class:`~.budget.Problem`: kind, site, message)."""

    kind: str  # "graph break" | "graphs" | "cudagraph skip"
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
        elif not isinstance(x, list) or not all(isinstance(s, str) for s in x):
            raise error(f"{where}.{k}: a list of names (strings), not {x!r}")
        entry[k] = x
    rest = {k: x for k, x in v.items() if k not in KEYS}
    return (rest or None), entry


def _most_graphs(region: Mapping) -> int:
    counts = [int(k) for k, n in (region.get("graphs_per_call") or {}).items() if n]
    return max(counts, default=0)


def freeze(regions: Any) -> dict:
    """site -> its budget entry, from a run's ``meta["compiled"]``."""
    out: dict = {}
    for r in regions if isinstance(regions, list) else ():
        if not isinstance(r, dict) or not isinstance(r.get("site"), str):
            continue
        out[r["site"]] = {
            "graphs": _most_graphs(r),
            "breaks": sorted({b["name"] for b in r.get("breaks") or () if isinstance(b, dict)}),
            "cudagraph_skips": sorted({s["name"] for s in r.get("skips") or () if isinstance(s, dict)}),
        }
    return out


def toml_items(entry: Mapping) -> str:
    """The entry as the items of a TOML inline table (``graphs = 3, breaks = [...]``)."""
    return ", ".join(f"{k} = {json.dumps(entry[k])}" for k in KEYS if k in entry)


def check(allowed: Mapping, regions: Any, measured: Any = None) -> list:
    """Problems of `regions` (a run's, or ``expect``'s whole block) against
    `allowed` (site -> entry); graphs per call from `measured` (the measured
    steps' regions; default `regions`)."""
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
    return problems
