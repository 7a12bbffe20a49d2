"""Issue 44, item 4: the project passes' cache key sees an edit that keeps a
file's size and modification time (``cp -p``, ``touch -r``, ``rsync -a``,
``tar -x``): each file's inode and change time are in it."""

from __future__ import annotations

import os
import shutil

from xferaudit.cli import main
from xferaudit.config import load_config
from xferaudit.static.project.scripted import project_of

HELPERS_CPU = "import torch\n\n\ndef make():\n    return torch.ones(3, device='cpu' )\n"
HELPERS_GPU = "import torch\n\n\ndef make():\n    return torch.ones(3, device='cuda')\n"
MAIN = "from helpers import make\n\n\ndef step():\n    x = make()\n    if x.sum() > 0:\n        return 1\n"


def _same_size_and_mtime_edit(path, text):
    st = os.stat(path)
    assert len(text.encode()) == st.st_size
    path.write_text(text)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))  # (touch -r: the old time put back)
    assert os.stat(path).st_mtime_ns == st.st_mtime_ns


def test_the_key_changes_on_an_edit_that_keeps_size_and_mtime(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    helper = tmp_path / "helpers.py"
    helper.write_text(HELPERS_CPU)
    cfg = load_config(tmp_path)
    before = project_of([str(helper)], cfg).state
    assert project_of([str(helper)], cfg).state == before  # (nothing changed: the same key)
    _same_size_and_mtime_edit(helper, HELPERS_GPU)
    assert project_of([str(helper)], cfg).state != before


def test_a_file_copied_over_with_its_times_kept_changes_the_key(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    helper = tmp_path / "helpers.py"
    helper.write_text(HELPERS_CPU)
    other = tmp_path.parent / (tmp_path.name + "-src.py")
    other.write_text(HELPERS_GPU)
    os.utime(other, ns=(os.stat(helper).st_atime_ns, os.stat(helper).st_mtime_ns))
    cfg = load_config(tmp_path)
    before = project_of([str(helper)], cfg).state
    shutil.copy2(other, tmp_path / "new.py")
    os.replace(tmp_path / "new.py", helper)  # (cp -p / rsync -a: a new file renamed over, times kept)
    assert project_of([str(helper)], cfg).state != before


def test_check_with_the_cache_reports_what_no_cache_reports(tmp_path, monkeypatch, capsys):
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (tmp_path / "helpers.py").write_text(HELPERS_CPU)
    (tmp_path / "main.py").write_text(MAIN)
    monkeypatch.chdir(tmp_path)
    main(["check", "--select", "XFA4", "main.py"])
    first = capsys.readouterr().out
    _same_size_and_mtime_edit(tmp_path / "helpers.py", HELPERS_GPU)
    main(["check", "--select", "XFA4", "--no-cache", "main.py"])
    fresh = capsys.readouterr().out
    assert fresh != first and "main.py:6" in fresh  # (the helper now places its result)
    main(["check", "--select", "XFA4", "main.py"])
    assert capsys.readouterr().out == fresh


def test_the_editor_server_reads_a_config_edited_with_its_size_and_mtime_kept(tmp_path):
    from xferaudit.server.documents import Projects

    conf = tmp_path / "pyproject.toml"
    conf.write_text('[tool.xferaudit]\nselect = ["XFA2"]\n')
    projects = Projects()
    assert projects.config(str(tmp_path / "a.py"))[0].select == ("XFA2",)
    _same_size_and_mtime_edit(conf, '[tool.xferaudit]\nselect = ["XFA4"]\n')
    assert projects.config(str(tmp_path / "a.py"))[0].select == ("XFA4",)
