"""[tool.xferaudit] and file discovery."""

from __future__ import annotations

from pathlib import Path

import pytest

from xferaudit.config import ConfigError, iter_python_paths, load_config


def touch(root: Path, *rels: str) -> None:
    for rel in rels:
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text("x = 1\n")


def rels(root: Path, paths) -> list[str]:
    return [Path(p).resolve().relative_to(root.resolve()).as_posix() for p in paths]


def test_discovery_walks_sorted_and_honours_excludes(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.xferaudit]\nextend-exclude = ["gen/*.py", "vendor"]\n')
    touch(tmp_path, "b.py", "a.py", "stubs.pyi", "notes.txt", "pkg/m.py", "gen/x.py", "gen/keep.txt",
          "vendor/v.py", "sub/vendor/w.py", "build/b.py", ".venv/lib/site.py", "__pycache__/c.py")
    cfg = load_config(tmp_path)
    assert rels(tmp_path, iter_python_paths([tmp_path], cfg)) == ["a.py", "b.py", "stubs.pyi", "pkg/m.py"]


def test_named_files_are_force_excluded_named_folders_walked(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.xferaudit]\nextend-exclude = ["legacy"]\n')
    touch(tmp_path, "legacy/old.py", "legacy/sub/older.py", "ok.py")
    cfg = load_config(tmp_path)
    assert rels(tmp_path, iter_python_paths([tmp_path / "legacy" / "old.py", tmp_path / "ok.py"], cfg)) == ["ok.py"]
    assert rels(tmp_path, iter_python_paths([tmp_path / "legacy"], cfg)) == ["legacy/old.py", "legacy/sub/older.py"]
    missing = list(iter_python_paths([str(tmp_path / "nope.py")], cfg))
    assert missing == [str(tmp_path / "nope.py")]  # yielded, for the caller to report


def test_exclude_replaces_the_defaults(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.xferaudit]\nexclude = ["only_this"]\n')
    touch(tmp_path, "build/b.py", "only_this/x.py")
    cfg = load_config(tmp_path)
    assert rels(tmp_path, iter_python_paths([tmp_path], cfg)) == ["build/b.py"]


def test_codes_select_ignore_per_file(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.xferaudit]\nselect = ["xfa2", "XFA301"]\nignore = ["XFA204"]\n'
        'per-file-ignores = { "tests/*" = ["XFA202"] }\n'
    )
    cfg = load_config(tmp_path)
    assert cfg.select == ("XFA2", "XFA301")
    assert cfg.code_enabled("XFA202", "src/a.py") and not cfg.code_enabled("XFA202", "tests/t.py")
    assert not cfg.code_enabled("XFA204") and not cfg.code_enabled("XFA101")
    assert cfg.code_enabled("XFA301")


@pytest.mark.parametrize("body,needle", [
    ("[tool.xferaudit]\npacks = ['nosuchpack']\n", "unknown pack"),
    ("[tool.xferaudit]\nexclude = 3\n", "exclude must be a list of strings"),
    ("[tool.xferaudit]\nper-file-ignores = ['x']\n", "per-file-ignores must be a table"),
    ("[tool.xferaudit]\ncache-dir = 1\n", "cache-dir must be a path"),
    ("[tool.xferaudit]\nrule = 1\n", "must be an array of tables"),
    ("[tool.xferaudit]\nimplicit = 'gpu'\n", "implicit must be one of 'proven', 'gpu-first'"),
    ("[tool.xferaudit]\ngpu-first-exclude = 3\n", "gpu-first-exclude must be a list of strings"),
])
def test_config_errors_name_the_file(tmp_path, body, needle):
    (tmp_path / "pyproject.toml").write_text(body)
    with pytest.raises(ConfigError) as e:
        load_config(tmp_path)
    assert str(tmp_path / "pyproject.toml") in str(e.value) and needle in str(e.value)


def test_root_cache_dir_and_relpaths(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.xferaudit]\ncache-dir = ".cache/xfa"\n')
    touch(tmp_path, "src/pkg/m.py")
    cfg = load_config(tmp_path / "src" / "pkg" / "m.py")
    assert cfg.root == tmp_path.resolve() or cfg.root == tmp_path
    assert cfg.cache_path() == cfg.root / ".cache" / "xfa"
    assert cfg.relpath(tmp_path / "src" / "pkg" / "m.py") == "src/pkg/m.py"
    assert cfg.relpath("/elsewhere/x.py") == "/elsewhere/x.py"


def test_a_config_file_of_its_own_uses_its_top_level(tmp_path):
    f = tmp_path / "xferaudit.toml"
    f.write_text('ignore = ["XFA204"]\n[[rule]]\ncall = "function"\ntarget = "acc.send"\nkind = "move"\n')
    cfg = load_config(path=f)
    assert cfg.ignore == ("XFA204",) and "acc.send" in cfg.table().functions
    f.write_text('ignre = ["XFA204"]\n')
    with pytest.raises(ConfigError, match="unknown key"):
        load_config(path=f)


def test_implicit_reading_and_its_excludes_reach_the_rule_table(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.xferaudit]\nimplicit = "gpu-first"\n'
                                             'gpu-first-exclude = ["bench"]\n')
    cfg = load_config(tmp_path)
    assert (cfg.implicit, cfg.gpu_first_exclude) == ("gpu-first", ("bench",))
    t = cfg.table()
    assert (t.implicit, t.gpu_first_exclude) == ("gpu-first", ("bench",))
    from xferaudit.rules import DEFAULT_GPU_FIRST_EXCLUDE

    from xferaudit.config import Config

    assert "tests" in DEFAULT_GPU_FIRST_EXCLUDE and Config(root=tmp_path).gpu_first_exclude == DEFAULT_GPU_FIRST_EXCLUDE
