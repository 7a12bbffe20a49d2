"""Honest totals (issue 40): the report's totals, its JSON and ``xferaudit
diff`` count every crossing, wrapped or not, with its bytes; the table's
heading says what it holds."""

from __future__ import annotations

import json

from xferaudit.cli import main
from xferaudit.runtime.reporting._report import Report, Row, Unwrapped, diff, format_diff

READ = "aten._local_scalar_dense"


def _unwrapped_only():
    """A run of a program nothing names: 3 reads at one line, 2 uploads at another."""
    return Report([], [], [Unwrapped("train.py", 33, READ, "down", 3, 12),
                           Unwrapped("train.py", 20, "aten._to_copy", "up", 2, 256, pageable=1)],
                  {"counting": True, "kind": "run"}).sorted()


def _wrapped():
    """The same program after `xferaudit wrap --from`: the same crossings, under names."""
    return Report([Row("train.py:step:loss.item", "item", "down", 3, 3, 12, {"down": {"calls": 3, "bytes": 12}}),
                   Row("train.py:step:x.to", "to", "up", 2, 2, 256,
                       {"up": {"calls": 2, "bytes": 256, "copies": 2, "pageable": 1}}, pageable=1)],
                  [], [], {"counting": True, "kind": "run"}).sorted()


def test_totals_count_the_lines_nothing_names_with_their_bytes():
    t = _unwrapped_only().totals()
    assert (t["all"]["crossings"], t["all"]["bytes"], t["all"]["pageable"]) == (5, 268, 1)
    assert (t["down"]["crossings"], t["down"]["bytes"]) == (3, 12)
    assert (t["up"]["crossings"], t["up"]["copies"], t["up"]["bytes"]) == (2, 2, 256)
    assert _wrapped().totals() == t  # before and after wrap: the same totals
    saved = _unwrapped_only().to_dict()
    assert saved["totals"]["all"]["crossings"] == 5 and saved["totals"]["all"]["bytes"] == 268


def test_the_table_says_what_it_holds_and_totals_every_crossing():
    text = _unwrapped_only().format()
    head = text.splitlines()[0]
    assert "per wrapped site" not in head
    assert head == "xferaudit: host<->device transfers per site: 0 wrapped sites, 2 lines nothing names"
    assert "no site crossed: every crossing is at a line nothing names" in text
    total_all = next(ln for ln in text.splitlines() if ln.startswith("total all")).split()
    assert total_all[2:6] == ["5", "5", "5", "268"]
    assert "1 non_blocking copies had a pageable host side" in text
    wrapped = _wrapped().format().splitlines()[0]
    assert wrapped == "xferaudit: host<->device transfers per site: 2 wrapped sites"
    library = Report([Row("lib.mod:f <- train.py:3", "library", "down", 1, 1, 4, {"down": {"calls": 1, "bytes": 4}})],
                     [], [], {}).format().splitlines()[0]
    assert library == "xferaudit: host<->device transfers per site: 0 wrapped sites, 1 named without a wrapper"


def test_diff_of_a_program_before_and_after_wrap_keeps_its_totals(tmp_path, capsys):
    d = diff(_unwrapped_only(), _wrapped())
    a, b = d["totals"]
    assert a["all"] == b["all"] and a["all"]["crossings"] == 5
    text = format_diff(d)
    line = next(ln for ln in text.splitlines() if ln.startswith("total all"))
    assert "crossings 5 -> 5 (0)" in line and "bytes 268 B -> 268 B" in line
    _unwrapped_only().save(tmp_path / "a.json")
    _wrapped().save(tmp_path / "b.json")
    capsys.readouterr()
    assert main(["diff", "--format", "json", str(tmp_path / "a.json"), str(tmp_path / "b.json")]) == 0
    ta, tb = json.loads(capsys.readouterr().out)["totals"]
    assert ta["all"]["crossings"] == tb["all"]["crossings"] == 5
