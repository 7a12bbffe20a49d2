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
from typing import Any, Iterator, Optional, Sequence

from ..._validate import count
from ..reporting._report import (
    SORTS, Launch, Report, ReportError, Reshape, Unwrapped, launch_order, read_file, read_parts,
    unwrapped_order,
)
from .merging import Merger, RankCells
from ..._gc import collector_paused
from ..reporting.report_json import Fields, Items, Pairs, encode

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
    sorted by rank (a rank read from a file keeps its rows in a temporary file
    until they are written again: :class:`~.merging.SpilledRows`);
    ``world_size`` is the size of the job (ranks may be missing from a merge:
    ``meta["missing_ranks"]``). ``cells`` holds each rank's calls, crossings
    and bytes at each row, by the row's position (:class:`~.merging.RankCells`);
    per-rank counts and the outliers are derived from them.
    """

    ranks: list = field(default_factory=list)  # list[Report]
    world_size: int = 1
    cells: Optional[RankCells] = None

    def __post_init__(self) -> None:
        if self.cells is None:
            self.cells = RankCells.of(self.rows, self.ranks)

    def sorted(self, by: str = "crossings") -> "RankedReport":
        key = SORTS[by]
        order = sorted(range(len(self.rows)), key=lambda i: key(self.rows[i]))
        self.rows = [self.rows[i] for i in order]
        self.cells.reorder(order)  # (the cells follow their rows)
        super().sorted(by)
        return self

    # --- derived figures -----------------------------------------------------
    def rank_ids(self) -> list:
        return [r.meta["rank"] for r in self.ranks]

    def per_rank(self) -> dict:
        """``{site: {rank: {"calls", "crossings", "bytes", "seconds"}}}``, 0s for
        ranks never there (``seconds``: the rank's host time in the site's calls)."""
        ids = self.cells.ranks
        return {row.site: {rk: {"calls": c, "crossings": x, "bytes": b, "seconds": t}
                           for rk, (c, x, b, t) in zip(ids, self.cells.at(i))}
                for i, row in enumerate(self.rows)}

    def per_rank_unwrapped(self) -> dict:
        """``{(path, line, op, direction): {rank: {"count", "bytes"}}}``."""
        out: dict = {}
        for u in self.unwrapped:
            out[_uw_key(u)] = {r: {"count": 0, "bytes": 0} for r in self.rank_ids()}
        for rep in self.ranks:
            for u in rep.unwrapped:
                cell = out.setdefault(_uw_key(u), {r: {"count": 0, "bytes": 0}
                                                   for r in self.rank_ids()})
                c = cell[rep.meta["rank"]]  # (a line a rank holds twice: its entries add up, as the total's do)
                c["count"] += u.count
                c["bytes"] += u.bytes
        return out

    def per_rank_launches(self) -> dict:
        ids = self.rank_ids()
        out: dict = {x.site: {r: 0 for r in ids} for x in self.launches}
        for rep in self.ranks:
            for x in rep.launches:
                out.setdefault(x.site, {r: 0 for r in ids})[rep.meta["rank"]] = x.launches
        return out

    def _row_outliers(self) -> Iterator[dict]:
        for i, row in enumerate(self.rows):
            counts = self.cells.crossings_at(i)
            med, flagged = _flag(counts)
            for r in flagged:
                yield {"site": row.site, "rank": r, "crossings": counts[r], "median": _num(med)}

    def outliers(self) -> list:
        """Flagged (site, rank) pairs, by :data:`OUTLIER_RULE`: dicts with keys
        site, rank, crossings, median (and "unwrapped": True for the guard's lines)."""
        found = list(self._row_outliers())
        for key, cells in self.per_rank_unwrapped().items():
            med, flagged = _flag({r: c["count"] for r, c in cells.items()})
            found += [{"site": _uw_name(key), "rank": r, "crossings": cells[r]["count"],
                       "median": _num(med), "unwrapped": True} for r in flagged]
        return found

    # --- JSON ----------------------------------------------------------------
    def fields(self, top: Optional[int] = None) -> Iterator[tuple[str, Any]]:
        # world_size first: a reader streaming the file knows it holds ranks before its rows.
        yield "world_size", self.world_size
        for key, value in super().fields(top):
            if key == "rows":  # each row's line, its per-rank cells added before its "}"
                value = Items((line[:-1] + ", " + encode(self._rank_cells(i))[1:]
                               for i, line in enumerate(value.items)), encoded=True)
            elif key == "launches":
                per_l = self.per_rank_launches()
                value = Items(dict(x, per_rank={str(r): n for r, n in per_l.get(x["site"], {}).items()})
                              for x in value.items)
            elif key == "unwrapped":
                per_u = self.per_rank_unwrapped()
                value = Items(self._ranked_unwrapped(u, per_u) for u in value.items)
            yield key, value
        yield "outlier_rule", OUTLIER_RULE
        yield "outliers", self.outliers()
        yield "ranks", Items((Fields(_with_rank(rep)) for rep in self.ranks), objects=True)

    def _rank_cells(self, i: int) -> dict:
        """What a merged file's row `i` holds beyond a row: its ranks' counts, their median, the outliers."""
        ids = self.cells.ranks
        cells = self.cells.at(i)
        med, flagged = _flag({r: x for r, (_, x, _, _) in zip(ids, cells)})
        return {"per_rank": {str(r): {"calls": c, "crossings": x, "bytes": b, "seconds": t}
                             for r, (c, x, b, t) in zip(ids, cells)},
                "median_crossings": _num(med), "outlier_ranks": flagged}

    @staticmethod
    def _ranked_unwrapped(u: dict, per_u: dict) -> dict:
        cells = per_u.get((u["path"], u["line"], u["op"], u["direction"]), {})
        med, flagged = _flag({r: c["count"] for r, c in cells.items()})
        u["per_rank"] = {str(r): c for r, c in cells.items()}
        u["median_count"] = _num(med)
        u["outlier_ranks"] = flagged
        return u

    # --- reading (the shape Report's reader hands "ranks" to) ---------------
    @staticmethod
    def merger(spill: bool) -> Merger:
        return Merger(spill)

    @staticmethod
    def read_ranks(items: Any, where: str, merger: Merger) -> None:
        """Each saved rank into `merger`, read as any report is (its rows one by one)."""
        for i, entry in enumerate(items):
            w = f"{where}: ranks[{i}]"
            pairs = entry.items() if isinstance(entry, dict) else entry if isinstance(entry, Pairs) else None
            if pairs is None:
                raise ReportError(f"{w}: must be an object")
            merger.begin(w)
            parts = read_parts(((k, v) for k, v in pairs if k != "ranks"), w, merger.add_row)
            meta = dict(parts["meta"]) if isinstance(parts.get("meta"), dict) else {}
            rk = parts["rank"] if "rank" in parts else meta.get("rank")
            if "rank" in parts:
                count(rk, w, "rank", ReportError)
            if isinstance(rk, bool) or not isinstance(rk, int) or rk < 0:
                raise ReportError(f"{w}: \"rank\" must be an integer >= 0, not {rk!r}")
            meta["rank"] = rk
            merger.end(meta, parts.get("launches", []), parts.get("unwrapped", []), parts.get("timeline"))

    @staticmethod
    def finish(merger: Merger, parts: dict, where: str, own: bool) -> Optional["RankedReport"]:
        """The merged report read (`own`), or, merging it with others, what it
        says of the job (its world size) noted in `merger`."""
        ws = parts.get("world_size")
        if ws is not None and (isinstance(ws, bool) or not isinstance(ws, int) or ws < 1):
            raise ReportError(f"{where}: \"world_size\" must be an integer >= 1, not {ws!r}")
        if ws is not None:
            merger.sizes.append((ws, where))
        if not own:
            return None
        meta = parts.get("meta") if isinstance(parts.get("meta"), dict) else {}
        return merged(merger, note=meta.get("note"))

    # --- text ----------------------------------------------------------------
    def format(self, top: Optional[int] = None) -> str:
        return "".join(self.format_lines(top))

    def format_lines(self, top: Optional[int] = None) -> Iterator[str]:
        """The table in pieces, each made as it is asked for: the totals'
        table, a blank line, then each line of the per-rank table (a million
        rows are printed without the whole text in memory twice)."""
        yield super().format(top)
        yield "\n"
        ids = self.rank_ids()
        missing = self.meta.get("missing_rank_ranges")
        yield (f"ranks: {len(ids)} of world size {self.world_size}"
               + (f" (missing: {_ranges_text(missing)})" if missing else "") + "\n")
        steps = {r.meta["rank"]: r.meta.get("steps") for r in self.ranks}
        if any(steps.values()):  # each rank's own (a budget from this run is per rank per step)
            shown = set(steps.values())
            yield ("steps per rank: " + (str(next(iter(shown))) if len(shown) == 1 else
                                         ", ".join(f"rank {r}: {n or '-'}" for r, n in steps.items())) + "\n")
        if self.meta.get("note"):
            yield f"note: {self.meta['note']}\n"
        if self.rows and len(ids) > 1:
            yield "per rank: crossings at each site; * = above the median of the ranks there\n"
            wide = len(ids) <= MAX_RANK_COLUMNS
            head = [f"{'rank ' + str(r):>8}" for r in ids] if wide else [
                f"{'min':>8}", f"{'max':>8}", f"{'above':>12}"]
            yield " ".join(head + [f"{'median':>8}"]) + "  site\n"
            for i, row in enumerate(self.rows[:top]):
                counts = self.cells.crossings_at(i)
                med, flagged = _flag(counts)
                if wide:
                    cols = [f"{str(counts.get(r, 0)) + ('*' if r in flagged else ''):>8}"
                            for r in ids]
                else:
                    above = ",".join(map(str, flagged)) or "-"
                    cols = [f"{min(counts.values()):>8}", f"{max(counts.values()):>8}",
                            f"{above:>12}"]
                yield " ".join(cols + [f"{_num(med)!s:>8}"]) + f"  {row.site}\n"
        outl = self.outliers()
        if outl:
            yield "ranks above the median of the ranks at a site (a rank that never reached it counts 0):\n"
            for o in outl:
                what = "unwrapped " if o.get("unwrapped") else ""
                yield (f"  rank {o['rank']}: {o['crossings']} {what}crossings at "
                       f"{o['site']} (median {o['median']})\n")
        elif len(ids) > 1:
            yield "no rank crosses more than the median of the ranks at any site\n"

    __str__ = format


def _with_rank(rep: Report) -> Iterator[tuple[str, Any]]:
    yield from rep.fields()
    yield "rank", rep.meta["rank"]


def _rank_of(meta: dict) -> Optional[int]:
    rk = meta.get("rank")
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
    rank, disagreeing world sizes, a rank outside the world size, a mix of
    reports with and without a rank, or a site twice in one report.
    """
    names = list(names) if names is not None else [f"report {i}" for i in range(len(reports))]
    merger = Merger(spill=False)
    for name, rep in zip(names, reports):
        for r in rep.ranks if isinstance(rep, RankedReport) else [rep]:
            merger.begin(name)
            for row in r.rows:
                merger.add_row(row)
            merger.end(dict(r.meta), list(r.launches), list(r.unwrapped), r.timeline)
    return merged(merger, world_size, note)


def merge_files(paths: Sequence[Any], world_size: Optional[int] = None,
                note: Optional[str] = None) -> RankedReport:
    """:func:`merge` of saved reports, streamed: each file is read a row at a
    time into one :class:`~.merging.Merger`, which keeps per-site totals and
    flat per-rank counts, and each rank's rows in a temporary file; memory
    grows with the distinct sites, not with ranks x sites."""
    shapes: dict = {}  # file -> True (merged) / False (one rank), where a first reading guessed wrong
    with collector_paused():
        return _merge_files(paths, shapes, world_size, note)


def _merge_files(paths: Sequence[Any], shapes: dict, world_size: Optional[int], note: Optional[str]) -> RankedReport:
    while True:
        merger = Merger(spill=True)
        try:
            for p in paths:
                current = p
                read_file(p, skip_rows=shapes.get(p), into=merger)
        except Reshape as e:
            shapes[current] = e.ranked  # read them all again, knowing
            continue
        return merged(merger, world_size, note)


def merged(merger: Merger, world_size: Optional[int] = None, note: Optional[str] = None) -> RankedReport:
    """The :class:`RankedReport` of every rank given to `merger`: the ranks
    numbered and checked against each other, then ordered."""
    parts = merger.ranks
    if not parts:
        raise ReportError("nothing to merge: no report given")
    notes = [note] if note else []
    ranked = []
    for p in parts:
        try:
            ranked.append(_rank_of(p["meta"]))
        except ReportError as e:
            raise ReportError(f"{p['name']}: {e}") from None
    if all(r is None for r in ranked):
        ranked = list(range(len(parts)))
        if len(parts) > 1:
            notes.append("no rank recorded in the reports: numbered in the order given")
    elif any(r is None for r in ranked):
        bad = next(p["name"] for p, r in zip(parts, ranked) if r is None)
        raise ReportError(f"{bad}: no rank recorded (meta.rank), but other reports have one; "
                          "save each rank's report while torch.distributed is initialized")
    seen: dict = {}
    for p, rk in zip(parts, ranked):
        if rk in seen:
            raise ReportError(f"{p['name']}: rank {rk} is also in {seen[rk]}")
        seen[rk] = p["name"]
    sizes: dict = {}
    for p in parts:
        ws = p["meta"].get("world_size")
        if ws is not None:
            if isinstance(ws, bool) or not isinstance(ws, int) or ws < 1:
                raise ReportError(f"{p['name']}: meta.world_size must be an integer >= 1, not {ws!r}")
            sizes.setdefault(ws, p["name"])
    for ws, name in merger.sizes + ([(world_size, parts[0]["name"])] if world_size is not None else []):
        sizes.setdefault(ws, name)
    if len(sizes) > 1:
        (a, na), (b, nb) = list(sizes.items())[:2]
        raise ReportError(f"world sizes differ: {a} in {na}, {b} in {nb}")
    ws = next(iter(sizes), max(ranked) + 1)
    if max(ranked) >= ws:
        raise ReportError(f"{seen[max(ranked)]}: rank {max(ranked)} is outside world size {ws}")

    order = sorted(range(len(parts)), key=lambda k: ranked[k])
    for k in order:  # a copy whose meta records the rank (the given report is left unchanged)
        parts[k]["meta"] = dict(parts[k]["meta"], rank=ranked[k])
    rows, cells = merger.finish(order)
    merger.release()
    per_rank = [Report(p["rows"], p["launches"], p["unwrapped"], p["meta"], p["timeline"])
                for p in (parts[k] for k in order)]
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
    meta.update(_run_kind([(p["name"], p["meta"]) for p in parts]))
    if notes:
        meta["note"] = "; ".join(notes)
    return RankedReport(rows, sorted(launches.values(), key=launch_order),
                        sorted(unwrapped.values(), key=unwrapped_order), meta, None,
                        ranks=per_rank, world_size=ws, cells=cells)


def _run_kind(metas: list) -> dict:
    """``{"kind": "run", "root": ...}`` when every report (``(name, meta)``) is a
    run file of one project root (their paths are relative to it), else {};
    ReportError when run files are mixed with other reports or with another root's."""
    runs = [(name, meta) for name, meta in metas if meta.get("kind") == "run"]
    if not runs:
        return {}
    if len(runs) != len(metas):
        other = next(name for name, meta in metas if meta.get("kind") != "run")
        raise ReportError(f"{other}: not a run file, but {runs[0][0]} is (meta.kind \"run\"): "
                          "merge run files with run files")
    roots = {}
    for name, meta in runs:
        roots.setdefault(meta.get("root"), name)
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
