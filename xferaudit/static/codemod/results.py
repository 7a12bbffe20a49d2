"""What the codemod reports for one file."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Optional


class CodemodError(Exception):
    """A file the codemod cannot process (decode or parse failure); it is left as it is."""


@dataclass
class Skipped:
    """A site left as it is, and why."""

    line: int
    column: int
    code: str
    label: str
    reason: str
    where: Optional[str] = None  # a notebook's "cell N:line" in place of the line


@dataclass
class CodemodResult:
    """The outcome for one file. ``new`` is None when nothing changes."""

    path: str
    new: Optional[bytes] = None
    wrapped: Counter = field(default_factory=Counter)  # kind -> sites wrapped
    unwrapped: Counter = field(default_factory=Counter)  # wrapper name -> calls restored
    skipped: list[Skipped] = field(default_factory=list)
    suppressed: int = 0  # unwrapped sites carrying a suppression comment (left alone)
    not_selected: int = 0  # unwrapped sites outside --select / the config's codes
    generic: int = 0  # function-row sites wrapped as xfer.call(callee, ...) (callee kept as written)
    wrapped_sites: list = field(default_factory=list)  # the finder's Site of each call wrapped
    #: ``wrap --from``: the file's evidenced lines by outcome (wrapped, already, left, stale)
    evidence: dict = field(default_factory=dict)

    @property
    def changed(self) -> bool:
        return self.new is not None

