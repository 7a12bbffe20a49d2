"""`xferaudit server` driven as an editor drives it: a subprocess spoken to in
JSON-RPC over stdio (initialize, didOpen, publishDiagnostics, didChange,
didSave, codeAction, hover, shutdown, exit)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import time

import pytest

pytest.importorskip("pygls")

from lsp_client import ROOT, Client  # noqa: E402

from xferaudit.static.codemod import code_style, wrap_source  # noqa: E402

# The emoji is two UTF-16 code units: every column after it on its line differs
# between characters and the protocol's default units.
TRAIN = """\
import torch

def step(model, batch, device):
    x = batch.to(device)
    tag = "🚀"; y = x.cpu()
    loss = model(y)
    return loss.item()
"""

PYPROJECT = """\
[tool.xferaudit]
docs-url = "https://docs.example.org/xa/"
extend-exclude = ["legacy"]
per-file-ignores = { "tests/*" = ["XFA203"] }
"""


@pytest.fixture
def proj(tmp_path):
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "train.py").write_text(TRAIN, encoding="utf-8")
    return tmp_path


@pytest.fixture
def client(proj):
    c = Client(proj)
    c.initialize(proj, {"debounce": 0.2})
    yield c
    c.close()


def utf16_offset(text: str, line: int, character: int) -> int:
    """An LSP position (lines split at \\n, \\r\\n, \\r; characters in UTF-16 units) as an index into text."""
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
    i = starts[line] if line < len(starts) else len(text)
    units = 0
    while units < character and i < len(text) and text[i] not in "\r\n":
        units += 2 if ord(text[i]) > 0xFFFF else 1
        i += 1
    return i


def apply_text_edits(text: str, edits: list[dict]) -> str:
    spans = sorted((utf16_offset(text, **e["range"]["start"]), utf16_offset(text, **e["range"]["end"]),
                    e["newText"]) for e in edits)
    out, last = [], 0
    for a, b, new in spans:
        assert a >= last, "overlapping edits in one action"
        out += [text[last:a], new]
        last = b
    return "".join(out + [text[last:]])


def with_fixes(p: dict) -> bool:
    return bool(p["diagnostics"]) and all("fix" in d["data"] for d in p["diagnostics"])


# --- the session -------------------------------------------------------------------------------


def test_initialize_says_what_it_serves_and_shutdown_exits_0(proj):
    c = Client(proj)
    try:
        result = c.initialize(proj)
        caps = result["capabilities"]
        assert caps["hoverProvider"] is True
        assert set(caps["codeActionProvider"]["codeActionKinds"]) == {"quickfix", "source.wrapAll.xferaudit"}
        assert result["serverInfo"]["name"] == "xferaudit"
        assert c.shutdown() == 0
    finally:
        c.close()


def test_diagnostics_on_open_in_utf16_units_with_version_and_rule_pages(client, proj):
    uri = client.open(proj / "train.py", TRAIN, version=7)
    p = client.wait_for("textDocument/publishDiagnostics")
    assert p["uri"] == uri and p["version"] == 7
    by_code = {d["code"]: d for d in p["diagnostics"]}
    assert [d["code"] for d in p["diagnostics"]] == ["XFA203", "XFA202", "XFA202"]
    # after the emoji: 21 characters in, 22 UTF-16 code units
    assert p["diagnostics"][1]["range"] == {"start": {"line": 4, "character": 22},
                                            "end": {"line": 4, "character": 27}}
    move = by_code["XFA203"]
    assert move["range"] == {"start": {"line": 3, "character": 14}, "end": {"line": 3, "character": 24}}
    assert move["source"] == "xferaudit" and move["severity"] == 2
    assert move["codeDescription"]["href"] == "https://docs.example.org/xa/rules/XFA203/"
    assert move["message"].startswith("`batch.to(device)` copies between host and device")


def test_fixes_arrive_in_data_and_the_quick_fix_is_what_wrap_writes(client, proj):
    uri = client.open(proj / "train.py", TRAIN)
    p = client.wait_for("textDocument/publishDiagnostics", with_fixes)
    assert p["version"] == 1
    for diag in p["diagnostics"]:
        fix = diag["data"]["fix"]
        assert fix["applicability"] == "safe" and fix["message"].startswith("Wrap it: `_xfer.")
        actions = client.request("textDocument/codeAction", {
            "textDocument": {"uri": uri}, "range": diag["range"], "context": {"diagnostics": [diag]}})
        quick = next(a for a in actions if a["title"].startswith("Wrap it"))
        assert quick["kind"] == "quickfix" and quick["isPreferred"] is True
        assert quick["edit"]["changes"][uri] == fix["edits"]  # from data: no second lint
        row, code = diag["range"]["start"]["line"] + 1, diag["code"]
        want = wrap_source(TRAIN.encode(), str(proj / "train.py"), None, "train.py", None, code_style(proj),
                           site_ok=lambda s, row=row, code=code: s.line == row and s.rule == code).new.decode()
        assert apply_text_edits(TRAIN, quick["edit"]["changes"][uri]) == want


def test_wrap_all_and_noqa_actions(client, proj):
    uri = client.open(proj / "train.py", TRAIN)
    p = client.wait_for("textDocument/publishDiagnostics")
    item = p["diagnostics"][-1]
    actions = client.request("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "range": item["range"], "context": {"diagnostics": [item]}})
    titles = {a["title"]: a for a in actions}
    whole = titles["Wrap every site in this file (xferaudit wrap)"]
    want = wrap_source(TRAIN.encode(), str(proj / "train.py"), None, "train.py", None, code_style(proj)).new.decode()
    assert apply_text_edits(TRAIN, whole["edit"]["changes"][uri]) == want
    noqa = titles["Suppress XFA202 on this line (# noqa: XFA202)"]
    silenced = apply_text_edits(TRAIN, noqa["edit"]["changes"][uri])
    assert "    return loss.item()  # noqa: XFA202\n" in silenced
    # the client applies it and says so: the finding is gone
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                             "contentChanges": [{"text": silenced}]})
    p = client.wait_for("textDocument/publishDiagnostics", lambda q: q["version"] == 2)
    assert [d["code"] for d in p["diagnostics"]] == ["XFA203", "XFA202"]
    # a source action asked for by kind alone (an editor's "on save" list)
    src = client.request("textDocument/codeAction", {
        "textDocument": {"uri": uri}, "range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}},
        "context": {"diagnostics": [], "only": ["source.wrapAll"]}})
    assert [a["kind"] for a in src] == ["source.wrapAll.xferaudit"]


def test_wrap_all_edit_is_made_on_resolve_for_clients_that_resolve(proj):
    c = Client(proj)
    try:
        c.initialize(proj, resolve=True)
        uri = c.open(proj / "train.py", TRAIN)
        p = c.wait_for("textDocument/publishDiagnostics")
        actions = c.request("textDocument/codeAction", {
            "textDocument": {"uri": uri}, "range": p["diagnostics"][0]["range"],
            "context": {"diagnostics": p["diagnostics"][:1]}})
        whole = next(a for a in actions if a["title"].startswith("Wrap every site"))
        assert "edit" not in whole  # not made until picked
        done = c.request("codeAction/resolve", whole)
        want = wrap_source(TRAIN.encode(), str(proj / "train.py"), None, "train.py", None,
                           code_style(proj)).new.decode()
        assert apply_text_edits(TRAIN, done["edit"]["changes"][uri]) == want
        # a stale action (the document changed since) resolves to no edit
        c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2},
                                            "contentChanges": [{"text": TRAIN + "\n"}]})
        assert "edit" not in c.request("codeAction/resolve", whole)
    finally:
        c.close()


def test_changes_are_debounced_and_published_with_the_latest_version(client, proj):
    uri = client.open(proj / "train.py", TRAIN)
    client.wait_for("textDocument/publishDiagnostics", lambda q: q["version"] == 1)
    for v in (2, 3, 4):  # typing: three changes inside the wait
        text = TRAIN.replace("return loss.item()", f"return loss.item() + {v}")
        client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": v},
                                                 "contentChanges": [{"text": text}]})
    p = client.wait_for("textDocument/publishDiagnostics", lambda q: q["version"] == 4)
    assert len(p["diagnostics"]) == 3
    time.sleep(0.5)
    client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}})
    versions = {n["params"].get("version") for n in client.notifications if n["method"] == "textDocument/publishDiagnostics"}
    assert not versions & {2, 3}, versions


def test_incremental_change_and_save(client, proj):
    uri = client.open(proj / "train.py", TRAIN)
    client.wait_for("textDocument/publishDiagnostics", lambda q: q["version"] == 1)
    # replace `x = batch.to(device)` by `x = batch` (range in UTF-16 units)
    client.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": 2}, "contentChanges": [
        {"range": {"start": {"line": 3, "character": 13}, "end": {"line": 3, "character": 24}}, "text": ""}]})
    client.notify("textDocument/didSave", {"textDocument": {"uri": uri}})
    p = client.wait_for("textDocument/publishDiagnostics", lambda q: q["version"] == 2)
    assert [d["code"] for d in p["diagnostics"]] == ["XFA202", "XFA202"]
    assert p["diagnostics"][1]["range"]["start"] == {"line": 6, "character": 16}


def test_hover_shows_the_rule(client, proj):
    uri = client.open(proj / "train.py", TRAIN)
    p = client.wait_for("textDocument/publishDiagnostics")
    item = p["diagnostics"][1]
    h = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": item["range"]["start"]})
    assert h["contents"]["kind"] == "markdown"
    assert h["contents"]["value"].startswith("# unwrapped-down (XFA202)")
    assert "https://docs.example.org/xa/rules/XFA202/" in h["contents"]["value"]
    assert client.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                 "position": {"line": 0, "character": 1}}) is None


def test_settings_come_from_the_workspace_pyproject(client, proj):
    (proj / "tests").mkdir()
    (proj / "legacy").mkdir()
    client.open(proj / "tests" / "test_step.py", TRAIN)
    p = client.wait_for("textDocument/publishDiagnostics", lambda q: q["uri"].endswith("test_step.py"))
    assert [d["code"] for d in p["diagnostics"]] == ["XFA202", "XFA202"]  # per-file-ignores
    client.open(proj / "legacy" / "old.py", TRAIN)
    p = client.wait_for("textDocument/publishDiagnostics", lambda q: q["uri"].endswith("old.py"))
    assert p["diagnostics"] == []  # excluded
    # an edit of the settings applies at the next check
    (proj / "pyproject.toml").write_text(PYPROJECT + 'ignore = ["XFA202"]\n')
    uri = client.open(proj / "train.py", TRAIN)
    p = client.wait_for("textDocument/publishDiagnostics", lambda q: q["uri"] == uri)
    assert [d["code"] for d in p["diagnostics"]] == ["XFA203"]


def test_an_unsaved_buffer_is_checked_as_a_file_of_the_workspace(client, proj):
    client.notify("textDocument/didOpen", {"textDocument": {
        "uri": "untitled:Untitled-1", "languageId": "python", "version": 1, "text": TRAIN}})
    p = client.wait_for("textDocument/publishDiagnostics", lambda q: q["uri"] == "untitled:Untitled-1")
    assert [d["code"] for d in p["diagnostics"]] == ["XFA203", "XFA202", "XFA202"]
    # its rule links come from the workspace's pyproject.toml
    assert p["diagnostics"][0]["codeDescription"]["href"].startswith("https://docs.example.org/xa/")


def test_a_broken_config_is_shown_not_crashed_on(client, proj):
    (proj / "pyproject.toml").write_text("[tool.xferaudit]\nselect = 3\n")
    uri = client.open(proj / "train.py", TRAIN)
    msg = client.wait_for("window/showMessage")
    assert "select must be a list of strings" in msg["message"]
    p = client.wait_for("textDocument/publishDiagnostics", lambda q: q["uri"] == uri)
    assert p["diagnostics"] == []
    assert client.request("textDocument/hover", {"textDocument": {"uri": uri},
                                                 "position": {"line": 0, "character": 0}}) is None


def test_close_clears_the_documents_diagnostics(client, proj):
    uri = client.open(proj / "train.py", TRAIN)
    client.wait_for("textDocument/publishDiagnostics", lambda q: q["diagnostics"])
    client.notify("textDocument/didClose", {"textDocument": {"uri": uri}})
    p = client.wait_for("textDocument/publishDiagnostics", lambda q: q["diagnostics"] == [])
    assert p["uri"] == uri


def test_without_pygls_the_command_says_what_to_install(tmp_path):
    fake = tmp_path / "fake" / "pygls"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ImportError('no pygls here')\n")
    r = subprocess.run([sys.executable, "-m", "xferaudit", "server"], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join([str(fake.parent), str(ROOT)])})
    assert r.returncode == 2
    assert r.stderr.strip() == "xferaudit: error: the editor server needs pygls: pip install 'xferaudit[server]'"


def test_server_modules_import_pygls_only_when_the_server_runs():
    code = textwrap.dedent("""\
        import sys
        from xferaudit.cli import main
        import xferaudit.commands.server, xferaudit.server
        print('pygls' in sys.modules)
    """)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.stdout.strip() == "False", r.stderr


def test_the_configs_run_evidence_is_read_as_check_reads_it(tmp_path):
    import json

    src = "def log(loss):\n    if loss > 10:\n        print(loss)\n    return float(loss)\n"
    (tmp_path / "pyproject.toml").write_text('[tool.xferaudit]\nevidence = ["run.json"]\n')
    entries = [{"path": "log.py", "line": n, "function": "log", "text": t, "op": "aten._local_scalar_dense",
                "direction": "down", "count": 1, "copies": 1, "bytes": 4}
               for n, t in ((2, "if loss > 10:"), (4, "return float(loss)"))]
    (tmp_path / "run.json").write_text(json.dumps({"format": "xferaudit.report", "rows": [], "unwrapped": entries,
                                                   "meta": {"kind": "run", "root": str(tmp_path)}}))
    c = Client(tmp_path)
    try:
        c.initialize(tmp_path, {"debounce": 0})
        c.open(tmp_path / "log.py", src)
        p = c.wait_for("textDocument/publishDiagnostics")
        assert [(d["range"]["start"]["line"] + 1, d["code"]) for d in p["diagnostics"]] == [
            (2, "XFA402"), (4, "XFA401")]
        assert "seen crossing at run time" in p["diagnostics"][0]["message"]
    finally:
        c.close()


@pytest.mark.parametrize("method, params", [
    ("textDocument/hover", {"textDocument": {"uri": "file:///x.py"}, "position": {"line": -1, "character": 0}}),
    ("textDocument/hover", {"textDocument": {"uri": "file:///x.py"},
                            "position": {"line": 0, "character": 2**31}}),
    ("textDocument/codeAction", {"textDocument": {"uri": "file:///x.py"},
                                 "range": {"start": {"line": 0, "character": 0},
                                           "end": {"line": 0, "character": 0}}}),
    ("textDocument/hover", "not an object"),
])
def test_a_request_whose_params_do_not_validate_gets_an_error(client, proj, method, params):
    uri = client.open(proj / "train.py", TRAIN)
    client.wait_for("textDocument/publishDiagnostics")
    with pytest.raises(RuntimeError) as e:
        client.request(method, params, timeout=20)
    assert e.value.args[0]["code"] == -32602  # InvalidParams
    # and the server goes on
    h = client.request("textDocument/hover", {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 0}})
    assert h is None


def test_a_huge_content_length_is_not_read_into_memory(proj):
    c = Client(proj)
    try:
        c.initialize(proj, {"debounce": 0})
        c.proc.stdin.write(b"Content-Length: 99999999999999\r\n\r\n")  # no body follows...
        c.proc.stdin.write(b"Content-Length: " + b"9" * 5000 + b"\r\n\r\n")
        c.proc.stdin.flush()
        time.sleep(1)
        assert c.proc.poll() is None  # still serving (it waits for the bytes it was promised)
    finally:
        c.close()
    c = Client(proj)
    try:  # a header of 5,000 digits, then a real message: answered
        c.initialize(proj, {"debounce": 0})
        c.proc.stdin.write(b"Content-Length: " + b"9" * 5000 + b"\r\n")
        c.proc.stdin.flush()
        assert c.request("textDocument/hover", {"textDocument": {"uri": (proj / "train.py").as_uri()},
                                                "position": {"line": 0, "character": 0}}, timeout=20) is None
    finally:
        c.close()


def test_fixes_wait_for_a_pause_and_an_edit_stops_them(proj):
    c = Client(proj)
    try:
        c.initialize(proj, {"debounce": 0, "fixDelay": 1.0})
        uri = c.open(proj / "train.py", TRAIN)
        c.wait_for("textDocument/publishDiagnostics", lambda q: q["version"] == 1)
        t = time.monotonic()
        c.wait_for("textDocument/publishDiagnostics", with_fixes)
        assert time.monotonic() - t >= 0.9  # the fixes came after the pause, not at once
        # two edits in a row: the first one's fixes are never made, the second's come
        for v in (2, 3):
            c.notify("textDocument/didChange", {"textDocument": {"uri": uri, "version": v},
                                                "contentChanges": [{"text": TRAIN + "\n" * v}]})
            c.wait_for("textDocument/publishDiagnostics", lambda q, v=v: q["version"] == v)
        c.wait_for("textDocument/publishDiagnostics", lambda q: q["version"] == 3 and with_fixes(q))
        published = [n["params"] for n in c.notifications if n["method"] == "textDocument/publishDiagnostics"]
        assert not [p for p in published if p["version"] == 2 and with_fixes(p)]
    finally:
        c.close()


def test_an_outdated_document_gets_no_fixes_and_a_stop_ends_them_between_codemod_runs(proj):
    from xferaudit.server import documents as D
    from xferaudit.static.findings import fixes

    doc = D.Document(uri="file:///t.py", path=str(proj / "train.py"), version=1, text=TRAIN)
    projects = D.Projects()
    D.check(doc, projects)
    cfg, rules = projects.config(doc.path)
    doc.outdated.set()
    D.fixes(doc, cfg, rules)
    assert not doc.fixes_done and all(d.fix is None for d in doc.linted.diags)
    asked = []
    with pytest.raises(fixes.Stopped):
        fixes.attach(doc.linted.diags, doc.linted.scan, cfg, rules, doc.linted.sources,
                     stop=lambda: asked.append(1) or True)
    assert asked == [1] and all(d.fix is None for d in doc.linted.diags)
