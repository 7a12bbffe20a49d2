"""``xferaudit report RUN.json --plot out.png``: the picture of a run.

The drawing tests need matplotlib (the ``plot`` extra; CI installs it through
the ``test`` extra) and are skipped without it. They read the PNG back and
check what a reader would see: the colours of the bars (by direction for one
rank, one per rank for several), their order, and the size. Without
matplotlib the command must say how to install it, exit 2 and write nothing.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from xferaudit.cli import main
from xferaudit.plot import MAX_SITES, _items, _short, _title, human_bytes
from xferaudit.runtime.reporting._report import Report, Row, Unwrapped
from xferaudit.runtime.ranks.distributed import merge

SITES = ["train.py:Trainer.step:loss.item", "train.py:Trainer.step:batch.to",
         "eval.py:evaluate:acc.cpu"]


def report(counts, rank=None, world=None):
    """Rows with `counts` crossings at SITES; the second site uploads, the others download."""
    rows = []
    for site, c in zip(SITES, counts):
        d = "up" if site.endswith("batch.to") else "down"
        if c:
            rows.append(Row(site, d, d, c, c, c * 4096, {d: {"calls": c, "bytes": c * 4096}}))
    meta = {} if rank is None else {"rank": rank, "world_size": world}
    return Report(rows, [], [], meta).sorted()


def colors_in(path, min_pixels=200):
    """RGB colours (0-255) covering at least `min_pixels` pixels of the image."""
    import numpy as np
    from matplotlib.image import imread

    img = imread(str(path))
    assert img.ndim == 3 and img.shape[2] in (3, 4)
    rgb = (img[:, :, :3] * 255).round().astype(int).reshape(-1, 3)
    values, counts = np.unique(rgb, axis=0, return_counts=True)
    return {tuple(v) for v, n in zip(values, counts) if n >= min_pixels}, img.shape


def hex_rgb(h):
    return tuple(int(h[i:i + 2], 16) for i in (1, 3, 5))


def test_single_rank_plot_has_direction_bars(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    run = report([5, 3, 1]).save(tmp_path / "run.json")
    out = tmp_path / "out.png"
    assert main(["report", str(run), "--plot", str(out)]) == 0
    captured = capsys.readouterr()
    assert "wrote " + str(out) in captured.err
    assert SITES[0] in captured.out  # the table is still printed
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert out.stat().st_size > 10_000
    colors, shape = colors_in(out)
    assert hex_rgb("#1f77b4") in colors and hex_rgb("#d62728") in colors  # up and down
    assert shape[1] > 800 and shape[0] > 200


def test_multi_rank_plot_stacks_one_colour_per_rank(tmp_path, capsys):
    matplotlib = pytest.importorskip("matplotlib")
    merged = merge([report([2, 3, 0], 0, 3), report([2, 3, 0], 1, 3), report([9, 3, 1], 2, 3)])
    run = merged.save(tmp_path / "merged.json")
    out = tmp_path / "ranks.png"
    assert main(["report", str(run), "--plot", str(out)]) == 0
    capsys.readouterr()
    colors, _ = colors_in(out)
    tab10 = matplotlib.colormaps["tab10"]
    for r in range(3):
        rgb = tuple(round(v * 255) for v in tab10(r)[:3])
        assert rgb in colors, f"rank {r}'s colour is missing"
    rgb3 = tuple(round(v * 255) for v in tab10(3)[:3])
    assert rgb3 not in colors  # no fourth rank


def test_items_are_sorted_and_flag_the_outlier():
    merged = merge([report([2, 3, 0], 0, 3), report([2, 3, 0], 1, 3), report([9, 3, 1], 2, 3)])
    items = _items(merged)
    assert [it["label"] for it in items] == [SITES[0], SITES[1], SITES[2]]
    assert [it["crossings"] for it in items] == [13, 9, 1]
    assert items[0]["flagged"] == [2] and items[1]["flagged"] == [] and items[2]["flagged"] == [2]
    assert items[0]["per_rank"] == {0: (2, 8192, 0.0), 1: (2, 8192, 0.0), 2: (9, 36864, 0.0)}
    title = _title(merged, 3, 3)
    assert title.startswith(f"xferaudit: 23 crossings, {human_bytes(23 * 4096)} over 3 site(s), "
                            "3 rank(s) of 3")
    assert "up 9" in title and "down 14" in title


def test_unwrapped_lines_are_drawn_as_sites_and_long_labels_are_shortened():
    rep = report([1, 0, 0])
    rep.unwrapped = [Unwrapped("train.py", 40, "aten._local_scalar_dense", "down", 6, 24)]
    items = _items(rep)
    assert items[0]["label"] == "unwrapped: train.py:40 aten._local_scalar_dense"
    assert items[0]["crossings"] == 6
    long = "pkg/" * 30 + "train.py:Trainer.step:loss.item"
    short = _short(long, 40)
    assert len(short) == 40 and short.endswith("loss.item") and "\u2026" in short
    assert _short("a.py:f:x.cpu") == "a.py:f:x.cpu"


def test_many_sites_are_capped_and_the_title_says_so(tmp_path):
    pytest.importorskip("matplotlib")
    from xferaudit.plot import plot_report

    rows = [Row(f"m.py:f:x{i}.cpu", "down", "down", i + 1, i + 1, 4, {}) for i in range(60)]
    rep = Report(rows, [], [], {}).sorted()
    out = plot_report(rep, tmp_path / "many.png")
    assert out.stat().st_size > 10_000
    assert f"top {MAX_SITES} of 60 sites shown" in _title(rep, MAX_SITES, 60)


def test_without_matplotlib_it_says_how_to_install_and_writes_nothing(tmp_path, capsys,
                                                                      monkeypatch):
    run = report([1, 1, 1]).save(tmp_path / "run.json")
    out = tmp_path / "out.png"
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib -> ImportError
    assert main(["report", str(run), "--plot", str(out)]) == 2
    err = capsys.readouterr().err
    assert "pip install 'xferaudit[plot]'" in err
    assert not out.exists()


def test_plot_into_a_missing_directory_exits_2(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    run = report([1, 1, 1]).save(tmp_path / "run.json")
    assert main(["report", str(run), "--plot", str(tmp_path / "no" / "x.png")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_matplotlib_is_imported_only_to_draw():
    code = ("import sys, xferaudit.plot, xferaudit.trace, xferaudit.commands.report, "
            "xferaudit.runtime; assert 'matplotlib' not in sys.modules; "
            "assert 'torch' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)


def timed(times):
    """Rows of one download each, holding `times` seconds of host time."""
    rows = [Row(s, "down", "down", 1, 1, 4096, {"down": {"calls": 1, "bytes": 4096, "seconds": t}},
                seconds=t) for s, t in zip(SITES, times)]
    return Report(rows, [], [], {}).sorted()


def test_time_is_a_third_panel_and_an_order(tmp_path, capsys):
    pytest.importorskip("matplotlib")
    rep = timed([0.001, 0.25, 0.02])
    assert [it["label"] for it in _items(rep, "time")] == [SITES[1], SITES[2], SITES[0]]
    assert "271 ms inside wrapped calls" in _title(rep, 3, 3)
    run = rep.save(tmp_path / "run.json")
    two, three = tmp_path / "two.svg", tmp_path / "three.svg"
    assert main(["report", str(report([1, 2, 3]).save(tmp_path / "untimed.json")),
                 "--plot", str(two)]) == 0
    assert main(["report", str(run), "--sort", "time", "--plot", str(three)]) == 0
    assert "host time inside the calls" not in two.read_text()
    svg = three.read_text()
    assert "host time inside the calls" in svg and "250 ms" in svg
