"""pytest plugin (entry point ``pytest11``): transfer tables, budgets and the guard in tests.

Loaded by every pytest run of every project that installed xferaudit, so it
imports nothing heavy: no torch, no libcst, not even ``xferaudit.runtime``
until a test asks for it. With none of its options, markers or fixture in use
it does nothing.

* ``pytest --xferaudit``: counts each test's host<->device crossings (every
  one, wrapped or not, with its bytes; how many of them at lines nothing
  names; graph launches) and prints a table after the run. The test body is measured (``call``), not its fixtures. Under
  it, each test runs inside ``guard("count")`` (when torch is installed), so
  implicit transfers show up too. The rows travel in each report's
  ``user_properties``, the channel pytest-xdist forwards to its controller
  (not tested with xdist here).
* ``pytest --xferaudit-guard=LEVELS``: every test runs under
  ``xfer.guard(LEVELS)`` (``raise``, ``log``, ``up:raise,down:log``...).
* ``@pytest.mark.xfer_budget(budget=None, steps=None, warmup=0, unwrapped=0)``:
  fails the test when its body breaks the budget (a dict, a TOML/JSON path, or
  None for ``[tool.xferaudit.budget]``), as ``xfer.expect`` checks it. Steps
  are marked with ``xfer_recorder.step()``; without, ``steps=`` says how many,
  or ``steps="optimizer"`` counts the ``optimizer.step()`` calls the body made,
  as ``xferaudit run`` does: a budget frozen from a run (``xferaudit budget
  --from RUN.json``: wrapped sites, library functions, named statements, the
  user's lines) fails a test that runs a step the way it fails the run.
* ``@pytest.mark.xfer_guard("raise", up=..., down=..., d2d=...)``: the test
  body runs under that guard.
* fixture ``xfer_recorder``: the recorder (``xferaudit.runtime.counted.recorder``)
  with counting on and every tally reset; also ``.report()`` (a Report of what
  the test counted so far), ``.crossings(site=None)``, ``.unwrapped()`` and
  ``.step()``.
"""

from __future__ import annotations

import sys
from typing import Any, Optional

import pytest

_KEY = "xferaudit"
_EXPECT: Any = pytest.StashKey()  # the test's Expectation (xfer_budget), for xfer_recorder.step()
_ROW: Any = pytest.StashKey()  # the test's measured row (--xferaudit)


def pytest_addoption(parser: Any) -> None:
    group = parser.getgroup("xferaudit", "host<->device transfer audit (xferaudit)")
    group.addoption(
        "--xferaudit", action="store_true", default=False,
        help="count each test's host<->device transfers and print a table after the run",
    )
    group.addoption(
        "--xferaudit-guard", metavar="LEVELS", default=None,
        help="run every test under xfer.guard(LEVELS): off, count, log, raise, "
             "or per direction: up:raise,down:log",
    )


def pytest_configure(config: Any) -> None:
    config.addinivalue_line(
        "markers",
        "xfer_budget(budget=None, *, steps=None, warmup=0, unwrapped=0): fail the test if its "
        "host<->device transfers break the budget (dict, TOML/JSON path, or None for "
        "[tool.xferaudit.budget]); steps=\"optimizer\" counts optimizer.step() calls as "
        "`xferaudit run` does; see xferaudit.runtime.expect",
    )
    config.addinivalue_line(
        "markers",
        "xfer_guard(level=None, *, up=None, down=None, d2d=None): run the test under "
        "xferaudit.runtime.guard(...), which flags transfers no wrapper names",
    )
    levels = config.getoption("xferaudit_guard", None)
    if levels is not None:
        from .runtime.guarding.guard import GuardConfigError, parse_levels

        try:
            parse_levels(levels, where="--xferaudit-guard")
        except GuardConfigError as e:
            raise pytest.UsageError(str(e)) from None
    if config.getoption("xferaudit", False):
        config.pluginmanager.register(_Table(), "xferaudit-table")


# --- measuring one test body ------------------------------------------------------

def _torch_installed() -> bool:
    if "torch" in sys.modules:
        return True
    import importlib.util

    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


class _Measure:
    """Snapshot diff of the tallies around a test body (counting on inside):
    every crossing, wrapped or not, with its bytes."""

    def __init__(self) -> None:
        from .runtime.runs import budget
        from .runtime.counted import recorder

        self._budget = budget
        self._state = recorder.STATE
        self._prev_on = self._state.on
        self._state.on = True
        self._start = budget._snapshot()

    def finish(self) -> dict:
        sites, launches, unwrapped = self._budget._delta(self._start, self._budget._snapshot())
        self._state.on = self._prev_on
        named = {k: v[0] for k, v in sites.items() if v[0] > 0}  # wrapped, library and statement rows
        lines = sum(max(v[0], 0) for v in unwrapped.values())  # lines nothing names
        return {
            "crossings": sum(named.values()) + lines,
            "sites": named,
            "bytes_total": sum(max(v[4], 0) for v in sites.values())
            + sum(max(v[4], 0) for v in unwrapped.values()),
            "unwrapped": lines,
            "launches": sum(max(v, 0) for v in launches.values()),
        }


def _mark_args(mark: Any, names: tuple) -> dict:
    kwargs = dict(mark.kwargs)
    for name, value in zip(names, mark.args):
        kwargs[name] = value
    return kwargs


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: Any) -> Any:
    cfg = item.config
    table = cfg.getoption("xferaudit", False)
    levels = cfg.getoption("xferaudit_guard", None)
    budget_mark = item.get_closest_marker("xfer_budget")
    guard_mark = item.get_closest_marker("xfer_guard")
    if not (table or levels or budget_mark or guard_mark):
        yield
        return

    from contextlib import ExitStack

    from .runtime.runs.budget import expect
    from .runtime.guarding.guard import guard

    stack = ExitStack()
    measure: Optional[_Measure] = None
    ex: Any = None
    try:
        if levels is not None:
            stack.enter_context(guard(levels))
        if guard_mark is not None:
            stack.enter_context(guard(*guard_mark.args, **guard_mark.kwargs))
        if table:
            if levels is None and guard_mark is None and _torch_installed():
                stack.enter_context(guard("count"))
            measure = _Measure()
        if budget_mark is not None:
            kw = _mark_args(budget_mark, ("budget",))
            ex = expect(kw.pop("budget", None), on_fail="raise", **kw)
            ex.__enter__()
            item.stash[_EXPECT] = ex
    except BaseException:
        stack.close()
        raise

    outcome = yield

    __tracebackhide__ = True  # a budget failure shows the problems, not this hook's source
    failure: Optional[BaseException] = None
    excinfo = outcome.excinfo
    try:
        if ex is not None:
            try:
                if excinfo is not None:
                    ex.__exit__(*excinfo)
                else:
                    ex.__exit__(None, None, None)
            except BaseException as e:  # BudgetExceeded, or BudgetError for bad steps
                failure = e
    finally:
        if _EXPECT in item.stash:
            del item.stash[_EXPECT]
        if measure is not None:
            row = item.stash[_ROW] = measure.finish()
            stopped = _stopped_at(excinfo[1] if excinfo is not None else None)
            if stopped:
                row["stopped"] = stopped
        stack.close()
    if failure is not None and excinfo is None:
        if hasattr(outcome, "force_exception"):
            outcome.force_exception(failure)
        else:  # pragma: no cover - pluggy < 1.1
            raise failure


_OWN_FAILURES = ("UnexpectedTransfer", "BudgetExceeded", "BudgetError")


def _stopped_at(exc: Optional[BaseException]) -> str:
    """``path:line`` of the crossing the guard stopped the test at (``raise``:
    nothing crossed, yet the test did not cross nothing), or ""."""
    from .runtime.guarding.guard import UnexpectedTransfer

    seen = 0
    while exc is not None and seen < 16:
        if isinstance(exc, UnexpectedTransfer):
            from ._text import printable

            return f"{printable(exc.path)}:{exc.line}"
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return ""


def _hide_torch_frames(excinfo: Any) -> None:
    """For xferaudit's own failures, drop torch's frames from the traceback.

    The guard raises from inside PyTorch's dispatch-mode machinery; the frames
    that matter are the user's. (xferaudit's own frames carry
    ``__tracebackhide__``.) Other failures are left exactly as they are.
    """
    exc = excinfo.value
    if type(exc).__name__ not in _OWN_FAILURES or not type(exc).__module__.startswith("xferaudit."):
        return
    torch = sys.modules.get("torch")
    torch_file = getattr(torch, "__file__", None)
    if not torch_file:
        return
    import os

    torch_dir = os.path.dirname(torch_file) + os.sep
    try:
        from _pytest._code import Traceback

        # pytest rebuilds the traceback from the raw chain (Traceback.cut), so
        # the chain itself is relinked past torch's frames.
        chain = []
        tb = excinfo.tb
        while tb is not None:
            chain.append(tb)
            tb = tb.tb_next
        kept = [t for t in chain if not t.tb_frame.f_code.co_filename.startswith(torch_dir)]
        if not kept or kept[0] is not chain[0] or len(kept) == len(chain):
            return
        for a, b in zip(kept, kept[1:]):
            a.tb_next = b
        kept[-1].tb_next = None
        excinfo.traceback = Traceback(kept[0])
    except Exception:  # pragma: no cover - another pytest: keep the traceback as it is
        pass


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: Any, call: Any) -> Any:
    if call.excinfo is not None and call.when == "call":
        _hide_torch_frames(call.excinfo)
    outcome = yield
    if call.when == "call" and _ROW in item.stash:
        outcome.get_result().user_properties.append((_KEY, item.stash[_ROW]))


# --- the fixture --------------------------------------------------------------------

class XferRecorder:
    """What the ``xfer_recorder`` fixture yields: the recorder, counting, reset.

    Attribute access falls through to ``xferaudit.runtime.counted.recorder`` (``STATE``,
    ``record``, ``reset``...); the methods here read the tallies.
    """

    def __init__(self, item: Any) -> None:
        from .runtime.counted import recorder

        self._recorder = recorder
        self._item = item

    def __getattr__(self, name: str) -> Any:
        return getattr(self._recorder, name)

    def report(self) -> Any:
        """A Report of everything counted since the test began."""
        from .runtime import snapshot

        return snapshot()

    def crossings(self, site: Optional[str] = None) -> int:
        """Crossings of one named site (a wrapped one, a library function's, a
        statement's site comment), or of all of them."""
        from .runtime.runs.budget import _snapshot

        sites = _snapshot()[0]
        if site is not None:
            return sites[site][0] if site in sites else 0
        return sum(v[0] for v in sites.values())

    def unwrapped(self) -> list:
        """[(path, line, op, direction, count)] the guard recorded that nothing names."""
        S = self._recorder.STATE
        with S.lock:
            return sorted((t.path, t.line, t.op, t.direction, t.count) for t in S.unwrapped.values()
                          if t.site is None)

    def step(self) -> None:
        """End of one step, for ``@pytest.mark.xfer_budget(..., warmup=K)``."""
        ex = self._item.stash.get(_EXPECT, None)
        if ex is not None:
            ex.step()


@pytest.fixture
def xfer_recorder(request: Any) -> Any:
    """The xferaudit recorder with counting on and all tallies reset (restored after)."""
    from .runtime.counted import recorder

    prev = recorder.STATE.on
    recorder.reset()
    recorder.STATE.on = True
    try:
        yield XferRecorder(request.node)
    finally:
        recorder.STATE.on = prev


# --- the table ----------------------------------------------------------------------

class _Table:
    """Collects the per-test rows (also from xdist workers) and prints them."""

    def __init__(self) -> None:
        self.rows: list = []

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.when != "call":
            return
        for key, value in getattr(report, "user_properties", ()):
            if key == _KEY and isinstance(value, dict):
                self.rows.append((report.nodeid, value))

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        tr = terminalreporter
        tr.write_sep("=", "xferaudit: host<->device transfers per test")
        active = [(n, r) for n, r in self.rows if r["crossings"] or r["unwrapped"] or r["launches"]
                  or r.get("stopped")]
        stopped = sum(1 for _, r in active if r.get("stopped"))
        quiet = len(self.rows) - len(active)
        if active:
            active.sort(key=lambda nr: (-nr[1]["crossings"], -nr[1]["unwrapped"], nr[0]))
            from ._units import human_bytes

            tr.write_line("crossings and bytes: every crossing of the test body, wrapped or not; "
                          "unwrapped: those of them at lines nothing names")
            tr.write_line(f"{'crossings':>9}  {'bytes':>10}  {'unwrapped':>9}  {'launches':>8}  test")
            for nodeid, r in active:
                tr.write_line(
                    f"{r['crossings']:>9}  {human_bytes(r['bytes_total']):>10}  {r['unwrapped']:>9}  "
                    f"{r['launches']:>8}  {nodeid}"
                    + (f" (stopped by the guard at {r['stopped']})" if r.get("stopped") else "")
                )
        tr.write_line(
            f"{len(active) - stopped} test(s) crossed or launched, "
            + (f"{stopped} stopped by the guard, " if stopped else "") + f"{quiet} crossed nothing"
            + ("" if _torch_installed() else " (torch is not installed: the guard was off)")
        )
