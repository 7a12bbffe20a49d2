"""Merging per-rank reports: the outlier rule, the layout, and ``xferaudit merge``.

Reports are built as plain data (no torch, no process group): each test
states the per-rank crossings and checks what the merge derives from them.
Nothing here imports libcst.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from xferaudit.cli import main
from xferaudit.runtime.reporting._report import Report, ReportError, Row, Unwrapped
from xferaudit.runtime.ranks.distributed import OUTLIER_RULE, RankedReport, merge

SITE = "train.py:Trainer.step:loss.item"
OTHER = "train.py:Trainer.step:batch.to"


def rank_report(rank, crossings, world=None, site=SITE, nbytes=4, extra=None, unwrapped=()):
    """One rank's report: `crossings` downloads of `nbytes` each at `site`."""
    rows = []
    if crossings:
        rows.append(Row(site, "down", "down", crossings, crossings, crossings * nbytes,
                        {"down": {"calls": crossings, "bytes": crossings * nbytes}}))
    for s, n in (extra or {}).items():
        rows.append(Row(s, "up", "up", n, n, n * 128, {"up": {"calls": n, "bytes": n * 128}}))
    meta = {"counting": True}
    if rank is not None:
        meta["rank"] = rank
    if world is not None:
        meta["world_size"] = world
    uw = [Unwrapped("train.py", 40, "aten._local_scalar_dense", "down", c, 4 * c)
          for c in unwrapped if c]
    return Report(rows, [], uw, meta).sorted()


def save_ranks(tmp_path: Path, counts, world=None, **kw) -> list:
    files = []
    for r, c in enumerate(counts):
        p = tmp_path / f"run.rank{r}.json"
        rank_report(r, c, len(counts) if world is None else world, **kw).save(p)
        files.append(str(p))
    return files


@pytest.mark.parametrize("counts", [
    [2, 2], [2, 5], [5, 2], [4, 4, 12, 4], [1, 2, 3, 4], [0, 0, 1], [3, 3, 3], [7],
])
def test_outlier_rule_is_above_the_median_of_the_ranks(counts):
    m = merge([rank_report(r, c, len(counts)) for r, c in enumerate(counts)])
    med = statistics.median(counts)
    want = sorted(r for r, c in enumerate(counts) if c > med) if len(counts) > 1 else []
    assert [o["rank"] for o in m.outliers() if o["site"] == SITE] == want
    assert all(o["median"] == med for o in m.outliers())
    if any(counts):
        row = m.to_dict()["rows"][0]
        assert row["outlier_ranks"] == want
        assert row["median_crossings"] == med
        assert row["crossings"] == sum(counts)
        assert row["per_rank"] == {str(r): {"calls": c, "crossings": c, "bytes": 4 * c, "seconds": 0.0}
                                   for r, c in enumerate(counts)}


def test_a_rank_missing_a_site_counts_zero_there():
    reps = [rank_report(0, 2, 3), rank_report(1, 2, 3, extra={OTHER: 6}), rank_report(2, 2, 3)]
    m = merge(reps)
    per = m.per_rank()
    assert {r: c["crossings"] for r, c in per[OTHER].items()} == {0: 0, 1: 6, 2: 0}
    assert [(o["site"], o["rank"]) for o in m.outliers()] == [(OTHER, 1)]


def test_unwrapped_lines_are_merged_and_flagged_per_rank():
    reps = [rank_report(r, 1, 3, unwrapped=[c]) for r, c in enumerate([1, 9, 1])]
    m = merge(reps)
    assert [(u.count, u.bytes) for u in m.unwrapped] == [(11, 44)]
    o = [x for x in m.outliers() if x.get("unwrapped")]
    assert [(x["rank"], x["crossings"], x["median"]) for x in o] == [(1, 9, 1)]
    d = m.to_dict()["unwrapped"][0]
    assert d["per_rank"] == {"0": {"count": 1, "bytes": 4}, "1": {"count": 9, "bytes": 36},
                             "2": {"count": 1, "bytes": 4}}
    assert d["outlier_ranks"] == [1]


def test_json_round_trip_keeps_ranks_and_stays_a_plain_report():
    m = merge([rank_report(r, c, 3) for r, c in enumerate([2, 2, 8])])
    data = json.loads(json.dumps(m.to_dict()))
    assert data["outlier_rule"] == OUTLIER_RULE
    back = Report.from_dict(data)
    assert isinstance(back, RankedReport)
    assert back.to_dict() == m.to_dict()
    # An old reader sees ordinary totals: the per-rank data are extra keys only.
    plain = Report.from_dict({k: v for k, v in data.items() if k != "ranks"})
    assert type(plain) is Report
    assert [(r.site, r.crossings) for r in plain.rows] == [(SITE, 12)]


def test_merge_refuses_inconsistent_inputs():
    with pytest.raises(ReportError, match="b: rank 1 is also in a"):
        merge([rank_report(1, 1, 2), rank_report(1, 1, 2)], ["a", "b"])
    with pytest.raises(ReportError, match="world sizes differ"):
        merge([rank_report(0, 1, 2), rank_report(1, 1, 4)], ["a", "b"])
    with pytest.raises(ReportError, match="b: no rank recorded"):
        merge([rank_report(0, 1, 2), rank_report(None, 1)], ["a", "b"])
    with pytest.raises(ReportError, match="outside world size 2"):
        merge([rank_report(0, 1, 2), rank_report(2, 1, 2)], ["a", "b"])
    with pytest.raises(ReportError, match="nothing to merge"):
        merge([])


def test_reports_without_ranks_are_numbered_in_order_with_a_note():
    m = merge([rank_report(None, 1), rank_report(None, 4)], ["x", "y"])
    assert m.rank_ids() == [0, 1] and m.world_size == 2
    assert "numbered in the order given" in m.meta["note"]
    assert [o["rank"] for o in m.outliers()] == [1]


def test_missing_ranks_are_reported_not_invented():
    m = merge([rank_report(0, 1, 4), rank_report(3, 5, 4)])
    assert m.meta["missing_ranks"] == [1, 2]
    assert m.rank_ids() == [0, 3]
    assert "missing: 1, 2" in m.format()


def test_cli_merge_writes_the_multi_rank_report(tmp_path, capsys):
    files = save_ranks(tmp_path, [3, 3, 9, 3])
    out = tmp_path / "merged.json"
    assert main(["merge", *files, "-o", str(out)]) == 0
    text = capsys.readouterr().out
    data = json.loads(out.read_text())
    assert data["world_size"] == 4
    assert data["rows"][0]["per_rank"]["2"]["crossings"] == 9
    assert data["outliers"] == [{"site": SITE, "rank": 2, "crossings": 9, "median": 3}]
    assert "rank 2: 9 crossings at " + SITE in text
    # The per-rank table: one column per rank, the flagged cell starred.
    line = next(x for x in text.splitlines() if x.endswith(SITE) and "*" in x)
    assert line.split()[:5] == ["3", "3", "9*", "3", "3"]
    # A merged file merges again, and `report` shows the same per-rank table.
    assert main(["report", str(out)]) == 0
    assert line in capsys.readouterr().out


def test_cli_merge_of_a_merged_file_with_more_ranks(tmp_path, capsys):
    files = save_ranks(tmp_path, [1, 1, 1, 6])
    first = tmp_path / "first.json"
    assert main(["merge", files[0], files[1], "-o", str(first), "-q"]) == 0
    both = tmp_path / "both.json"
    assert main(["merge", str(first), files[2], files[3], "-o", str(both), "-q"]) == 0
    assert capsys.readouterr().out == ""
    data = json.loads(both.read_text())
    assert [e["rank"] for e in data["ranks"]] == [0, 1, 2, 3]
    assert data["rows"][0]["outlier_ranks"] == [3]


@pytest.mark.parametrize("content, message", [
    (None, "no such file"),
    ("{", "not JSON"),
    ('{"hello": 1}', "not an xferaudit report"),
    ('{"rows": [{"site": 3}]}', "'site' must be a string"),
])
def test_cli_merge_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, content, message):
    good = save_ranks(tmp_path, [1, 1])[0]
    bad = tmp_path / "bad.json"
    if content is not None:
        bad.write_text(content)
    out = tmp_path / "merged.json"
    assert main(["merge", good, str(bad), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "xferaudit: error: " in err and message in err and str(bad) in err
    assert not out.exists()


def test_cli_merge_disagreeing_files_exit_2(tmp_path, capsys):
    a = tmp_path / "a.json"
    b = tmp_path / "b.json"
    rank_report(0, 1, 2).save(a)
    rank_report(0, 3, 2).save(b)
    out = tmp_path / "m.json"
    out.write_text("keep me")
    assert main(["merge", str(a), str(b), "-o", str(out)]) == 2
    assert "rank 0 is also in" in capsys.readouterr().err
    assert out.read_text() == "keep me"
    assert main(["merge", str(a), "-o", str(tmp_path / "no" / "such" / "dir.json")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_cli_merge_json_to_stdout(tmp_path, capsys):
    files = save_ranks(tmp_path, [2, 2])
    assert main(["merge", *files, "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["outliers"] == [] and data["world_size"] == 2


def test_a_line_a_rank_holds_twice_adds_up_per_rank_and_flags_that_rank(tmp_path, capsys):
    # rank 0 holds line 40 twice (two entries of one line: by another function or text);
    # its count there is their sum, 12, against 5 and 5 on the others
    reps = [rank_report(r, 0, 3, unwrapped=c) for r, c in enumerate([(9, 3), (5,), (5,)])]
    m = merge(reps)
    (u,) = m.unwrapped
    cells = m.per_rank_unwrapped()[("train.py", 40, "aten._local_scalar_dense", "down")]
    assert {r: c["count"] for r, c in cells.items()} == {0: 12, 1: 5, 2: 5}
    assert sum(c["count"] for c in cells.values()) == u.count == 22
    assert sum(c["bytes"] for c in cells.values()) == u.bytes == 88
    assert [(o["rank"], o["crossings"]) for o in m.outliers() if o.get("unwrapped")] == [(0, 12)]
    files = []
    for r, rep in enumerate(reps):
        rep.save(tmp_path / f"r{r}.json")
        files.append(str(tmp_path / f"r{r}.json"))
    assert main(["merge", *files, "-o", str(tmp_path / "m.json")]) == 0
    (saved,) = json.loads((tmp_path / "m.json").read_text())["unwrapped"]
    assert saved["per_rank"] == {"0": {"count": 12, "bytes": 48}, "1": {"count": 5, "bytes": 20},
                                 "2": {"count": 5, "bytes": 20}} and saved["outlier_ranks"] == [0]
