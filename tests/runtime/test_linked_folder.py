"""Issue 44, item 6: a run through a linked folder (a symbolic link to the
project, or a project that holds the program through one) writes every path
relative to the run's root, the real one, so ``wrap --from`` takes the run's
lines and budget names match."""

from __future__ import annotations

import json
import os
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("libcst")

import xferaudit.runtime as xfer  # noqa: E402
from xferaudit.cli import main  # noqa: E402
from xferaudit.runtime.counted import frames  # noqa: E402

TRAIN = ("import torch\n\nimport mod\nfrom xferaudit.testing import simulated_device\n\n"
         "x = torch.ones(4).to(simulated_device())\n"
         "a = float(x.sum())\n"
         "b = mod.read(x)\n")
MOD = "def read(t):\n    return float(t.max())\n"


@pytest.fixture
def linked(tmp_path, monkeypatch):
    if not hasattr(os, "symlink"):
        pytest.skip("no symbolic links here")
    real = tmp_path / "real"
    real.mkdir()
    (real / "pyproject.toml").write_text("[project]\nname = 'p'\n")
    (real / "train.py").write_text(TRAIN)
    (real / "mod.py").write_text(MOD)
    link = tmp_path / "link"
    link.symlink_to(real, target_is_directory=True)
    frames.set_frames()
    yield real, link
    sys.modules.pop("mod", None)
    xfer.reset()


@pytest.mark.parametrize("cwd", ["real", "link"])
def test_a_run_through_a_link_names_every_line_relative_to_the_real_root(linked, monkeypatch, capsys, cwd):
    real, link = linked
    monkeypatch.chdir(real if cwd == "real" else link)
    monkeypatch.setattr(sys, "path", list(sys.path))
    assert main(["run", "-q", "-o", str(real / "run.json"), str(link / "train.py")]) == 0
    data = json.loads((real / "run.json").read_text())
    assert data["meta"]["root"] == os.path.realpath(real)
    paths = sorted({u["path"] for u in data["unwrapped"]})
    assert paths == ["mod.py", "train.py"], paths
    frame_paths = {f["path"] for u in data["unwrapped"] for f in u.get("frames", [])}
    assert frame_paths <= {"mod.py", "train.py"}, frame_paths
    capsys.readouterr()
    monkeypatch.chdir(real)
    assert main(["wrap", "-q", "--from", "run.json"]) == 0, capsys.readouterr().err
    assert "_xfer.float(x.sum(), site=" in (real / "train.py").read_text()
    assert "_xfer.float(t.max(), site=" in (real / "mod.py").read_text()
