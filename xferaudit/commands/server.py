"""``xferaudit server``: the editor server (Language Server Protocol over stdio).

Diagnostics as you type, a fix per finding, wrap-all and noqa actions, and the
rule's page on hover; see :mod:`xferaudit.server` and the "Editors and CI"
page of the docs. Needs the ``server`` extra (pygls).
"""

from __future__ import annotations

import argparse

from . import EXIT_OK, Command, UserError


class ServerCommand(Command):
    NAME = "server"
    DESCRIPTION = "Run the editor server: the Language Server Protocol over standard input and output."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--stdio", action="store_true",
                            help="talk over standard input and output (the default and only transport; "
                                 "accepted because editors pass it)")

    def run(self, args: argparse.Namespace) -> int:
        try:
            import pygls  # noqa: F401
        except ImportError:
            raise UserError("the editor server needs pygls: pip install 'xferaudit[server]'") from None
        from ..server import main

        main()
        return EXIT_OK


COMMAND = ServerCommand
