"""A picture of a run: crossings and bytes per site, as horizontal bars.

``xferaudit report RUN.json --plot out.png`` (or :func:`plot_report`). The
panels share the site axis: crossings on the left, bytes in the middle, and,
when the report carries host time, the time spent inside each site's calls on
the right. Sites are sorted by crossings (then bytes), or by bytes or time
(``--sort``), the busiest at the top; the guard's unwrapped transfers appear
as sites of their own, labelled ``unwrapped:``.
Single-rank reports colour the bars by direction (up, down, d2d); multi-rank
reports (``xfer.report(all_ranks=True)``, ``xferaudit merge``) stack one
segment per rank and mark a rank above the median of the ranks at a site.
The title gives the totals.

matplotlib is an optional extra (``pip install 'xferaudit[plot]'``), imported
only when a plot is drawn, and only through its object API (no pyplot, no GUI
backend, no global state).
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Any, Optional, Union

from ._atomic import atomic_write
from ._units import human_bytes  # noqa: F401 - re-exported: the plot's labels and the report's units are one

#: At most this many sites are drawn (the rest are counted in the title).
MAX_SITES = 40
#: Site labels longer than this are shortened in the middle.
MAX_LABEL = 64

_DIR_COLORS = {"up": "#1f77b4", "down": "#d62728", "d2d": "#9467bd", "none": "#7f7f7f"}


class PlotError(RuntimeError):
    """The plot cannot be drawn here (matplotlib missing, or the file cannot be written)."""


def require_matplotlib() -> None:
    """Raise PlotError (with the install command) when matplotlib is missing."""
    _matplotlib()


def _matplotlib() -> Any:
    try:
        import matplotlib
        from matplotlib.figure import Figure
    except ImportError:
        raise PlotError(
            "--plot needs matplotlib, an optional extra: pip install 'xferaudit[plot]'"
        ) from None
    return matplotlib, Figure


#: Sort keys of the bars, as the report's ``--sort``.
_SORTS = {
    "crossings": lambda it: (-it["crossings"], -it["bytes"], it["label"]),
    "bytes": lambda it: (-it["bytes"], -it["crossings"], it["label"]),
    "time": lambda it: (-it["seconds"], -it["crossings"], it["label"]),
}


def _short(label: str, width: int = MAX_LABEL) -> str:
    if len(label) <= width:
        return label
    keep = width - 1  # the end (qualname:receiver.method) says more than the path
    head = keep // 3
    return label[:head] + "\u2026" + label[len(label) - (keep - head):]


def _items(rep: Any, sort: str = "crossings") -> list:
    """One dict per bar: label, direction, crossings, bytes, seconds, per-rank
    cells ``(crossings, bytes, seconds)``, flagged ranks; in `sort` order."""
    from .runtime.ranks.distributed import RankedReport, _flag, _uw_key

    ranked = isinstance(rep, RankedReport)
    per = rep.per_rank() if ranked else {}
    per_u = rep.per_rank_unwrapped() if ranked else {}
    items = []
    for r in rep.rows:
        cells = per.get(r.site, {})
        counts = {k: c["crossings"] for k, c in cells.items()}
        items.append({
            "label": r.site, "direction": r.direction.split(",")[0], "crossings": r.crossings,
            "bytes": r.bytes, "calls": r.calls, "copies": r.copies, "seconds": r.seconds,
            "per_rank": {k: (c["crossings"], c["bytes"], c.get("seconds", 0.0))
                         for k, c in cells.items()},
            "flagged": _flag(counts)[1] if ranked else [],
        })
    for u in rep.unwrapped:
        cells = per_u.get(_uw_key(u), {})
        counts = {k: c["count"] for k, c in cells.items()}
        items.append({
            "label": f"unwrapped: {u.path}:{u.line} {u.op}", "direction": u.direction,
            "crossings": u.count, "bytes": u.bytes, "calls": u.count, "copies": u.count,
            "seconds": u.seconds,
            "per_rank": {k: (c["count"], c["bytes"], c.get("seconds", 0.0)) for k, c in cells.items()},
            "flagged": _flag(counts)[1] if ranked else [], "unwrapped": True,
        })
    items.sort(key=_SORTS[sort])
    return items


def _title(rep: Any, shown: int, total: int) -> str:
    from .runtime.ranks.distributed import RankedReport

    tot = rep.totals()
    cross = tot["all"]["crossings"] + sum(u.count for u in rep.unwrapped)
    nbytes = tot["all"]["bytes"] + sum(u.bytes for u in rep.unwrapped)
    head = f"xferaudit: {cross:,} crossings, {human_bytes(nbytes)} over {total} site(s)"
    if tot["all"].get("seconds"):
        head += f", {tot['all']['seconds'] * 1e3:.3g} ms inside wrapped calls"
    if isinstance(rep, RankedReport):
        head += f", {len(rep.ranks)} rank(s) of {rep.world_size}"

    def copies(t: dict) -> str:
        n = t.get("copies", t["crossings"])
        return f", {n:,} copies" if n != t["crossings"] else ""

    parts = [f"{d} {tot[d]['crossings']:,} ({human_bytes(tot[d]['bytes'])}{copies(tot[d])})"
             for d in ("up", "down", "d2d") if tot[d]["crossings"]]
    if rep.unwrapped:
        parts.append(f"unwrapped {sum(u.count for u in rep.unwrapped):,} "
                     f"({human_bytes(sum(u.bytes for u in rep.unwrapped))})")
    launches = sum(x.launches for x in rep.launches)
    if launches:
        parts.append(f"graph launches {launches:,}")
    if shown < total:
        parts.append(f"top {shown} of {total} sites shown")
    return head + ("\n" + " \u00b7 ".join(parts) if parts else "")


def plot_report(rep: Any, path: Union[str, "os.PathLike[str]"], top: Optional[int] = None,
                dpi: int = 110, sort: str = "crossings") -> Path:
    """Draw `rep` (a Report or RankedReport) to `path` (PNG, SVG or PDF, by suffix);
    `sort`: the order of the bars (crossings, bytes or time).

    Written through a temporary file renamed into place, so a failed plot never
    leaves half a file. Returns the path.
    """
    matplotlib, Figure = _matplotlib()
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter, MaxNLocator

    from .runtime.ranks.distributed import RankedReport

    out = Path(path)
    if not out.parent.is_dir():
        raise PlotError(f"{out}: directory {out.parent} does not exist")
    items = _items(rep, sort)
    total = len(items)
    limit = MAX_SITES if top is None else max(0, top)
    items = items[:limit]
    ranked = isinstance(rep, RankedReport) and len(rep.ranks) > 1
    ranks = rep.rank_ids() if ranked else []
    # (key, index in a per-rank cell, axis label): the panels, time only where measured
    panels = [("crossings", 0, "crossings (calls that moved data)"), ("bytes", 1, "bytes moved")]
    if any(it["seconds"] for it in items):
        panels.append(("seconds", 2, "host time inside the calls"))

    n = max(len(items), 1)
    longest = max((len(_short(it["label"])) for it in items), default=10)
    label_in = min(0.075 * longest + 0.3, 5.5)  # inches for the site labels
    width = label_in + 4.5 * len(panels)
    height = 1.8 + 0.3 * n
    # Constrained layout makes room for the labels, the title and the legend.
    fig = Figure(figsize=(width, height), dpi=dpi, layout="constrained")
    axes = fig.subplots(1, len(panels), sharey=True)
    ax_c = axes[0]
    ys = list(range(len(items)))
    labels = [_short(it["label"]) for it in items]

    bars = []  # every BarContainer drawn, to hatch the unwrapped rows after
    if ranked:
        cmap = matplotlib.colormaps["tab10" if len(ranks) <= 10 else "tab20"]
        colors = {r: cmap(i % cmap.N) for i, r in enumerate(ranks)}
        for ax, (_, i, _) in zip(axes, panels):
            left = [0.0] * len(items)
            for r in ranks:
                v = [it["per_rank"].get(r, (0, 0, 0.0))[i] for it in items]
                bars.append(ax.barh(ys, v, left=left, color=colors[r], edgecolor="white",
                                    linewidth=0.5, height=0.7))
                left = [x + y for x, y in zip(left, v)]
        handles = [Patch(color=colors[r], label=f"rank {r}") for r in ranks]
        fig.legend(handles=handles, loc="outside lower center", ncol=min(len(ranks), 8),
                   fontsize=8, frameon=False)
    else:
        colors_i = [_DIR_COLORS.get(it["direction"], "#7f7f7f") for it in items]
        for ax, (key, _, _) in zip(axes, panels):
            bars.append(ax.barh(ys, [it[key] for it in items], color=colors_i,
                                edgecolor="white", linewidth=0.5, height=0.7))
        used = []
        for it in items:
            if it["direction"] not in used:
                used.append(it["direction"])
        handles = [Patch(color=_DIR_COLORS.get(d, "#7f7f7f"), label=d) for d in used]
        if handles:
            fig.legend(handles=handles, loc="outside lower center", ncol=len(handles),
                       fontsize=8, frameon=False)

    # The guard's unwrapped transfers: hatched bars, red labels.
    for container in bars:
        for y, it in zip(ys, items):
            if it.get("unwrapped"):
                container.patches[y].set_hatch("///")
    # Value labels at the bar ends (crossings; bytes and time in readable units), and the flag.
    shown = {"crossings": None, "bytes": human_bytes, "seconds": lambda v: f"{v * 1e3:.3g} ms"}
    for ax, (key, _, xlabel) in zip(axes, panels):
        top_v = max((it[key] for it in items), default=0) or 1
        for y, it in zip(ys, items):
            if key == "crossings":
                note = f"{it['crossings']:,}"
                if it.get("copies", it["crossings"]) != it["crossings"]:
                    note += f" ({it['copies']:,} copies)"
                if it["flagged"]:
                    note += "  \u25b2 rank " + ",".join(map(str, it["flagged"])) + " above median"
            else:
                note = shown[key](it[key])
            ax.text(it[key] + top_v * 0.01, y, note, va="center", fontsize=7.5,
                    color="#b00000" if key == "crossings" and it["flagged"] else "#333333")
        ax.set_xlim(0, top_v * (1.45 if key == "crossings" else 1.25))
        ax.set_xlabel(xlabel, fontsize=9)
        if key != "crossings":
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _, f=shown[key]: f(v)))
    ax_c.set_yticks(ys)
    ax_c.set_yticklabels(labels, fontsize=8.5, family="monospace")
    for y, it in zip(ys, items):
        if it.get("unwrapped"):
            ax_c.get_yticklabels()[y].set_color("#b00000")
    ax_c.set_ylim(len(items) - 0.5, -0.5)  # busiest at the top
    ax_c.xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in axes:
        ax.grid(axis="x", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.tick_params(axis="x", labelsize=8)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    if not items:
        ax_c.text(0.5, 0.5, "nothing counted", transform=ax_c.transAxes, ha="center")
        ax_c.set_yticks([])
    fig.suptitle(_title(rep, len(items), total), fontsize=10.5, x=0.5, ha="center")

    fmt = out.suffix.lstrip(".").lower() or "png"
    image = io.BytesIO()
    try:
        fig.savefig(image, format=fmt, dpi=dpi)
        atomic_write(out, image.getvalue())
    except OSError as e:
        raise PlotError(f"{out}: cannot write the plot: {e.strerror or e}") from None
    except ValueError as e:
        raise PlotError(f"{out}: cannot write the plot: {e}") from None
    return out
