"""Errors a user can act on, shared by the CLI and the layers below it.

:class:`UserError` lives here, below both ``commands/`` and ``static/``, so
that the code doing the work can raise it without importing the CLI.
"""

from __future__ import annotations


class UserError(Exception):
    """Bad input the user can act on: printed as `xferaudit: error: ...`, exit 2."""


__all__ = ["UserError"]
