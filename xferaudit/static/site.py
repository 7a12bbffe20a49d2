"""A site: one call that moves data between host and device, or makes or
launches a graph, as the finder reports it.

A module of its own so that every part of the static half can name the type
(the finder makes sites, naming names them, check and the codemod read them)
without importing the finder; so does a file's result (:class:`FileResult`),
which a warm ``check`` reads from the cache without importing the finder.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Optional


@dataclass
class Site:
    """One site: a call that moves data between host and device, or makes/launches a graph."""

    path: str
    line: int
    column: int
    end_line: int
    end_column: int
    kind: str
    rule: str  # the XFA code reported for it when unwrapped
    call: str  # the call's source text
    wrapped: bool
    site: Optional[str]  # the wrapper's site name, or the name `wrap` would give it
    suppressed: bool = False
    rule_id: str = ""  # row of the table, e.g. "torch.to"
    function: str = "<module>"  # enclosing qualified name
    decorator: bool = False  # the call is a decorator (`@torch.compile(...)`)
    label: str = ""  # receiver text and method (`loss.item`), or the function's name
    byte_col: int = 0  # 0-based UTF-8 column of the called name (ast's), for the codemod
    implicit: bool = False  # a crossing with no transfer call of its own (the value layer's)
    # an implicit site's category (conversion, truth, format...); "unbound" for Tensor.m(x);
    # "bound" for x.m(args) whose arguments may have side effects (wrapped as xfer.call(x.m, args))
    op: str = ""
    no_wrap: str = ""  # why no wrapped form can keep this code as it is (static/front/unwrappable.py); "" if one can
    evidence: str = ""  # an implicit site's: why its value is taken for a device value (`sites --explain`)
    # an implicit site's wrapper as the value layer chose it (the wrap grammar's implicit style:
    # "bool", "index", "read", "reads", "save", or "call" for the builtin's own: float(t) -> xfer.float(t))
    wrapper: str = ""
    #: a read that breaks the graph of code `torch.compile` compiles (XFA601): "file:line" of the
    #: call that compiles it (static/front/graph_breaks.py); "" elsewhere
    compiled: str = ""

    def to_json(self) -> dict:
        d = asdict(self)
        del d["byte_col"], d["label"], d["wrapper"]
        if not self.implicit:
            del d["implicit"], d["op"]
        if not self.no_wrap:
            del d["no_wrap"]
        if not self.evidence:
            del d["evidence"]
        if not self.compiled:
            del d["compiled"]
        return d


@dataclass
class FileResult:
    """One file's findings as the finder gives them (:func:`.front.finder.find_in_source`)
    and the cache keeps them: here so the cache and the findings read them without the finder."""

    path: str
    sites: list[Site] = field(default_factory=list)
    error: Optional[str] = None  # parse or read error; the file yields no sites
    error_line: int = 1
    error_column: int = 1
    suppressions: list[tuple[int, tuple[str, ...]]] = field(default_factory=list)
    #: Lines with a bare `xferaudit: ignore` comment (ours, so reported when
    #: unused; a bare noqa comment may serve another linter and is not).
    bare_own: list[int] = field(default_factory=list)
    #: The file does not parse (``error`` says why) but read as old Python
    #: (``print "x"``, ``x.cuda(async=True)``) it did: ``sites`` are from that
    #: reading (:mod:`.front.repair`).
    repaired: bool = False
    #: ``check --evidence``: the run's lines of this file, matched to its text
    #: (:class:`~.front.evidence.FileEvidence`; never cached)
    evidence: Optional[object] = None
