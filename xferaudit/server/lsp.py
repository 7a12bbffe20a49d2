"""The protocol shell of ``xferaudit server``: pygls wiring over :mod:`.documents`.

What it does, per open document:

- **diagnostics** on open and save at once, and on change after a pause in the
  typing (:data:`DEBOUNCE` seconds per document: each change restarts that
  document's wait), published with the document's version. Each carries its
  code's page (``codeDescription.href``, where the docs site is known) and, in
  ``data``, the edits of its fix: first the findings alone (fast), then, once
  the document has been left alone :data:`FIX_DELAY` seconds more, the
  codemod run off the event loop, the same findings with their fixes. A change
  cancels fixes not begun and stops those under way (between codemod runs),
  so an edit's findings never wait for the previous edit's fixes;
- **code actions** for a finding: wrap this site (its fix from ``data``: no
  second lint), wrap every site of the file (``xferaudit wrap`` over the
  buffer), and suppress it with ``# noqa: CODE``;
- **hover** over a finding: its rule's page (``xferaudit rule CODE``).

Positions cross the protocol in the client's units (UTF-16 code units unless
the client negotiates another encoding), converted once, here, through
pygls's position codec over the document's lines as Python splits them.
"""

from __future__ import annotations

import asyncio
import os
import sys
from typing import Any, Optional
from urllib.parse import unquote, urlparse

from lsprotocol import types
from lsprotocol.converters import get_converter
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.uris import to_fs_path

from .. import __version__
from ..config import ConfigError
from ..static.findings.diagnostics import docs_base, rule_url
from ..static.findings.edits import Edit
from . import documents as D
from .positions import Columns

CONVERTER = get_converter()  # lsprotocol's: LSP types <-> JSON-ready data

#: Seconds of quiet after a change before the document is checked again.
DEBOUNCE = 0.3
#: Seconds of quiet after the findings are out before their fixes are made
#: (``initializationOptions: {"fixDelay": ...}``).
FIX_DELAY = 0.5
SOURCE = "xferaudit"
#: The kind of the "wrap every site of the file" action (a source action, so
#: an editor can bind it: VS Code's "editor.codeActionsOnSave").
WRAP_ALL = "source.wrapAll.xferaudit"
WRAP_ALL_TITLE = "Wrap every site in this file (xferaudit wrap)"


#: The most bytes one message may hold: a larger one is read in pieces and
#: dropped (the server goes on), never held whole in memory.
MAX_MESSAGE = 256 << 20
#: A header line is read this many bytes at a time at most (one of thousands
#: of digits is then no header: ignored).
MAX_HEADER = 1024


class _Invalid:
    """A request whose params do not validate: answered with an error, not dropped."""

    jsonrpc = "2.0"

    def __init__(self, msg_id: object, error: object) -> None:
        self.id, self.error = msg_id, error


class _Protocol(LanguageServerProtocol):
    """pygls's protocol, except that a request it cannot read (params of the
    wrong shape or out of range: a hover at line -1, a codeAction without its
    context) gets an error response: pygls drops it, and the client would wait
    for the answer forever."""

    def structure_message(self, data: dict) -> object:
        try:
            return super().structure_message(data)
        except JsonRpcException as e:
            if isinstance(data, dict) and "method" in data and isinstance(data.get("id"), (int, str)):
                return _Invalid(data["id"], e.to_response_error())
            raise

    def handle_message(self, message: object) -> None:
        if isinstance(message, _Invalid):
            self._send_response(message.id, None, message.error)
            return
        super().handle_message(message)


class _BoundedInput:
    """Standard input as the protocol reads it, with what one read may take
    bounded: a ``Content-Length`` of 99999999999999 is read and dropped in
    pieces (the server waits for those bytes, as the protocol says, without
    holding them), a header line is read :data:`MAX_HEADER` bytes at a time."""

    def __init__(self, raw: Any) -> None:
        self.raw = raw

    def readline(self) -> bytes:
        return self.raw.readline(MAX_HEADER)

    def read(self, n: int) -> bytes:
        if n <= MAX_MESSAGE:
            return self.raw.read(n)
        left = n
        while left > 0:
            chunk = self.raw.read(min(left, 1 << 20))
            if not chunk:
                return b""  # (the end of the input: the server stops, as it would)
            left -= len(chunk)
        sys.stderr.write(f"xferaudit server: a message of {n} bytes (more than {MAX_MESSAGE}) was dropped\n")
        return b"null"


class XferauditServer(LanguageServer):
    def __init__(self) -> None:
        super().__init__("xferaudit", __version__, protocol_cls=_Protocol)
        self.projects = D.Projects()
        self.docs: dict[str, D.Document] = {}
        self.pending: dict[str, asyncio.Task] = {}
        self.debounce = DEBOUNCE
        self.fix_delay = FIX_DELAY


server = XferauditServer()


# --- positions -------------------------------------------------------------------------


def _codec(ls: XferauditServer):
    return ls.workspace.position_codec


def _columns(ls: XferauditServer, doc: D.Document) -> Columns:
    """The document's columns in the client's units, worked out once per
    version (linear in its size: :mod:`.positions`)."""
    enc = _codec(ls).encoding
    enc = str(getattr(enc, "value", enc) or "utf-16").lower()
    cols = doc.columns
    if cols is None or cols.encoding != enc:
        cols = doc.columns = Columns(doc.text, enc)
    return cols


def _range(cols: Columns, start: tuple[int, int], end: tuple[int, int]) -> types.Range:
    """A range of 1-based (line, character column) positions in the client's units."""
    a, b = cols.to_client(start[0] - 1, start[1] - 1), cols.to_client(end[0] - 1, end[1] - 1)
    return types.Range(start=types.Position(line=a[0], character=a[1]),
                       end=types.Position(line=b[0], character=b[1]))


def _from_client(ls: XferauditServer, doc: D.Document, pos: types.Position) -> tuple[int, int]:
    """A client's position -> (line, character column), both from 0."""
    return _columns(ls, doc).from_client(pos.line, pos.character)


def _text_edits(ls: XferauditServer, doc: D.Document, edits: list[Edit]) -> list[types.TextEdit]:
    cols = _columns(ls, doc)
    return [types.TextEdit(range=_range(cols, e.start, e.end), new_text=e.content) for e in edits]


# --- checking and publishing -----------------------------------------------------------------


def _path(ls: XferauditServer, uri: str) -> str:
    """The file a document is checked as: its own path, or for an unsaved one
    a name under the workspace root (so the project's config still applies)."""
    parsed = urlparse(uri)
    if parsed.scheme == "file":
        return to_fs_path(uri) or unquote(parsed.path)
    root = ls.workspace.root_path or os.getcwd()
    return os.path.join(root, os.path.basename(unquote(parsed.path)) or "untitled.py")


def _document(ls: XferauditServer, uri: str) -> D.Document:
    td = ls.workspace.get_text_document(uri)
    doc = ls.docs.get(uri)
    if doc is None or doc.version != td.version or doc.text != td.source:
        doc = D.Document(uri=uri, path=_path(ls, uri), version=td.version, text=td.source)
        ls.docs[uri] = doc
    return doc


def _diagnostics(ls: XferauditServer, doc: D.Document) -> list[types.Diagnostic]:
    out = []
    if doc.linted is None:
        return out
    cols = _columns(ls, doc)
    base = docs_base(_config_or_none(ls, doc))
    for d in doc.reported():
        url = rule_url(d.code, base)
        data = {"version": doc.version}
        if d.fix is not None:
            data["fix"] = {
                "applicability": d.fix.applicability,
                "message": d.fix.message,
                "edits": [CONVERTER.unstructure(types.TextEdit(range=_range(cols, e.start, e.end),
                                                               new_text=e.content)) for e in d.fix.edits],
            }
        out.append(types.Diagnostic(
            range=_range(cols, (d.line, d.column), (d.end_line, d.end_column)),
            message=d.message,
            severity=types.DiagnosticSeverity.Error if d.fatal else types.DiagnosticSeverity.Warning,
            code=d.code,
            code_description=types.CodeDescription(href=url) if url else None,
            source=SOURCE,
            data=data,
        ))
    return out


def _config_or_none(ls: XferauditServer, doc: D.Document):
    try:
        return ls.projects.config(doc.path)[0]
    except ConfigError:  # shown when the document was checked
        return None


async def _publish(ls: XferauditServer, doc: D.Document) -> None:
    """Publish the document's findings (converted off the event loop: a long
    document's thousands of ranges must not hold up a hover)."""
    diagnostics = await asyncio.get_running_loop().run_in_executor(ls.thread_pool, _diagnostics, ls, doc)
    ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
        uri=doc.uri, version=doc.version, diagnostics=diagnostics))


async def _check(ls: XferauditServer, uri: str) -> None:
    """Check the document as it is now and publish; then publish again with the
    fixes, unless it changed meanwhile. The check runs off the event loop (a
    long document takes seconds): requests are answered meanwhile."""
    if uri not in ls.workspace.text_documents:
        return
    doc = _document(ls, uri)
    await asyncio.get_running_loop().run_in_executor(ls.thread_pool, D.check_locked, doc, ls.projects)
    if ls.docs.get(uri) is not doc:
        return  # (changed meanwhile: its own check publishes)
    if doc.config_error is not None:
        ls.window_show_message(types.ShowMessageParams(
            type=types.MessageType.Error, message=f"xferaudit: {doc.config_error}"))
    await _publish(ls, doc)
    if doc.linted is None or not any(d.code.startswith(("XFA2", "XFA3", "XFA4", "XFA6")) for d in doc.reported()):
        return
    if ls.fix_delay:
        await asyncio.sleep(ls.fix_delay)  # (a change meanwhile cancels this task: no fixes begun)
    await _fixes(ls, doc)
    if ls.docs.get(uri) is doc:
        await _publish(ls, doc)


async def _fixes(ls: XferauditServer, doc: D.Document) -> None:
    """The document's fixes, made off the event loop (once per version)."""
    if doc.fixes_done or doc.linted is None:
        return
    try:
        cfg, rules = ls.projects.config(doc.path)
    except ConfigError:  # broken since the document was checked: its next check says so
        return
    await asyncio.get_running_loop().run_in_executor(ls.thread_pool, D.fixes, doc, cfg, rules)


def _schedule(ls: XferauditServer, uri: str, delay: float) -> None:
    """(Re)start the document's wait; the check runs when it ends."""
    old = ls.pending.pop(uri, None)
    if old is not None:
        old.cancel()

    async def later() -> None:
        if delay:
            await asyncio.sleep(delay)
        await _check(ls, uri)

    task = asyncio.ensure_future(later())
    ls.pending[uri] = task
    task.add_done_callback(lambda t: ls.pending.pop(uri, None) if ls.pending.get(uri) is t else None)


@server.feature(types.INITIALIZE)
def initialize(ls: XferauditServer, params: types.InitializeParams) -> None:
    opts = params.initialization_options or {}
    for key, attr in (("debounce", "debounce"), ("fixDelay", "fix_delay")):
        value = opts.get(key) if isinstance(opts, dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 60:
            setattr(ls, attr, float(value))


@server.feature(types.TEXT_DOCUMENT_DID_OPEN)
def did_open(ls: XferauditServer, params: types.DidOpenTextDocumentParams) -> None:
    _schedule(ls, params.text_document.uri, 0)


@server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
def did_change(ls: XferauditServer, params: types.DidChangeTextDocumentParams) -> None:
    _outdate(ls, params.text_document.uri)
    _schedule(ls, params.text_document.uri, ls.debounce)


def _outdate(ls: XferauditServer, uri: str) -> None:
    """The document the server holds for `uri` is no longer the client's: its
    fixes under way stop at their next codemod run."""
    doc = ls.docs.get(uri)
    if doc is not None:
        doc.outdated.set()


@server.feature(types.TEXT_DOCUMENT_DID_SAVE)
def did_save(ls: XferauditServer, params: types.DidSaveTextDocumentParams) -> None:
    _schedule(ls, params.text_document.uri, 0)


@server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
def did_close(ls: XferauditServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    _outdate(ls, uri)
    task = ls.pending.pop(uri, None)
    if task is not None:
        task.cancel()
    ls.docs.pop(uri, None)
    ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))


# --- code actions and hover --------------------------------------------------------------


def _current(ls: XferauditServer, uri: str) -> Optional[D.Document]:
    """The document as the client has it now (checked or not yet)."""
    if uri not in ls.workspace.text_documents:
        return None
    return _document(ls, uri)


async def _checked(ls: XferauditServer, uri: str) -> Optional[D.Document]:
    """The document as the client has it now, checked (a request may come
    before a pending check has run: it is run, off the event loop, or waited for)."""
    doc = _current(ls, uri)
    if doc is not None and doc.linted is None and doc.config_error is None:
        await asyncio.get_running_loop().run_in_executor(ls.thread_pool, D.check_once, doc, ls.projects)
    return doc


def _wanted(kind: str, only: Optional[list]) -> bool:
    return not only or any(kind == k or kind.startswith(f"{k}.") for k in only)


@server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
    code_action_kinds=[types.CodeActionKind.QuickFix, WRAP_ALL], resolve_provider=True))
async def code_action(ls: XferauditServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    uri = params.text_document.uri
    doc = await _checked(ls, uri)
    if doc is None or doc.linted is None:
        return []
    only = params.context.only
    ours = [d for d in params.context.diagnostics if d.source == SOURCE]
    actions: list[types.CodeAction] = []
    if _wanted(types.CodeActionKind.QuickFix, only):
        for diag in ours:
            actions.extend(await _site_actions(ls, doc, diag))
    wrappable = any(d.code.startswith(("XFA2", "XFA4", "XFA6")) for d in doc.reported())
    kind = types.CodeActionKind.QuickFix if ours and _wanted(types.CodeActionKind.QuickFix, only) else WRAP_ALL
    if wrappable and (ours or only) and _wanted(kind, only):
        action = await _deferred(ls, doc, WRAP_ALL_TITLE, kind, {"action": "wrap-all"})
        if action is not None:
            actions.append(action)
    return actions


async def _deferred(ls: XferauditServer, doc: D.Document, title: str, kind: str, what: dict,
                    diagnostics: Optional[list] = None) -> Optional[types.CodeAction]:
    """An action whose edit costs a pass over the whole document: made when the
    user picks it (codeAction/resolve) where the client can wait for it, else now."""
    action = types.CodeAction(title=title, kind=kind, diagnostics=diagnostics,
                              data={**what, "uri": doc.uri, "version": doc.version})
    if _resolves_edits(ls):
        return action
    action = await resolve_code_action(ls, action)
    return action if action.edit is not None else None


def _resolves_edits(ls: XferauditServer) -> bool:
    try:
        props = ls.client_capabilities.text_document.code_action.resolve_support.properties
    except AttributeError:
        return False
    return "edit" in (props or ())


@server.feature(types.CODE_ACTION_RESOLVE)
async def resolve_code_action(ls: XferauditServer, action: types.CodeAction) -> types.CodeAction:
    """The edit of a deferred action, for the version of the document it was
    offered for (none when the document changed since)."""
    data = action.data if isinstance(action.data, dict) else {}
    uri = data.get("uri")
    doc = await _checked(ls, uri) if isinstance(uri, str) else None
    if doc is None or doc.version != data.get("version"):
        return action
    edits: list = []
    if data.get("action") == "wrap-all":
        if doc.wrap_all is None:  # once per version: wrap over the whole buffer costs what the codemod costs
            cfg = _config_or_none(ls, doc)
            if cfg is None:
                return action
            doc.wrap_all = await asyncio.get_running_loop().run_in_executor(ls.thread_pool, D.wrap_all, doc, cfg)
        edits = doc.wrap_all
    elif data.get("action") == "noqa" and isinstance(data.get("line"), int):
        edits = D.noqa(doc, data["line"], {str(data.get("code"))})
    if edits:
        action.edit = types.WorkspaceEdit(changes={uri: _text_edits(ls, doc, edits)})
    return action


async def _site_actions(ls: XferauditServer, doc: D.Document, diag: types.Diagnostic) -> list[types.CodeAction]:
    out = []
    code = str(diag.code)
    data = diag.data if isinstance(diag.data, dict) else {}
    fix = data.get("fix") if data.get("version") == doc.version else None
    edits = None
    if fix is not None:
        edits = [CONVERTER.structure(e, types.TextEdit) for e in fix["edits"]]
        message, applicability = fix["message"], fix["applicability"]
    else:
        # published before its fix was ready: the same computation, once per version
        await _fixes(ls, doc)
        found = _finding(ls, doc, diag)
        if found is not None and found.fix is not None:
            edits = _text_edits(ls, doc, list(found.fix.edits))
            message, applicability = found.fix.message, found.fix.applicability
    if edits:
        out.append(types.CodeAction(
            title=f"{message} ({code})", kind=types.CodeActionKind.QuickFix, diagnostics=[diag],
            is_preferred=applicability == "safe",
            edit=types.WorkspaceEdit(changes={doc.uri: edits})))
    if D.suppressible(code):
        line = _from_client(ls, doc, diag.range.start)[0] + 1
        action = await _deferred(ls, doc, f"Suppress {code} on this line (# noqa: {code})",
                                 types.CodeActionKind.QuickFix, {"action": "noqa", "line": line, "code": code},
                                 [diag])
        if action is not None:
            out.append(action)
    return out


def _finding(ls: XferauditServer, doc: D.Document, diag: types.Diagnostic):
    """The finding a client's diagnostic stands for (same code, same start)."""
    start = _from_client(ls, doc, diag.range.start)
    for d in doc.reported():
        if d.code == diag.code and (d.line - 1, d.column - 1) == start:
            return d
    return None


@server.feature(types.TEXT_DOCUMENT_HOVER)
async def hover(ls: XferauditServer, params: types.HoverParams) -> Optional[types.Hover]:
    doc = await _checked(ls, params.text_document.uri)
    if doc is None or doc.linted is None:
        return None
    cols = _columns(ls, doc)
    at = cols.from_client(params.position.line, params.position.character)
    here = (at[0] + 1, at[1] + 1)
    base = docs_base(_config_or_none(ls, doc))
    for d in doc.reported():
        if (d.line, d.column) <= here <= (d.end_line, d.end_column):
            text = D.rule_text(d.code, rule_url(d.code, base))
            if text:
                return types.Hover(
                    contents=types.MarkupContent(kind=types.MarkupKind.Markdown, value=text),
                    range=_range(cols, (d.line, d.column), (d.end_line, d.end_column)))
    return None


def start(stdin=None, stdout=None) -> None:
    """Serve over standard input and output until the client says exit."""
    server.start_io(_BoundedInput(stdin or sys.stdin.buffer), stdout)
