"""The warm ``check`` and a small one stay short (issue 43: warm <= 0.3 s on
torch's tree, 10 files <= 0.5 s) without changing what they answer.

- The walk of the paths checked hands its stats and its folders to the
  walk of the project's root (``iter_python_paths(stats=, walked=, skip=)``):
  the project is the same files, in the same order, under the same state.
- A warm run imports neither the finder nor the value layer, and the value
  layer is still plugged into the finder whatever imports it first.
- A warm run reads the placing helpers' map only when asked (the fixes), and
  then the same map a cold run makes, even where the saved one is gone.
- The cache's quick reading of an entry with nothing in it takes no
  malformed entry; an edit between two runs is analysed again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from xferaudit.cli import main
from xferaudit.config import iter_python_paths, load_config
from xferaudit.static.project import cache as cache_mod
from xferaudit.static.project import compiled, placed, scripted
from xferaudit.static.project.scan import scan
from xferaudit.static.project.scripted import project_of
from xferaudit.static.site import FileResult

REPO = Path(__file__).resolve().parents[2]

FILES = {
    "pyproject.toml": "[tool.xferaudit]\nexclude = [\"build\", \"pkg/skipped\"]\n",
    "pkg/__init__.py": "",
    "pkg/utils.py": """
        import torch

        def to_gpu(batch):
            return batch.cuda(non_blocking=True)
    """,
    "pkg/train.py": """
        from .utils import to_gpu

        def train(loader, model):
            for batch in loader:
                out = model(to_gpu(batch))
                while out.max() > 1:
                    out = out / 2
                yield int(out.argmax())
    """,
    "pkg/sub/deep.py": "def f(t):\n    return t.cpu()\n",
    "pkg/skipped/no.py": "def f(t):\n    return t.cpu()\n",
    "build/gen.py": "def f(t):\n    return t.cpu()\n",
    "tests/test_a.py": "def test_a(t):\n    assert t.item() == 1\n",
    "top.py": "import torch\n\ny = torch.ones(2).cuda()\n",
}


def _write(root: Path, files: dict) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")


def _forget() -> None:
    for mod in (scripted, compiled, placed):
        mod._MEMO.clear()


@pytest.fixture
def project(tmp_path, monkeypatch):
    root = tmp_path / "proj"
    _write(root, FILES)
    # hard links: one name inside a folder checked and one outside it, before and after it in the walk
    (root / "aaa").mkdir()
    (root / "zzz").mkdir()
    os.link(root / "pkg/sub/deep.py", root / "aaa/deep_link.py")
    os.link(root / "pkg/utils.py", root / "zzz/utils_link.py")
    monkeypatch.chdir(root)
    _forget()
    yield root
    _forget()


PATHS = ([""], ["pkg"], ["pkg/sub"], ["pkg", "tests"], ["pkg/sub", "pkg"], ["pkg/train.py"],
         ["pkg/skipped"], ["top.py", "pkg/sub"], ["build"], ["zzz", "aaa"], ["pkg/sub", "aaa"],
         ["aaa", "pkg/sub"], ["pkg", "pkg"], [".", "pkg"], ["pkg/", "./tests"])


@pytest.mark.parametrize("named", PATHS, ids=lambda p: "+".join(p) or "root")
def test_the_project_is_the_same_with_the_walks_shared(project, named):
    cfg = load_config(project)
    tops = [os.path.join(str(project), p) for p in named]
    alone = project_of(list(iter_python_paths(tops, cfg)), cfg)
    stats: dict = {}
    walked: dict = {}
    files = list(iter_python_paths(tops, cfg, stats, walked))
    shared = project_of(files, cfg, stats, walked)
    assert shared.files == alone.files and shared.state == alone.state and shared.sizes == alone.sizes
    # every stat the walk kept is the file's own
    for p in files:
        st = os.stat(p)
        assert (stats[p].st_ino, stats[p].st_size, stats[p].st_mtime_ns) == (st.st_ino, st.st_size, st.st_mtime_ns)


def test_a_folder_walked_is_not_walked_again(project, monkeypatch):
    cfg = load_config(project)
    stats: dict = {}
    walked: dict = {}
    files = list(iter_python_paths([str(project / "pkg")], cfg, stats, walked))
    opened = []
    real = os.scandir
    monkeypatch.setattr(os, "scandir", lambda d: opened.append(os.fspath(d)) or real(d))
    project_of(files, cfg, stats, walked)
    assert str(project) in opened and not any(d.startswith(str(project / "pkg")) for d in opened)


def _run_python(code: str, cwd: Path) -> str:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PYTHONPATH"] = str(REPO)
    p = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, env=env, timeout=120,
                       check=False)
    assert p.returncode == 0, p.stderr
    return p.stdout


_CHECK_AND_SAY = """
import sys
from xferaudit.cli import main
main(["check", ".", "--exit-zero"])
print("LOADED", sorted(m for m in ("xferaudit.static.front.finder", "xferaudit.static.values.sites",
                                   "xferaudit.static.values.project", "libcst") if m in sys.modules))
"""


def test_a_warm_check_imports_neither_the_finder_nor_the_value_layer(project):
    cold = _run_python(_CHECK_AND_SAY, project)
    warm = _run_python(_CHECK_AND_SAY, project)
    assert "xferaudit.static.front.finder" in cold  # (the cold run analysed the files)
    assert warm.splitlines()[-1] == "LOADED []"
    assert warm.splitlines()[:-1] == cold.splitlines()[:-1] and "XFA4" in warm


@pytest.mark.parametrize("first", ["xferaudit.static.values.sites", "xferaudit.static.front.finder",
                                   "xferaudit.static.project.scan", "xferaudit.static.values.findings"])
def test_the_value_layer_is_plugged_in_whatever_is_imported_first(tmp_path, first):
    out = _run_python(textwrap.dedent(f"""
        import importlib
        importlib.import_module({first!r})
        from xferaudit.static.front import finder
        from xferaudit.static.values import sites
        from xferaudit.rules import table
        assert finder.ANALYSES == [sites.analyse], finder.ANALYSES
        res = finder.find_in_source("import torch\\nx = torch.ones(2).cuda()\\nif x.sum() > 0:\\n    pass\\n",
                                    "t.py", table(("torch",)))
        print(sorted(s.rule for s in res.sites))
    """), tmp_path)
    assert "XFA4" in out  # (the implicit read of `if x.sum() > 0`: the value layer ran)


def test_a_warm_run_reads_the_placing_helpers_when_asked(project, tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    cold = scan([str(project)], load_config(project), jobs=1, use_cache=True, cache_dir=cache)
    assert "pkg.utils.to_gpu" in cold.placed["helpers"]
    for f in cache.glob("placed-*.json"):
        f.unlink()  # (gone: made again when asked for, not taken as empty)
    _forget()
    warm = scan([str(project)], load_config(project), jobs=1, use_cache=True, cache_dir=cache)
    assert warm.stats.cached == len(warm.results) == len(cold.results)
    assert [r.sites for r in warm.results] == [r.sites for r in cold.results]
    assert not placed._MEMO  # (not read yet)
    assert dict(warm.placed) == cold.placed and warm.placed.get("helpers") == cold.placed["helpers"]
    assert list(cache.glob("placed-*.json"))  # (and saved again)


def test_json_output_of_a_warm_run_is_the_cold_one(project, capsys):
    assert main(["check", ".", "--format", "json", "--exit-zero"]) == 0
    cold = capsys.readouterr().out
    _forget()
    assert main(["check", ".", "--format", "json", "--exit-zero"]) == 0
    assert capsys.readouterr().out == cold and '"fix"' in cold


@pytest.mark.parametrize("row", [[None, 1, 1, [], [], [], 0], [None, True, 1, [], [], [], False],
                                 [None, 1, 1.0, [], [], [], False], [None, 1, 1, [], [], [], None]])
def test_an_entry_equal_to_an_empty_one_but_of_other_types_is_a_miss(tmp_path, row):
    c = cache_mod.Cache(tmp_path, "k")
    c.put("a.py", "d", FileResult(path="a.py"))
    assert c.get("a.py", "d", "a.py", 10) == FileResult(path="a.py")
    c.entries["a.py"] = ["d", row]
    assert c.get("a.py", "d", "a.py", 10) is None


def test_a_site_of_another_shape_is_a_miss(tmp_path):
    c = cache_mod.Cache(tmp_path, "k")
    res = FileResult(path="a.py")
    from xferaudit.static.site import Site

    res.sites = [Site("a.py", 1, 1, 1, 5, "down", "XFA202", "x.cpu()", False, "a.py::x.cpu", rule_id="torch.cpu")]
    c.put("a.py", "d", res)
    assert c.get("a.py", "d", "a.py", 10).sites == res.sites
    good = json.loads(json.dumps(c.entries["a.py"]))
    for k, bad in ((1, True), (1, 1.0), (9, None), (8, 0), (9, 3)):
        entry = json.loads(json.dumps(good))
        entry[1][4][0][k] = bad
        c.entries["a.py"] = entry
        assert c.get("a.py", "d", "a.py", 10) is None, (k, bad)


def test_an_edit_between_two_runs_is_analysed_again(project, capsys):
    main(["check", ".", "--exit-zero", "-q"])
    first = capsys.readouterr().out
    _forget()
    main(["check", ".", "--exit-zero", "-q"])
    assert capsys.readouterr().out == first
    test = project / "tests/test_a.py"
    st = os.stat(test)
    test.write_text("def test_a(t):\n    assert t.cpu() == 12\n", encoding="utf-8")  # (same size)
    os.utime(test, ns=(st.st_atime_ns, st.st_mtime_ns))  # (and mtime: the inode's ctime still moves)
    _forget()
    main(["check", ".", "--exit-zero", "-q"])
    edited = capsys.readouterr().out
    assert edited != first and "tests/test_a.py:2:" in edited and "t.cpu()" in edited and "t.item()" not in edited
    _forget()
    main(["check", ".", "--exit-zero", "-q", "--no-cache"])
    assert capsys.readouterr().out == edited


SCRIPTED = {
    "pyproject.toml": "[tool.xferaudit]\n",
    "pkg/__init__.py": "",
    "pkg/model.py": """
        import torch

        def clamp_host(t):
            return t.detach().cpu().clamp(0, 1)

        class Head(torch.nn.Module):
            def forward(self, feats):
                return clamp_host(feats).to(feats.device)
    """,
    "pkg/run.py": """
        import torch
        from pkg.model import Head

        head = torch.jit.script(Head())

        def predict(feats):
            return head(feats).tolist()
    """,
}


def test_a_small_run_parses_each_file_once_and_finds_what_a_pool_finds(tmp_path, monkeypatch):
    from xferaudit.static.front import finder
    from xferaudit.static.project import reach

    _write(tmp_path, SCRIPTED)
    monkeypatch.chdir(tmp_path)
    _forget()
    pooled = scan([str(tmp_path)], load_config(tmp_path), jobs=2, use_cache=False)
    parsed = []
    for mod in (finder, reach):
        real = mod.parse
        monkeypatch.setattr(mod, "parse", lambda text, *a, real=real, **k: parsed.append(text) or real(text, *a, **k))
    _forget()
    small = scan([str(tmp_path)], load_config(tmp_path), jobs=1, use_cache=False)
    assert small.scripted and small.stats.workers == 1  # (the TorchScript pass parsed model.py and run.py)
    assert len(parsed) == len(set(parsed)) == 3  # (each file once: the compiler passes' trees analysed)
    assert [(r.path, r.sites) for r in small.results] == [(r.path, r.sites) for r in pooled.results]
    assert sum(len(r.sites) for r in small.results) >= 2  # (run.py's `.tolist()`; model.py's, left as wrap leaves them)


def test_spawned_workers_plug_the_value_layer_in_too(project, monkeypatch):
    from xferaudit.static.project import scan as scan_module

    _forget()
    serial = scan([str(project)], load_config(project), jobs=1, use_cache=False)
    monkeypatch.setattr(scan_module, "_start_method", lambda: "spawn")  # (a worker imports the package anew)
    _forget()
    spawned = scan([str(project)], load_config(project), jobs=2, use_cache=False)
    assert spawned.stats.workers == 2
    assert [(r.path, r.sites) for r in spawned.results] == [(r.path, r.sites) for r in serial.results]
    assert any(s.rule.startswith("XFA4") for r in spawned.results for s in r.sites)
