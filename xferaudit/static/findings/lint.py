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
    from ...config import Config
    from ...rules import RuleTable
    from .diagnostics import Diagnostic
    from ..project.scan import Scan


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
    from ..project.scan import scan_source

    rules = rules if rules is not None else cfg.table()
    result = scan_source(source, filename, cfg, rules, evidence)
    out = Linted(result, sources={r.path: source for r in result.results})
    out.diags = collect(result, cfg, rules, out.sources)
    if fixes:
        add_fixes(out, cfg, rules)
    return out


_EVIDENCE: dict = {}  # (root, ((run file, stamp), ...)) -> Evidence: read again only when a file changes


def config_evidence(cfg: "Config", extra: Any = (), cwd: Optional[str] = None) -> Optional[Any]:
    """The run evidence in force for `cfg`: its ``evidence`` run files, then
    `extra` (``--evidence``), as ``check`` reads them; None when there is none.
    The editor server and the flake8 plugin read it here too, so they report
    what ``check`` reports; each set of files is read once until one of them
    changes. Raises :class:`~xferaudit.static.front.evidence.EvidenceError`."""
    import os

    from ..project.scan import display_path

    here = cwd if cwd is not None else os.getcwd()
    runs = [display_path(p, here) for p in cfg.evidence] + list(extra or ())
    if not runs:
        return None
    from ..front.evidence import load
    key = (str(cfg.root), tuple((p, _stamp(p)) for p in runs))
    hit = _EVIDENCE.get(key)
    if hit is None:
        hit = load(runs, cfg.root)
        if len(_EVIDENCE) >= 16:
            _EVIDENCE.clear()
        _EVIDENCE[key] = hit
    return hit


def _stamp(path: str) -> tuple:
    """What of a run file an edit cannot keep (:func:`~..project.scripted.file_state`)."""
    from ..project.scripted import file_state

    try:
        return file_state(path) or ()
    except ValueError:  # (a path with a NUL)
        return ()


def add_fixes(linted: Linted, cfg: "Config", rules: "RuleTable", stop: Any = None) -> None:
    """Set each reported finding's fix (the codemod's edits), after the fact
    (`stop()`: see :func:`~xferaudit.static.findings.fixes.attach`)."""
    from .fixes import attach

    attach(linted.diags, linted.scan, cfg, rules, linted.sources, stop=stop)
