"""Sub-commands of the ``xferaudit`` CLI, one module each.

A command is a small class (after libcst's codemod commands): a ``NAME``, a
one-line ``DESCRIPTION``, ``add_arguments(parser)`` and ``run(args) -> int``.
Each module in this package defines ``COMMAND = TheClass``; the CLI finds them
by file name and imports only the one it runs, to keep start-up short for
pre-commit.

Exit codes follow ruff's: 0 clean, 1 findings, 2 usage, config or input error.
"""

from __future__ import annotations

import abc
import argparse

from ..errors import UserError

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2

__all__ = ["EXIT_ERROR", "EXIT_FINDINGS", "EXIT_OK", "Command", "UserError"]


class Command(abc.ABC):
    NAME: str = ""
    DESCRIPTION: str = ""

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        """Declare this command's options."""

    @abc.abstractmethod
    def run(self, args: argparse.Namespace) -> int:
        """Do the work; return the exit code."""
