"""Issue 44, item 10: a test the guard stopped at its first crossing
(``xfer_guard("raise")``) is not counted in the footer as having crossed nothing."""

from __future__ import annotations

import textwrap

import pytest
from test_pytest_plugin import _warm, run  # noqa: F401 - (_warm: the imports the inner runs need, first)

pytest_plugins = ["pytester"]

torch = pytest.importorskip("torch")

TESTS = textwrap.dedent(
    """
    import pytest
    import torch
    from xferaudit.testing import simulated_device

    DEV = simulated_device()

    @pytest.mark.xfer_guard("raise")
    def test_stopped_at_its_first_crossing():
        x = torch.ones(4).to(DEV)
        float(x.sum())

    def test_nothing():
        assert 1 + 1 == 2
    """
)


def test_a_test_the_guard_stopped_is_named_and_not_counted_as_quiet(pytester):
    pytester.makepyfile(test_stopped=TESTS)
    r = run(pytester, "--xferaudit")
    r.assert_outcomes(passed=1, failed=1)
    lines = r.stdout.lines
    start = next(i for i, ln in enumerate(lines) if "xferaudit: host<->device transfers per test" in ln)
    start = next(i for i in range(start, len(lines))  # (the heading's explanation line comes first)
                 if lines[i].split()[:2] == ["crossings", "bytes"])
    table = lines[start:start + 3]
    assert table[0].split() == ["crossings", "bytes", "unwrapped", "launches", "test"]
    assert table[1].split()[:4] == ["0", "0", "B", "0"] or table[1].split()[:5] == ["0", "0", "B", "0", "0"]
    assert "test_stopped.py::test_stopped_at_its_first_crossing" in table[1]
    assert "stopped by the guard at test_stopped.py:9" in table[1]
    assert table[2] == "0 test(s) crossed or launched, 1 stopped by the guard, 1 crossed nothing"
