"""`xferaudit wrap` / `xferaudit unwrap` on files: writes, diffs, errors, exit codes."""

from __future__ import annotations

import io
import os
import stat
import sys
from pathlib import Path

import pytest

from xferaudit.cli import main
from xferaudit.config import load_config
from xferaudit.static.codemod import files as codemod_files
from xferaudit.static.codemod.files import (
    Progress,
    Summary,
    atomic_write,
    format_summary,
    run_codemod,
)
from xferaudit.static.front.finder import decode_source, find_in_source

TRAIN = b'''"""Training loop."""
import torch


def train_step(model, x, dev):
    loss = model(x.to(dev, non_blocking=True)).mean()
    return loss.item()
'''
WRAPPED_LINE = b'    return _xfer.item(loss, site=":train_step:loss.item")\n'


@pytest.fixture
def project(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n", encoding="utf-8")
    (tmp_path / "train.py").write_bytes(TRAIN)
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "util.py").write_bytes(b"def f(x):\n    return x.cpu()\n")
    (tmp_path / "pkg" / "clean.py").write_bytes(b"def g(x):\n    return x + 1\n")
    return tmp_path


def run(*argv, capsys=None):
    code = main(list(argv))
    out, err = capsys.readouterr() if capsys else ("", "")
    return code, out, err


def test_wrap_writes_and_summarises(project, capsys):
    code, out, err = run("wrap", str(project), capsys=capsys)
    assert code == 0
    new = (project / "train.py").read_bytes()
    assert WRAPPED_LINE in new
    assert b"import xferaudit.runtime as _xfer\n" in new
    assert b'_xfer.cpu(x, site=":f:x.cpu")' in (project / "pkg" / "util.py").read_bytes()
    assert "3 files checked; 2 files changed; 3 sites wrapped (down 2, move 1)" in err
    # after wrap the finder sees nothing unwrapped
    for f in ("train.py", "pkg/util.py"):
        res = find_in_source(decode_source((project / f).read_bytes()), f, None, f)
        assert [s for s in res.sites if not s.wrapped] == []
    # and unwrap restores every byte
    code, out, err = run("unwrap", str(project), capsys=capsys)
    assert code == 0
    assert (project / "train.py").read_bytes() == TRAIN
    assert (project / "pkg" / "util.py").read_bytes() == b"def f(x):\n    return x.cpu()\n"
    assert "2 files changed; 3 calls unwrapped" in err


def test_diff_writes_nothing(project, capsys, monkeypatch):
    monkeypatch.chdir(project)  # (the diff names files from the working directory)
    code, out, err = run("wrap", "--diff", str(project / "train.py"), capsys=capsys)
    assert code == 1
    assert (project / "train.py").read_bytes() == TRAIN
    assert out.startswith("--- a/train.py\n+++ b/train.py\n")
    assert "-    return loss.item()\n" in out
    assert "+" + WRAPPED_LINE.decode() in out
    assert "would change" in err


def test_check_for_pre_commit(project, capsys, monkeypatch):
    monkeypatch.chdir(project)
    code, _, err = run("wrap", "--check", ".", capsys=capsys)
    assert code == 1 and "would wrap train.py" in err
    assert (project / "train.py").read_bytes() == TRAIN
    assert run("wrap", str(project), capsys=capsys)[0] == 0
    assert run("wrap", "--check", str(project), capsys=capsys)[0] == 0
    assert run("unwrap", "--check", str(project), capsys=capsys)[0] == 1
    assert run("unwrap", str(project), capsys=capsys)[0] == 0
    assert run("unwrap", "--check", str(project), capsys=capsys)[0] == 0


def test_quiet(project, capsys):
    code, out, err = run("wrap", "-q", str(project), capsys=capsys)
    assert code == 0 and out == "" and err == ""


def test_select(project, capsys):
    code, _, err = run("wrap", "--select", "XFA203", str(project), capsys=capsys)
    assert code == 0
    new = (project / "train.py").read_bytes()
    assert b"_xfer.to(" in new and b"non_blocking=True" in new and b"loss.item()" in new
    assert "1 site wrapped (move 1)" in err
    assert run("wrap", "--select", "bogus", str(project), capsys=capsys)[0] == 2


def test_config_ignore_is_honoured(project, capsys):
    (project / "pyproject.toml").write_text('[tool.xferaudit]\nignore = ["XFA202"]\n', encoding="utf-8")
    run("wrap", str(project), capsys=capsys)
    assert b"loss.item()" in (project / "train.py").read_bytes()
    assert b"_xfer.to(" in (project / "train.py").read_bytes()


def test_unparsable_file_reported_untouched_others_processed(project, capsys):
    bad = project / "bad.py"
    bad.write_bytes(b"def f(:\n    return x.cpu()\n")
    code, _, err = run("wrap", str(project), capsys=capsys)
    assert code == 2
    assert bad.read_bytes() == b"def f(:\n    return x.cpu()\n"
    assert WRAPPED_LINE in (project / "train.py").read_bytes()
    assert "bad.py: skipped: cannot parse: SyntaxError" in err
    assert "1 file skipped (1 cannot parse)" in err


def test_read_only_file_reported(project, capsys):
    target = project / "train.py"
    os.chmod(target, 0o444)
    try:
        code, _, err = run("wrap", str(project), capsys=capsys)
    finally:
        os.chmod(target, 0o644)
    assert code == 2
    assert target.read_bytes() == TRAIN
    assert "train.py: skipped: read-only: not rewritten (2 calls would change)" in err
    assert b"xfer.cpu" in (project / "pkg" / "util.py").read_bytes()


def test_unreadable_file_reported(project, capsys, monkeypatch):
    real = codemod_files._read_bytes

    def fake(path):
        if path.endswith("util.py"):
            raise PermissionError(13, "Permission denied", path)
        return real(path)

    monkeypatch.setattr(codemod_files, "_read_bytes", fake)
    code, _, err = run("wrap", "-j", "1", str(project), capsys=capsys)
    assert code == 2
    assert "pkg/util.py: skipped: unreadable: Permission denied" in err
    assert WRAPPED_LINE in (project / "train.py").read_bytes()


def test_dangling_symlink_reported(project, capsys):
    (project / "gone.py").symlink_to(project / "nowhere.py")
    code, _, err = run("wrap", str(project), capsys=capsys)
    assert code == 2 and "gone.py: skipped: unreadable" in err


def test_missing_path_is_a_usage_error(project, capsys):
    code, _, err = run("wrap", str(project / "nope.py"), capsys=capsys)
    assert code == 2 and "no such file" in err


def test_unsafe_sites_left_and_exit_1(project, capsys):
    (project / "mod.py").write_bytes(
        b"import torch\n\n\nclass M(torch.nn.Module):\n    def cuda(self):\n        return super().cuda()\n"
    )
    code, _, err = run("wrap", str(project / "mod.py"), capsys=capsys)
    assert code == 1
    assert "mod.py:6:24: XFA201 left as it is: `super().cuda()` inside a method itself called `cuda`" in err
    assert "1 site left as it is (not safely wrappable)" in err


def test_write_keeps_mode_and_follows_symlinks(project, capsys):
    target = project / "train.py"
    os.chmod(target, 0o751)
    link = project / "link.py"
    link.symlink_to(target)
    code, _, _ = run("wrap", str(link), capsys=capsys)
    assert code == 0
    assert link.is_symlink()
    assert stat.S_IMODE(os.stat(target).st_mode) == 0o751
    assert WRAPPED_LINE in target.read_bytes()  # named by the real file, not the link
    assert [p.name for p in project.iterdir() if "xferaudit-tmp" in p.name] == []


def test_interrupted_write_leaves_old_file_and_no_temp(project, monkeypatch):
    target = project / "train.py"

    def fail(src, dst):
        raise KeyboardInterrupt

    monkeypatch.setattr(codemod_files.os, "replace", fail)
    with pytest.raises(KeyboardInterrupt):
        atomic_write(str(target), b"new")
    assert target.read_bytes() == TRAIN
    assert [p.name for p in project.iterdir() if "xferaudit-tmp" in p.name] == []


def test_file_changed_during_run_is_not_clobbered(project, capsys, monkeypatch):
    real = codemod_files.process_file

    def edit_after_read(path):
        out = real(path)
        if path.endswith("train.py"):
            Path(path).write_bytes(TRAIN + b"# edited meanwhile\n")
        return out

    monkeypatch.setattr(codemod_files, "process_file", edit_after_read)
    code, _, err = run("wrap", "-j", "1", str(project), capsys=capsys)
    assert code == 2 and "changed on disk during the run" in err
    assert (project / "train.py").read_bytes().endswith(b"# edited meanwhile\n")


def test_pool_and_serial_agree(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.xferaudit]\n", encoding="utf-8")
    srcs = {}
    for i in range(codemod_files.PARALLEL_MIN_FILES + 4):
        body = f"import torch\n\n\ndef f{i}(x):\n    return x.cpu(), x.to('cuda:{i % 2}')\n".encode()
        if i % 5 == 0:
            body = b"def clean():\n    return 1\n"
        srcs[f"m{i:02d}.py"] = body
    cfg = load_config(start=tmp_path)
    results = {}
    for jobs in (1, 2):
        d = tmp_path / f"j{jobs}"
        d.mkdir()
        for name, body in srcs.items():
            (d / name).write_bytes(body)
        files = sorted(str(p) for p in d.glob("*.py"))
        err = io.StringIO()
        code = run_codemod(files, "wrap", cfg, jobs=jobs, err=err)
        assert code == 0
        results[jobs] = {Path(f).name: Path(f).read_bytes().replace(f"j{jobs}/".encode(), b"") for f in files}
        assert "20 files checked; 16 files changed; 32 sites wrapped (up 16, down 16)" in err.getvalue()
    assert results[1] == results[2]


def test_progress_bar_only_on_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    tty = Tty()
    p = Progress(3, tty, enabled=True)
    for _ in range(3):
        p.step()
    p.close()
    assert "[" in tty.getvalue() and "3/3 files" in tty.getvalue()
    plain = io.StringIO()
    p = Progress(3, plain, enabled=True)
    p.step()
    p.close()
    assert plain.getvalue() == ""


def test_summary_line():
    s = Summary(mode="wrap", files=10, changed=2)
    s.kinds.update({"up": 1, "graph": 2})
    s.skipped.update({"cannot parse": 1, "read-only": 2})
    line = format_summary(s, dry=False)
    assert line == (
        "xferaudit wrap: 10 files checked; 2 files changed; 3 sites wrapped (up 1, graph 2); "
        "3 files skipped (1 cannot parse, 2 read-only)"
    )


def test_help_lists_options(capsys):
    with pytest.raises(SystemExit):
        main(["wrap", "--help"])
    out = capsys.readouterr().out
    for opt in ("--diff", "--check", "--select", "--config", "--quiet"):
        assert opt in out
    with pytest.raises(SystemExit):
        main(["unwrap", "--help"])
    out = capsys.readouterr().out
    for opt in ("--diff", "--check"):
        assert opt in out


def test_explicit_config_file(project, capsys, tmp_path_factory):
    other = tmp_path_factory.mktemp("cfg") / "pyproject.toml"
    other.write_text('[tool.xferaudit]\nselect = ["XFA203"]\n', encoding="utf-8")
    code, _, _ = run("wrap", "--config", str(other), str(project / "train.py"), capsys=capsys)
    assert code == 0
    new = (project / "train.py").read_bytes()
    assert b"_xfer.to(" in new and b"loss.item()" in new
    assert run("wrap", "--config", str(project / "missing.toml"), str(project), capsys=capsys)[0] == 2


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX modes")
def test_is_read_only(tmp_path):
    f = tmp_path / "a.py"
    f.write_text("x = 1\n")
    os.chmod(f, 0o644)
    assert not codemod_files.is_read_only(str(f))
    os.chmod(f, 0o444)
    assert codemod_files.is_read_only(str(f))
    os.chmod(f, 0o644)
