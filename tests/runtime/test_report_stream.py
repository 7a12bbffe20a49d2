"""Reports streamed both ways: written a row a line, read a chunk at a time,
merged a row at a time; the same reports as the in-memory path, old files too.

Plain data only (no torch, no process group); nothing here imports libcst.
"""

from __future__ import annotations

import io
import json
import os

import pytest

from xferaudit.cli import main
from xferaudit.runtime.reporting import report_json
from xferaudit.runtime.reporting._report import Report, ReportError, Row, Unwrapped
from xferaudit.runtime.ranks.distributed import RankedReport, merge, merge_files
from xferaudit.runtime.reporting.report_json import Fields, Items, chunks, plain, read_pairs
from xferaudit.runtime.counted.rows import Launch

DOC = {
    "format": "xferaudit.report", "n": 1234567890123, "f": -0.5e-3, "t": True, "z": None,
    "s": "a \"quoted\" \\ back\\slash \u00e9 \u2603 \U0001f600 \udcff tab\t nl\n",
    "rows": [{"site": f"m{i}.py:f:x{i}.to", "calls": i * 1000003, "by": {"up": [i, 2.5, None]}}
             for i in range(40)],
    "ranks": [{"meta": {"rank": 0}, "rows": [{"site": "a"}, {"site": "b"}]}, {"rows": []}],
    "launches": [], "empty": {}, "deep": [[[1], {"k": [2, {"x": 3}]}]],
}


def _read_all(text, chunk, streamed=("rows", "ranks", "launches"), nested=("ranks",)):
    """Read `text` back into plain data through the streaming reader."""
    def value(v):
        if isinstance(v, report_json.Pairs):
            return {k: value(x) for k, x in v}
        if hasattr(v, "__next__"):
            return [value(x) for x in v]
        return v

    old = report_json._CHUNK
    report_json._CHUNK = chunk
    try:
        return {k: value(v) for k, v in read_pairs(io.StringIO(text), "f.json", ReportError, streamed, nested)}
    finally:
        report_json._CHUNK = old


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 7, 16, 61, 1 << 20])
@pytest.mark.parametrize("layout", ["ours", "indent", "compact"])
def test_the_reader_gives_what_json_loads_gives_at_any_chunk_size(chunk, layout):
    if layout == "ours":
        text = "".join(chunks(iter(DOC.items())))
    else:
        text = json.dumps(DOC, indent=2 if layout == "indent" else None)
    assert _read_all(text, chunk) == json.loads(text) == DOC


def test_a_number_cut_by_the_chunk_end_is_read_whole():
    text = '{"rows": [1234567, 89012345678901234567890], "x": 12345}'
    for chunk in range(1, len(text) + 1):
        assert _read_all(text, chunk) == json.loads(text)


def test_fields_are_written_a_key_and_a_row_a_line_and_read_back_as_plain_data():
    pairs = [("format", "x"), ("rows", Items(iter([{"a": 1}, {"b": [2]}]))), ("empty", Items(iter([]))),
             ("pre", Items(iter(['{"c": 3}']), encoded=True)),
             ("ranks", Items(iter([Fields(iter([("rows", Items(iter([{"d": 4}])))]))]), objects=True))]
    text = "".join(chunks(iter(pairs)))
    assert text.splitlines() == ['{"format": "x",', '"rows": [', '{"a": 1},', '{"b": [2]}', '],',
                                 '"empty": [],', '"pre": [', '{"c": 3}', '],', '"ranks": [', '{"rows": [',
                                 '{"d": 4}', ']}', ']}']
    again = [("format", "x"), ("rows", Items(iter([{"a": 1}, {"b": [2]}]))), ("empty", Items(iter([]))),
             ("pre", Items(iter(['{"c": 3}']), encoded=True)),
             ("ranks", Items(iter([Fields(iter([("rows", Items(iter([{"d": 4}])))]))]), objects=True))]
    assert json.loads(text) == plain(iter(again))


@pytest.mark.parametrize("text, message", [
    ('{"rows": [1, 2,]}', "not JSON: Expecting value at line 1"),
    ('{"rows": []}\n\n{}', "not JSON: Extra data at line 3"),
    ('{"rows": [],\n"rows": []}', "key 'rows' is there twice"),
    ('{"rows": [NaN]}', "bad value: NaN is not a number"),
    ('{"rows": [%s]}' % ("[" * 100 + "]" * 100), "nested too deeply"),
    ('{"meta": %s}' % ("[" * 100_000 + "]" * 100_000), "nested too deeply"),
    ('{"rows": [1\n\n\n', "not JSON: expecting ',' or ']', found end of file at line 4"),
    ('{"a" 1}', "expecting ':'"),
])
def test_reader_errors_name_the_file_and_the_line(text, message):
    with pytest.raises(ReportError, match="^f.json: ") as e:
        _read_all(text, 5)
    assert message in str(e.value)


def test_a_value_much_larger_than_a_chunk_is_read_in_linear_time():
    big = {"meta": {"k": "x" * 3_000_000}, "rows": []}
    text = json.dumps(big)
    reads = []

    class Counting(io.StringIO):
        def read(self, n=-1):
            reads.append(n)
            return super().read(n)

    old = report_json._CHUNK
    report_json._CHUNK = 1000
    try:
        got = {k: (list(v) if hasattr(v, "__next__") else v)
               for k, v in read_pairs(Counting(text), "f.json", ReportError, ("rows",))}
    finally:
        report_json._CHUNK = old
    assert got == big
    assert len(reads) < 20  # doubling reads, not 3,000 of a chunk each


# --- saving ----------------------------------------------------------------------------

def _report(n=5, rank=None, world=None, extra=0):
    rows = [Row(f"t.py:step:x{i}.to", "up", "up", i + 1 + extra, i + 1 + extra, 4 * (i + 1),
                {"up": {"calls": i + 1 + extra, "bytes": 4 * (i + 1)}}) for i in range(n)]
    meta = {"counting": True, "steps": 2}
    if rank is not None:
        meta["rank"] = rank
    if world is not None:
        meta["world_size"] = world
    return Report(rows, [Launch("t.py:<module>:torch.compile", 3 + (rank or 0), 7)],
                  [Unwrapped("t.py", 9, "aten.item", "down", 2, 8, via="lib.py:3")], meta).sorted()


def test_save_writes_one_row_a_line_and_what_to_dict_holds(tmp_path):
    rep = _report()
    rep.rows[0].site = "t.py:step:\udcff\u00e9\x1b"  # not UTF-8, not ASCII, a control character
    p = rep.save(tmp_path / "run.json")
    text = p.read_bytes().decode("ascii")
    assert json.loads(text) == rep.to_dict()
    lines = text.splitlines()
    assert lines[0] == '{"format": "xferaudit.report",' and lines[-1] == "]}"
    row_lines = lines[lines.index('"rows": [') + 1:lines.index('"rows": [') + 6]
    assert [json.loads(x.rstrip(","))["site"] for x in row_lines] == [r.site for r in rep.rows]
    back = Report.load(p)
    assert back.to_dict() == rep.to_dict()


def test_a_save_that_fails_midway_leaves_the_old_file_and_no_temporary(tmp_path):
    p = tmp_path / "run.json"
    _report().save(p)
    before = p.read_bytes()
    rep = _report(3000)
    rep.rows[2500].by_direction = {"up": {"calls": object()}}  # cannot be encoded
    with pytest.raises(TypeError):
        rep.save(p)
    assert p.read_bytes() == before and os.listdir(tmp_path) == ["run.json"]


@pytest.mark.parametrize("indent", [2, None])
def test_files_written_before_read_the_same(tmp_path, indent):
    m = merge([_report(rank=r, world=3, extra=r) for r in range(3)])
    for rep in (_report(), m):
        d = rep.to_dict()
        old = {k: d[k] for k in sorted(d, key=lambda k: k == "world_size")}  # world_size after the rows
        p = tmp_path / "old.json"
        p.write_text(json.dumps(old, indent=indent) + "\n")
        back = Report.load(p)
        assert type(back) is type(rep) and back.to_dict() == d


# --- merging a row at a time -----------------------------------------------------------

def _files(tmp_path, reports):
    out = []
    for i, rep in enumerate(reports):
        p = tmp_path / f"r{i}.json"
        rep.save(p)
        out.append(p)
    return out


def test_the_streamed_merge_gives_the_in_memory_merge(tmp_path):
    reps = [_report(n=4 + r, rank=r, world=4, extra=2 * (r == 2)) for r in range(4)]
    files = _files(tmp_path, reps)
    streamed = merge_files(files)
    in_memory = merge([Report.load(f) for f in files], [str(f) for f in files])
    assert streamed.to_dict() == in_memory.to_dict() == merge(reps).to_dict()
    assert streamed.format() == in_memory.format()
    # a merged file merges again with more ranks, streamed or not
    first = tmp_path / "first.json"
    merge_files(files[:2]).save(first)
    again = merge_files([first, *files[2:]])
    assert again.to_dict() == streamed.to_dict()


def test_merge_of_files_whose_shape_shows_late_is_read_again(tmp_path):
    """A merged file written before (its world_size after its rows) is first
    read as one rank; the merge reads it again as the ranks it holds."""
    reps = [_report(rank=r, world=3, extra=r) for r in range(3)]
    d = merge(reps[:2]).to_dict()
    old = tmp_path / "old_merged.json"
    old.write_text(json.dumps({k: d[k] for k in sorted(d, key=lambda k: k == "world_size")}, indent=2))
    plain_rank = _files(tmp_path, reps[2:])[0]
    assert merge_files([old, plain_rank]).to_dict() == merge(reps).to_dict()
    # and a plain report that says world_size (at the top) before its rows is one rank
    odd = tmp_path / "odd.json"
    d2 = reps[2].to_dict()
    odd.write_text(json.dumps(dict({"world_size": 3}, **d2)))
    assert merge_files([odd]).to_dict() == merge([reps[2]]).to_dict()
    assert Report.load(odd).to_dict() == reps[2].to_dict()


def test_rows_not_in_the_reports_order_are_sorted_as_a_load_sorts_them(tmp_path):
    rep = _report(6, rank=0, world=1)
    d = rep.to_dict()
    d["rows"].reverse()
    p = tmp_path / "unsorted.json"
    p.write_text(json.dumps(d))
    assert merge_files([p]).to_dict() == merge([Report.load(p)]).to_dict() == merge([rep]).to_dict()


def test_a_merged_file_loads_with_its_ranks_rows_on_disk_and_saves_again(tmp_path):
    m = merge([_report(n=50, rank=r, world=2, extra=r) for r in range(2)])
    p = tmp_path / "m.json"
    m.save(p)
    back = Report.load(p)
    assert isinstance(back, RankedReport)
    assert all(hasattr(r.rows, "json_lines") for r in back.ranks)  # not in memory
    assert [x.site for x in back.ranks[1].rows] == [x.site for x in m.ranks[1].rows]
    q = tmp_path / "again.json"
    back.save(q)
    assert json.loads(q.read_text()) == m.to_dict()


def test_the_merge_command_streams_json_and_names_a_site_twice_in_a_rank(tmp_path, capsys):
    files = _files(tmp_path, [_report(rank=r, world=2) for r in range(2)])
    assert main(["merge", *map(str, files), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == merge_files(files).to_dict()
    d = _report(rank=1, world=2).to_dict()
    d["rows"].append(dict(d["rows"][0]))
    files[1].write_text(json.dumps(d))
    assert main(["merge", *map(str, files), "-o", str(tmp_path / "m.json")]) == 2
    err = capsys.readouterr().err
    assert "t.py:step:x4.to" in err and "twice" in err and "r1.json" in err
    assert not (tmp_path / "m.json").exists()


def test_an_in_memory_merge_refuses_a_site_twice_in_one_report():
    rep = _report(2, rank=0)
    rep.rows.append(rep.rows[0])
    with pytest.raises(ReportError, match="twice"):
        merge([rep], ["r0"])


def test_a_row_line_is_what_encoding_to_dict_gives_and_a_new_row_field_is_never_left_out(monkeypatch):
    from xferaudit.runtime.reporting import report_rows as _report
    from xferaudit.runtime.reporting.report_json import encode

    assert _report._DIRECT  # the direct line is in use for rows of the usual shape
    cell = {"calls": 2, "bytes": 10, "copies": 2, "pageable": 1, "seconds": 0.1 + 0.2}
    rows = [Row("t.py:\x1b\u00e9\udcff\"x\\", "up", "up,down", 3, 2, 10, {"up": dict(cell), "none": dict(
                cell, calls=1, bytes=0, copies=0, pageable=0)}, seconds=1 / 3),
            Row(None, "up", "up", 1, 1, 4, {}), Row("a", "up", "up", True, 1, 4, {}),
            Row("b", "up", "up", 1, 1, 4, {"up": {"bytes": 4, "calls": 1}})]  # cells in another order
    for r in rows:
        assert json.loads(_report.row_line(r)) == json.loads(encode(r.to_dict())) == r.to_dict()
    assert _report._row_line_direct(rows[0]) is not None and _report._row_line_direct(rows[1]) is None
    assert '"seconds": 0.333333333' in _report.row_line(rows[0])
    # Row.to_dict gives a key more (a field added to rows): the direct line is not used
    monkeypatch.setattr(Row, "to_dict", lambda self: dict(vars(self), extra=1.5))
    assert not _report._direct_is_exact()
    monkeypatch.setattr(_report, "_DIRECT", False)
    assert json.loads(_report.row_line(rows[0]))["extra"] == 1.5


def test_the_totals_a_save_sums_on_the_way_are_the_reports_totals():
    """Rows of the usual shape are summed as their lines are made, the others
    apart: the file's totals are Report.totals() either way."""
    cell = {"calls": 2, "bytes": 10, "copies": 2, "pageable": 1, "seconds": 0.1 + 0.2}
    rows = [Row(f"s{i}", "up", "up", 2, 2, 10, {"up": dict(cell, seconds=cell["seconds"] * i)}, 2, 1,
                cell["seconds"] * i) for i in range(50)]
    rows += [Row("odd", "up", "up,d2d", 3, 3, 7, {"d2d": {"bytes": 3, "calls": 1}, "up": {"calls": 2, "bytes": 4}}),
             Row("none", "up", "none", 4, 0, 0, {"none": dict(cell, calls=4, bytes=0, copies=0, pageable=0)},
                 seconds=1e-7)]
    rep = Report(rows, [], [], {})
    assert json.loads("".join(rep.json_chunks()))["totals"] == rep.totals()
    assert rep.totals()["up"]["crossings"] == 102 and rep.totals()["d2d"]["bytes"] == 3
