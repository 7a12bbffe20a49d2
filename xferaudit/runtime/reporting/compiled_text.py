"""The "compiled regions" section of the printed report: per compiled site,
its calls and the graphs each ran, its graph breaks at the user's lines, its
CUDA-graph replays and skips, and its recompilations
(:mod:`xferaudit.runtime.counted.compiled` counts them; the report and the
run file keep them in ``meta["compiled"]``)."""

from __future__ import annotations

from typing import Any, Optional

from ..._text import printable

__all__ = ["compiled_section", "graphs_per_call"]


def graphs_per_call(region: dict) -> tuple:
    """``(least, most)`` graphs one call of the region ran ((0, 0): no call)."""
    counts = [int(k) for k, v in (region.get("graphs_per_call") or {}).items() if v]
    return (min(counts), max(counts)) if counts else (0, 0)


def _per(n: float, d: float) -> str:
    return f"{n / d:.3g}" if d else "-"


def compiled_section(regions: Any, steps: Optional[int] = None) -> list:
    """The section's lines (none where no compiled site ran)."""
    if not isinstance(regions, list) or not regions:
        return []
    lines = ["", "compiled regions (graphs run per call, graph breaks, CUDA graphs; read from torch)"]
    for r in regions:
        if not isinstance(r, dict):
            continue
        calls, runs = int(r.get("calls") or 0), int(r.get("graph_runs") or 0)
        lo, hi = graphs_per_call(r)
        per = f"{lo}" if lo == hi else f"{lo}-{hi}"
        step = f", {_per(runs, steps)} per step" if steps else ""
        lines.append(f"  {printable(str(r.get('site')))}: {calls} call(s), {runs} graph(s) run "
                     f"({per} per call{step})")
        breaks = r.get("breaks") or []
        if breaks:
            n = sum(int(b.get("count") or 0) for b in breaks)
            lines.append(f"    graph breaks: {n} at {len(breaks)} line(s) (each splits the graph: a sync, "
                         "eager Python, one more graph to launch)")
            for b in breaks:
                text = f"  {printable(str(b.get('text')))}" if b.get("text") else ""
                lines.append(f"      {b.get('count'):>4}  {printable(str(b.get('path')))}:{b.get('line')}  "
                             f"{b.get('reason')}{text}  [{printable(str(b.get('detail')))}]")
        replays, skips = int(r.get("replays") or 0), int(r.get("cudagraph_skips") or 0)
        pending = int(r.get("pending_backward") or 0)
        if replays or skips or pending:
            without = runs - int(r.get("replayed_runs") or 0)
            lines.append(f"    CUDA graphs: {replays} replay(s); {without} of {runs} graph run(s) "
                         f"without one; {skips} skip(s)")
        if pending:
            lines.append(f"      {pending:>4}  run(s) kept in warm-up: a forward ran again before its "
                         "backward (training mode with no backward: run it under torch.no_grad(), or "
                         "call torch.compiler.cudagraph_mark_step_begin() each step)")
            for s in r.get("skips") or []:
                at = f" at {printable(str(s.get('at')))}" if s.get("at") else ""
                lines.append(f"      {s.get('count'):>4}  {s.get('reason')}{at}  "
                             f"[{printable(str(s.get('detail')))}]")
        for rc in r.get("recompiles") or []:
            lines.append(f"    recompiled {rc.get('count')}x: guard failed: {printable(str(rc.get('guard')))}")
    return lines
