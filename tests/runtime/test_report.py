"""The after-step report: table, totals, JSON round-trip, load errors, diff, and
the `report` / `diff` commands."""

from __future__ import annotations

import io
import json

import pytest

import xferaudit.runtime as xfer
from xferaudit.cli import main
from xferaudit.runtime.counted import recorder
from xferaudit.runtime.reporting._report import NORMAL, Report, ReportError, diff


def fill(sites):
    """Record straight into the tally: {site: [(direction, nbytes), ...]}."""
    for site, events in sites.items():
        for direction, n in events:
            recorder.record(site, "move", direction, n)


def test_table_sorted_by_crossings_with_totals_and_launches():
    fill({
        "a.py:f:x.to": [("up", 1000)] * 2,
        "a.py:f:loss.item": [("down", 4)] * 5,
        "a.py:f:h.cpu": [("none", 0)] * 7,
        "a.py:f:m.to": [("up", 2_000_000), ("down", 500_000), ("none", 0)],
    })
    recorder.record_launch("a.py:<module>:torch.compile", nodes=12)
    recorder.record_launch("a.py:<module>:torch.compile")
    recorder.record_launch("a.py:f:g.replay")
    buf = io.StringIO()
    rep = xfer.report(file=buf)
    text = buf.getvalue()
    assert text == rep.format()
    lines = text.splitlines()
    assert lines[0].startswith("xferaudit:") and NORMAL.splitlines()[0] in lines[1]
    body = [ln for ln in lines if ln.startswith(("up ", "down ", "none ", "up,down "))]
    assert [ln.split()[-1] for ln in body] == [
        "a.py:f:loss.item", "a.py:f:m.to", "a.py:f:x.to", "a.py:f:h.cpu"]
    assert body[1].split()[:6] == ["up,down", "3", "2", "2", "2.5", "MB"]  # calls crossings copies bytes
    assert [r.site for r in rep.rows] == [ln.split()[-1] for ln in body]
    tot = rep.totals()
    assert tot["up"] == {"crossings": 3, "copies": 3, "bytes": 2_002_000, "pageable": 0, "seconds": 0.0}
    assert tot["down"] == {"crossings": 6, "copies": 6, "bytes": 500_020, "pageable": 0, "seconds": 0.0}
    assert tot["all"] == {"crossings": 9, "copies": 9, "bytes": 2_502_020, "pageable": 0, "seconds": 0.0}
    assert "total up" in text and "total down" in text and "total all" in text
    total_all = next(ln for ln in lines if ln.startswith("total all"))
    assert total_all.split()[2:] == ["17", "9", "9", "2.5", "MB"]
    assert " ms " not in text  # no host time recorded: no time columns
    launch_lines = text.split("graph launches")[1].splitlines()
    assert launch_lines[2].split() == ["2", "12", "a.py:<module>:torch.compile"]
    assert launch_lines[3].split() == ["1", "-", "a.py:f:g.replay"]
    assert xfer.launches() == {"a.py:<module>:torch.compile": 2, "a.py:f:g.replay": 1}


def test_rows_have_the_contract_keys():
    fill({"s": [("up", 8), ("none", 0)]})
    d = xfer.snapshot().to_dict()
    (row,) = d["rows"]
    assert {k: row[k] for k in ("site", "kind", "direction", "calls", "crossings", "bytes")} == {
        "site": "s", "kind": "move", "direction": "up", "calls": 2, "crossings": 1, "bytes": 8}
    assert row["by_direction"] == {
        "up": {"calls": 1, "bytes": 8, "copies": 1, "pageable": 0, "seconds": 0.0},
        "none": {"calls": 1, "bytes": 0, "copies": 0, "pageable": 0, "seconds": 0.0}}
    assert (row["copies"], row["pageable"], row["seconds"]) == (1, 0, 0.0)
    assert d["launches"] == [] and d["unwrapped"] == []


def test_json_round_trip(tmp_path):
    fill({"a": [("up", 10)] * 3, "b": [("down", 4), ("d2d", 64)]})
    recorder.record_launch("g", nodes=5)
    recorder.record_unwrapped("train.py", 12, "aten._local_scalar_dense", "down", 4)
    recorder.record_unwrapped("train.py", 12, "aten._local_scalar_dense", "down", 4)
    rep = xfer.report(file=io.StringIO())
    path = rep.save(tmp_path / "run.json")
    back = Report.load(path)
    assert back.to_dict() == rep.to_dict()
    assert back.format() == rep.format()
    assert back.unwrapped[0].count == 2 and "train.py:12" in back.format()
    assert json.loads(path.read_text())["rows"][0]["site"] == "a"
    assert not list(tmp_path.glob(".*tmp"))  # the temporary file is gone


def test_report_to_a_path(tmp_path):
    fill({"a": [("up", 1)]})
    rep = xfer.report(file=tmp_path / "out.txt")
    assert (tmp_path / "out.txt").read_text() == rep.format()


def test_empty_report_says_how_to_count(capsys):
    xfer.report()
    out = capsys.readouterr().out
    assert "nothing counted" in out and "xfer.count(True)" in out


@pytest.mark.parametrize("content, message", [
    ("{", "not JSON"),
    ("[]", "not an xferaudit report"),
    ('{"rows": [{"site": "a"}]}', "missing key 'calls'"),
    ('{"rows": [{"site": "a", "calls": "2", "crossings": 1, "bytes": 0, "direction": "up"}]}',
     "'calls' must be an integer"),
    ('{"format": "other", "rows": []}', "format is 'other'"),
])
def test_load_rejects_what_is_not_a_report(tmp_path, content, message):
    p = tmp_path / "bad.json"
    p.write_text(content)
    with pytest.raises(ReportError, match=message):
        Report.load(p)


def test_load_missing_file(tmp_path):
    with pytest.raises(ReportError, match="no such file"):
        Report.load(tmp_path / "nope.json")


def test_diff_shows_a_swap_that_totals_hide():
    fill({"keep": [("up", 100)], "gone": [("down", 4)] * 2})
    a = xfer.snapshot()
    xfer.reset()
    fill({"keep": [("up", 100)], "new": [("down", 4)] * 2})
    b = xfer.snapshot()
    assert a.totals() == b.totals()  # same totals...
    d = diff(a, b)
    status = {c.site: c.status for c in d["sites"]}
    assert status == {"keep": "same", "gone": "removed", "new": "added"}  # ...different causes
    new = next(c for c in d["sites"] if c.site == "new")
    assert new.crossings == (0, 2) and new.bytes == (0, 8)


def test_report_command_renders_a_saved_run(tmp_path, capsys):
    fill({"a.py:f:x.to": [("up", 2048)], "a.py:f:y.item": [("down", 4)] * 3})
    rep = xfer.snapshot()
    path = rep.save(tmp_path / "run.json")
    assert main(["report", str(path)]) == 0
    assert capsys.readouterr().out == rep.format()
    assert main(["report", str(path), "--top", "1", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["site"] for r in out["rows"]] == ["a.py:f:y.item"]


def test_report_command_errors_exit_2(tmp_path, capsys):
    assert main(["report", str(tmp_path / "missing.json")]) == 2
    assert "no such file" in capsys.readouterr().err
    (tmp_path / "x.json").write_text("{}")
    assert main(["report", str(tmp_path / "x.json")]) == 2
    assert "not an xferaudit report" in capsys.readouterr().err


def test_diff_command(tmp_path, capsys):
    fill({"s1": [("up", 1_000_000)] * 2, "s2": [("down", 4)]})
    recorder.record_launch("g")
    a = xfer.snapshot().save(tmp_path / "a.json")
    xfer.reset()
    fill({"s1": [("up", 1_000_000)] * 3, "s3": [("down", 4)]})
    recorder.record_launch("g")
    recorder.record_launch("g")
    b = xfer.snapshot().save(tmp_path / "b.json")
    assert main(["diff", str(a), str(b)]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    changed = next(ln for ln in lines if ln.endswith(" s1"))
    assert changed.split()[:6] == ["changed", "2->3", "2->3", "2->3", "+1", "MB"]
    assert any(ln.startswith("added") and ln.endswith("s3") for ln in lines)
    assert any(ln.startswith("removed") and ln.endswith("s2") for ln in lines)
    assert "crossings 3 -> 4 (+1)" in out
    assert "changed  1 -> 2  g" in out
    assert main(["diff", str(a), str(b), "--format", "json"]) == 0
    d = json.loads(capsys.readouterr().out)
    s1 = next(s for s in d["sites"] if s["site"] == "s1")
    assert s1["delta"] == {"calls": 1, "crossings": 1, "copies": 1, "bytes": 1_000_000, "seconds": 0.0}
    assert main(["diff", str(a), str(tmp_path / "none.json")]) == 2


# --- duplicate site rows: every command reads a report through one loader, which refuses them
def _with_duplicate(tmp_path, where="rows"):
    row = {"site": "t.py:step:x.to", "kind": "up", "direction": "up", "calls": 2, "crossings": 2,
           "bytes": 8, "by_direction": {"up": {"calls": 2, "bytes": 8}}}
    data = {"format": "xferaudit.report", "version": 1, "meta": {"steps": 1}, "rows": [row],
            "launches": [{"site": "t.py:<module>:torch.compile", "launches": 1}]}
    if where == "rows":
        data["rows"] = [row, dict(row, calls=1, crossings=1, bytes=4,
                                  by_direction={"up": {"calls": 1, "bytes": 4}})]
    else:
        data["launches"] = data["launches"] * 2
    p = tmp_path / f"dup_{where}.json"
    p.write_text(json.dumps(data))
    good = tmp_path / "good.json"
    good.write_text(json.dumps(dict(data, rows=[row], launches=data["launches"][:1])))
    return p, good


@pytest.mark.parametrize("where, site", [("rows", "t.py:step:x.to"), ("launches", "t.py:<module>:torch.compile")])
def test_duplicate_site_rows_are_refused_by_every_command_naming_the_site(tmp_path, capsys, where, site):
    dup, good = _with_duplicate(tmp_path, where)
    with pytest.raises(ReportError, match="twice"):
        Report.load(dup)
    for argv in (["report", str(dup)], ["budget", "--from", str(dup)], ["diff", str(good), str(dup)],
                 ["diff", str(dup), str(good)], ["merge", str(dup), "-o", str(tmp_path / "m.json")]):
        assert main(argv) == 2, argv
        err = capsys.readouterr().err
        assert site in err and "twice" in err and str(dup) in err, (argv, err)
    assert not (tmp_path / "m.json").exists()


def test_duplicate_site_rows_in_one_rank_of_a_merged_report_are_refused(tmp_path, capsys):
    dup, _ = _with_duplicate(tmp_path)
    data = json.loads(dup.read_text())
    merged = {"format": "xferaudit.report", "rows": [], "world_size": 1,
              "ranks": [dict(data, rank=0)]}
    p = tmp_path / "merged.json"
    p.write_text(json.dumps(merged))
    assert main(["report", str(p)]) == 2
    assert "ranks[0]" in capsys.readouterr().err
