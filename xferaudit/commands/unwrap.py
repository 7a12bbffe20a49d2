"""``xferaudit unwrap PATH...``: restore the bare calls that ``wrap`` rewrote.

``xfer.item(loss, site="...")`` becomes ``loss.item()`` again, exactly as it was
written, and ``import xferaudit.runtime as NAME`` goes once nothing uses it.
"""

from __future__ import annotations

import argparse

from . import Command


class UnwrapCommand(Command):
    NAME = "unwrap"
    DESCRIPTION = "Restore the bare calls of every counting wrapper (the inverse of wrap)."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        from ..static.codemod.files import add_common_arguments

        add_common_arguments(parser, "unwrap")

    def run(self, args: argparse.Namespace) -> int:
        from ..static.codemod.files import run_command
        from ._args import require_python_files

        require_python_files(args.paths)

        return run_command(args, "unwrap")


COMMAND = UnwrapCommand
