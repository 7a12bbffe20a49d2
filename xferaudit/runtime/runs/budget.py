"""Transfer budgets: expected crossings per named site per step, checked.

Why: a step that is right today gains a ``.item()`` tomorrow and nothing
fails; only the speed-up goes. A budget freezes what a good step crosses, so
CI fails the day it changes::

    import xferaudit.runtime as xfer

    budget = {"train.py:step:batch.to": 2, "train.py:step:loss.item": 1}
    with xfer.expect(budget, warmup=1) as ex:
        for batch in batches:          # 1 warm-up step + N measured steps
            step(batch)
            ex.step()                  # marks the end of one step

On exit it fails (raises :class:`BudgetExceeded`, or with
``on_fail="report"`` prints the problems and keeps them in ``ex.problems``)
when:

* a site crossed more often per step than its budget (``over``);
* a site that is not in the budget crossed at all (``unexpected``);
* the guard saw an unwrapped transfer (``unwrapped``): a crossing no wrapper
  names. ``expect`` enters ``guard("count")`` for the block unless a guard is
  already active (``guard=None`` to not), so these are seen;
* a graph site launched that the budget does not hold (``unexpected``, a new
  name), or more often than it holds (a plain ``= 0`` for a graph site: no
  launch at all);
* pageable copies over a site's or a line's ``pageable``, or over
  ``expect(..., pageable=N)`` (every crossing, named or not).

Each problem says what to do (:mod:`.advice`); ``xferaudit run --budget``
also prints the commands (freeze again, ``wrap --from``).

A budget is ``{site: n}``: n crossings per step (an int, a decimal, or a
fraction written as a string: 0.1 is one crossing every ten steps, ``"1/3"``
one every three). Comparisons are exact: a measured 7 crossings in 10 steps
is within 0.7 (the decimal as written, not the float a hair under it), and 1
in 3 steps is within ``"1/3"``. ``{site: {launches = n}}`` budgets the launches of a
graph site (a compiled callable or a replayed CUDA graph) per step instead;
``{crossings = n}`` is the long form of a plain number; it may also hold
``copies = n`` (copies on the wire per step: a module move is one crossing
and a copy per tensor) and ``pageable = n`` (``non_blocking`` copies with a
pageable host side, which run synchronously: ``pageable = 0`` forbids them at
that site; ``expect(..., pageable=0)`` forbids them everywhere; under
``xferaudit run --budget`` a site that gives none allows none). Sources, for
:func:`load_budget` and ``expect``:

* a dict;
* a TOML or JSON file: its ``[tool.xferaudit.budget]`` table, else its
  ``[budget]`` table, else the whole file (``xferaudit budget --from RUN.json``
  writes one from a good run);
* ``None``: ``[tool.xferaudit.budget]`` of the project's pyproject.toml.

Steps: each ``ex.step()`` ends one step; the first ``warmup`` of them are not
measured (compilation, allocator warm-up, lazy init). Without ``step()`` calls,
``steps=N`` says how many steps ran in the block (default 1), and
``steps="optimizer"`` counts them at each ``optimizer.step()`` made in the
block, as ``xferaudit run`` does: a budget frozen from a run
(``xferaudit budget --from RUN.json``) is checked per step the same way. Counting is on
inside the block and is measured as the difference of the tallies, so counts
made outside are neither lost nor mixed in; the block's own ``xfer.count(...)``,
``xfer.reset()`` and ``guard("off")`` are held (``ex.held``), and threads
started in it run under its guard levels (:mod:`.unseen`).

Time: ``ex.seconds`` gives, after the block, each site's host time per step
inside its calls (as ``ex.measured`` gives its crossings per step). A budget
holds counts alone: they are exact and the same on every machine, where time
depends on the machine and its load, so a budget that failed on time would
fail by chance.
"""

from __future__ import annotations

import os
import re
import sys
import dataclasses
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import IO, Any, Mapping, Optional, Union

from ... import _validate
from ..._text import printable
from . import compiled_budget as _compiled_budget
from ..counted import compiled as _compiled
from ..counted import recorder as _recorder
from .advice import advice, commands
from .advice import number as _num
from . import oldnames as _oldnames
from .unseen import hold_block, threads_guarded

__all__ = [
    "Budget", "BudgetError", "BudgetExceeded", "Expectation", "Problem", "expect", "load_budget",
]

BudgetSource = Union[Mapping[str, Any], str, "os.PathLike[str]", "Budget", None]
#: ``expect(steps=OPTIMIZER)``: the steps are the ``optimizer.step()`` calls made
#: in the block (the most any one optimizer made), as ``xferaudit run`` counts them.
OPTIMIZER = "optimizer"


class BudgetError(ValueError):
    """A budget is malformed or cannot be read; the message says where."""


@dataclass(frozen=True)
class Problem:
    """One way a run broke its budget."""

    kind: str  # "over" | "unexpected" | "unwrapped" | "pageable" | "unseen" (what the run could not see)
    site: str  # the site, or the name of an unwrapped transfer (path:function:expression)
    measured: float  # per step
    budget: Optional[float]  # per step; None for unexpected/unwrapped
    what: str = "crossings"  # "crossings" | "launches" | the op of an unwrapped transfer

    @property
    def message(self) -> str:
        """One line; control characters in the site name escaped (``self.site`` keeps them)."""
        m = _num(self.measured)
        site, what = printable(self.site), printable(self.what)
        if self.kind == "over":
            return (f"over budget: {site}: {m} {what} per step, "
                    f"budget {_num(self.budget or 0)}")
        if self.kind == "unexpected":
            if self.what == "launches":
                return f"new graph site: {site}: {m} launches per step, and it is not in the budget"
            return f"unexpected site: {site}: {m} crossings per step, and it is not in the budget"
        if self.kind == "pageable":
            return (f"pageable copies: {site}: {m} non_blocking copies per step from or to "
                    f"pageable host memory (they ran synchronously), allowed "
                    f"{_num(self.budget or 0)}: pin the host memory")
        if self.kind == "unseen":
            return f"not seen, so not judged: {site}"
        return f"unwrapped transfer: {site}: {what}, {m} per step"


class BudgetExceeded(AssertionError):
    """A block under ``expect(...)`` broke its budget; ``.problems`` lists how."""

    def __init__(self, problems: list, steps: float, budget_file: Optional[str] = None) -> None:
        self.problems = list(problems)
        self.steps = steps
        lines = [f"transfer budget broken ({len(problems)} problem(s), {_num(steps)} step(s) measured):"]
        for p in problems:
            lines += [f"  {p.message}", f"    what to do: {advice(p, budget_file)}"]
        if problems:
            lines.append("  if every change is meant, freeze the budget again from a good run "
                         "(xferaudit run ...; xferaudit budget --from RUN.json -o BUDGET.toml)")
        super().__init__("\n".join(lines))


@dataclass
class Budget:
    """Per-step allowance per site: ``crossings`` for transfer sites, ``launches`` for graph sites."""

    crossings: dict
    launches: dict
    source: str = "budget"
    copies: dict = field(default_factory=dict)  # site -> copies per step, where given
    pageable: dict = field(default_factory=dict)  # site -> pageable copies per step, where given
    file: Optional[str] = None  # the file it was read from, where one (what to edit, or freeze into)
    compiled: dict = field(default_factory=dict)  # site -> graphs/breaks/cudagraph_skips (.compiled_budget)

    def __contains__(self, site: str) -> bool:
        return site in self.crossings or site in self.launches

    def __len__(self) -> int:
        return len(self.crossings) + len(self.launches)

    def to_dict(self) -> dict:
        """The budget as JSON/TOML values (a fraction as its ``"a/b"`` string)."""
        out: dict = {}
        for site, n in self.crossings.items():
            extra = {k: written(d[site]) for k, d in (("copies", self.copies), ("pageable", self.pageable))
                     if site in d}
            out[site] = dict(crossings=written(n), **extra) if extra else written(n)
        out.update({s: {"launches": written(n)} for s, n in self.launches.items()})
        for s, e in self.compiled.items():  # (beside the site's launches: one table)
            out[s] = {**out[s], **e} if isinstance(out.get(s), dict) else dict(e)
        return out


def written(v: Any) -> Any:
    """A per-step allowance as a budget file holds it, exactly: an int when
    whole, a decimal when one of at most 6 places is exact (``1.25``), else
    the fraction as a string (``"1/3"``), which :func:`load_budget` reads back."""
    q = exact(v)
    if q.denominator == 1:
        return q.numerator
    if 10**6 % q.denominator == 0 and exact(float(q)) == q:
        return float(q)
    return f"{q.numerator}/{q.denominator}"


_FRACTION = re.compile(r"\s*(\d{1,19})\s*(?:/\s*(\d{1,19})\s*)?")


def _value(v: Any, where: str) -> Any:
    """A per-step allowance: an int, a float, or a ``"a/b"`` string (a Fraction)."""
    if isinstance(v, str):
        m = _FRACTION.fullmatch(v)
        den = int(m.group(2) or 1) if m else 0
        if not den:
            raise BudgetError(f"{where}: must be a number of crossings per step >= 0 or a fraction "
                              f"like \"1/3\", not {v!r}")
        v = Fraction(int(m.group(1)), den)
        v = v.numerator if v.denominator == 1 else v
    if isinstance(v, Fraction):
        _validate.number(float(v), where, BudgetError, "number of crossings per step")
        return v
    return _validate.number(v, where, BudgetError, "number of crossings per step")


def exact(v: Any) -> Fraction:
    """A number as the exact value it was written as: a float by its shortest
    decimal (``0.7`` is 7/10, not the binary float a hair under it)."""
    if isinstance(v, float):
        return Fraction(repr(v))
    return Fraction(v)


def _over(total: Any, steps: Fraction, allowed: Any) -> bool:
    """`total` over `steps` steps is more than `allowed` per step, exactly."""
    return exact(total) > exact(allowed) * steps


def budget_from_mapping(data: Mapping[str, Any], where: str = "budget") -> Budget:
    if not isinstance(data, Mapping):
        raise BudgetError(f"{where}: a budget is a table of site = crossings per step")
    crossings: dict = {}
    launches: dict = {}
    copies: dict = {}
    pageable: dict = {}
    compiled: dict = {}
    for site, v in data.items():
        w = f"{where}: {site!r}"
        if not isinstance(site, str):  # "" is a name (the runtime records `site=""` as one)
            raise BudgetError(f"{where}: site names must be strings, not {site!r}")
        if isinstance(v, Mapping):
            v, entry = _compiled_budget.split(v, w, BudgetError)
            if entry is not None:
                compiled[site] = entry
            if v is None:
                continue
            unknown = set(v) - {"crossings", "launches", "copies", "pageable"}
            if unknown or not v or ("launches" in v and len(v) != 1) or (
                    "launches" not in v and "crossings" not in v):
                raise BudgetError(
                    f"{w}: a table must hold 'launches' alone, or 'crossings' (with "
                    "'copies' and 'pageable' if wanted)"
                    + (f" (unknown: {', '.join(sorted(map(str, unknown)))})" if unknown else "")
                )
            for key, n in v.items():
                table = {"crossings": crossings, "launches": launches, "copies": copies,
                         "pageable": pageable}[key]
                table[site] = _value(n, f"{w}.{key}")
        else:
            crossings[site] = _value(v, w)
    return Budget(crossings, launches, where, copies, pageable, compiled=compiled)


def _table_of(data: Any, where: str) -> Any:
    if isinstance(data, dict):
        tool = data.get("tool")
        if isinstance(tool, dict) and isinstance(tool.get("xferaudit"), dict):
            if "budget" not in tool["xferaudit"]:
                raise BudgetError(f"{where}: no [tool.xferaudit.budget] table")
            return tool["xferaudit"]["budget"]
        if isinstance(data.get("budget"), dict):
            return data["budget"]
    return data


def load_budget(source: BudgetSource = None) -> Budget:
    """A :class:`Budget` from a dict, a TOML/JSON file, or ``[tool.xferaudit.budget]`` (None)."""
    if isinstance(source, Budget):
        return source
    if source is None:
        from ...config import ConfigError, load_config

        try:
            cfg = load_config()
        except ConfigError as e:
            raise BudgetError(str(e)) from None
        where = f"{cfg.source or 'pyproject.toml'}: [tool.xferaudit.budget]"
        if "budget" not in cfg.raw:  # (an empty table is a budget: nothing may cross)
            raise BudgetError(f"{where}: no budget there; pass one to expect(...)")
        b = budget_from_mapping(cfg.budget, where)
        b.file = str(cfg.source) if cfg.source else None
        return b
    if isinstance(source, Mapping):
        return budget_from_mapping(source)
    path = Path(source)
    where = str(path)
    from ..._readfile import read_text

    text = read_text(path, where, BudgetError, missing=f"{where}: no such budget file")
    if path.suffix.lower() == ".json":
        data = _validate.parse_json(text, where, BudgetError)
    else:
        data = _validate.parse_toml(text, where, BudgetError, "not TOML")
    b = budget_from_mapping(_table_of(data, where), where)
    b.file = where
    return b


# --- measuring ------------------------------------------------------------------

def _snapshot() -> tuple:
    """The tallies as totals: ``(sites, launches, unwrapped)``. A crossing named
    without a wrapper (a library function's, a statement's site comment) is a
    site of that name; an unnamed one is keyed ``(path, line, op, direction,
    name)``, the path as a run names the user's files, the name
    ``path:function:expression`` (:mod:`.oldnames`: a budget holding the old
    ``path:line`` still finds the line)."""
    S = _recorder.STATE
    with S.lock:
        sites = {k: (t.crossings, t.copies, t.pageable, t.ns, t.bytes) for k, t in S.sites.items()}
        launches = {k: t.launches for k, t in S.launches.items()}
        unwrapped: dict = {}
        for t in S.unwrapped.values():
            if t.site is not None:
                v = sites.get(t.site, (0, 0, 0, 0, 0))
                sites[t.site] = (v[0] + t.count, v[1] + t.copies, v[2] + t.pageable, v[3] + t.ns,
                                 v[4] + t.bytes)
                continue
            path = _recorder.line_path(t.code.co_filename, t.path) if t.code is not None else t.path
            _add_line(unwrapped, (path, t.line, t.op, t.direction, t.name), t.count, t.op, t.copies,
                      t.pageable, t.bytes)
    return sites, launches, unwrapped, _compiled.snapshot()


def _add_line(lines: dict, key: tuple, count: int, op: str, copies: int, pageable: int, nbytes: int) -> None:
    """A line's figures added to `lines`: ``key -> (count, op, copies, pageable, bytes)``."""
    had = lines.get(key)
    if had is not None:
        count, copies, pageable, nbytes = (count + had[0], copies + had[2], pageable + had[3],
                                           nbytes + had[4])
    lines[key] = (count, op, copies, pageable, nbytes)


def _delta(a: tuple, b: tuple) -> tuple:
    sites = {k: tuple(x - y for x, y in zip(v, a[0].get(k, (0,) * len(v)))) for k, v in b[0].items()}
    launches = {k: v - a[1].get(k, 0) for k, v in b[1].items()}
    unwrapped = {}
    for k, v in b[2].items():
        w = a[2].get(k, (0, "", 0, 0, 0))
        unwrapped[k] = (v[0] - w[0], v[1], *(x - y for x, y in zip(v[2:], w[2:])))
    return sites, launches, unwrapped


def line_name(path: str, line: int) -> str:
    """A user's line by its old name, ``path:line`` (a budget frozen before
    names had no line number: :mod:`.oldnames`)."""
    return _oldnames.line_name(path, line)


def check(budget: Budget, sites: Mapping[str, Any], launches: Mapping[str, float],
          unwrapped: Mapping[tuple, tuple], steps: float, unwrapped_allowed: float = 0,
          pageable_allowed: Optional[float] = None, made_at: Optional[Mapping[str, Any]] = None) -> list:
    """Problems of `steps` steps' totals against `budget` (totals are divided by
    `steps`). `sites` maps a site to its crossings, or to (crossings, copies,
    pageable[, ns, bytes]); `unwrapped` maps ``(path, line, op, direction[, name])``
    to ``(count, op[, copies, pageable, bytes])``: a crossing whose name the
    budget holds (``path:function:expression``, as ``xferaudit budget --from``
    freezes a run's; or the old ``path:line``) is checked as a site, its copies
    and pageable copies too, any other is an unwrapped transfer;
    `pageable_allowed`: pageable copies allowed per step over every crossing,
    named or not (None: not checked beyond each site's own ``pageable``);
    `made_at`: where the rows named without a wrapper were made (``{site:
    [(path, line), ...]}``), for a budget that holds a library row by its old
    name (:mod:`.oldnames`). Every graph site launched is checked: one the
    budget does not hold is a new name, one it holds as a plain number is held
    to it."""
    problems = []
    exact_steps = exact(steps) if steps > 0 else Fraction(1, 10**12)
    steps = float(exact_steps)
    total_pageable = 0
    lines: dict = {}
    rest: dict = {}
    sites = _oldnames.fold_library(budget.crossings, sites, made_at)
    launches = _oldnames.fold_library(budget.launches, launches, made_at)
    for key, v in unwrapped.items():
        c, op = v[0], v[1]
        copies, pageable = (v[2], v[3]) if len(v) > 3 else (c, 0)
        name = _oldnames.unwrapped_name(key, budget.crossings)
        if name in budget.crossings and name not in sites:
            had = lines.get(name, (0, 0, 0))
            lines[name] = (had[0] + c, had[1] + copies, had[2] + pageable)
        elif name in budget.crossings and len(key) > 4 and key[4] == name:
            # (a wrapped site's name too: counted with that row, its copies and pageable ones too)
            had = sites[name] if isinstance(sites[name], tuple) else (sites[name], 0, 0)
            sites[name] = (had[0] + c, had[1] + copies, had[2] + pageable) + tuple(had[3:])
        else:
            rest[key] = (c, op)
            total_pageable += max(pageable, 0)
    for site, v in sorted({**sites, **lines}.items()):
        n, copies, pageable = v[:3] if isinstance(v, tuple) else (v, 0, 0)
        total_pageable += max(pageable, 0)
        if n <= 0:
            continue
        per = n / steps
        if site in budget.crossings:
            allowed = budget.crossings[site]
            if _over(n, exact_steps, allowed):
                problems.append(Problem("over", site, per, float(allowed)))
            if site in budget.copies and _over(copies, exact_steps, budget.copies[site]):
                problems.append(Problem("over", site, copies / steps, float(budget.copies[site]), "copies"))
            if site in budget.pageable and _over(pageable, exact_steps, budget.pageable[site]):
                problems.append(Problem("pageable", site, pageable / steps, float(budget.pageable[site])))
        elif site not in budget.launches:
            problems.append(Problem("unexpected", site, per, None))
    if pageable_allowed is not None and _over(total_pageable, exact_steps, pageable_allowed):
        problems.append(Problem("pageable", "all sites", total_pageable / steps, pageable_allowed))
    for site, n in sorted(launches.items()):
        if n <= 0:
            continue
        if site in budget.launches:
            allowed = budget.launches[site]
        elif site in budget.crossings and site not in sites:
            allowed = budget.crossings[site]  # a plain number at a graph site: its launches (`= 0`: none)
        else:
            problems.append(Problem("unexpected", site, n / steps, None, "launches"))
            continue
        if _over(n, exact_steps, allowed):
            problems.append(Problem("over", site, n / steps, float(allowed), "launches"))
    total = sum(c for c, _ in rest.values() if c > 0)
    if _over(total, exact_steps, unwrapped_allowed):
        for key, (c, op) in sorted(rest.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
            if c > 0:
                problems.append(Problem("unwrapped", _oldnames.unwrapped_name(key, ()), c / steps, None,
                                        f"{op} ({key[3]}), line {key[1]}"))
    return problems


def check_run(budget: Budget, rep: Any) -> list:
    """Problems of a run's report against `budget`, per step: its totals divided
    by its steps (``meta.steps``: the optimizer steps ``xferaudit run``
    counted, or those the program marked; else 1). A named site over its
    allowance, a named site the budget does not hold, a graph site launched
    more often, and a line that crossed with nothing naming it unless the
    budget holds it (``path:line``) are problems."""
    steps = rep.meta.get("steps")
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        steps = 1
    sites, launches, unwrapped = report_totals(rep)
    regions = rep.meta.get("compiled")
    launches = _compiled_budget.as_budgeted(launches, budget.compiled, regions)
    return (check(_pageable_held(budget), sites, launches, unwrapped, steps, made_at=_oldnames.lines_of(rep.meta))
            + _compiled_budget.check(budget.compiled, regions, steps=steps))


def _pageable_held(budget: Budget) -> Budget:
    """`budget` with ``pageable = 0`` at every site that gives no ``pageable``:
    a run's gate allows pageable ``non_blocking`` copies only where its budget
    says so (``xferaudit budget --from`` writes them where the good run made
    them), so a copy turned ``non_blocking`` from pageable memory fails."""
    held = {s: 0 for s in budget.crossings if s not in budget.pageable}
    if not held:
        return budget
    return dataclasses.replace(budget, pageable={**budget.pageable, **held})


def run_verdict(problems: list, source: str, steps: Any, run_file: Optional[str] = None,
                budget: Optional[Budget] = None) -> str:
    """The lines ``xferaudit run --budget`` prints: each problem and what to do
    about it, with the commands (`run_file`: the run file written), or that the
    run kept its budget."""
    if not problems:
        return f"xferaudit run: within the budget ({printable(source)})\n"
    head = (f"xferaudit run: transfer budget broken ({printable(source)}; {len(problems)} problem(s), "
            f"{_num(steps if isinstance(steps, int) and steps > 0 else 1)} step(s)):")
    file = budget.file if budget is not None else None
    lines = [head]
    for p in problems:
        lines += [f"  {p.message}", f"    what to do: {advice(p, file, run_file)}"]
    lines += commands(problems, file, bool(file) and Path(file).name == "pyproject.toml", run_file)
    return "\n".join(lines) + "\n"


def report_totals(rep: Any) -> tuple:
    """A saved report's ``(sites, launches, unwrapped)`` as :func:`check` takes them."""
    sites = {r.site: (r.crossings, r.copies, r.pageable) for r in rep.rows}
    launches = {x.site: x.launches for x in rep.launches}
    unwrapped: dict = {}
    for u in rep.unwrapped:
        _add_line(unwrapped, (u.path, u.line, u.op, u.direction, u.name), u.count, u.op, u.copies,
                  u.pageable, u.bytes)
    return sites, launches, unwrapped


class Expectation:
    """What ``expect(...)`` returns: call :meth:`step` after each step; results after exit."""

    def __init__(self, budget: BudgetSource = None, *, steps: Union[int, str, None] = None, warmup: int = 0,
                 on_fail: str = "raise", guard: Optional[str] = "count", unwrapped: float = 0,
                 file: Optional[IO[str]] = None, pageable: Optional[float] = None) -> None:
        if on_fail not in ("raise", "report"):
            raise ValueError(f"expect(on_fail=...) must be 'raise' or 'report', not {on_fail!r}")
        if steps is not None and steps != OPTIMIZER and (
                isinstance(steps, bool) or not isinstance(steps, int) or steps < 1):
            raise ValueError(f"expect(steps=...) must be a whole number >= 1 or {OPTIMIZER!r}, not {steps!r}")
        if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
            raise ValueError(f"expect(warmup=...) must be a whole number >= 0, not {warmup!r}")
        self.budget = load_budget(budget)
        self.steps_declared = steps
        self.warmup = warmup
        self.on_fail = on_fail
        self.guard_level = guard
        self.unwrapped_allowed = unwrapped
        self.pageable_allowed = pageable
        self.file = file
        self.problems: list = []
        self.steps: float = 0
        self.measured: dict = {}  # site -> crossings per step
        self.seconds: dict = {}  # site -> host seconds per step inside its calls (not budgeted)
        self.launches: dict = {}  # site -> launches per step
        self.unwrapped: dict = {}  # (path, line, op, direction, name) -> events per step
        self._calls = 0
        self._start: Any = None
        self._guard: Any = None
        self._optimizer: Any = None  # (steps="optimizer") the optimizer steps counted in the block
        self._unhook: Any = None
        self._unhook_threads: Any = None
        self._unhold: Any = None
        self.held: list = []  # what the block asked of counting and was held (xfer.count(False), ...)
        self._prev_on = False
        self._prev_compiled = False
        self._first: Any = None
        self.checked = False

    # -- use ---------------------------------------------------------------------
    def step(self) -> None:
        """End of one step; the first ``warmup`` steps are dropped from the measure."""
        self._calls += 1
        if self._calls == self.warmup:
            self._start = _snapshot()

    @property
    def ok(self) -> bool:
        return self.checked and not self.problems

    def __enter__(self) -> "Expectation":
        S = _recorder.STATE
        self._prev_on = S.on
        if "torch" in sys.modules:
            try:  # bind torch for the wrappers now, outside any compiled region (as xfer.count does)
                from ... import registry

                registry.runtime_module("torch")._init()
            except Exception:  # pragma: no cover - the wrappers bind lazily anyway
                pass
        S.on = True
        if self.steps_declared == OPTIMIZER and _torch_available():
            import torch  # noqa: F401 - (the optimizers' global step hook)

            from .run_hooks import OptimizerSteps

            self._optimizer = OptimizerSteps()
            self._unhook = self._optimizer.install(sys.modules["torch"])
        if self.guard_level:
            from ..guarding.guard import active_levels, guard

            active = active_levels()  # (a guard already on, but "off" somewhere, would hide crossings)
            if (active is None or "off" in (active.get(d) for d in ("up", "down", "d2d"))) \
                    and _torch_available():
                self._guard = guard(self.guard_level)
                self._guard.__enter__()
            self._unhook_threads = threads_guarded(self._guard, _torch_available())
        self._prev_compiled = _compiled.STATE.on
        _compiled.start()
        self._start = self._first = _snapshot()
        self._unhold = hold_block(self)
        return self

    def hold(self, what: str) -> None:
        """The block asked `what` of counting (``xfer.count(False)``,
        ``xfer.reset()``, ``guard("off")``): held, so every crossing is measured."""
        if what not in self.held:
            self.held.append(what)


    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        __tracebackhide__ = True  # pytest shows the failure, not this module's source
        end = _snapshot()
        if self._unhold is not None:
            self._unhold()
            self._unhold = None
        try:
            if self._guard is not None:
                self._guard.__exit__(None, None, None)
        finally:
            self._guard = None
            _recorder.STATE.on = self._prev_on
            if not self._prev_compiled:
                _compiled.stop()
            if self._unhook is not None:
                self._unhook()
                self._unhook = None
            if self._unhook_threads is not None:
                self._unhook_threads()
                self._unhook_threads = None
        if exc_type is not None:
            return  # the block's own error wins; nothing to check
        self._finish(end)

    def _finish(self, end: tuple) -> None:
        __tracebackhide__ = True
        if self._calls:
            if self._calls <= self.warmup:
                raise BudgetError(
                    f"expect(warmup={self.warmup}): only {self._calls} step(s) ran, none measured"
                )
            steps = self._calls - self.warmup
            if self.steps_declared not in (None, OPTIMIZER) and self.steps_declared != steps:
                raise BudgetError(
                    f"expect(steps={self.steps_declared}): {steps} measured step(s) ran "
                    f"({self._calls} step() calls, warmup={self.warmup})"
                )
        else:
            if self.warmup:
                raise BudgetError(
                    "expect(warmup=...) needs ex.step() at the end of each step to know "
                    "where the warm-up ends"
                )
            steps = self.steps_declared or 1
            if steps == OPTIMIZER:
                steps = self._optimizer.steps if self._optimizer is not None else 0
                if not steps:
                    raise BudgetError(f"expect(steps={OPTIMIZER!r}): no optimizer step ran in the block")
        sites, launches, unwrapped = _delta(self._start, end)
        self.steps = steps
        self.measured = {k: v[0] / steps for k, v in sites.items() if v[0]}
        self.seconds = {k: v[3] / 1e9 / steps for k, v in sites.items() if v[3] > 0}
        self.launches = {k: v / steps for k, v in launches.items() if v}
        self.unwrapped = {k: v[0] / steps for k, v in unwrapped.items() if v[0]}
        measured = _compiled.delta(self._start[3], end[3])
        self.problems = check(self.budget, sites, _compiled_budget.as_budgeted(launches, self.budget.compiled, measured),
                              unwrapped, steps, self.unwrapped_allowed, self.pageable_allowed, _live_lines())
        self.problems += _compiled_budget.check(  # (breaks and skips come at compile: the warm-up too)
            self.budget.compiled, _compiled.delta(self._first[3], end[3]), measured, steps)
        self.checked = True
        if not self.problems:
            return
        err = BudgetExceeded(self.problems, steps, self.budget.file)
        if self.on_fail == "raise":
            raise err
        out = self.file if self.file is not None else sys.stderr
        out.write(f"xferaudit: {err}\n")


def _live_lines() -> dict:
    """Where the live rows named without a wrapper were made (see :func:`check`'s `made_at`)."""
    from ..counted.tallies import named_lines

    S = _recorder.STATE
    with S.lock:
        return named_lines(list(S.unwrapped.values()))


def _torch_available() -> bool:
    if "torch" in sys.modules:
        return True
    try:
        import importlib.util

        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):  # pragma: no cover
        return False


def expect(budget: BudgetSource = None, *, steps: Union[int, str, None] = None, warmup: int = 0,
           on_fail: str = "raise", guard: Optional[str] = "count", unwrapped: float = 0,
           file: Optional[IO[str]] = None, pageable: Optional[float] = None) -> Expectation:
    """``with expect(budget, steps=N, warmup=K, on_fail="raise"|"report") as ex: ...``

    See the module docstring. ``steps``: how many steps ran, where the block
    marks none with ``ex.step()`` (default 1), or ``"optimizer"``: the
    ``optimizer.step()`` calls made in it. ``guard``: the level of the guard entered for the
    block when none is active (None: enter none). ``unwrapped``: unwrapped
    transfers allowed per step (default 0). ``pageable``: ``non_blocking``
    copies with a pageable host side allowed per step over all sites (None,
    the default: not checked; 0 forbids them). ``file``: where
    ``on_fail="report"`` prints (default stderr).
    """
    return Expectation(budget, steps=steps, warmup=warmup, on_fail=on_fail, guard=guard,
                       unwrapped=unwrapped, file=file, pageable=pageable)
