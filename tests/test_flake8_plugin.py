"""`flake8 --select XFA`: real flake8, the plugin found through its entry point,
reports what `xferaudit check` reports, with the same codes."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("flake8")

ROOT = Path(__file__).resolve().parents[1]
FINDING = re.compile(r"^(?P<path>[^:]+):(?P<row>\d+):(?P<col>\d+): (?P<code>XFA\d{3}) (?P<msg>.*)$")

FILES = {
    "train.py": """\
        import torch

        def step(model, batch, device):
            x = batch.to(device)
            loss = model(x)
            a = loss.cpu(); b = x.cpu()  # noqa: XFA202
            s = "héllo"; c = loss.item()
            if loss > 1:
                print(float(loss))
            return loss.item()  # xferaudit: ignore
        """,
    "tests/test_step.py": """\
        import torch
        y = torch.ones(2).cuda()
        z = y.cpu()
        """,
    "legacy/old.py": """\
        import torch
        w = torch.ones(2).cuda()
        """,
    "broken.py": "def f(:\n",
}


@pytest.fixture
def proj(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        "[tool.xferaudit]\n"
        'extend-exclude = ["legacy"]\n'
        'per-file-ignores = { "tests/*" = ["XFA201"] }\n'
    )
    for rel, text in FILES.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text), encoding="utf-8")
    return tmp_path


def findings(text: str) -> set[tuple]:
    out = set()
    for line in text.splitlines():
        m = FINDING.match(line)
        if m:
            out.add((m["path"].removeprefix("./"), int(m["row"]), int(m["col"]), m["code"], m["msg"]))
    return out


def run(cwd: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=cwd, capture_output=True, text=True, timeout=300,
                          input=stdin, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_flake8_reports_what_check_reports(proj):
    files = ["train.py", "tests/test_step.py", "legacy/old.py", "broken.py"]
    f8 = run(proj, "flake8", "--select", "XFA,E999", *files)
    xa = run(proj, "xferaudit", "check", "--no-cache", *files)
    got, want = findings(f8.stdout), findings(xa.stdout)
    assert f8.returncode == 1, f8.stderr
    # a file that does not parse is flake8's own E999 (it runs no plugin on it), check's XFA001
    assert {g[:2] for g in want if g[3] == "XFA001"} == {("broken.py", 1)}
    assert "broken.py:1:8: E999 SyntaxError" in f8.stdout
    assert got == {g for g in want if g[3] != "XFA001"} and len(got) >= 5
    codes = {c for _, _, _, c, _ in got}
    assert {"XFA202", "XFA203", "XFA401", "XFA402"} <= codes
    # the config applied: per-file-ignores, excludes; suppressions both ways
    assert ("tests/test_step.py", 2) not in {(p, r) for p, r, *_ in got}
    assert not any(p.startswith("legacy/") for p, *_ in got)
    assert not any(p == "train.py" and r in (6, 10) for p, r, *_ in got)
    # a column after non-ASCII text is counted in characters by both
    assert ("train.py", 7, 27, "XFA202") in {g[:4] for g in got}  # (28 in bytes)


def test_flake8_select_xfa_alone_and_noqa_by_flake8(proj):
    (proj / "n.py").write_text("import torch\nx = torch.ones(1).cuda()\ny = x.cpu()  # noqa\nz = x.cpu()\n")
    f8 = run(proj, "flake8", "--select", "XFA", "n.py")
    assert [g[:4] for g in sorted(findings(f8.stdout))] == [("n.py", 2, 19, "XFA201"), ("n.py", 4, 7, "XFA202")]
    other = run(proj, "flake8", "--select", "E", "train.py")
    assert "XFA" not in other.stdout


def test_flake8_on_stdin(proj):
    f8 = run(proj, "flake8", "--select", "XFA", "--stdin-display-name", "train.py", "-",
             stdin=textwrap.dedent(FILES["train.py"]))
    xa = run(proj, "xferaudit", "check", "--no-cache", "train.py")
    assert findings(f8.stdout) == findings(xa.stdout)


def test_the_plugin_imports_no_libcst_or_torch(proj):
    code = (
        "import sys; from xferaudit.flake8_plugin import XferauditChecker as C\n"
        "lines = open('train.py').readlines()\n"
        "print(len(list(C(None, 'train.py', lines).run())), [m for m in ('libcst', 'torch') if m in sys.modules])"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=proj, capture_output=True, text=True,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert r.stdout.split() == ["4", "[]"], r.stderr


EVIDENCE_SRC = "def log(loss):\n    if loss > 10:\n        print(loss)\n    return float(loss)\n"


def write_evidence_project(root: Path) -> None:
    """A project whose config names a run file that saw lines the code alone shows no device on."""
    import json

    (root / "pyproject.toml").write_text('[tool.xferaudit]\nevidence = ["run.json"]\n')
    (root / "log.py").write_text(EVIDENCE_SRC)
    seen = [(2, "if loss > 10:", "aten._local_scalar_dense"), (4, "return float(loss)", "aten._local_scalar_dense")]
    entries = [{"path": "log.py", "line": n, "function": "log", "text": t, "op": op, "direction": "down",
                "count": 1, "copies": 1, "bytes": 4} for n, t, op in seen]
    (root / "run.json").write_text(json.dumps({"format": "xferaudit.report", "version": 1, "rows": [],
                                               "launches": [], "meta": {"kind": "run", "root": str(root)},
                                               "unwrapped": entries}))


def test_flake8_reads_the_configs_run_evidence_as_check_does(tmp_path):
    write_evidence_project(tmp_path)
    f8 = run(tmp_path, "flake8", "--select", "XFA", "log.py")
    xa = run(tmp_path, "xferaudit", "check", "--no-cache", "log.py")
    got = findings(f8.stdout)
    assert got == findings(xa.stdout) and {(g[1], g[3]) for g in got} == {(2, "XFA402"), (4, "XFA401")}
