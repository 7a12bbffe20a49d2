"""``xferaudit budget --from RUN.json``: freeze a good run as a transfer budget.

A run saves its report with ``xfer.report().save("run.json")`` (or ``xferaudit
run`` writes its run file); this writes the crossings per site per step it
measured as a budget that ``xferaudit run --budget``, ``xfer.expect(...)`` and
``@pytest.mark.xfer_budget(...)`` check, so CI fails the day a step starts
crossing more. Every named crossing is frozen: wrapped sites, crossings made
inside a library (``lib.mod:function <- train.py:train_step:self.log``),
statements named by a site comment, the launches of graph sites, and the
user's crossings with nothing naming them (``train.py:train_step:loss.item``).
No name holds a line number, so lines inserted above, a moved function or a
reformatted file leave the budget as it is. A run file written before names
had no line number gives its user lines as ``train.py:41`` (an edit above
moves them: freeze again from a new run). The file's table is ``[tool.xferaudit.budget]``: it can be
read as it is, or pasted into pyproject.toml.

Steps: ``--steps N`` divides the run's totals by N; without it, the report's
``steps`` (top level or ``meta``), else 1. A merged run (``xferaudit merge``)
is frozen per rank per step: each rank's figures divided by its own steps
(``--steps N``: N each), the most any rank crossed, since each rank's
``xferaudit run --budget`` checks its own run; the ranks' sum would let one
rank cross as often as all of them together. ``--slack`` adds headroom: ``10%``
of each site's count, or an absolute number of crossings per step (``0.5``).
"""

from __future__ import annotations

import argparse
import json
import sys
from fractions import Fraction
from pathlib import Path

from .._atomic import atomic_write
from .._validate import MAX_COUNT
from . import EXIT_OK, Command, UserError


def _slack(text: str) -> tuple:
    """'10%' -> (1/10, 0); '0.5' -> (0, 1/2): exact fractions."""
    t = text.strip()
    try:
        v = Fraction(t[:-1] if t.endswith("%") else t)
        if not 0 <= v <= MAX_COUNT:
            raise ValueError
    except (ValueError, ZeroDivisionError):
        raise argparse.ArgumentTypeError(
            f"--slack {text!r}: give a percentage (10%) or a number of crossings per step (0.5), >= 0"
        ) from None
    return (v / 100, Fraction(0)) if t.endswith("%") else (Fraction(0), v)


def _steps(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"--steps {text!r}: a whole number of steps >= 1")
    return n


def _fmt(x) -> str:
    """An allowance as TOML, exactly (see :func:`~xferaudit.runtime.runs.budget.written`)."""
    from ..runtime.runs.budget import written

    v = written(x)
    return json.dumps(v) if isinstance(v, str) else repr(v)


def _toml_key(s: str) -> str:
    return json.dumps(s, ensure_ascii=True)  # a TOML basic string, same escapes


def _toml_can_hold(sites: list) -> None:
    """TOML strings hold Unicode scalar values only: a site name with a lone
    surrogate (Python's reading of a file name whose bytes are not UTF-8) has
    no TOML spelling, while JSON keeps it (``\\udcff``) and reads it back."""
    for s in sites:
        if any("\ud800" <= ch <= "\udfff" for ch in s):
            raise UserError(f"site {_toml_key(s)} holds a character TOML cannot hold (from a file "
                            "name that is not UTF-8?): write the budget as JSON (-o budget.json)")


class BudgetCommand(Command):
    NAME = "budget"
    DESCRIPTION = "Write a transfer budget (crossings per site per step) from a saved run report."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--from", dest="source", metavar="RUN.json", required=True,
                            help="a report saved with xfer.report().save(...)")
        parser.add_argument("-o", "--output", metavar="BUDGET.toml", default=None,
                            help="write here (.toml, or .json by suffix); default, or '-': stdout")
        parser.add_argument("--steps", type=_steps, default=None, metavar="N",
                            help="steps the run measured (default: the report's 'steps', else 1)")
        parser.add_argument("--slack", type=_slack, default=(Fraction(0), Fraction(0)), metavar="PCT%|N",
                            help="headroom per site: '10%%' of its count or N crossings per step")

    def run(self, args: argparse.Namespace) -> int:
        from ..runtime.reporting._report import Report, ReportError
        from ..runtime.runs.budget import written

        from .._validate import steps_of

        def _declared(r, where) -> int:
            return steps_of({"meta": r.meta}, f"{where}: rank {r.meta.get('rank')}", ReportError)

        src = Path(args.source)
        try:
            rep = Report.load(src)  # (a top-level "steps" is read into its meta)
            declared = steps_of({"meta": rep.meta}, str(src), ReportError)
            for r in getattr(rep, "ranks", None) or []:
                _declared(r, src)  # (checked now: an error is one line)
        except ReportError as e:
            raise UserError(str(e)) from None
        pct, absolute = args.slack
        ranks = list(getattr(rep, "ranks", None) or [])
        if ranks:  # a merged run: each rank per its own step, the most any rank crossed
            parts = [(r, args.steps if args.steps is not None else _declared(r, src) or 1) for r in ranks]
            step_counts = sorted({n for _, n in parts})
            steps_text = (f"{len(ranks)} rank(s) of {'/'.join(map(str, step_counts))} step(s), "
                          "per rank per step (the most any rank crossed)")
        else:
            parts = [(rep, args.steps if args.steps is not None else declared or 1)]
            steps_text = f"{parts[0][1]} step(s)"

        def allowance(per: Fraction) -> Fraction:  # exact: the run it came from passes
            return per * (1 + pct) + absolute if per else absolute

        crossings: dict = {}
        copies: dict = {}
        launches: dict = {}
        user_lines: set = set()
        pageable: dict = {}
        for part, steps in parts:
            c, k, x, lines = _per_step(part, steps)
            user_lines |= lines
            for table, figures in ((crossings, c), (copies, k), (launches, x),
                                   (pageable, _pageable_per_step(part, steps))):
                for site, per in figures.items():
                    table[site] = max(table.get(site, per), per)
        # Copies beside crossings where a call makes several (a module move).
        copies = {s: allowance(k) for s, k in copies.items() if k != crossings[s]}
        crossings = {s: allowance(n) for s, n in crossings.items()}
        launches = {s: allowance(n) for s, n in launches.items()}
        # Pageable copies where the run made them (elsewhere run --budget allows none).
        pageable = {s: allowance(n) for s, n in pageable.items() if n and s in crossings}
        from ..runtime.runs.compiled_budget import freeze, toml_items

        compiled = freeze(rep.meta.get("compiled"),  # calls per step, graphs per call, breaks, CUDA-graph skips
                          lambda n: written(allowance(Fraction(n, parts[0][1]))))
        both = sorted(set(crossings) & set(launches))
        if both:
            raise UserError(f"{src}: site(s) both transfer and launch rows: {', '.join(both)}")
        if not crossings and not launches and rep.meta.get("kind") != "run":
            raise UserError(f"{src}: the report has no site rows to make a budget of "
                            "(was counting on? xfer.count(True) / `with xfer.counting():`)")

        out = None if args.output == "-" else args.output  # ("-": stdout, as without -o)
        if out is not None and Path(out).suffix.lower() == ".json":
            data = {s: _entry(n, copies.get(s), pageable.get(s), written) for s, n in crossings.items()}
            data.update({s: {"launches": written(n)} for s, n in launches.items()})
            for s, e in compiled.items():
                data[s] = {**data[s], **e} if isinstance(data.get(s), dict) else e
            text = json.dumps({"budget": data}, indent=2, sort_keys=True) + "\n"
        else:
            _toml_can_hold(list(crossings) + list(launches))
            slack = f"{float(pct * 100):g}%" if pct else _fmt(absolute)
            lines = [
                "# xferaudit budget: expected crossings per site per step (launches for graph sites).",
                f"# From {src.name}: {steps_text}, slack {slack}.",
                "# Checked by xferaudit run --budget <this file>, xfer.expect(<this file>) and",
                "# @pytest.mark.xfer_budget(<this file>); the table can go into pyproject.toml as is.",
                "[tool.xferaudit.budget]",
            ]
            lines += [f"{_toml_key(s)} = " + _toml_entry(_entry(n, copies.get(s), pageable.get(s), _fmt))
                      for s, n in sorted(crossings.items())]
            lines += [f"{_toml_key(s)} = {{ launches = {_fmt(n)}"
                      + (f", {toml_items(compiled[s])}" if s in compiled else "") + " }"
                      for s, n in sorted(launches.items())]
            lines += [f"{_toml_key(s)} = {{ {toml_items(e)} }}" for s, e in sorted(compiled.items())
                      if s not in launches]
            text = "\n".join(lines) + "\n"

        from ..runtime.runs.budget import line_name

        by_line = len({line_name(u.path, u.line) for u in rep.unwrapped if not u.name} & set(user_lines))
        if by_line:
            print(f"xferaudit: note: {by_line} line(s) of {src} crossed with nothing naming them, and the run "
                  "file (written before names had no line number) names them by path:line, which an edit "
                  "above them moves: freeze the budget again from a new run", file=sys.stderr)
        if out is None:
            sys.stdout.write(text)
        else:
            _write_atomic(Path(out), text)
            print(f"xferaudit: wrote {out} ({len(crossings) + len(launches)} site(s), "
                  f"{steps_text})", file=sys.stderr)
        return EXIT_OK


def _per_step(rep, steps: int) -> tuple:
    """One run's (or one rank's) figures per step: ``(crossings, copies,
    launches, user lines)``, the first three ``{name: Fraction}``: every row
    (the empty name too: `site=""` is a name the runtime records), the user's
    lines that crossed with nothing naming them (``path:function:expression``), the graph
    sites' launches."""
    from ..runtime.runs.budget import line_name

    totals = {r.site: (r.crossings, r.copies) for r in rep.rows}
    # The user's crossings with nothing naming them: path:function:expression
    # (path:line in a run file from before names had no line number).
    lines: dict = {}
    for u in rep.unwrapped:
        name = u.name or line_name(u.path, u.line)
        if u.name and name in totals:  # (a wrapped site's name too: the check counts it with that row)
            n, k = totals[name]
            totals[name] = (n + u.count, k + u.copies)
        elif name not in totals:
            n, k = lines.get(name, (0, 0))
            lines[name] = (n + u.count, k + u.copies)
    totals.update(lines)
    crossings = {s: Fraction(n, steps) for s, (n, _) in totals.items()}
    copies = {s: Fraction(k, steps) for s, (_, k) in totals.items()}
    launches = {x.site: Fraction(x.launches, steps) for x in rep.launches}
    return crossings, copies, launches, set(lines)


def _pageable_per_step(rep, steps: int) -> dict:
    """One run's pageable ``non_blocking`` copies per step, by the names
    :func:`_per_step` gives (a row's site, else a user's ``path:function:expression``;
    ``path:line`` in a run file from before names had no line number)."""
    from ..runtime.runs.budget import line_name

    out: dict = {}
    for r in rep.rows:
        out[r.site] = out.get(r.site, 0) + (getattr(r, "pageable", 0) or 0)
    names = set(out)
    for u in rep.unwrapped:
        name = u.name or line_name(u.path, u.line)
        if u.name and name in names:  # (a wrapped site's name too: counted with that row)
            out[name] += getattr(u, "pageable", 0) or 0
        elif name not in names:
            out[name] = out.get(name, 0) + (getattr(u, "pageable", 0) or 0)
    return {s: Fraction(n, steps) for s, n in out.items()}


def _entry(n, copies, pageable, fmt):
    """A site's entry: its plain number, or a table where copies or pageable copies are given."""
    if copies is None and pageable is None:
        return fmt(n)
    table = {"crossings": fmt(n)}
    if copies is not None:
        table["copies"] = fmt(copies)
    if pageable is not None:
        table["pageable"] = fmt(pageable)
    return table


def _toml_entry(e) -> str:
    if not isinstance(e, dict):
        return e
    return "{ " + ", ".join(f"{k} = {v}" for k, v in e.items()) + " }"


def _write_atomic(path: Path, text: str) -> None:
    """Never a half-written budget: see :func:`xferaudit._atomic.atomic_write`.
    Every failure (a missing or read-only folder, a folder as the path, a full
    disk, a socket) is one line and exit 2."""
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise UserError(f"{path}: folder {parent} does not exist")
    try:
        atomic_write(path, text)
    except OSError as e:
        raise UserError(f"{path}: cannot write the budget: {e.strerror or e}") from None


COMMAND = BudgetCommand
