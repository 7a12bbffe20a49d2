"""Multi-rank reports: every rank counts its own crossings; rank 0 sees them all.

Why: in data-parallel training every rank runs the same step on its own
slice of the data, so every rank should cross the same number of times at
each site. A rank that crosses more (it logs, evaluates, checkpoints, or takes
a branch the others do not) slows every other rank down at the next
collective, and a report of one rank, or of a sum, does not show it.

Normal: the same crossings at every site on every rank (rank 0 often has a
few more downloads for logging). More on one rank is flagged.

Two ways to get one report of all ranks:

* ``xfer.report(all_ranks=True)``, called by every rank at the same point (it
  is a collective): each rank's report goes to rank 0 through
  ``torch.distributed.gather_object`` on the default process group (gloo,
  NCCL, whatever it uses; with NCCL, call ``torch.cuda.set_device`` for each
  rank first, as torch.distributed requires). Rank 0 prints and returns the
  merged :class:`RankedReport`; the other ranks print nothing and get their
  own report back. Without an initialized process group it is a one-rank
  report with a note saying so, not an error.
* Each rank saves its own report (``xfer.report().save(f"run.rank{r}.json")``;
  rank and world size are recorded in it when torch.distributed is
  initialized) and ``xferaudit merge run.rank*.json -o run.json`` merges them.

Both give the same layout: per-site totals in the usual "rows" (so a merged
report reads like any other), each row's "per_rank" counts, and the outliers.

Outlier rule (:data:`OUTLIER_RULE`): at a site, a rank is flagged when its
crossings exceed the median of all the ranks' crossings there, a rank that
never reached the site counting as 0. With two ranks that differ, the higher
one is flagged; with ``[4, 4, 12, 4]`` rank 2 is; when all ranks agree none
is. The guard's unwrapped transfers are judged the same way, per source line.

torch is never imported here: ``torch.distributed`` is looked up in
``sys.modules`` (a process group cannot exist unless it was imported).
"""

from __future__ import annotations

import dataclasses
import statistics
import sys
from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from ._report import Launch, Report, ReportError, Row, Unwrapped

OUTLIER_RULE = (
    "a rank is flagged at a site when its crossings there exceed the median of all ranks' "
    "crossings at that site (a rank that never reached the site counts 0)"
)
NOT_INITIALIZED = (
    "torch.distributed is not initialized: this is one process's report (rank 0 of 1)"
)
#: Up to this many ranks the per-rank table has one column per rank; above it,
#: min / median / max and the flagged ranks.
MAX_RANK_COLUMNS = 8


def rank_info(group: Any = None) -> Optional[tuple]:
    """``(rank, world_size)`` when torch.distributed is initialized, else None."""
    dist = sys.modules.get("torch.distributed")
    if dist is None:
        return None
    try:
        if not (dist.is_available() and dist.is_initialized()):
            return None
        return dist.get_rank(), dist.get_world_size(group)
    except Exception:  # a half-torn-down group: treat as not distributed
        return None


def stamp(rep: Report) -> Report:
    """Record this process's rank and world size in ``rep.meta`` (when distributed)."""
    info = rank_info()
    if info is not None:
        rep.meta["rank"], rep.meta["world_size"] = info
    return rep


def _uw_key(u: Unwrapped) -> tuple:
    return (u.path, u.line, u.op, u.direction)


def _uw_name(key: tuple) -> str:
    return f"{key[0]}:{key[1]} {key[2]} ({key[3]})"


def _flag(counts: dict) -> tuple:
    """(median, ranks above it) for ``{rank: crossings}`` over every rank present."""
    if not counts:
        return 0, []
    med = statistics.median(counts.values())
    if len(counts) < 2:
        return med, []
    return med, sorted(r for r, c in counts.items() if c > med)


def _num(x: float) -> Any:
    return int(x) if float(x).is_integer() else float(x)


@dataclass
class RankedReport(Report):
    """A report of several ranks: totals in ``rows`` plus each rank's own report.

    ``ranks`` holds one :class:`Report` per rank present (``meta["rank"]`` set),
    sorted by rank; ``world_size`` is the size of the job (ranks may be
    missing from a merge: ``meta["missing_ranks"]``). Per-rank counts and the
    outliers are derived from ``ranks`` (:meth:`per_rank`, :meth:`outliers`).
    """

    ranks: list = field(default_factory=list)  # list[Report]
    world_size: int = 1

    # --- derived figures -----------------------------------------------------
    def rank_ids(self) -> list:
        return [r.meta["rank"] for r in self.ranks]

    def per_rank(self) -> dict:
        """``{site: {rank: {"calls", "crossings", "bytes", "seconds"}}}``, 0s for
        ranks never there (``seconds``: the rank's host time in the site's calls)."""
        out: dict = {}
        zero = {"calls": 0, "crossings": 0, "bytes": 0, "seconds": 0.0}
        for row in self.rows:
            out[row.site] = {r: dict(zero) for r in self.rank_ids()}
        for rep in self.ranks:
            rk = rep.meta["rank"]
            for row in rep.rows:
                out.setdefault(row.site, {r: dict(zero) for r in self.rank_ids()})[rk] = {
                    "calls": row.calls, "crossings": row.crossings, "bytes": row.bytes,
                    "seconds": row.seconds}
        return out

    def per_rank_unwrapped(self) -> dict:
        """``{(path, line, op, direction): {rank: {"count", "bytes"}}}``."""
        out: dict = {}
        for u in self.unwrapped:
            out[_uw_key(u)] = {r: {"count": 0, "bytes": 0} for r in self.rank_ids()}
        for rep in self.ranks:
            for u in rep.unwrapped:
                cell = out.setdefault(_uw_key(u), {r: {"count": 0, "bytes": 0}
                                                   for r in self.rank_ids()})
                cell[rep.meta["rank"]] = {"count": u.count, "bytes": u.bytes}
        return out

    def per_rank_launches(self) -> dict:
        ids = self.rank_ids()
        out: dict = {x.site: {r: 0 for r in ids} for x in self.launches}
        for rep in self.ranks:
            for x in rep.launches:
                out.setdefault(x.site, {r: 0 for r in ids})[rep.meta["rank"]] = x.launches
        return out

    def outliers(self) -> list:
        """Flagged (site, rank) pairs, by :data:`OUTLIER_RULE`: dicts with keys
        site, rank, crossings, median (and "unwrapped": True for the guard's lines)."""
        found = []
        for site, cells in self.per_rank().items():
            med, flagged = _flag({r: c["crossings"] for r, c in cells.items()})
            found += [{"site": site, "rank": r, "crossings": cells[r]["crossings"],
                       "median": _num(med)} for r in flagged]
        for key, cells in self.per_rank_unwrapped().items():
            med, flagged = _flag({r: c["count"] for r, c in cells.items()})
            found += [{"site": _uw_name(key), "rank": r, "crossings": cells[r]["count"],
                       "median": _num(med), "unwrapped": True} for r in flagged]
        return found

    # --- JSON ----------------------------------------------------------------
    def to_dict(self, top: Optional[int] = None) -> dict:
        d = super().to_dict(top)
        per = self.per_rank()
        for row in d["rows"]:
            cells = per.get(row["site"], {})
            med, flagged = _flag({r: c["crossings"] for r, c in cells.items()})
            row["per_rank"] = {str(r): c for r, c in cells.items()}
            row["median_crossings"] = _num(med)
            row["outlier_ranks"] = flagged
        per_u = self.per_rank_unwrapped()
        for u in d["unwrapped"]:
            cells = per_u.get((u["path"], u["line"], u["op"], u["direction"]), {})
            med, flagged = _flag({r: c["count"] for r, c in cells.items()})
            u["per_rank"] = {str(r): c for r, c in cells.items()}
            u["median_count"] = _num(med)
            u["outlier_ranks"] = flagged
        per_l = self.per_rank_launches()
        for x in d["launches"]:
            x["per_rank"] = {str(r): n for r, n in per_l.get(x["site"], {}).items()}
        d["world_size"] = self.world_size
        d["outlier_rule"] = OUTLIER_RULE
        d["outliers"] = self.outliers()
        d["ranks"] = [dict(rep.to_dict(), rank=rep.meta["rank"]) for rep in self.ranks]
        return d

    @classmethod
    def from_dict(cls, data: Any, where: str = "report") -> "RankedReport":
        """Rebuilt from the saved "ranks" (the totals are derived from them again)."""
        if not isinstance(data, dict) or not isinstance(data.get("ranks"), list):
            raise ReportError(f"{where}: \"ranks\" must be a list of per-rank reports")
        reps = []
        for i, entry in enumerate(data["ranks"]):
            w = f"{where}: ranks[{i}]"
            if not isinstance(entry, dict):
                raise ReportError(f"{w}: must be an object")
            rep = Report.from_dict({k: v for k, v in entry.items() if k != "ranks"}, w)
            rk = entry.get("rank", rep.meta.get("rank"))
            if isinstance(rk, bool) or not isinstance(rk, int) or rk < 0:
                raise ReportError(f"{w}: \"rank\" must be an integer >= 0, not {rk!r}")
            rep.meta["rank"] = rk
            reps.append(rep)
        ws = data.get("world_size")
        if ws is not None and (isinstance(ws, bool) or not isinstance(ws, int) or ws < 1):
            raise ReportError(f"{where}: \"world_size\" must be an integer >= 1, not {ws!r}")
        meta = data.get("meta") if isinstance(data.get("meta"), dict) else {}
        return merge(reps, [where] * len(reps), world_size=ws, note=meta.get("note"))

    # --- text ----------------------------------------------------------------
    def format(self, top: Optional[int] = None) -> str:
        lines = [super().format(top).rstrip("\n"), ""]
        ids = self.rank_ids()
        lines.append(f"ranks: {len(ids)} of world size {self.world_size}"
                     + (f" (missing: {_ranges_text(self.meta['missing_rank_ranges'])})"
                        if self.meta.get("missing_rank_ranges") else ""))
        if self.meta.get("note"):
            lines.append(f"note: {self.meta['note']}")
        per = self.per_rank()
        if self.rows and len(ids) > 1:
            lines.append("per rank: crossings at each site; "
                         "* = above the median of the ranks there")
            wide = len(ids) <= MAX_RANK_COLUMNS
            head = [f"{'rank ' + str(r):>8}" for r in ids] if wide else [
                f"{'min':>8}", f"{'max':>8}", f"{'above':>12}"]
            lines.append(" ".join(head + [f"{'median':>8}"]) + "  site")
            for row in self.rows[:top]:
                cells = per.get(row.site, {})
                counts = {r: cells[r]["crossings"] for r in ids if r in cells}
                med, flagged = _flag(counts)
                if wide:
                    cols = [f"{str(counts.get(r, 0)) + ('*' if r in flagged else ''):>8}"
                            for r in ids]
                else:
                    above = ",".join(map(str, flagged)) or "-"
                    cols = [f"{min(counts.values()):>8}", f"{max(counts.values()):>8}",
                            f"{above:>12}"]
                lines.append(" ".join(cols + [f"{_num(med)!s:>8}"]) + f"  {row.site}")
        outl = self.outliers()
        if outl:
            lines.append("ranks above the median of the ranks at a site (a rank that never "
                         "reached it counts 0):")
            for o in outl:
                what = "unwrapped " if o.get("unwrapped") else ""
                lines.append(f"  rank {o['rank']}: {o['crossings']} {what}crossings at "
                             f"{o['site']} (median {o['median']})")
        elif len(ids) > 1:
            lines.append("no rank crosses more than the median of the ranks at any site")
        return "\n".join(lines) + "\n"

    __str__ = format


def _rank_of(rep: Report) -> Optional[int]:
    rk = rep.meta.get("rank")
    if rk is None:
        return None
    if isinstance(rk, bool) or not isinstance(rk, int) or rk < 0:
        raise ReportError(f"meta.rank must be an integer >= 0, not {rk!r}")
    return rk


#: At most this many missing ranks are listed one by one in ``meta["missing_ranks"]``.
MAX_LISTED_MISSING = 1000


def _missing(present: list, ws: int) -> dict:
    """The ranks of `ws` not in `present` (sorted), bounded by the input's size, not
    the world size: ``missing_ranks`` lists up to :data:`MAX_LISTED_MISSING`,
    ``missing_rank_ranges`` gives them all as ``[first, last]`` pairs (at most one
    more pair than ranks present), ``missing_rank_count`` how many."""
    ranges, start = [], 0
    for r in present + [ws]:
        if r > start:
            ranges.append([start, r - 1])
        start = r + 1
    if not ranges:
        return {}
    n = sum(b - a + 1 for a, b in ranges)
    listed: list = []
    for a, b in ranges:
        listed += range(a, min(b + 1, a + MAX_LISTED_MISSING - len(listed)))
        if len(listed) >= MAX_LISTED_MISSING:
            break
    return {"missing_ranks": listed, "missing_rank_ranges": ranges, "missing_rank_count": n}


def _ranges_text(ranges: list) -> str:
    return ", ".join(str(a) if a == b else f"{a}, {b}" if b == a + 1 else f"{a}-{b}" for a, b in ranges)


def merge(
    reports: Sequence[Report],
    names: Optional[Sequence[str]] = None,
    world_size: Optional[int] = None,
    note: Optional[str] = None,
) -> RankedReport:
    """One :class:`RankedReport` of per-rank reports (a RankedReport contributes its ranks).

    Ranks come from each report's ``meta["rank"]``; when no report records one
    they are numbered in the order given (and a note says so). Raises
    :class:`ReportError` (naming the file, from `names`) on two reports of one
    rank, disagreeing world sizes, a rank outside the world size, or a mix of
    reports with and without a rank.
    """
    names = list(names) if names is not None else [f"report {i}" for i in range(len(reports))]
    flat: list = []  # (name, Report)
    for name, rep in zip(names, reports):
        if isinstance(rep, RankedReport):
            flat += [(name, r) for r in rep.ranks]
        else:
            flat.append((name, rep))
    if not flat:
        raise ReportError("nothing to merge: no report given")
    notes = [note] if note else []
    ranked = []
    for name, rep in flat:
        try:
            ranked.append(_rank_of(rep))
        except ReportError as e:
            raise ReportError(f"{name}: {e}") from None
    if all(r is None for r in ranked):
        ranked = list(range(len(flat)))
        if len(flat) > 1:
            notes.append("no rank recorded in the reports: numbered in the order given")
    elif any(r is None for r in ranked):
        bad = next(n for (n, _), r in zip(flat, ranked) if r is None)
        raise ReportError(f"{bad}: no rank recorded (meta.rank), but other reports have one; "
                          "save each rank's report while torch.distributed is initialized")
    seen: dict = {}
    for (name, _), rk in zip(flat, ranked):
        if rk in seen:
            raise ReportError(f"{name}: rank {rk} is also in {seen[rk]}")
        seen[rk] = name
    sizes = {}
    for name, rep in flat:
        ws = rep.meta.get("world_size")
        if ws is not None:
            if isinstance(ws, bool) or not isinstance(ws, int) or ws < 1:
                raise ReportError(f"{name}: meta.world_size must be an integer >= 1, not {ws!r}")
            sizes.setdefault(ws, name)
    if world_size is not None:
        sizes.setdefault(world_size, names[0] if names else "report")
    if len(sizes) > 1:
        (a, na), (b, nb) = list(sizes.items())[:2]
        raise ReportError(f"world sizes differ: {a} in {na}, {b} in {nb}")
    ws = next(iter(sizes), max(ranked) + 1)
    if max(ranked) >= ws:
        raise ReportError(f"{seen[max(ranked)]}: rank {max(ranked)} is outside world size {ws}")

    per_rank = []
    for (_, rep), rk in sorted(zip(flat, ranked), key=lambda p: p[1]):
        # A copy whose meta records the rank (the given report is left unchanged).
        meta = dict(rep.meta, rank=rk)
        per_rank.append(Report(list(rep.rows), list(rep.launches), list(rep.unwrapped),
                               meta, rep.timeline))

    rows: dict = {}
    for rep in per_rank:
        for r in rep.rows:
            t = rows.get(r.site)
            if t is None:
                t = rows[r.site] = Row(r.site, r.kind, "none", 0, 0, 0, {})
            t.add(r)
    launches: dict = {}
    for rep in per_rank:
        for x in rep.launches:
            t = launches.setdefault(x.site, Launch(x.site, 0, None))
            t.launches += x.launches
            if x.nodes is not None:
                t.nodes = x.nodes if t.nodes is None else max(t.nodes, x.nodes)
    unwrapped: dict = {}
    for rep in per_rank:
        for u in rep.unwrapped:
            t = unwrapped.get(_uw_key(u))
            if t is None:  # (a copy: the ranks' own entries are left as they are)
                unwrapped[_uw_key(u)] = dataclasses.replace(
                    u, frames=list(u.frames), chains=[list(c) for c in u.chains])
            else:
                t.add(u)

    present = [rep.meta["rank"] for rep in per_rank]
    meta: dict = {
        "counting": any(rep.meta.get("counting", True) for rep in per_rank),
        "world_size": ws,
        "ranks_present": present,
    }
    meta.update(_missing(present, ws))
    meta.update(_run_kind(flat))
    if notes:
        meta["note"] = "; ".join(notes)
    return RankedReport(list(rows.values()), list(launches.values()), list(unwrapped.values()),
                        meta, None, per_rank, ws).sorted()


def _run_kind(flat: list) -> dict:
    """``{"kind": "run", "root": ...}`` when every report is a run file of one
    project root (their paths are relative to it), else {}; ReportError when
    run files are mixed with other reports or with another root's."""
    runs = [(name, rep) for name, rep in flat if rep.meta.get("kind") == "run"]
    if not runs:
        return {}
    if len(runs) != len(flat):
        other = next(name for name, rep in flat if rep.meta.get("kind") != "run")
        raise ReportError(f"{other}: not a run file, but {runs[0][0]} is (meta.kind \"run\"): "
                          "merge run files with run files")
    roots = {}
    for name, rep in runs:
        roots.setdefault(rep.meta.get("root"), name)
    if len(roots) > 1:
        (ra, na), (rb, nb) = list(roots.items())[:2]
        raise ReportError(f"run files of different project roots ({ra} in {na}, {rb} in {nb}): "
                          "their paths are relative to different folders")
    return {"kind": "run", "root": next(iter(roots))}


def single(rep: Report, note: str = NOT_INITIALIZED) -> RankedReport:
    """A one-rank RankedReport of `rep`, with `note` (used when not distributed)."""
    return merge([rep], ["this process"], note=note)


def gather(rep: Report, dst: int = 0, group: Any = None) -> Optional[RankedReport]:
    """Collect every rank's `rep` on rank `dst`: a RankedReport there, None elsewhere.

    A collective: every rank of `group` (default: the default process group)
    must call it. Uses ``torch.distributed.gather_object``; with NCCL the
    objects travel through ``torch.cuda.current_device()``, so each rank must
    have called ``torch.cuda.set_device`` first. When torch.distributed is not
    initialized, returns ``single(rep)`` with a note.
    """
    info = rank_info(group)
    if info is None:
        return single(stamp(rep))
    dist = sys.modules["torch.distributed"]
    rank, size = info
    stamp(rep)
    out = [None] * size if rank == dst else None
    dist.gather_object(rep.to_dict(), out, dst=dst, group=group)
    if rank != dst:
        return None
    reps = [Report.from_dict(d, f"rank {i}") for i, d in enumerate(out)]
    return merge(reps, [f"rank {r.meta.get('rank', i)}" for i, r in enumerate(reps)],
                 world_size=dist.get_world_size())


Report.shapes["ranks"] = RankedReport  # a saved report with "ranks" is a RankedReport
