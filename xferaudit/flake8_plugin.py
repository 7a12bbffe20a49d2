"""xferaudit's findings through flake8: ``flake8 --select XFA``.

Registered as the ``flake8.extension`` entry point ``XFA`` (pyproject.toml), so
an installed xferaudit adds its codes to flake8 with nothing to configure. The
findings are the ones ``xferaudit check`` reports, with the same codes and
messages: this is the same engine (:func:`xferaudit.static.project.scan.scan_source`
and :func:`xferaudit.static.findings.diagnostics.collect`) run on the text flake8 read,
with the ``[tool.xferaudit]`` of the project the file belongs to (its select,
ignore, per-file-ignores, excludes and rows). Suppressions work both ways:
flake8's own ``# noqa: XFA202``, and ``# xferaudit: ignore``.

Imports only the static half's finder on first use (no libcst, no torch).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Iterator

from . import __version__

_CONFIGS: dict[str, Any] = {}  # project root -> (config, rule table); one load per project per run


def _config(filename: str):
    from .config import ConfigError, find_root, load_config

    start = Path(os.path.abspath(filename)).parent
    root = str(find_root(start))
    if root not in _CONFIGS:
        try:
            cfg = load_config(start)
            _CONFIGS[root] = (cfg, cfg.table(), None)
        except ConfigError as e:
            _CONFIGS[root] = (None, None, str(e))
    return _CONFIGS[root]


class XferauditChecker:
    """flake8's plugin protocol: constructed per file with what it asks for by
    name, `run` yields ``(row, col, "CODE message", type)`` with 0-based
    columns. `tree` (flake8's own parse) makes it a tree plugin, run once per
    file; the finder reads `lines` itself, as ``check`` reads a file."""

    name = "xferaudit"
    version = __version__

    def __init__(self, tree: Any, filename: str, lines: list[str]) -> None:
        self.filename = filename
        self.lines = lines

    def run(self) -> Iterator[tuple[int, int, str, type]]:
        from .static.findings.lint import lint_source

        cfg, rules, error = _config(self.filename)
        if error is not None:
            yield 1, 0, f"XFA001 cannot read the xferaudit config: {error}", type(self)
            return
        from .static.front.evidence import EvidenceError
        from .static.findings.lint import config_evidence

        try:  # the config's run files, as `check` reads them
            evidence = config_evidence(cfg)
        except EvidenceError as e:
            evidence = None
            yield 1, 0, f"XFA001 cannot read the run evidence: {e}", type(self)
        for d in lint_source("".join(self.lines), self._name(), cfg, rules, evidence=evidence).diags:
            if d.suppressed is None:
                yield d.line, max(0, d.column - 1), f"{d.code} {d.message}", type(self)

    def _name(self) -> str:
        """flake8 names standard input ``stdin`` (or its --stdin-display-name)."""
        return self.filename if self.filename not in ("-", "stdin") else os.path.join(os.getcwd(), "stdin.py")

