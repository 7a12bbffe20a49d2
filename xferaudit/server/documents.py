"""What the editor server knows of each open document, and what it can do with
it, without the protocol: no pygls here (:mod:`.lsp` is the thin shell).

Everything goes through the engine ``check -`` and ``wrap -`` use
(:func:`~xferaudit.static.findings.lint.lint_source`,
:func:`~xferaudit.static.codemod.files.rewrite_source`,
:func:`~xferaudit.static.findings.noqa.noqa_text`), with the config of the project the
document's path belongs to (its ``pyproject.toml``, read again when it
changes). Positions here are the static half's: lines as Python splits them,
columns in characters, both from 1; the shell converts them to the client's
units.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..config import Config, ConfigError, find_root, load_config
from ..rules import RuleTable
from ..static.findings.edits import Edit, text_edits
from ..static.front.evidence import EvidenceError
from ..static.findings.lint import Linted, add_fixes, config_evidence, lint_source


@dataclass
class Document:
    uri: str
    path: str  # the file it is checked as (an unsaved one: under the workspace root)
    version: Optional[int]
    text: str
    linted: Optional[Linted] = None
    config_error: Optional[str] = None
    fixes_done: bool = False
    wrap_all: Optional[list] = None  # the edits of wrap over the whole document, once made
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    #: set when the client changed the document since: its fixes are no longer wanted
    outdated: threading.Event = field(default_factory=threading.Event, repr=False)
    #: held while the document is checked (off the event loop: a request may wait for it)
    checking: threading.Lock = field(default_factory=threading.Lock, repr=False)
    columns: Optional[object] = field(default=None, repr=False)  # its positions in the client's units

    def reported(self) -> list:
        return [d for d in (self.linted.diags if self.linted else []) if d.suppressed is None]


class Projects:
    """The config and rule table of each project, read once and again when its
    ``pyproject.toml`` changes (an edit of the settings takes effect at the next check)."""

    def __init__(self) -> None:
        self._cache: dict[str, tuple[tuple, Config, RuleTable]] = {}

    def config(self, path: str) -> tuple[Config, RuleTable]:
        """Raises :class:`~xferaudit.config.ConfigError` for a broken config."""
        start = Path(os.path.abspath(path)).parent
        root = find_root(start)
        stamp = _stamp(root / "pyproject.toml")
        hit = self._cache.get(str(root))
        if hit is not None and hit[0] == stamp:
            return hit[1], hit[2]
        cfg = load_config(start)
        rules = cfg.table()
        self._cache[str(root)] = (stamp, cfg, rules)
        return cfg, rules


def _stamp(path: Path) -> tuple:
    """What of the config an edit cannot keep (its inode and change time too:
    :func:`~xferaudit.static.project.scripted.file_state`)."""
    from ..static.project.scripted import file_state

    return file_state(str(path)) or ()


def check(doc: Document, projects: Projects) -> None:
    """Lint the document's text (no fixes: those come after, from :func:`fixes`)."""
    try:
        cfg, rules = projects.config(doc.path)
    except ConfigError as e:
        doc.linted, doc.config_error = None, str(e)
        return
    doc.config_error = None
    try:  # the config's run files, as `check` reads them
        evidence = config_evidence(cfg, cwd=str(cfg.root))
    except EvidenceError as e:
        evidence, doc.config_error = None, str(e)
    doc.linted = lint_source(doc.text, doc.path, cfg, rules, evidence=evidence)
    doc.fixes_done = False


def check_locked(doc: Document, projects: Projects) -> None:
    """:func:`check`, one at a time per document (the shell runs it off the event loop)."""
    with doc.checking:
        check(doc, projects)


def check_once(doc: Document, projects: Projects) -> None:
    """:func:`check` unless the document is checked already (or is being
    checked: then its result is waited for)."""
    with doc.checking:
        if doc.linted is None and doc.config_error is None:
            check(doc, projects)


def fixes(doc: Document, cfg: Config, rules: RuleTable) -> None:
    """Attach to each finding the edits ``wrap`` makes for it (runs the codemod:
    hundreds of milliseconds on a large file, so the shell runs it off the
    event loop, after the findings are shown; the config is read on the loop)."""
    from ..static.findings.fixes import Stopped

    with doc.lock:
        if doc.fixes_done or doc.linted is None or doc.outdated.is_set():
            return
        try:  # (stopped between codemod runs once the document changes: the next edit does not wait)
            add_fixes(doc.linted, cfg, rules, stop=doc.outdated.is_set)
        except Stopped:
            return
        doc.fixes_done = True


def wrap_all(doc: Document, cfg: Config) -> list[Edit]:
    """The edits of ``wrap`` over the whole document (none when it changes nothing)."""
    from ..static.codemod.files import rewrite_source
    from ..static.findings.fixes import source_bytes, source_text

    data = source_bytes(doc.text)
    if data is None:
        return []
    out = rewrite_source(data, doc.path, "wrap", cfg)
    if out.result is None or not out.result.changed:
        return []
    new = source_text(out.result.new)
    return text_edits(doc.text, new) if new is not None else []


def noqa(doc: Document, line: int, codes: set) -> list[Edit]:
    """The edits that add ``# noqa: CODES`` to `line` (as ``--add-noqa`` writes it)."""
    from ..static.findings.noqa import noqa_text

    new, _, _ = noqa_text(doc.text, {line: set(codes)}, doc.path)
    return text_edits(doc.text, new) if new is not None else []


def rule_text(code: str, url: Optional[str]) -> Optional[str]:
    """A code's page as Markdown (``xferaudit rule CODE``), with its link."""
    from ..static.codes import CODES, render

    if code not in CODES:
        return None
    text = render(CODES[code])
    return text + (f"\n[{code} on the documentation site]({url})\n" if url else "")


#: Codes a noqa comment may suppress (XFA001 cannot be; XFA101 is about noqa itself).
def suppressible(code: str) -> bool:
    return code not in ("XFA001", "XFA101")
