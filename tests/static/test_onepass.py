"""A cold ``check`` in one parse per file (xferaudit/static/project/onepass.py):
the maps and findings equal those of the serial passes, no file's text is
parsed twice, and a partly warm run agrees with a cold one."""

from __future__ import annotations

import ast
import hashlib
import os
import textwrap
from pathlib import Path

import pytest

from xferaudit.config import load_config
from xferaudit.static.project import compiled, onepass, placed, scripted
from xferaudit.static.project import scan as scan_module
from xferaudit.static.project.scan import scan

FILES = {
    "pyproject.toml": "[tool.xferaudit]\n",
    "pkg/__init__.py": "",
    # a placing helper, imported by train.py (a class too, so the helper's reduced text is not the file)
    "pkg/utils.py": """
        import torch

        def move(x):
            return x.to("cuda", non_blocking=True)

        class Meter:
            def add(self, v):
                self.v = v
    """,
    "pkg/train.py": """
        import torch
        from .utils import move

        def step(x):
            x = move(x)
            if x.sum() > 0:
                print(x.mean().item())
            return float(x.max())
    """,
    # code TorchScript compiles from another file: the sites wrap leaves
    "pkg/model.py": """
        import torch

        def helper(t):
            return t.cpu()

        class Net(torch.nn.Module):
            def forward(self, x):
                y = helper(x)
                return y.to("cuda")
    """,
    "tests/test_script.py": """
        import torch
        from pkg.model import Net

        def test_scripts():
            torch.jit.script(Net())
    """,
    # code torch.compile compiles from another file: a read there breaks the graph (XFA601)
    "pkg/body.py": """
        import torch

        def body(x):
            if x.sum() > 0:
                return x.item()
            return x.cpu()
    """,
    "pkg/run.py": """
        import torch
        from pkg.body import body

        fast = torch.compile(body)

        def go(x):
            return fast(x).numpy()
    """,
}


def _write(root: Path, files: dict) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
    for k in range(6):  # (more files than workers, each a share)
        p = root / "pkg" / f"extra{k}.py"
        p.write_text(f"import torch\n\ndef f{k}(x):\n    return x.to('cuda').item() + {k}\n", encoding="utf-8")


def _forget() -> None:
    for mod in (scripted, compiled, placed):
        mod._MEMO.clear()


def _findings(out) -> list:
    return [(r.path, r.error, [repr(s) for s in r.sites]) for r in out.results]


@pytest.fixture
def project(tmp_path, monkeypatch):
    _write(tmp_path, FILES)
    monkeypatch.chdir(tmp_path)
    _forget()
    yield tmp_path
    _forget()


def _cold(root: Path, jobs: int, cache_dir=None):
    _forget()
    cfg = load_config(root)
    return scan([str(root)], cfg, jobs=jobs, use_cache=cache_dir is not None, cache_dir=cache_dir)


def test_maps_and_findings_equal_the_serial_passes(project, monkeypatch):
    calls = []
    real = onepass.run
    monkeypatch.setattr(onepass, "run", lambda *a, **k: calls.append(1) or real(*a, **k))
    one = _cold(project, 2)
    assert calls, "the one-parse pool ran"
    assert one.stats.workers == 2
    serial = _cold(project, 1)
    assert one.scripted == serial.scripted and one.scripted  # (TorchScript: model.py's functions)
    assert any(p.endswith("model.py") for p in one.scripted)
    assert one.compiled == serial.compiled and any(p.endswith("body.py") for p in one.compiled)
    assert one.placed == serial.placed and "pkg.utils.move" in one.placed["helpers"]
    assert _findings(one) == _findings(serial)
    sites = [s for r in one.results for s in r.sites]
    assert any(s.compiled and s.path.endswith("body.py") for s in sites)  # (XFA601, from run.py's compile)
    assert any(s.no_wrap and s.path.endswith("model.py") for s in sites)  # (scripted from tests/)
    assert any(s.implicit and s.path.endswith("train.py") for s in sites)  # (through utils.move)


def test_no_text_is_parsed_twice_on_a_cold_run(project, tmp_path_factory, monkeypatch):
    log = tmp_path_factory.mktemp("spy") / "parses"
    real = ast.parse

    def spy(source, filename="<unknown>", *a, **k):
        text = source if isinstance(source, str) else repr(source)
        line = f"{filename}\t{hashlib.sha1(text.encode('utf-8', 'surrogateescape')).hexdigest()}\t{os.getpid()}\n"
        with open(log, "a", encoding="utf-8") as f:  # (the workers, forked, write here too)
            f.write(line)
        return real(source, filename, *a, **k)

    monkeypatch.setattr(ast, "parse", spy)
    # forked workers inherit the spy; after other tests have started threads the scan would spawn them
    monkeypatch.setattr(scan_module, "_start_method", lambda: "fork")
    out = _cold(project, 2)
    assert out.stats.workers == 2
    rows = [ln.split("\t") for ln in log.read_text(encoding="utf-8").splitlines()]
    seen: dict = {}
    for name, digest, pid in rows:
        seen.setdefault((name, digest), []).append(pid)
    twice = {k: v for k, v in seen.items() if len(v) > 1}
    assert not twice, twice
    parsed = {os.path.basename(name) for name, _, _ in rows}
    assert {"train.py", "model.py", "body.py", "run.py", "test_script.py", "extra5.py"} <= parsed
    assert len({pid for _, _, pid in rows}) >= 2  # (parsed in the workers, not here alone)


def test_a_partly_warm_run_agrees_with_a_cold_one(project, tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    first = _cold(project, 2, cache)
    assert first.stats.cached == 0
    _forget()
    warm = scan([str(project)], load_config(project), jobs=2, use_cache=True, cache_dir=cache)
    assert warm.stats.cached == len(warm.results) and _findings(warm) == _findings(first)
    # the helper now returns what it leaves on the host: train.py's reads are gone, its own content unchanged
    (project / "pkg/utils.py").write_text("import torch\n\ndef move(x):\n    return x.cpu()\n\n\nclass Meter:\n"
                                          "    pass\n", encoding="utf-8")
    _forget()
    edited = scan([str(project)], load_config(project), jobs=2, use_cache=True, cache_dir=cache)
    cold = _cold(project, 1)
    assert _findings(edited) == _findings(cold)
    assert _findings(edited) != _findings(first)
    assert edited.placed == cold.placed and "pkg.utils.move" not in edited.placed["helpers"]


def test_an_unchanged_project_is_answered_without_reading_its_files(project, tmp_path_factory, monkeypatch):
    from xferaudit.static.project import cache as cache_mod

    cache = tmp_path_factory.mktemp("cache")
    first = _cold(project, 1, cache)
    hashed = []
    real = cache_mod.file_digest
    monkeypatch.setattr(cache_mod, "file_digest", lambda *a: hashed.append(1) or real(*a))
    _forget()
    warm = scan([str(project)], load_config(project), jobs=1, use_cache=True, cache_dir=cache)
    assert not hashed and warm.stats.cached == len(warm.results) and _findings(warm) == _findings(first)
    # an edit changes the project's state (the file's size, mtime and ctime): read again, found again
    body = project / "pkg/body.py"
    body.write_text(body.read_text(encoding="utf-8").replace("x.item()", "x.tolist()"), encoding="utf-8")
    _forget()
    edited = scan([str(project)], load_config(project), jobs=1, use_cache=True, cache_dir=cache)
    assert hashed and _findings(edited) == _findings(_cold(project, 1))
    assert _findings(edited) != _findings(first)


def test_a_worker_done_first_takes_over_the_files_the_other_has_not_parsed(project, tmp_path_factory,
                                                                             monkeypatch):
    import time

    log = tmp_path_factory.mktemp("spy") / "taken"
    real_take, real_parse, real_analyse = onepass._Holder.take, onepass._Holder.parse, onepass._Holder.analyse

    def take(self, j, item, facts=True):
        if not facts:  # (a file of another worker's share, taken over)
            with open(log, "a", encoding="utf-8") as f:
                f.write(f"{self.me}\t{os.path.basename(item.rel)}\n")
        return real_take(self, j, item, facts)

    def slow_parse(self, j, item):
        if self.me == 1:  # (the first worker slow: the second is done first)
            time.sleep(0.2)
        return real_parse(self, j, item)

    def slow_analyse(self, j, item, scripted, placed):
        if self.me == 1:
            time.sleep(0.2)
        return real_analyse(self, j, item, scripted, placed)

    monkeypatch.setattr(onepass._Holder, "take", take)
    monkeypatch.setattr(onepass._Holder, "parse", slow_parse)
    monkeypatch.setattr(onepass._Holder, "analyse", slow_analyse)
    monkeypatch.setattr(scan_module, "_start_method", lambda: "fork")  # (the workers inherit the spies)
    out = _cold(project, 2)
    assert out.stats.workers == 2
    rows = [ln.split("\t") for ln in log.read_text(encoding="utf-8").splitlines()]
    assert rows and {me for me, _ in rows} == {"2"}, rows  # (the fast worker took files over, the slow one none)
    assert len({name for _, name in rows}) == len(rows)  # (each once)
    serial = _cold(project, 1)  # (the serial passes: no pool, the spies unused)
    assert _findings(out) == _findings(serial)
    assert out.placed == serial.placed and out.scripted == serial.scripted


def test_workers_started_afresh_give_the_serial_maps_and_findings(project, monkeypatch):
    # (spawned, a worker is sent its share's files alone and takes over none; the lead's are its own)
    monkeypatch.setattr(scan_module, "_start_method", lambda: "spawn")
    one = _cold(project, 2)
    assert one.stats.workers == 2
    serial = _cold(project, 1)
    assert one.scripted == serial.scripted and one.compiled == serial.compiled and one.placed == serial.placed
    assert _findings(one) == _findings(serial)


def test_workers_summarise_only_the_candidates_an_import_names(project, tmp_path_factory, monkeypatch):
    # a placing helper no file imports: its summary would be thrown away, so it is never made
    (project / "pkg" / "unused.py").write_text("import torch\n\ndef ship(x):\n    return x.to('cuda')\n",
                                               encoding="utf-8")
    log = tmp_path_factory.mktemp("spy") / "summarised"
    real = onepass._Holder.summaries

    def summaries(self, js, items):
        with open(log, "a", encoding="utf-8") as f:  # (the workers, forked, write here too)
            f.writelines(f"{self.me}\t{os.path.basename(items[j].rel)}\n" for j in js)
        return real(self, js, items)

    monkeypatch.setattr(onepass._Holder, "summaries", summaries)
    monkeypatch.setattr(scan_module, "_start_method", lambda: "fork")
    out = _cold(project, 2)
    assert out.stats.workers == 2
    rows = [ln.split("\t") for ln in log.read_text(encoding="utf-8").splitlines()]
    names = [name for _, name in rows]
    assert "utils.py" in names and len(names) == len(set(names))  # (the helper train.py imports, once)
    assert "unused.py" not in names and not any(n.startswith("extra") for n in names)
    assert all(me != str(onepass._LEAD) for me, _ in rows)  # (made in the workers)
    serial = _cold(project, 1)
    assert out.placed == serial.placed and "pkg.utils.move" in out.placed["helpers"]
    assert "pkg.unused.ship" not in out.placed["helpers"]
    assert _findings(out) == _findings(serial)
