"""``xferaudit budget --from RUN.json``: freeze a good run as a transfer budget.

A run saves its report with ``xfer.report().save("run.json")`` (or ``xferaudit
run`` writes its run file); this writes the crossings per site per step it
measured as a budget that ``xferaudit run --budget``, ``xfer.expect(...)`` and
``@pytest.mark.xfer_budget(...)`` check, so CI fails the day a step starts
crossing more. Every named crossing is frozen: wrapped sites, crossings made
inside a library (``lib.mod:function <- train.py:41``), statements named by a
site comment, the launches of graph sites, and the user's lines that crossed
with nothing naming them (``train.py:41``: a line number names them, so
freeze again after editing that file, or name the line with ``xferaudit wrap
--from``). The file's table is ``[tool.xferaudit.budget]``: it can be
read as it is, or pasted into pyproject.toml.

Steps: ``--steps N`` divides the run's totals by N; without it, the report's
``steps`` (top level or ``meta``), else 1. ``--slack`` adds headroom: ``10%``
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

        src = Path(args.source)
        try:
            rep = Report.load(src)  # (a top-level "steps" is read into its meta)
            declared = steps_of({"meta": rep.meta}, str(src), ReportError)
        except ReportError as e:
            raise UserError(str(e)) from None
        steps = args.steps if args.steps is not None else declared or 1
        pct, absolute = args.slack

        def allowance(total: int) -> Fraction:  # exact: the run it came from passes
            return Fraction(total, steps) * (1 + pct) + absolute if total else absolute

        from ..runtime.runs.budget import line_name

        # Every row, the empty name too: `site=""` is a name the runtime records.
        totals = {r.site: (r.crossings, r.copies) for r in rep.rows}
        # The user's lines that crossed with nothing naming them: path:line.
        user_lines: dict = {}
        for u in rep.unwrapped:
            name = line_name(u.path, u.line)
            if name not in totals:
                n, k = user_lines.get(name, (0, 0))
                user_lines[name] = (n + u.count, k + u.copies)
        totals.update(user_lines)
        crossings = {s: allowance(n) for s, (n, _) in totals.items()}
        # Copies beside crossings where a call makes several (a module move).
        copies = {s: allowance(k) for s, (n, k) in totals.items() if k != n}
        launches = {x.site: allowance(x.launches) for x in rep.launches}
        from ..runtime.runs.compiled_budget import freeze, toml_items

        compiled = freeze(rep.meta.get("compiled"))  # graphs per call, breaks, CUDA-graph skips
        both = sorted(set(crossings) & set(launches))
        if both:
            raise UserError(f"{src}: site(s) both transfer and launch rows: {', '.join(both)}")
        if not crossings and not launches and rep.meta.get("kind") != "run":
            raise UserError(f"{src}: the report has no site rows to make a budget of "
                            "(was counting on? xfer.count(True) / `with xfer.counting():`)")

        out = None if args.output == "-" else args.output  # ("-": stdout, as without -o)
        if out is not None and Path(out).suffix.lower() == ".json":
            data = {s: ({"crossings": written(n), "copies": written(copies[s])} if s in copies
                        else written(n)) for s, n in crossings.items()}
            data.update({s: {"launches": written(n)} for s, n in launches.items()})
            for s, e in compiled.items():
                data[s] = {**data[s], **e} if isinstance(data.get(s), dict) else e
            text = json.dumps({"budget": data}, indent=2, sort_keys=True) + "\n"
        else:
            _toml_can_hold(list(crossings) + list(launches))
            slack = f"{float(pct * 100):g}%" if pct else _fmt(absolute)
            lines = [
                "# xferaudit budget: expected crossings per site per step (launches for graph sites).",
                f"# From {src.name}: {steps} step(s), slack {slack}. Checked by xferaudit run --budget <this file>,",
                "# xfer.expect(<this file>) and @pytest.mark.xfer_budget(<this file>); the table can go into",
                "# pyproject.toml as is.",
                "[tool.xferaudit.budget]",
            ]
            lines += [f"{_toml_key(s)} = {{ crossings = {_fmt(n)}, copies = {_fmt(copies[s])} }}"
                      if s in copies else f"{_toml_key(s)} = {_fmt(n)}"
                      for s, n in sorted(crossings.items())]
            lines += [f"{_toml_key(s)} = {{ launches = {_fmt(n)}"
                      + (f", {toml_items(compiled[s])}" if s in compiled else "") + " }"
                      for s, n in sorted(launches.items())]
            lines += [f"{_toml_key(s)} = {{ {toml_items(e)} }}" for s, e in sorted(compiled.items())
                      if s not in launches]
            text = "\n".join(lines) + "\n"

        if user_lines:
            print(f"xferaudit: note: {len(user_lines)} line(s) of {src} crossed with nothing naming them; the "
                  "budget holds them by path:line, which an edit above them moves (name them with "
                  f"`xferaudit wrap --from {src}`)", file=sys.stderr)
        if out is None:
            sys.stdout.write(text)
        else:
            _write_atomic(Path(out), text)
            print(f"xferaudit: wrote {out} ({len(crossings) + len(launches)} site(s), "
                  f"{steps} step(s))", file=sys.stderr)
        return EXIT_OK


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
