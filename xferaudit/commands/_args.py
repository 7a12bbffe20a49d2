"""Checks of command-line arguments shared by ``check``, ``sites``, ``wrap`` and ``unwrap``.

Each raises :class:`~xferaudit.commands.UserError` (exit 2, one clear line) for
input the user can fix before anything is read or written.
"""

from __future__ import annotations

import os
from typing import Iterable, Sequence

from . import UserError

#: Suffixes of the files xferaudit reads; a folder is searched for these.
PYTHON_SUFFIXES = (".py", ".pyi", ".ipynb")


def _is_python(path: str) -> bool:
    """A ``*.py``/``*.pyi`` file, a notebook (``*.ipynb``: its code cells), or a
    script whose first line is a Python shebang."""
    if path.endswith(PYTHON_SUFFIXES):
        return True
    try:
        with open(path, "rb") as f:
            first = f.readline(200)
    except OSError:
        return True  # let the scan report it as unreadable, naming the error
    return first.startswith(b"#!") and b"python" in first


def require_python_files(paths: Iterable[str]) -> None:
    """A file named on the command line must be Python: ``check notes.txt`` is a
    usage error, not a pass. Folders, and paths that do not exist (reported
    later, as before), are left alone."""
    for p in paths:
        if os.path.isfile(p) and not _is_python(p):
            raise UserError(
                f"{p}: not a Python file (xferaudit reads *.py, *.pyi and *.ipynb files, and "
                "scripts with a python shebang); name a Python file or a folder"
            )


def split_codes(values: Sequence[str] | str | None) -> list[str]:
    """``"XFA202, XFA3"`` (or several such strings) as a list of upper-cased items."""
    if values is None:
        return []
    if isinstance(values, str):
        values = [values]
    return [c.strip().upper() for v in values for c in v.split(",") if c.strip()]


def require_known_codes(codes: Sequence[str], option: str) -> None:
    """Every code or prefix given to ``--select``/``--ignore`` must match a code
    xferaudit reports: ``--select XFA9`` would otherwise select nothing and pass."""
    from ..static.codes import CODES

    for c in codes:
        if c == "ALL":
            continue
        if not any(code.startswith(c) for code in CODES):
            raise UserError(
                f"{option}: {c!r} matches no xferaudit code (codes: {', '.join(CODES)}; "
                "a prefix such as XFA2 selects a group)"
            )


def add_implicit_argument(parser) -> None:
    """``--implicit {proven,gpu-first}`` of ``check``, ``sites`` and ``wrap``."""
    from ..rules import IMPLICIT_READINGS

    parser.add_argument("--implicit", choices=IMPLICIT_READINGS, default=None,
                        help="how implicit transfers are read, replacing the config's: proven (only values the "
                             "file shows on a device) or gpu-first (a tensor the file does not place is on the "
                             "accelerator; tests read proven)")
