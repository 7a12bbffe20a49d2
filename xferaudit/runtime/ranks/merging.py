"""Merging ranks a row at a time: memory grows with the distinct sites, not with ranks x sites.

A merged report holds per-site totals, each rank's counts at each site, and
each rank's own report. :class:`Merger` takes the ranks one after the other,
row by row, and keeps:

* one :class:`~.rows.Row` of totals per distinct site (added with ``Row.add``);
* each rank's calls, crossings, bytes and host seconds per site in flat arrays
  (:class:`RankCells`: 32 bytes a site a rank, no object per cell);
* each rank's rows, when `spill`, as the JSON lines the merged file will hold,
  in a temporary file (:class:`SpilledRows`), so a merged file is written by
  copying them; else the rows themselves (an in-memory merge).

Its rank bookkeeping (which rank a report is, world sizes) is distributed.py's.
"""

from __future__ import annotations

import json
import os
import tempfile
from array import array
from typing import IO, Any, Iterator, Optional

from ..reporting.report_rows import (
    ReportError, Row, add_row, launch_order, new_sums, row_from_dict, row_line, row_order, totals_of, twice,
    unwrapped_order,
)

#: Spilled rows are written in pieces of this many lines.
_BATCH = 4096


def _zeros(n: int) -> array:
    return array("q", bytes(8 * n))


class RankCells:
    """Per rank, the calls, crossings, bytes and host seconds of each row of a
    merged report, by the row's position (so a copy of the report with its site
    names escaped for printing reads the same cells)."""

    __slots__ = ("ranks", "calls", "crossings", "bytes", "seconds")

    def __init__(self, ranks: list, calls: list, crossings: list, nbytes: list, seconds: list) -> None:
        self.ranks = ranks  # rank ids, in order
        self.calls, self.crossings, self.bytes, self.seconds = calls, crossings, nbytes, seconds

    @classmethod
    def of(cls, rows: list, ranks: list) -> "RankCells":
        """The cells of `rows` (totals) from the ranks' own reports."""
        at = {r.site: i for i, r in enumerate(rows)}
        tables: tuple = ([], [], [], [])
        for rep in ranks:
            cells = _cells(len(rows))
            for r in rep.rows:
                i = at.get(r.site)
                if i is not None:
                    _set(cells, i, r)
            for table, a in zip(tables, cells):
                table.append(a)
        return cls([rep.meta["rank"] for rep in ranks], *tables)

    def at(self, i: int) -> list:
        """``[(calls, crossings, bytes, seconds), ...]`` of row `i`, one per rank."""
        return [(c[i], x[i], b[i], t[i])
                for c, x, b, t in zip(self.calls, self.crossings, self.bytes, self.seconds)]

    def crossings_at(self, i: int) -> dict:
        return {rk: x[i] for rk, x in zip(self.ranks, self.crossings)}

    def reorder(self, order: list) -> None:
        """Rows were put in `order` (new position -> old): the cells follow."""
        for table in (self.calls, self.crossings, self.bytes, self.seconds):
            for k, a in enumerate(table):
                table[k] = array(a.typecode, map(a.__getitem__, order))


def _cells(n: int) -> tuple:
    """A rank's cells for `n` sites: calls, crossings, bytes (whole numbers), seconds."""
    return _zeros(n), _zeros(n), _zeros(n), array("d", bytes(8 * n))


def _set(cells: tuple, i: int, row: Row) -> None:
    calls, crossings, nbytes, seconds = cells
    calls[i], crossings[i], nbytes[i], seconds[i] = row.calls, row.crossings, row.bytes, row.seconds


def _grow(cells: tuple, n: int) -> None:
    """Zeros up to `n` sites (sites first seen after this rank)."""
    for a in cells:
        a.extend(array(a.typecode, bytes(8 * (n - len(a)))))


def _read_at(f: IO[bytes], n: int, pos: int) -> bytes:
    """`n` bytes at `pos`, leaving the file's position alone where the system can."""
    if hasattr(os, "pread"):
        return os.pread(f.fileno(), n, pos)
    f.seek(pos)  # pragma: no cover - Windows
    return f.read(n)


class SpilledRows:
    """A rank's rows kept as JSON lines in a merge's temporary file: a sequence
    of :class:`~.rows.Row` read back as it is iterated, or its lines as they are
    (what a merged file holds, copied without decoding)."""

    def __init__(self, f: IO[bytes], start: int, end: int, count: int, where: str, totals: dict) -> None:
        self.f, self.start, self.end, self.count, self.where = f, start, end, count, where
        self.totals = totals  # the rank's Report.totals(), added up as the rows went by

    def __len__(self) -> int:
        return self.count

    def json_lines(self) -> Iterator[str]:
        pos, rest = self.start, b""
        while pos < self.end:
            block = _read_at(self.f, min(1 << 20, self.end - pos), pos)
            if not block:
                break
            pos += len(block)
            lines = (rest + block).split(b"\n")
            rest = lines.pop()
            for line in lines:
                yield line.decode("ascii")
        if rest:
            yield rest.decode("ascii")

    def __iter__(self) -> Iterator[Row]:
        for i, line in enumerate(self.json_lines()):
            yield row_from_dict(json.loads(line), f"{self.where}: rows[{i}]")

    def __getitem__(self, key: Any) -> Any:  # rows[:top] and rows[i], for readers of reports
        rows = list(self)
        return rows[key]


class Merger:
    """Ranks added one at a time (:meth:`begin`, :meth:`add_row` for each row,
    :meth:`end`), then :meth:`finish` in the ranks' order."""

    def __init__(self, spill: bool) -> None:
        self.index: dict = {}  # site -> slot
        self.totals: list = []  # Row of totals per slot
        self.ranks: list = []  # per rank: dict(name, meta, launches, unwrapped, timeline, rows)
        self.cells: list = []  # per rank: (calls, crossings, bytes) arrays by slot
        self.last = array("q")  # per slot: the rank that gave it a row last
        self.first = array("q")  # per slot: that row's index in its rank
        self.sizes: list = []  # (world size, who said so) declared by merged inputs
        self.spill: Optional[IO[bytes]] = tempfile.TemporaryFile() if spill else None
        self._lines: list = []
        self._rows: list = []
        self._prev: Optional[tuple] = None
        self._sorted = True
        self._start = 0
        self._name = ""
        self._n = 0

    def begin(self, name: str) -> None:
        """A rank starts (`name`: what errors call it)."""
        self.cells.append(_cells(len(self.totals)))
        self._name, self._rows, self._lines, self._n = name, [], [], 0
        self._sums = new_sums()
        self._prev, self._sorted = None, True
        if self.spill is not None:
            self._start = self.spill.seek(0, os.SEEK_END)

    def add_row(self, row: Row) -> None:
        k, n = len(self.ranks), self._n
        cells = self.cells[k]
        i = self.index.get(row.site)
        if i is None:
            i = self.index[row.site] = len(self.totals)
            self.totals.append(Row(row.site, row.kind, "none", 0, 0, 0, {}))
            self.last.append(-1)
            self.first.append(0)
            _grow(cells, i + 1)
        elif self.last[i] == k:
            raise twice(row.site, n, self.first[i], self._name)
        self.last[i], self.first[i] = k, n
        try:
            _set(cells, i, row)
        except (OverflowError, TypeError):
            raise ReportError(f"{self._name}: rows[{n}]: a count that is no whole number "
                              "from 0 to 2**63-1") from None
        self.totals[i].add(row)
        self._n += 1
        if self.spill is None:
            self._rows.append(row)
            return
        add_row(self._sums, row)
        key = row_order(row)
        if self._prev is not None and key < self._prev:
            self._sorted = False
        self._prev = key
        self._lines.append(row_line(row))
        if len(self._lines) >= _BATCH:
            self._flush()

    def _flush(self, to_disk: bool = False) -> None:
        if self._lines:
            self.spill.write(("\n".join(self._lines) + "\n").encode("ascii"))
            self._lines = []
        if to_disk:  # SpilledRows reads the file itself (os.pread), not this buffer
            self.spill.flush()

    def end(self, meta: dict, launches: list, unwrapped: list, timeline: Any) -> None:
        """The rank is over: its meta (with its rank id, if known) and its small parts."""
        rows: Any = self._rows
        if self.spill is not None:
            totals = totals_of(self._sums)
            self._flush(to_disk=True)
            rows = SpilledRows(self.spill, self._start, self.spill.tell(), self._n, self._name, totals)
            if not self._sorted:  # not in the report's order: sorted, as a load sorts them
                ordered = sorted(rows, key=row_order)
                self._start = self.spill.seek(0, os.SEEK_END)
                self._lines = [row_line(r) for r in ordered]
                self._flush(to_disk=True)
                rows = SpilledRows(self.spill, self._start, self.spill.tell(), self._n, self._name,
                                   totals)
        self.ranks.append({"name": self._name, "meta": meta, "rows": rows, "timeline": timeline,
                           "launches": sorted(launches, key=launch_order),
                           "unwrapped": sorted(unwrapped, key=unwrapped_order)})
        self._rows = []

    def release(self) -> None:
        """Drop what only the merging needed (the site index, the per-slot arrays):
        the report keeps the totals, the cells in row order and the ranks."""
        self.index, self.totals, self.cells = {}, [], []
        self.last, self.first = array("q"), array("q")

    def finish(self, order: list) -> tuple:
        """(totals rows in the report's order, their :class:`RankCells`), the
        ranks taken in `order` (indexes into :attr:`ranks`, each with its rank id
        in its meta)."""
        n = len(self.totals)
        rows_order = sorted(range(n), key=lambda i: row_order(self.totals[i]))
        rows = [self.totals[i] for i in rows_order]
        tables: tuple = ([], [], [], [])
        for k in order:
            _grow(self.cells[k], n)
            for table, a in zip(tables, self.cells[k]):
                table.append(array(a.typecode, map(a.__getitem__, rows_order)))
        ids = [self.ranks[k]["meta"]["rank"] for k in order]
        return rows, RankCells(ids, *tables)
