"""The pytest plugin, through pytester: the table, the markers, the fixture, the guard option."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from importlib.metadata import entry_points

import pytest

pytest_plugins = ["pytester"]

torch = pytest.importorskip("torch")


def _plugin_args() -> list:
    """The plugin loads by its entry point once installed; else name it."""
    try:
        eps = entry_points(group="pytest11")
    except TypeError:  # pragma: no cover - Python < 3.10
        eps = entry_points().get("pytest11", [])
    if any(ep.value == "xferaudit.pytest_plugin" for ep in eps):
        return []
    return ["-p", "xferaudit.pytest_plugin"]


def run(pytester, *args):
    return pytester.runpytest_inprocess(*_plugin_args(), "-p", "no:cacheprovider", *args)


STEP = textwrap.dedent(
    """
    import torch
    import xferaudit.runtime as xfer
    from xferaudit.testing import simulated_device

    DEV = simulated_device()

    def step(extra=0):
        y = xfer.to(torch.ones(4), DEV, site="m.py:step:x.to")
        for _ in range(1 + extra):
            xfer.item(y.sum(), site="m.py:step:loss.item")
        return y
    """
)


@pytest.fixture(scope="module", autouse=True)
def _warm():
    """Import, in this process, what the inner runs import lazily: in-process
    pytester runs drop the modules a run imported, and some of torch's cannot
    be imported twice (they register operators)."""
    import io

    import xferaudit.runtime as xfer
    from xferaudit.testing import simulated_device

    dev = simulated_device()
    with xfer.expect({}, on_fail="report", file=io.StringIO()):
        y = xfer.to(torch.ones(2), dev, site="warm")
        xfer.item(y.sum(), site="warm.item")
        float(y.sum())
    xfer.reset()


def test_plugin_module_imports_nothing_heavy():
    code = (
        "import sys, xferaudit.pytest_plugin\n"
        "print(sorted(m for m in ('torch', 'libcst', 'xferaudit.runtime', 'numpy') if m in sys.modules))"
    )
    r = subprocess.run([sys.executable, "-c", code], check=False, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"


def test_a_plain_run_with_the_plugin_loaded_imports_no_torch(pytester):
    pytester.makepyfile(
        test_inner_plain="""
        import sys

        def test_light(request):
            assert request.config.pluginmanager.hasplugin("xferaudit") or \\
                request.config.pluginmanager.hasplugin("xferaudit.pytest_plugin")
            assert "torch" not in sys.modules and "libcst" not in sys.modules
        """
    )
    r = pytester.runpytest_subprocess(*_plugin_args(), "-p", "no:cacheprovider")
    r.assert_outcomes(passed=1)


def test_markers_are_registered(pytester):
    r = run(pytester, "--markers")
    out = r.stdout.str()
    assert "@pytest.mark.xfer_budget(budget=None" in out
    assert "@pytest.mark.xfer_guard(level=None" in out


def test_table_per_test(pytester):
    pytester.makepyfile(
        test_inner_table=STEP
        + textwrap.dedent(
            """
            def test_two_sites_and_an_implicit_read():
                y = step()
                float(y.sum())          # unwrapped: the guard counts it

            def test_three_crossings():
                step(extra=1)

            def test_nothing():
                assert 1 + 1 == 2
            """
        )
    )
    r = run(pytester, "--xferaudit")
    r.assert_outcomes(passed=3)
    lines = r.stdout.lines
    start = next(i for i, ln in enumerate(lines) if "xferaudit: host<->device transfers per test" in ln)
    table = lines[start + 2:start + 6]
    assert table[0].split() == ["crossings", "bytes", "unwrapped", "launches", "test"]
    # every crossing with its bytes: the implicit read (4 B) is one of the test's 3
    assert table[1].split() == ["3", "24", "B", "1", "0",
                                "test_inner_table.py::test_two_sites_and_an_implicit_read"]
    assert table[2].split() == ["3", "24", "B", "0", "0", "test_inner_table.py::test_three_crossings"]
    assert table[3] == "2 test(s) crossed or launched, 1 crossed nothing"


def test_no_table_without_the_option(pytester):
    pytester.makepyfile(test_inner_quiet=STEP + "\ndef test_a():\n    step()\n")
    r = run(pytester)
    r.assert_outcomes(passed=1)
    assert "transfers per test" not in r.stdout.str()


def test_budget_marker_passes_and_fails(pytester):
    pytester.makefile(".toml", budget='[tool.xferaudit.budget]\n"m.py:step:x.to" = 1\n"m.py:step:loss.item" = 1\n')
    pytester.makepyfile(
        test_inner_budget=STEP
        + textwrap.dedent(
            """
            import pytest

            BUDGET = {"m.py:step:x.to": 1, "m.py:step:loss.item": 1}

            @pytest.mark.xfer_budget(BUDGET, steps=2)
            def test_within():
                step(); step()

            @pytest.mark.xfer_budget(BUDGET)
            def test_over():
                step(extra=1)

            @pytest.mark.xfer_budget({"m.py:step:x.to": 1})
            def test_unexpected_site():
                step()

            @pytest.mark.xfer_budget(budget="budget.toml")
            def test_from_a_file():
                step()

            @pytest.mark.xfer_budget(BUDGET)
            def test_unwrapped():
                float(step().sum())

            @pytest.mark.xfer_budget(BUDGET, warmup=1)
            def test_warmup_with_steps(xfer_recorder):
                step(extra=3)             # warm-up: not measured
                xfer_recorder.step()
                for _ in range(2):
                    step()
                    xfer_recorder.step()

            @pytest.mark.xfer_budget(BUDGET)
            def test_own_failure_wins():
                step(extra=5)
                assert False, "the test's own failure"
            """
        )
    )
    r = run(pytester, "--strict-markers")
    r.assert_outcomes(passed=3, failed=4)
    out = r.stdout.str()
    assert "over budget: m.py:step:loss.item: 2 crossings per step, budget 1" in out
    assert "unexpected site: m.py:step:loss.item" in out
    assert "unwrapped transfer: test_inner_budget.py:" in out and "aten._local_scalar_dense" in out
    assert "the test's own failure" in out
    assert "FAILED test_inner_budget.py::test_own_failure_wins - AssertionError" in out


PROG = textwrap.dedent(
    """\
    import torch
    from xferaudit.testing import simulated_device

    DEV = simulated_device()

    def train(steps, extra=0):
        w = torch.nn.Parameter(torch.ones(4).to(DEV))
        opt = torch.optim.SGD([w], lr=0.1)
        for _ in range(steps):
            (w * 2).sum().backward()
            opt.step()
            kept = w[w > 0]  # xferaudit: site="prog.py:train:mask"
            for _ in range(1 + extra):
                float(kept.sum())
    """
)


def test_a_budget_frozen_from_a_run_checks_a_test_per_optimizer_step(pytester):
    lines = PROG.splitlines()
    up = next(i for i, ln in enumerate(lines, 1) if ".to(DEV)" in ln)
    read = next(i for i, ln in enumerate(lines, 1) if "float(kept.sum())" in ln)
    # as `xferaudit budget --from` writes it from a run of train(3): the named statement,
    # the user's lines that crossed with nothing naming them (path:line), per optimizer step
    pytester.makefile(".toml", budget=f'[tool.xferaudit.budget]\n"prog.py:train:mask" = 1\n'
                                      f'"prog.py:{read}" = 1\n"prog.py:{up}" = "1/3"\n')
    pytester.makepyfile(prog=PROG)
    pytester.makepyfile(
        test_inner_run_budget=textwrap.dedent(
            """
            import pytest
            import prog

            @pytest.mark.xfer_budget("budget.toml", steps="optimizer")
            def test_three_steps():
                prog.train(3)

            @pytest.mark.xfer_budget("budget.toml", steps="optimizer")
            def test_one_more_read_per_step():
                prog.train(3, extra=1)

            @pytest.mark.xfer_budget("budget.toml", steps="optimizer")
            def test_no_step():
                pass
            """
        )
    )
    r = run(pytester, "--strict-markers")
    r.assert_outcomes(passed=1, failed=2)
    out = r.stdout.str()
    assert f"over budget: prog.py:{read}: 2 crossings per step, budget 1" in out
    assert "prog.py:train:mask" not in out  # (the named statement kept its budget: 1 per step)
    assert "expect(steps='optimizer'): no optimizer step ran in the block" in out


def test_fixture_yields_the_recorder_counting_and_reset(pytester):
    pytester.makepyfile(
        test_inner_fixture=STEP
        + textwrap.dedent(
            """
            from xferaudit.runtime.counted import recorder

            def test_first(xfer_recorder):
                assert xfer_recorder.STATE is recorder.STATE and recorder.STATE.on
                step(extra=1)
                assert xfer_recorder.crossings() == 3
                assert xfer_recorder.crossings("m.py:step:loss.item") == 2
                rows = {r.site: r.crossings for r in xfer_recorder.report().rows}
                assert rows == {"m.py:step:x.to": 1, "m.py:step:loss.item": 2}

            def test_second_starts_from_zero(xfer_recorder):
                assert xfer_recorder.crossings() == 0
                step()
                assert xfer_recorder.crossings() == 2

            def test_counting_is_restored_after():
                assert not recorder.STATE.on
            """
        )
    )
    run(pytester, "-p", "no:randomly").assert_outcomes(passed=3)


def test_guard_option_and_marker(pytester):
    pytester.makepyfile(
        test_inner_guarded=STEP
        + textwrap.dedent(
            """
            import pytest

            def test_wrapped_only():
                step()

            def test_implicit():
                y = step()
                y.sum().item()

            @pytest.mark.xfer_guard("raise")
            def test_marked_implicit():
                step().cpu()

            @pytest.mark.xfer_guard(down="off")
            def test_marked_allows_down():
                step().cpu()
            """
        )
    )
    r = run(pytester, "-k", "marked")
    r.assert_outcomes(passed=1, failed=1)
    assert "UnexpectedTransfer: unexpected down transfer at test_inner_guarded.py:" in r.stdout.str()

    r = run(pytester, "--xferaudit-guard=up:log,down:raise", "-k", "not marked")
    r.assert_outcomes(passed=1, failed=1)
    assert "aten._local_scalar_dense" in r.stdout.str()


def test_bad_guard_option_is_a_usage_error(pytester):
    pytester.makepyfile(test_inner_x="def test_x():\n    pass\n")
    r = run(pytester, "--xferaudit-guard=up:loudly")
    assert r.ret == pytest.ExitCode.USAGE_ERROR
    assert "unknown guard level 'loudly'" in r.stderr.str()


def test_failures_show_the_users_line_not_xferaudits_source(pytester):
    """Budget and guard failures carry __tracebackhide__ (and torch's dispatch
    frames are dropped for them): the report shows the test's line and the
    message, not pages of xferaudit's and torch's source."""
    pytester.makepyfile(
        test_inner_tb=STEP
        + textwrap.dedent(
            """
            import pytest

            @pytest.mark.xfer_budget({"m.py:step:x.to": 1, "m.py:step:loss.item": 1})
            def test_over():
                step(extra=2)

            @pytest.mark.xfer_guard("raise")
            def test_guarded():
                y = step()
                float(y.sum())

            def test_plain_failure_untouched():
                assert 1 == 2
            """
        )
    )
    r = run(pytester)
    r.assert_outcomes(failed=3)
    out = r.stdout.str()
    assert "over budget: m.py:step:loss.item: 3 crossings per step, budget 1" in out
    assert "UnexpectedTransfer: unexpected down transfer at test_inner_tb.py:" in out
    for where in ("runtime/runs/budget.py", "runtime/guarding/guard.py", "pytest_plugin.py", "_dynamo/eval_frame.py",
                  "torch/_compile.py"):
        assert where not in out, where
    assert ">       float(y.sum())" in out
    assert "assert 1 == 2" in out
