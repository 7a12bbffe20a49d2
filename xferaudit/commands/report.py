"""``xferaudit report RUN.json``: print a saved after-step report.

A run saves one with ``xfer.report().save("run.json")``; this renders the same
table the run printed (direction, calls, crossings, MB, site; totals; launches;
the guard's unwrapped transfers), or its JSON. ``--plot OUT.png`` also draws
crossings and bytes per site (xferaudit/plot.py); ``--trace OUT.json`` writes
a Chrome/Perfetto trace of the run's timeline (xferaudit/trace.py).

``--sort`` orders the sites by crossings (the default), bytes or time (the
host time inside each site's calls); ``--top N`` shows the first N in that
order, and the first N unwrapped lines; the totals stay the whole run's, and a
line (``rows_hidden`` and ``unwrapped_hidden`` in JSON) says how many are not
shown. Names from the file are printed with control characters escaped
(xferaudit/_text.py); a file with impossible counts is refused (exit 2).
"""

from __future__ import annotations

import argparse
import sys

from ..runtime.reporting.printable import printable_report
from . import EXIT_OK, Command, UserError

__all__ = ["ReportCommand", "printable_report"]


class ReportCommand(Command):
    NAME = "report"
    DESCRIPTION = "Print a saved runtime report (RUN.json from xfer.report().save(...))."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("file", metavar="RUN.json", help="a report saved with Report.save")
        parser.add_argument("--format", choices=("text", "json"), default="text",
                            help="text table (default) or the JSON form")
        parser.add_argument("--sort", choices=("crossings", "bytes", "time"), default="crossings",
                            help="order of the sites: most crossings (default), most bytes, or "
                                 "most host time inside their calls")
        parser.add_argument("--top", type=int, default=None, metavar="N",
                            help="only the first N sites in --sort order, and the first N unwrapped lines "
                                 "(totals stay the run's)")
        # Pictures: xferaudit/plot.py and xferaudit/trace.py.
        parser.add_argument("--plot", metavar="OUT.png", default=None,
                            help="also draw crossings and bytes per site (PNG/SVG/PDF by "
                                 "suffix; needs matplotlib: pip install 'xferaudit[plot]')")
        parser.add_argument("--trace", metavar="OUT.json", default=None,
                            help="also write a Chrome/Perfetto trace of the run's timeline "
                                 "(recorded with xfer.timeline(True))")
        parser.add_argument("--trace-with", metavar="PROFILER.json", default=None,
                            help="with --trace: put torch.profiler's exported trace and ours "
                                 "in one file, on the profiler's time base")

    def run(self, args: argparse.Namespace) -> int:
        from ..runtime.reporting._report import Report, ReportError

        if args.top is not None and args.top < 0:
            raise UserError("--top must be 0 or more")
        try:
            rep = Report.load(args.file)
        except ReportError as e:
            raise UserError(str(e)) from None
        rep.sorted(args.sort)
        if args.top is not None:  # the picture shows the rows the table shows
            import copy

            shown = copy.copy(rep)
            shown.rows = rep.rows[: args.top]
            self._pictures(shown, args)
        else:
            self._pictures(rep, args)
        if args.format == "json":
            sys.stdout.writelines(rep.json_chunks(top=args.top))  # a row a line, as it goes
        else:
            sys.stdout.writelines(printable_report(rep).format_lines(top=args.top))
        return EXIT_OK

    @staticmethod
    def _pictures(rep: object, args: argparse.Namespace) -> None:
        """--plot and --trace: everything is checked before anything is written."""
        if args.trace_with is not None and args.trace is None:
            raise UserError("--trace-with needs --trace OUT.json")
        if args.plot is None and args.trace is None:
            return
        from ..plot import PlotError, plot_report, require_matplotlib
        from ..trace import TraceError, build_trace, read_profiler_trace, save_trace

        try:
            if args.plot is not None:
                require_matplotlib()
            trace = None
            if args.trace is not None:
                prof = read_profiler_trace(args.trace_with) if args.trace_with else None
                trace = build_trace(rep, prof)
            if args.plot is not None:
                plot_report(rep, args.plot, sort=args.sort)
                print(f"xferaudit: wrote {args.plot}", file=sys.stderr)
            if trace is not None:
                save_trace(trace, args.trace)
                print(f"xferaudit: wrote {args.trace}", file=sys.stderr)
        except (PlotError, TraceError) as e:
            raise UserError(str(e)) from None


COMMAND = ReportCommand
