"""One file's findings from its source, not from disk: the engine that
``check -`` (standard input), the flake8 plugin and the editor server share.

The source is checked exactly as ``check`` checks a file of that name: the
path decides the config's per-file-ignores and excludes and names the sites;
suppressions and unused suppressions are read from the source itself. With
``fixes=True`` each finding ``wrap`` can rewrite carries its edits
(:mod:`.fixes`; that runs the codemod, so it is asked for only where a format
or an editor shows fixes).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Optional, Union

if TYPE_CHECKING:  # pragma: no cover
    from ..config import Config
    from ..rules import RuleTable
    from .diagnostics import Diagnostic
    from .scan import Scan


@dataclass
class Linted:
    scan: "Scan"
    diags: list["Diagnostic"] = field(default_factory=list)
    sources: dict = field(default_factory=dict)  # displayed path -> the source checked

    @property
    def excluded(self) -> bool:
        """The path is excluded by the config: nothing was checked."""
        return not self.scan.results


def lint_source(source: Union[bytes, str], filename: str, cfg: "Config", rules: Optional["RuleTable"] = None,
                *, fixes: bool = False, evidence: Optional[Any] = None) -> Linted:
    """The findings of `source` (bytes as a file holds them, or text as an
    editor holds it) checked as the file `filename`, suppressed ones marked."""
    from .diagnostics import collect
    from .scan import scan_source

    rules = rules if rules is not None else cfg.table()
    result = scan_source(source, filename, cfg, rules, evidence)
    out = Linted(result, sources={r.path: source for r in result.results})
    out.diags = collect(result, cfg, rules, out.sources)
    if fixes:
        add_fixes(out, cfg, rules)
    return out


def add_fixes(linted: Linted, cfg: "Config", rules: "RuleTable") -> None:
    """Set each reported finding's fix (the codemod's edits), after the fact."""
    from .fixes import attach

    attach(linted.diags, linted.scan, cfg, rules, linted.sources)
