"""The `xferaudit-check` pre-commit hook, for real.

A temporary git repository whose `.pre-commit-config.yaml` points at this
checkout (cloned, with the current working tree committed on top, so
uncommitted changes are what is tested) runs `pre-commit run`: pre-commit
builds the hook's virtualenv itself and pip-installs the checkout with its core
dependencies only (libcst; this needs PyPI, once per test session).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.skipif(shutil.which("pre-commit") is None, reason="pre-commit is not installed (pip install pre-commit)"),
    pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed"),
    pytest.mark.skipif(not (REPO / ".git").exists(), reason="not a git checkout"),
]

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.com",
}


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", "-c", "commit.gpgsign=false", "-c", "init.defaultBranch=main", *args],
        cwd=cwd, capture_output=True, text=True, env={**os.environ, **GIT_ENV},
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory) -> tuple[Path, str]:
    """A clone of this checkout holding the working tree as its HEAD commit."""
    dst = tmp_path_factory.mktemp("hookrepo") / "xferaudit"
    git(REPO.parent, "clone", "-q", "--no-checkout", str(REPO), str(dst))
    git(dst, "checkout", "-q", "HEAD")
    files = git(REPO, "ls-files", "-co", "--exclude-standard", "-z").split("\0")
    for rel in filter(None, files):
        src = REPO / rel
        if src.is_file():
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)
        elif not src.exists() and (dst / rel).exists():
            (dst / rel).unlink()
    git(dst, "add", "-A")
    git(dst, "commit", "-q", "--allow-empty", "-m", "working tree under test")
    return dst, git(dst, "rev-parse", "HEAD")


@pytest.fixture(scope="module")
def project(tmp_path_factory, hook_repo) -> tuple[Path, dict]:
    repo, rev = hook_repo
    proj = tmp_path_factory.mktemp("proj")
    git(proj, "init", "-q")
    (proj / ".pre-commit-config.yaml").write_text(
        f"repos:\n- repo: {repo}\n  rev: {rev}\n  hooks:\n  - id: xferaudit-check\n"
    )
    git(proj, "add", ".pre-commit-config.yaml")
    env = {**os.environ, **GIT_ENV, "PRE_COMMIT_HOME": str(tmp_path_factory.mktemp("pre-commit-home"))}
    env.pop("PYTHONPATH", None)
    return proj, env


def pre_commit(proj: Path, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(["pre-commit", "run"], cwd=proj, capture_output=True, text=True, env=env, timeout=900)


def test_hook_is_declared_with_core_dependencies_only():
    text = (REPO / ".pre-commit-hooks.yaml").read_text()
    block = text.split("- id: xferaudit-check", 1)[1].split("\n- id:", 1)[0]
    assert "entry: xferaudit check" in block and "language: python" in block and "types: [python]" in block
    assert "additional_dependencies" not in block


def test_unwrapped_fails_wrapped_passes_nothing_staged_passes(project):
    proj, env = project
    (proj / "train.py").write_text(
        "import torch\n\n\ndef step(model, x):\n    y = model(x)\n    return y.cpu()\n"
    )
    git(proj, "add", "train.py")
    r = pre_commit(proj, env)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "xferaudit check" in out and "Failed" in out
    assert "train.py:6:14: XFA202 `y.cpu()`" in out

    (proj / "train.py").write_text(
        "import torch\nimport xferaudit.runtime as xfer\n\n\ndef step(model, x):\n"
        "    y = model(x)\n    return xfer.cpu(y, site=\"train.py:step:y.cpu\")\n"
    )
    git(proj, "add", "train.py")
    r = pre_commit(proj, env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Passed" in r.stdout

    git(proj, "commit", "-q", "-m", "wrapped", "--no-verify")
    (proj / "NOTES.md").write_text("x.cpu() is described here, not called\n")
    git(proj, "add", "NOTES.md")
    r = pre_commit(proj, env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "(no files to check)Skipped" in r.stdout


def test_a_committed_run_file_rejects_a_commit_that_leaves_its_line_unwrapped(project, tmp_path, monkeypatch):
    """`evidence = [...]` in the config: the hook (libcst only, no torch) reads the
    run file and rejects the line the run saw crossing until it is wrapped."""
    import json

    from xferaudit.cli import main

    first, env = project
    proj = tmp_path / "evproj"
    proj.mkdir()
    git(proj, "init", "-q")
    shutil.copy(first / ".pre-commit-config.yaml", proj / ".pre-commit-config.yaml")
    (proj / "pyproject.toml").write_text("[tool.xferaudit]\nevidence = [\"xferaudit-run.json\"]\n")
    (proj / "train.py").write_text("def log(loss):\n    return float(loss)\n")
    entry = {"path": "train.py", "line": 2, "function": "log", "text": "return float(loss)",
             "op": "aten._local_scalar_dense", "direction": "down", "count": 1, "copies": 1, "bytes": 4}
    (proj / "xferaudit-run.json").write_text(json.dumps(
        {"format": "xferaudit.report", "meta": {"kind": "run", "root": str(proj)}, "rows": [],
         "unwrapped": [entry]}))
    git(proj, "add", ".")
    r = pre_commit(proj, env)
    out = r.stdout + r.stderr
    assert r.returncode == 1, out
    assert "train.py:2:12: XFA401 `float(loss)`" in out
    assert "seen crossing at run time" in out and "xferaudit-run.json" in out

    monkeypatch.chdir(proj)
    assert main(["wrap", "-q", "--from", "xferaudit-run.json"]) == 0
    assert "xfer.float(loss, site=" in (proj / "train.py").read_text()
    git(proj, "add", "train.py")
    r = pre_commit(proj, env)
    assert r.returncode == 0, r.stdout + r.stderr

def test_files_named_like_options_cannot_pass_the_hook_or_overwrite_a_file(project):
    """A committed `--exit-zero` (an executable python script) would make the check
    pass; `--write-baseline=bad.py` would overwrite bad.py: the hook refuses both."""
    proj, env = project
    git(proj, "reset", "-q")
    script = proj / "--exit-zero"
    script.write_text("#!/usr/bin/env python\nimport torch\n\n\ndef f(x):\n    return x.cpu()\n")
    script.chmod(0o755)
    bad = "def g(y):\n    return y.item()\n"
    (proj / "bad.py").write_text(bad)
    git(proj, "add", "--", "--exit-zero", "bad.py")
    r = pre_commit(proj, env)
    out = r.stdout + r.stderr
    assert r.returncode == 1 and "exit code: 2" in out and "names a file here" in out, out

    (proj / "--write-baseline=bad.py").write_text("import torch\n")
    git(proj, "add", "--", "--write-baseline=bad.py")
    r = pre_commit(proj, env)
    out = r.stdout + r.stderr
    assert r.returncode != 0 and "names a file here" in out, out
    assert (proj / "bad.py").read_text() == bad
    git(proj, "rm", "-q", "--cached", "--", "--exit-zero", "bad.py", "--write-baseline=bad.py")
