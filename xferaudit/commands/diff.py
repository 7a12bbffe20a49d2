"""``xferaudit diff A.json B.json``: what changed per site between two reports.

A total can stay the same while its causes change (a copy removed at one site,
another added elsewhere); only per-site counts show that. Lists sites added,
removed and changed with their calls, crossings and MB before -> after, the
totals, and launch and unwrapped-transfer changes. Exits 0 (it reports, it does
not judge; budgets are the guard's job), 2 if a file is not a report.
"""

from __future__ import annotations

import argparse
import json
import sys

from .._text import printable
from . import EXIT_OK, Command, UserError


class DiffCommand(Command):
    NAME = "diff"
    DESCRIPTION = "Per-site changes between two saved runtime reports (A.json -> B.json)."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("a", metavar="A.json", help="the earlier report")
        parser.add_argument("b", metavar="B.json", help="the later report")
        parser.add_argument("--format", choices=("text", "json"), default="text")
        parser.add_argument("--all", action="store_true", help="list unchanged sites too")

    def run(self, args: argparse.Namespace) -> int:
        from ..runtime.reporting._report import Report, ReportError, diff, diff_to_dict, format_diff

        try:
            a = Report.load(args.a)
            b = Report.load(args.b)
        except ReportError as e:
            raise UserError(str(e)) from None
        d = diff(a, b)
        if args.format == "json":
            sys.stdout.write(json.dumps(diff_to_dict(d), indent=2) + "\n")
        else:
            sys.stdout.write(format_diff(_printable(d), printable(args.a), printable(args.b),
                                         show_same=args.all))
        return EXIT_OK


def _printable(d: dict) -> dict:
    """The diff with its names escaped for a terminal (xferaudit._text.printable)."""
    import dataclasses

    p = printable
    return dict(
        d,
        sites=[dataclasses.replace(c, site=p(c.site), direction=tuple(map(p, c.direction)))
               for c in d["sites"]],
        launches=[dict(x, site=p(x["site"])) for x in d["launches"]],
        unwrapped=[dict(u, path=p(u["path"]), op=p(u["op"]), direction=p(u["direction"]))
                   for u in d["unwrapped"]],
    )


COMMAND = DiffCommand
