"""``xferaudit report RUN.json``: print a saved after-step report.

A run saves one with ``xfer.report().save("run.json")``; this renders the same
table the run printed (direction, calls, crossings, MB, site; totals; launches;
the guard's unwrapped transfers), or its JSON.
"""

from __future__ import annotations

import argparse
import json
import sys

from . import EXIT_OK, Command, UserError


class ReportCommand(Command):
    NAME = "report"
    DESCRIPTION = "Print a saved runtime report (RUN.json from xfer.report().save(...))."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("file", metavar="RUN.json", help="a report saved with Report.save")
        parser.add_argument("--format", choices=("text", "json"), default="text",
                            help="text table (default) or the JSON form")
        parser.add_argument("--top", type=int, default=None, metavar="N",
                            help="only the N sites with the most crossings")

    def run(self, args: argparse.Namespace) -> int:
        from ..runtime._report import Report, ReportError

        if args.top is not None and args.top < 0:
            raise UserError("--top must be 0 or more")
        try:
            rep = Report.load(args.file)
        except ReportError as e:
            raise UserError(str(e)) from None
        if args.top is not None:
            rep.rows = rep.rows[: args.top]
        if args.format == "json":
            sys.stdout.write(json.dumps(rep.to_dict(), indent=2) + "\n")
        else:
            sys.stdout.write(rep.format())
        return EXIT_OK


COMMAND = ReportCommand
