"""`check -` and `wrap -`: a file's source on standard input, as editors and
formatters hand it over, reported or rewritten under `--stdin-filename`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

STEP = """\
import torch

def step(model, batch, device):
    x = batch.to(device)
    loss = model(x)
    return loss.item()  # noqa: XFA201
"""


@pytest.fixture
def proj(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.xferaudit]\n"
        'extend-exclude = ["legacy"]\n'
        'per-file-ignores = { "tests/*" = ["XFA203"] }\n'
    )
    (tmp_path / "pkg").mkdir()
    return tmp_path


def xa(cwd: Path, *args: str, stdin: str = STEP) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "xferaudit", *args], cwd=cwd, input=stdin.encode(),
                          capture_output=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_check_reads_stdin_and_reports_under_the_given_name(proj):
    r = xa(proj, "check", "-", "--stdin-filename", "pkg/train.py")
    out = r.stdout.decode()
    assert r.returncode == 1, r.stderr
    assert out.splitlines()[0].startswith("pkg/train.py:4:15: XFA203 ")
    assert "pkg/train.py:6:17: XFA202 " in out
    # the unused suppression's column comes from the text on stdin, not a file on disk
    assert "pkg/train.py:6:25: XFA101 unused suppression of XFA201" in out
    assert not (proj / "pkg" / "train.py").exists()


def test_check_stdin_honours_the_paths_config(proj):
    r = xa(proj, "check", "-", "--stdin-filename", "legacy/old.py")
    assert r.returncode == 0 and r.stdout.decode().strip() == "All checks passed!"
    r = xa(proj, "check", "-", "--stdin-filename", "tests/test_step.py")
    assert "XFA203" not in r.stdout.decode() and "XFA202" in r.stdout.decode()
    # the config is the one above the named path, found from anywhere
    sub = proj / "pkg"
    r = xa(sub, "check", "--stdin-filename", "../legacy/old.py")
    assert r.returncode == 0, r.stdout


def test_check_stdin_json_names_sites_by_the_path_and_carries_fixes(proj):
    r = xa(proj, "check", "-", "--stdin-filename", "pkg/train.py", "--format", "json")
    recs = json.loads(r.stdout)
    item = next(x for x in recs if x["code"] == "XFA202")
    assert item["filename"] == str(proj / "pkg" / "train.py")
    contents = [e["content"] for e in item["fix"]["edits"]]
    assert '_xfer.item(loss, site=":step:loss.item"' in contents


def test_check_stdin_that_does_not_parse_is_xfa001(proj):
    r = xa(proj, "check", "-", "--stdin-filename", "pkg/bad.py", stdin="def f(:\n")
    assert r.returncode == 2 and "pkg/bad.py:1:7: XFA001 " in r.stdout.decode()


def test_wrap_stdin_writes_the_wrapped_source_to_stdout(proj):
    r = xa(proj, "wrap", "-", "--stdin-filename", "pkg/train.py")
    out = r.stdout.decode()
    assert r.returncode == 0, r.stderr
    assert 'x = _xfer.to(batch, device, site=":step:batch.to")' in out
    assert out.startswith("import torch\nimport xferaudit.runtime as _xfer\n")
    assert not (proj / "pkg" / "train.py").exists()
    back = xa(proj, "unwrap", "-", "--stdin-filename", "pkg/train.py", stdin=out)
    assert back.stdout.decode() == STEP


@pytest.mark.parametrize("name,text", [
    ("legacy/old.py", STEP),  # excluded: written back unchanged, never blanked
    ("pkg/plain.py", "print('no site')\n"),  # nothing to wrap
])
def test_wrap_stdin_writes_back_unchanged_what_it_does_not_rewrite(proj, name, text):
    r = xa(proj, "wrap", "-", "--stdin-filename", name, stdin=text)
    assert r.returncode == 0 and r.stdout.decode() == text


def test_wrap_stdin_that_does_not_parse_is_written_back_and_exits_2(proj):
    r = xa(proj, "wrap", "-", "--stdin-filename", "pkg/bad.py", stdin="def f(:\n")
    assert r.returncode == 2 and r.stdout.decode() == "def f(:\n"
    assert "pkg/bad.py: left as it is: cannot parse" in r.stderr.decode()


def test_wrap_stdin_check_and_diff(proj):
    r = xa(proj, "wrap", "--check", "-", "--stdin-filename", "pkg/train.py")
    assert r.returncode == 1 and r.stdout == b""
    r = xa(proj, "wrap", "--diff", "-", "--stdin-filename", "pkg/train.py")
    assert r.returncode == 1 and r.stdout.decode().startswith("--- a/pkg/train.py\n+++ b/pkg/train.py\n")


@pytest.mark.parametrize("args", [
    ("check", "-", "a.py"),
    ("check", "--stdin-filename", "x.py", "a.py"),
    ("wrap", "-", "a.py"),
    ("wrap", "--stdin-filename", "x.py", "a.py"),
    ("check", "-", "--add-noqa"),
])
def test_stdin_usage_errors(proj, args):
    (proj / "a.py").write_text("x = 1\n")
    r = xa(proj, *args)
    assert r.returncode == 2 and r.stderr.decode().startswith("xferaudit: error: ")
    assert r.stderr.decode().count("\n") == 1


def test_check_from_stdin_reads_the_run_evidence_of_that_path(proj):
    """An editor's buffer checked as `pkg/log.py` gets the findings of the run
    file the project names (a parameter the code does not place)."""
    src = "def log(loss):\n    return float(loss)\n"
    entry = {"path": "pkg/log.py", "line": 2, "function": "log", "text": "return float(loss)",
             "op": "aten._local_scalar_dense", "direction": "down", "count": 1, "copies": 1, "bytes": 4}
    (proj / "run.json").write_text(json.dumps(
        {"format": "xferaudit.report", "meta": {"kind": "run", "root": str(proj)}, "rows": [],
         "unwrapped": [entry]}))
    plain = xa(proj, "check", "-", "--stdin-filename", "pkg/log.py", stdin=src)
    assert plain.returncode == 0, plain.stdout + plain.stderr
    r = xa(proj, "check", "-", "--stdin-filename", "pkg/log.py", "--evidence", "run.json", stdin=src)
    assert r.returncode == 1, r.stdout + r.stderr
    out = r.stdout.decode()
    assert "pkg/log.py:2:12: XFA401" in out and "seen crossing at run time" in out
