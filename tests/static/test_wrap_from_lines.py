"""Issue 44, item 7: `wrap --from` finds a statement's code by the lines Python
splits (a form feed is whitespace, not a line end), so a statement after a
form-feed line is named by its own code."""

from __future__ import annotations

from evidence_util import entry, write_run

from xferaudit.cli import main

SRC = (
    "import torch\n"
    "\n"
    "\x0c\n"
    "def other(a, b):\n"
    "    y = a + b\n"
    "    return y\n"
)


def test_a_statement_after_a_form_feed_is_named_by_its_own_code(tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "t.py").write_bytes(SRC.encode())
    monkeypatch.chdir(tmp_path)
    write_run(tmp_path / "run.json", [entry("t.py", 5, "y = a + b", "aten.add.Tensor", "up", function="other")])
    assert main(["wrap", "-q", "--from", "run.json"]) == 0
    out = (tmp_path / "t.py").read_bytes().decode()
    assert '    y = a + b  # xferaudit: site=":other:y=a+b"\n' in out, out
    assert "\x0c\n" in out
    assert main(["unwrap", "-q", "t.py"]) == 0
    assert (tmp_path / "t.py").read_bytes() == SRC.encode()
