"""Issue 44, item 9: the editor server converts positions in time linear in the
document (many findings on one line took minutes), gives the same answers as
pygls's position codec, and answers a hover while a long check runs."""

from __future__ import annotations

import random
import time
from types import SimpleNamespace

import pytest

pytest.importorskip("pygls")

from lsp_client import Client  # noqa: E402
from lsprotocol import types  # noqa: E402
from pygls.workspace.position_codec import PositionCodec, ServerTextPosition  # noqa: E402

from xferaudit.server import documents as D  # noqa: E402
from xferaudit.server import lsp  # noqa: E402
from xferaudit.static.front.source import split_lines  # noqa: E402


def _one_line(n: int) -> str:
    return "import torch\n\nx = torch.ones(3, device='cuda')\ny = ('\U0001F600é', " + ", ".join(["x.item()"] * n) + ")\n"


def _converted(tmp_path, n: int) -> tuple:
    """(findings, seconds) of the server's conversion of every finding's range (not the check): the
    fastest of three conversions, so that a stall of the machine in one of them (a busy CI runner) is
    not read as the conversion's own time; quadratic work is slow in all three."""
    text = _one_line(n)
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n")
    doc = D.Document(uri=(tmp_path / "t.py").as_uri(), path=str(tmp_path / "t.py"), version=1, text=text)
    projects = D.Projects()
    D.check(doc, projects)
    ls = SimpleNamespace(workspace=SimpleNamespace(position_codec=PositionCodec()), projects=projects)
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        out = lsp._diagnostics(ls, doc)
        best = min(best, time.perf_counter() - t)
    return out, best


def test_many_findings_on_one_line_convert_in_linear_time(tmp_path):
    small, t_small = _converted(tmp_path, 300)
    big, t_big = _converted(tmp_path, 1200)
    assert len(small) == 300 and len(big) == 1200
    # (four times the findings on a four times longer line: quadratic work is 16 times longer)
    assert t_big < 8 * t_small + 0.1, (t_small, t_big)
    # the ranges are right: in UTF-16 units, after the emoji (2 units) and the é (1)
    text = _one_line(1200)
    col = text.splitlines()[3].index("x.item()") + len("x.")  # (a finding starts at the method's name)
    assert (big[0].range.start.line, big[0].range.start.character) == (3, col + 1)


@pytest.mark.parametrize("encoding", [types.PositionEncodingKind.Utf16, types.PositionEncodingKind.Utf8,
                                      types.PositionEncodingKind.Utf32])
def test_the_columns_are_pygls_columns(encoding):
    from xferaudit.server.positions import Columns

    rnd = random.Random(44)
    alphabet = "ab \t#é€\U0001F600\U00010000\r\n\x0c"
    codec = PositionCodec(encoding)
    for _ in range(200):
        text = "".join(rnd.choice(alphabet) for _ in range(rnd.randrange(0, 40)))
        lines = split_lines(text)
        cols = Columns(text, encoding.value)
        for ln in range(len(lines) + 2):
            width = len(lines[ln]) if ln < len(lines) else 3
            for ch in range(width + 3):
                want = codec.position_to_client_units(lines, ServerTextPosition(ln, ch)) \
                    if ln < len(lines) and ch <= width else None
                if want is not None:
                    assert cols.to_client(ln, ch) == (want.line, want.character), (text, ln, ch)
                got = codec.position_from_client_units(lines, types.Position(line=ln, character=ch))
                assert cols.from_client(ln, ch) == (got.line, got.character), (text, ln, ch)


def _open_and_hover(c: Client, path, text: str, hover_uri: str, timeout: float) -> dict:
    """didOpen `path`, then a hover on `hover_uri`: when each answer came (seconds after didOpen)."""
    c.open(path, text)
    t0 = time.perf_counter()
    time.sleep(0.2)  # (the check of the long line under way)
    c.next_id += 1
    rid = c.next_id
    c.send({"id": rid, "method": "textDocument/hover",
            "params": {"textDocument": {"uri": hover_uri}, "position": {"line": 0, "character": 1}}})
    got: dict = {}
    deadline = time.monotonic() + timeout
    while "hover" not in got or "publish" not in got:
        msg = c._next(deadline)
        if msg.get("id") == rid and "method" not in msg:
            got["hover"] = time.perf_counter() - t0
        elif msg.get("method") == "textDocument/publishDiagnostics" and msg["params"]["uri"] == path.as_uri():
            got["publish"] = time.perf_counter() - t0
            got["findings"] = len(msg["params"]["diagnostics"])
    return got


def test_a_hover_is_answered_while_a_long_check_runs(tmp_path):
    text = _one_line(12000)  # (a check long enough on a quiet machine too: 3,000 took 0.24 s, a race)
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n")
    path = tmp_path / "t.py"
    path.write_text(text, encoding="utf-8")
    other = tmp_path / "small.py"
    other.write_text("import torch\n")
    c = Client(tmp_path)
    try:
        c.initialize(tmp_path, {"debounce": 0, "fixDelay": 60})
        c.open(other, "import torch\n")
        c.wait_for("textDocument/publishDiagnostics", lambda q: q["uri"] == other.as_uri())
        got = _open_and_hover(c, path, text, other.as_uri(), 300)
        assert got["findings"] == 12000
        # the hover is answered before the long document's findings are out: not queued behind its check
        assert got["hover"] < got["publish"], got
    finally:
        c.close()
