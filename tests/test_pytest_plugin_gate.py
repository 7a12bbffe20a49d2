"""The pytest plugin as a gate (issue 40): the marker checks every graph site
launched and pageable copies at lines nothing names; the table counts every
crossing of a test, wrapped or not, with its bytes."""

from __future__ import annotations

import textwrap

import pytest

from test_pytest_plugin import STEP, _plugin_args, _warm, run  # noqa: F401 - (_warm: a fixture)

pytest_plugins = ["pytester"]

torch = pytest.importorskip("torch")


def test_the_marker_checks_graph_sites_and_pageable_copies(pytester):
    pytester.makepyfile(
        test_inner_gate=STEP
        + textwrap.dedent(
            """
            import pytest

            BUDGET = {"m.py:step:x.to": 1, "m.py:step:loss.item": 1}
            GRAPH = "m.py:<module>:torch.compile"

            def launch(n):
                g = xfer.graph(lambda t: t, site=GRAPH)
                for _ in range(n):
                    g(1)

            @pytest.mark.xfer_budget(BUDGET)
            def test_new_graph_site():
                step(); launch(2)

            @pytest.mark.xfer_budget(dict(BUDGET, **{GRAPH: 0}))
            def test_graph_site_held_at_zero():
                step(); launch(1)

            @pytest.mark.xfer_budget(dict(BUDGET, **{GRAPH: {"launches": 2}}))
            def test_graph_site_within():
                step(); launch(2)

            @pytest.mark.xfer_budget({}, unwrapped=1, pageable=0)
            def test_pageable_at_a_line_nothing_names():
                torch.ones(8).to(DEV, non_blocking=True)

            @pytest.mark.xfer_budget({}, unwrapped=1, pageable=0)
            def test_blocking_is_no_pageable_copy():
                torch.ones(8).to(DEV)
            """
        )
    )
    r = run(pytester, "--strict-markers")
    r.assert_outcomes(passed=2, failed=3)
    out = r.stdout.str()
    assert "new graph site: m.py:<module>:torch.compile: 2 launches per step" in out
    assert "over budget: m.py:<module>:torch.compile: 1 launches per step, budget 0" in out
    assert "pageable copies: all sites: 1 non_blocking copies per step" in out
    assert "what to do:" in out


def test_the_table_counts_every_crossing_with_its_bytes(pytester, monkeypatch):
    vendor = pytester.mkdir("vendor")
    (vendor / "helpers.py").write_text("def read(t):\n    return t.sum().item()\n")
    monkeypatch.setenv("XFERAUDIT_LIBRARY_PATHS", str(vendor))  # a library: its crossing gets its name
    pytester.makepyfile(
        test_inner_honest=textwrap.dedent(
            f"""
            import sys
            import torch
            from xferaudit.testing import simulated_device

            sys.path.insert(0, {str(vendor)!r})
            import helpers

            DEV = simulated_device()

            def test_a_module_move():
                torch.nn.Linear(4, 2).to(DEV)  # weight 32 B + bias 8 B, nothing names the line

            def test_a_library_read():
                helpers.read(torch.ones(3).to(DEV))  # 12 B up at this line, 4 B read in the library
            """
        )
    )
    r = pytester.runpytest_subprocess(*_plugin_args(), "-p", "no:cacheprovider", "--xferaudit")
    r.assert_outcomes(passed=2)
    lines = r.stdout.lines
    start = next(i for i, ln in enumerate(lines) if "xferaudit: host<->device transfers per test" in ln)
    head = next(i for i in range(start, len(lines)) if lines[i].split()[:2] == ["crossings", "bytes"])
    table = [ln.split() for ln in lines[head:head + 3]]
    assert table[0] == ["crossings", "bytes", "unwrapped", "launches", "test"]
    assert table[1] == ["2", "40", "B", "2", "0", "test_inner_honest.py::test_a_module_move"]
    assert table[2] == ["2", "16", "B", "1", "0", "test_inner_honest.py::test_a_library_read"]
    assert "every crossing of the test body, wrapped or not" in lines[start + 1]  # the table says so
