"""``xferaudit rule CODE``: explain a code, the way ``ruff rule`` does.

What it does, why it matters, an example, and what to write instead; the text
lives as data in :mod:`xferaudit.static.codes`. ``--all`` lists every code.
"""

from __future__ import annotations

import argparse
import json

from . import EXIT_OK, Command, UserError


class RuleCommand(Command):
    NAME = "rule"
    DESCRIPTION = "Explain a rule code (XFA201 ...): what it does, why, an example, the fix."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("code", nargs="?", metavar="CODE", help="a code such as XFA202")
        parser.add_argument("--all", action="store_true", help="every code")
        parser.add_argument("--format", choices=("text", "json"), default="text",
                            help="Markdown text (default) or JSON")

    def run(self, args: argparse.Namespace) -> int:
        from dataclasses import asdict

        from ..static.codes import CODES, render

        if args.all:
            docs = list(CODES.values())
        elif args.code:
            code = args.code.strip().upper()
            if code not in CODES:
                raise UserError(f"unknown code {args.code!r}; codes: {', '.join(CODES)}")
            docs = [CODES[code]]
        else:
            raise UserError("give a code (e.g. `xferaudit rule XFA202`) or --all")
        if args.format == "json":
            data = [asdict(d) for d in docs]
            print(json.dumps(data if args.all else data[0], indent=2))
        else:
            print("\n".join(render(d) for d in docs), end="")
        return EXIT_OK


COMMAND = RuleCommand
