"""Every command names a file the same way: relative to the working directory
(ruff's habit), whether or not a ``.git`` or ``pyproject.toml`` marks the
project root; site names stay relative to the root (they are keys). The diff
of ``wrap --diff`` applies with ``git apply`` from where it was made."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from xferaudit.cli import main

A = "import torch\n\n\ndef f(x):\n    return x.cpu()\n"
# A site wrap leaves as it is (a method named cuda calling super().cuda()).
LEFT = "import torch\n\n\nclass M(torch.nn.Module):\n    def cuda(self):\n        return super().cuda()\n"


def _tree(root, marker):
    (root / "pkg" / "sub").mkdir(parents=True)
    (root / "pkg" / "a.py").write_text(A)
    (root / "pkg" / "sub" / "b.py").write_text(A)
    (root / "pkg" / "sub" / "m.py").write_text(LEFT)
    if marker == "pyproject":
        (root / "pyproject.toml").write_text("[tool.xferaudit]\n")
    elif marker == "git":
        _git(root, "init", "-q", ".")
        _git(root, "add", ".")
        _git(root, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "start")
    return root


def _git(cwd, *args, stdin=None):
    return subprocess.run(["git", *args], cwd=cwd, input=stdin, capture_output=True, text=True, check=True)


def _run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _named(text):
    """The file names a command's lines start with (`name:line:col: ...`)."""
    return sorted({line.split(":", 1)[0] for line in text.splitlines() if ".py:" in line})


@pytest.mark.parametrize("marker", ["none", "pyproject", "git"])
def test_check_sites_wrap_and_its_left_lines_name_files_alike(tmp_path, monkeypatch, capsys, marker):
    _tree(tmp_path, marker)
    for cwd, arg, want in ((tmp_path, "pkg", ["pkg/a.py", "pkg/sub/b.py", "pkg/sub/m.py"]),
                           (tmp_path / "pkg", "sub", ["sub/b.py", "sub/m.py"]),
                           (tmp_path / "pkg" / "sub", ".", ["b.py", "m.py"])):
        monkeypatch.chdir(cwd)
        _, out, _ = _run(capsys, "check", arg)
        assert _named(out) == want, (cwd, out)
        _, out, _ = _run(capsys, "sites", arg)
        assert _named(out) == want, (cwd, out)
        _, out, err = _run(capsys, "wrap", "--diff", arg)
        assert _named(err) == [w for w in want if w.endswith("m.py")], err  # "left as it is"
        # The diff names files as git does: from the top of the git work tree, if any.
        top = "" if marker != "git" else str(cwd.relative_to(tmp_path)).replace(".", "", 1) + "/"
        diffed = sorted(x[len("--- a/"):] for x in out.splitlines() if x.startswith("--- a/"))
        assert diffed == [(top + w).lstrip("/") for w in want if not w.endswith("m.py")], out
        _, _, err = _run(capsys, "wrap", "--check", arg)
        assert "would wrap " + want[0] in err


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git")
@pytest.mark.parametrize("marker", ["none", "pyproject", "git"])
@pytest.mark.parametrize("where", [".", "pkg", "pkg/sub"])
def test_git_apply_takes_the_diff_of_wrap_from_where_it_was_made(tmp_path, monkeypatch, capsys, marker, where):
    _tree(tmp_path, marker)
    expect = tmp_path.parent / (tmp_path.name + "_wrapped")
    shutil.copytree(tmp_path, expect)
    monkeypatch.chdir(expect / where)
    assert _run(capsys, "wrap", ".")[0] == 1  # (one site left as it is)

    cwd = tmp_path / where
    monkeypatch.chdir(cwd)
    code, patch, _ = _run(capsys, "wrap", "--diff", ".")
    assert code == 1 and patch.startswith("--- a/")
    _git(cwd, "apply", "-v", stdin=patch)
    for f in ("pkg/a.py", "pkg/sub/b.py", "pkg/sub/m.py"):
        if (expect / f).is_relative_to(expect / where):
            assert (tmp_path / f).read_text() == (expect / f).read_text(), f
            assert "_xfer.cpu(x, site=" in (tmp_path / f).read_text() or f.endswith("m.py")


def test_site_names_stay_relative_to_the_root_whatever_the_working_directory(tmp_path, monkeypatch, capsys):
    _tree(tmp_path, "pyproject")
    monkeypatch.chdir(tmp_path / "pkg" / "sub")
    _run(capsys, "wrap", ".")
    assert "_xfer.cpu(x, site=" in (tmp_path / "pkg" / "sub" / "b.py").read_text()
    _, out, _ = _run(capsys, "sites", ".")  # the file as the working directory sees it, the name as the root does
    assert out.startswith("b.py:6:") and "[pkg/sub/b.py:f:x.cpu]" in out
    monkeypatch.chdir(tmp_path)
    _, out, _ = _run(capsys, "sites", "pkg")
    assert "\npkg/sub/b.py:6:18: down  XFA202 wrapped" in out and "[pkg/sub/b.py:f:x.cpu]" in out
