"""``xferaudit merge A.json B.json ... -o merged.json``: one report of several ranks.

Each rank of a torch.distributed job saves its own report
(``xfer.report().save(f"run.rank{rank}.json")``; rank and world size are
recorded in it while torch.distributed is initialized). This merges them into
the layout ``xfer.report(all_ranks=True)`` gives on rank 0: per-site totals,
each row's per-rank counts, and the ranks whose crossings at a site exceed the
median of the ranks there. A merged report may be merged again with more ranks.

Exit codes: 0 merged (outliers are shown, not failed on), 2 a file is missing,
unreadable, not a report, or the files disagree (two files of one rank,
different world sizes, some with a rank and some without), or a count in one is
impossible (negative, over 2**63-1, more crossings than calls). On error
nothing is written.

The files are read a row at a time: memory holds one total per distinct site
and each rank's counts per site in flat arrays, while each rank's rows wait
in a temporary file (in ``$TMPDIR``) until the merged file is written.

Missing ranks are bounded by the input, not by the world size it declares: the
merged ``meta`` has ``missing_rank_count``, ``missing_rank_ranges`` (``[first,
last]`` pairs) and ``missing_ranks`` (the first 1,000 of them one by one).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import EXIT_OK, Command, UserError
from .report import printable_report


class MergeCommand(Command):
    NAME = "merge"
    DESCRIPTION = "Merge per-rank runtime reports (one JSON per rank) into one multi-rank report."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("files", nargs="+", metavar="RANK.json",
                            help="reports saved by the ranks (or merged reports)")
        parser.add_argument("-o", "--output", metavar="MERGED.json", default=None,
                            help="write the merged report here (JSON, written atomically)")
        parser.add_argument("--format", choices=("text", "json"), default="text",
                            help="print the merged table (default) or its JSON")
        parser.add_argument("-q", "--quiet", action="store_true",
                            help="print nothing (with -o: only write the file)")

    def run(self, args: argparse.Namespace) -> int:
        from ..runtime.reporting._report import ReportError
        from ..runtime.ranks.distributed import merge_files

        try:  # streamed: a row at a time, whatever the files' size
            merged = merge_files(args.files)
        except ReportError as e:
            raise UserError(str(e)) from None
        if args.output is not None:
            out = Path(args.output)
            if not out.parent.is_dir():
                raise UserError(f"{out}: directory {out.parent} does not exist")
            try:
                merged.save(out)
            except OSError as e:
                raise UserError(f"{out}: cannot write: {e.strerror or e}") from None
        if not args.quiet:
            if args.format == "json":
                sys.stdout.writelines(merged.json_chunks())
            else:
                sys.stdout.writelines(printable_report(merged).format_lines())
                if args.output is not None:
                    sys.stdout.write(f"wrote {args.output}\n")
        return EXIT_OK


COMMAND = MergeCommand
