"""``xferaudit wrap PATH...``: rewrite every unwrapped site into its counting wrapper.

``loss.item()`` becomes ``xfer.item(loss, site=":train_step:loss.item")``
and ``import xferaudit.runtime as xfer`` is added once per file. ``unwrap``
restores the bare calls byte for byte. See :mod:`xferaudit.static.codemod`.

``xferaudit wrap --from RUN.json`` wraps exactly the lines a recorded run saw
crossing outside every wrapper (:mod:`xferaudit.static.front.evidence`).
"""

from __future__ import annotations

import argparse

from . import Command


class WrapCommand(Command):
    NAME = "wrap"
    DESCRIPTION = "Rewrite every unwrapped transfer site into its named counting wrapper."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        from ..static.codemod.files import add_common_arguments

        from ._args import add_implicit_argument

        add_common_arguments(parser, "wrap", paths_optional=True)
        parser.add_argument("--from", dest="from_runs", action="append", metavar="RUN.json",
                            help="wrap exactly the lines this run file (`xferaudit run`) saw crossing outside "
                                 "every wrapper, even where the code does not show a device; without PATH, in "
                                 "every file of the project it names (repeat for several runs)")
        add_implicit_argument(parser)
        parser.add_argument("--select", action="append", metavar="CODES",
                            help="only sites with these codes or prefixes, comma-separated (e.g. XFA202,XFA204)")
        parser.add_argument("--ignore", action="append", metavar="CODES",
                            help="not the sites with these codes or prefixes, comma-separated (e.g. XFA204)")
        parser.add_argument("--rename-sites", action="store_true",
                            help="also turn full site literals into short ones (\":f:x.cpu\"): a file's own "
                                 "names stay the same; names of another file (XFA302, after a move or rename) "
                                 "take this file's path; off by default, as budgets and baselines keyed by a "
                                 "moved file's old names would stop matching")

    def run(self, args: argparse.Namespace) -> int:
        from ..static.codemod.files import run_command
        from . import UserError
        from ._args import require_known_codes, require_python_files, split_codes

        if not args.paths and not args.from_runs:
            raise UserError("name the files or folders to wrap (PATH), or a run file to apply (--from RUN.json)")
        require_python_files(args.paths)
        for opt in ("select", "ignore"):
            require_known_codes(split_codes(getattr(args, opt)), f"--{opt}")

        return run_command(args, "wrap")


COMMAND = WrapCommand
