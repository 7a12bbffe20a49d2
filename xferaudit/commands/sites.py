"""``xferaudit sites PATH...``: every transfer and graph site, wrapped or not.

The inventory behind ``check``: one line per site (or, with ``--format json``, a
JSON array of objects with the keys ``path``, ``line``, ``column``,
``end_line``, ``end_column``, ``kind``, ``rule``, ``call``, ``wrapped``,
``site``, ``suppressed`` plus ``rule_id``, ``function`` and ``decorator``).
Implicit sites (a crossing with no transfer call of its own: ``float(loss)``,
``if loss > 100:``, ``print(loss)``, ``t[mask]``...) carry two keys more:
``"implicit": true`` and ``"op"``, their category (``conversion``, ``truth``,
``format``, ``math``, ``count``, ``upload``, ``download``, ``save``,
``hazard``); their ``rule`` is an ``XFA4xx`` code and ``line`` the line of the
offending expression (for a truth test, of the condition); ``evidence`` says
what makes the value a device value (``loss: result of `model(x)`, model:
moved to the device by `model.to(dev)` (line 12)``), and ``--explain`` prints
it under each implicit site of the text listing.
Positions are 1-based; the column is that of the called name (the ``cpu`` of
``x.cpu()``), counted in characters. ``select``/``ignore`` do not apply: this
lists what is there. Exit 0, or 2 when a file cannot be read or parsed. A file
in old Python syntax (``print "x"``, ``x.cuda(async=True)``) is read as such
(:mod:`xferaudit.static.front.repair`): its sites are listed, with a warning.
"""

from __future__ import annotations

import argparse
import json
import sys

from .._text import printable, printable_path
from . import EXIT_ERROR, EXIT_OK, Command
from .check import add_scan_arguments, emit, load, scan_or_exit


class SitesCommand(Command):
    NAME = "sites"
    DESCRIPTION = "List every transfer and graph site, wrapped or not."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_scan_arguments(parser)
        parser.add_argument("--format", choices=("text", "json"), default="text",
                            help="text (default) or a JSON array")
        parser.add_argument("--explain", action="store_true",
                            help="under each implicit site, the evidence that its value is on the device")

    def run(self, args: argparse.Namespace) -> int:
        from ..static.front.notebook import display_position
        from ..static.project.scan import scan

        cfg, rules, paths = load(args)
        result = scan_or_exit(scan, paths, cfg, rules, args)
        errors = [r for r in result.results if r.error is not None and not r.repaired]
        repaired = [r for r in result.results if r.repaired]
        sites = [s for r in result.results for s in r.sites]
        if args.format == "json":
            emit(json.dumps([s.to_json() for s in sites], indent=2))
        else:
            lines = []
            for s in sites:
                state = "wrapped" if s.wrapped else ("suppressed" if s.suppressed else "unwrapped")
                call = " ".join(s.call.split())
                if len(call) > 70:
                    call = call[:67] + "..."
                lines.append(f"{printable_path(s.path)}:{display_position(s.path, s.line, s.column)}: "
                             f"{s.kind:<5} {s.rule} "
                             f"{state:<10} {printable(call)}  [{printable(s.site)}]")
                if args.explain and s.evidence:
                    lines.append(f"    evidence: {printable(s.evidence)}")
            if lines:
                emit("\n".join(lines))
        for r in repaired:
            print(f"xferaudit: warning: {printable(r.path)}:{r.error_line}:{r.error_column}: {r.error}; "
                  "its sites were found reading it as old Python (print statements, async=...)", file=sys.stderr)
        for r in errors:
            print(f"{printable_path(r.path)}:{r.error_line}:{r.error_column}: XFA001 {printable(r.error)}",
                  file=sys.stderr)
        return EXIT_ERROR if errors else EXIT_OK


COMMAND = SitesCommand
