"""The ``xferaudit`` command line: ``xferaudit COMMAND ...``.

Commands live in :mod:`xferaudit.commands`, one module each; only the command
that runs is imported.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import sys
from typing import Optional, Sequence

from . import __version__
from .commands import EXIT_ERROR, Command, UserError


def _command_names() -> list[str]:
    from . import commands

    return sorted(m.name for m in pkgutil.iter_modules(commands.__path__) if not m.name.startswith("_"))


def _load(name: str) -> Command:
    mod = importlib.import_module(f"xferaudit.commands.{name}")
    return mod.COMMAND()


def _build_parser(only: Optional[str]) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="xferaudit",
        description="Find, wrap and count host<->device transfer sites.",
    )
    parser.add_argument("--version", action="version", version=f"xferaudit {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in _command_names():
        if only is not None and name.replace("_", "-") != only:
            # Listed for --help, but not imported: start-up stays short.
            sub.add_parser(name.replace("_", "-"), add_help=False)
            continue
        cmd = _load(name)
        p = sub.add_parser(cmd.NAME, help=cmd.DESCRIPTION, description=cmd.DESCRIPTION)
        cmd.add_arguments(p)
        p.set_defaults(_command=cmd, _parser=p)
    return parser


def _option_named_file(argv: Sequence[str]) -> Optional[str]:
    """The first argument before ``--`` that reads as an option and names an
    existing file or folder: pre-commit and ``$(git ls-files)`` pass file names
    as they are, so a committed ``--exit-zero`` would switch the check off and
    ``--write-baseline=bad.py`` would overwrite bad.py."""
    for a in argv:
        if a == "--":
            return None
        if a.startswith("-") and a != "-" and os.path.lexists(a):
            return a
    return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    whole_process = argv is None  # (the `xferaudit` program itself: the process ends with the command)
    argv = list(sys.argv[1:] if argv is None else argv)
    named = _option_named_file(argv)
    if named is not None:
        from ._text import printable

        shown = printable(named)
        print(f"xferaudit: error: {shown!r} reads as an option but names a file here; put file names "
              f"after '--' (xferaudit CMD [OPTIONS] -- {shown}) or write ./{shown}", file=sys.stderr)
        return EXIT_ERROR
    first = next((a for a in argv if not a.startswith("-")), None)
    only = first if first in {n.replace("_", "-") for n in _command_names()} else None
    parser = _build_parser(only)
    args, unknown = parser.parse_known_args(argv)
    if unknown:  # said by the command's own parser, with its usage (not the top level's)
        getattr(args, "_parser", parser).error(f"unrecognized arguments: {' '.join(unknown)}")
    cmd = getattr(args, "_command", None)
    if cmd is None:
        parser.print_help()
        return EXIT_ERROR
    args._whole_process = whole_process  # (read by `run`: see xferaudit.commands.run)
    try:
        return int(cmd.run(args) or 0)
    except UserError as e:
        from ._text import printable  # names from files: one line, no escape sequences

        print(f"xferaudit: error: {printable(e)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
