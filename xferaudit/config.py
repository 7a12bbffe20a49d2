"""``[tool.xferaudit]`` in pyproject.toml, read once per run.

Keys follow ruff's names where ruff has one::

    [tool.xferaudit]
    packs = ["torch"]              # packs always on; others turn on by import
    select = ["XFA2"]              # code prefixes to report (default: all)
    ignore = ["XFA204"]
    exclude = [...]                # replaces the default excludes
    extend-exclude = ["legacy/"]   # adds to them
    per-file-ignores = { "tests/*" = ["XFA202"] }
    cache-dir = ".xferaudit_cache" # where `check` keeps its findings (relative to the root)
    implicit = "gpu-first"         # how implicit transfers are read: "proven" or "gpu-first"
    gpu-first-exclude = ["tests"]  # paths read "proven" under gpu-first (replaces the default)
    evidence = ["xferaudit-run.json"]  # run files `check` reads as evidence (relative to the root)
    run-budget = "budget.toml"     # `xferaudit run` checks every run against it (true: the table below)
    docs-url = "https://..."       # where this documentation site is served: findings link to its rule pages

    [[tool.xferaudit.rule]]        # rows of your own stack, same schema as a pack
    call = "function"
    target = "accelerate.utils.send_to_device"
    kind = "move"

    [tool.xferaudit.budget]        # expected crossings per site per step (the guard)
    "train.py:step:loss.item" = 1
"""

from __future__ import annotations

import fnmatch
import os
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from operator import attrgetter
from pathlib import Path
from typing import Any, Iterable, Iterator, Mapping, Optional

from .rules import (
    DEFAULT_GPU_FIRST_EXCLUDE, DEFAULT_IMPLICIT, IMPLICIT_READINGS, RuleError, RuleTable, available_packs, table,
    user_rules,
)
from .runkeys import relative_path

DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", ".eggs", "__pycache__",
    "build", "dist", "node_modules", "site-packages", ".mypy_cache", ".ruff_cache",
    ".pytest_cache", ".xferaudit_cache",
)
KNOWN_KEYS = {
    "packs", "select", "ignore", "exclude", "extend-exclude", "per-file-ignores",
    "rule", "budget", "cache-dir", "implicit", "gpu-first-exclude", "evidence", "docs-url", "run-budget",
}


class ConfigError(ValueError):
    """pyproject.toml's [tool.xferaudit] is malformed; the message says where."""


#: A code or a code prefix as `select`, `ignore` and `per-file-ignores` take them.
CODE_PREFIX = re.compile(r"^(?:ALL|XFA[0-9]{0,3})$")


class _Globs:
    """Exclude patterns compiled once: a pattern without a slash matches any one
    path component (`build`, `*.egg-info`); one with a slash matches the path
    relative to the root, or any path under it (`tests/corpus`)."""

    def __init__(self, patterns: Iterable[str]) -> None:
        names, paths = [], []
        self.literal: frozenset = frozenset()  # names without a wildcard: a set's look-up, not a regex's
        for p in patterns:
            p = p.strip().rstrip("/")
            if p.startswith("./"):
                p = p[2:]
            if not p:
                continue
            if "/" in p:
                paths.append(fnmatch.translate(p))
                paths.append(re.escape(p) + "/.*")
            elif not any(c in p for c in "*?["):
                self.literal |= {p}
            else:
                names.append(fnmatch.translate(p))
        self.names = re.compile("|".join(names)) if names else None
        self.paths = re.compile("|".join(paths), re.S) if paths else None

    def name(self, name: str) -> bool:
        return name in self.literal or (self.names is not None and self.names.match(name) is not None)

    def path(self, relpath: str) -> bool:
        return self.paths is not None and self.paths.match(relpath) is not None


@dataclass
class Config:
    root: Path  # the project root: where pyproject.toml (or .git) is
    source: Optional[Path] = None  # the pyproject.toml read, if any
    packs: tuple[str, ...] = ("torch",)
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    per_file_ignores: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    rule_rows: tuple[Mapping[str, Any], ...] = ()
    budget: Mapping[str, Any] = field(default_factory=dict)
    raw: Mapping[str, Any] = field(default_factory=dict)
    cache_dir: Optional[Path] = None  # None: <root>/.xferaudit_cache
    implicit: str = DEFAULT_IMPLICIT  # the value layer's reading (rules.IMPLICIT_READINGS)
    gpu_first_exclude: tuple[str, ...] = DEFAULT_GPU_FIRST_EXCLUDE
    evidence: tuple[str, ...] = ()  # run files read as evidence by `check` (paths, relative to the root)
    docs_url: Optional[str] = None  # the documentation site's address; None: the installed package's, if any
    #: The budget `xferaudit run` checks: a file (absolute), True for [tool.xferaudit.budget], None for none.
    run_budget: Any = None
    _globs: Optional[_Globs] = field(default=None, repr=False, compare=False)

    def table(self) -> RuleTable:
        """The rule table in force: the configured packs plus the user's own rows."""
        try:
            extra = user_rules(self.rule_rows, where=str(self.source or "config"))
        except RuleError as e:
            raise ConfigError(str(e)) from None
        # The torch pack and the configured packs are on in every file; every
        # other pack turns on in a file that imports its library.
        return replace(table(("torch", *self.packs), extra=extra), implicit=self.implicit,
                       gpu_first_exclude=tuple(self.gpu_first_exclude))

    def relpath(self, path) -> str:
        """Path relative to the project root, with forward slashes (for site
        names, baselines and the cache); a path outside the root stays absolute."""
        return relative_path(path, str(self.root))

    def code_enabled(self, code: str, relpath: str = "") -> bool:
        if self.select and not any(code.startswith(p) or p == "ALL" for p in self.select):
            return False
        if any(code.startswith(p) or p == "ALL" for p in self.ignore):
            return False
        for pattern, codes in self.per_file_ignores.items():
            if _match(relpath, pattern) and any(code.startswith(p) or p == "ALL" for p in codes):
                return False
        return True

    @property
    def globs(self) -> _Globs:
        if self._globs is None:
            self._globs = _Globs(self.exclude)
        return self._globs

    def excluded(self, relpath: str) -> bool:
        """True when the path (relative to the root) or one of its components is excluded."""
        g = self.globs
        if g.path(relpath):
            return True
        return any(g.name(part) for part in relpath.split("/") if part not in ("", "."))

    def cache_path(self) -> Path:
        return self.cache_dir if self.cache_dir is not None else self.root / ".xferaudit_cache"


@lru_cache(maxsize=16)
def _compiled(patterns: tuple[str, ...]) -> _Globs:
    return _Globs(patterns)


def path_matches(relpath: str, patterns: tuple[str, ...]) -> bool:
    """`relpath` (relative to the root, forward slashes) matches one of `patterns`,
    read as ``exclude`` reads them."""
    g = _compiled(tuple(patterns))
    return g.path(relpath) or any(g.name(part) for part in relpath.split("/") if part not in ("", "."))


def check_implicit(value: Any, where: str) -> str:
    """The value layer's reading, one of :data:`~xferaudit.rules.IMPLICIT_READINGS`."""
    if value not in IMPLICIT_READINGS:
        raise ConfigError(f"{where}: implicit must be one of {', '.join(map(repr, IMPLICIT_READINGS))}, "
                          f"not {value!r}")
    return value


def _match(relpath: str, pattern: str) -> bool:
    return fnmatch.fnmatch(relpath, pattern) or relpath.startswith(pattern.rstrip("/") + "/")


def find_root(start: Path) -> Path:
    """The nearest folder at or above `start` holding pyproject.toml or .git
    (`start` itself when there is none)."""
    start = Path(os.path.abspath(start))
    if start.is_file():
        start = start.parent
    return marked_root(start) or start


def marked_root(start: Path) -> Optional[Path]:
    """The nearest folder at or above the folder `start` holding pyproject.toml or .git, or None."""
    for d in (start, *start.parents):
        if (d / "pyproject.toml").is_file() or (d / ".git").exists():
            return d
    return None


def _strings(value: Any, key: str, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: [tool.xferaudit] {key} must be a list of strings")
    return tuple(value)


def check_codes(codes: Iterable[str], key: str, where: str) -> tuple[str, ...]:
    """Codes or code prefixes (`XFA2`, `XFA202`, `ALL`), upper-cased, each
    matching a code xferaudit reports (``select = ["XFA9"]`` would select
    nothing, and every check would pass); anything else is an error."""
    from .static.codes import CODES

    out = []
    for c in codes:
        c = c.strip().upper()
        if not CODE_PREFIX.match(c):
            raise ConfigError(
                f"{where}: {key}: {c!r} is not an xferaudit code or prefix "
                "(codes are XFA + 3 digits, e.g. XFA202; prefixes like XFA2 select a group)"
            )
        if c != "ALL" and not any(code.startswith(c) for code in CODES):
            raise ConfigError(f"{where}: {key}: {c!r} matches no xferaudit code (codes: {', '.join(CODES)}; "
                              "a prefix such as XFA2 selects a group)")
        out.append(c)
    return tuple(out)


def outside(path: Path, root: Path) -> Optional[str]:
    """`path`'s real location when ``~``, ``..`` and links take it out of `root`, else None."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    if real == top or real.startswith(top.rstrip(os.sep) + os.sep):
        return None
    return real


def _cache_dir(value: Any, root: Path, where: str) -> Path:
    """The config's cache-dir, relative to the root: it must stay inside the
    project once ``~``, ``..`` and links are resolved (a repository's config
    must not make the tool write elsewhere); ``--cache-dir`` may point anywhere."""
    if not isinstance(value, str) or not value or "\0" in value:
        raise ConfigError(f"{where}: [tool.xferaudit] cache-dir must be a path (a string)")
    path = root / os.path.expanduser(value)
    real = outside(path, root)
    if real is not None:
        raise ConfigError(
            f"{where}: [tool.xferaudit] cache-dir {value!r} is {real}, outside the project ({root}); "
            "a folder outside it can only be given on the command line, with --cache-dir"
        )
    return path


def _docs_url(value: Any, where: str) -> str:
    """The docs-url setting: an http(s) address, or a file:// one of a site built
    locally (findings link to its rule pages)."""
    if (not isinstance(value, str) or not re.match(r"(?:https?://[^\s/]+|file:///)", value)
            or any(c.isspace() for c in value)):
        raise ConfigError(f"{where}: [tool.xferaudit] docs-url must be an http(s) or file:// address, "
                          f"e.g. \"https://example.org/xferaudit/\" (got {value!r})")
    return value


def _run_budget(value: Any, root: Path, where: str) -> Any:
    """The run-budget setting: a budget file (relative to the root), true for the
    [tool.xferaudit.budget] table, false for none."""
    if value is True:
        return True
    if value is False:
        return None
    if not isinstance(value, str) or not value or "\0" in value:
        raise ConfigError(f"{where}: [tool.xferaudit] run-budget must be a budget file (a path, relative to "
                          f"the project root) or true for [tool.xferaudit.budget], not {value!r}")
    return str(root / os.path.expanduser(value))


def load_config(start: Optional[Path] = None, path: Optional[Path] = None) -> Config:
    """Read the config for the project holding `start` (or the file `path`)."""
    if path is None:
        root = find_root(start or Path.cwd())
        candidate = root / "pyproject.toml"
        path = candidate if candidate.is_file() else None
    else:
        path = Path(path)
        if not path.is_file():
            raise ConfigError(f"{path}: no such config file")
        root = Path(os.path.abspath(path)).parent
    if path is None:
        return Config(root=root)
    where = str(path)
    from ._validate import parse_toml

    from ._readfile import read_text

    text = read_text(path, where, ConfigError)
    data = parse_toml(text, where, ConfigError)
    if path.name != "pyproject.toml" and "tool" not in data:
        raw = data  # a file of its own (`--config xferaudit.toml`): its top level is the table
    else:
        raw = data.get("tool", {}).get("xferaudit", {})
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: [tool.xferaudit] must be a table")
    unknown = set(raw) - KNOWN_KEYS
    if unknown:
        raise ConfigError(
            f"{where}: unknown key(s) in [tool.xferaudit]: {', '.join(sorted(unknown))}"
            f" (known: {', '.join(sorted(KNOWN_KEYS))})"
        )
    cfg = Config(root=root, source=path, raw=raw)
    if "packs" in raw:
        cfg.packs = _strings(raw["packs"], "packs", where)
        bad = [p for p in cfg.packs if p not in available_packs()]
        if bad:
            raise ConfigError(f"{where}: unknown pack(s) {bad}; known: {available_packs()}")
    cfg.select = check_codes(_strings(raw.get("select", []), "select", where), "select", where)
    cfg.ignore = check_codes(_strings(raw.get("ignore", []), "ignore", where), "ignore", where)
    if "exclude" in raw:
        cfg.exclude = _strings(raw["exclude"], "exclude", where)
    cfg.exclude = cfg.exclude + _strings(raw.get("extend-exclude", []), "extend-exclude", where)
    pfi = raw.get("per-file-ignores", {})
    if not isinstance(pfi, dict):
        raise ConfigError(f"{where}: [tool.xferaudit] per-file-ignores must be a table")
    cfg.per_file_ignores = {
        k: check_codes(_strings(v, f"per-file-ignores.{k}", where), f"per-file-ignores.{k}", where)
        for k, v in pfi.items()
    }
    if "cache-dir" in raw:
        cfg.cache_dir = _cache_dir(raw["cache-dir"], root, where)
    if "implicit" in raw:
        cfg.implicit = check_implicit(raw["implicit"], f"{where}: [tool.xferaudit]")
    if "gpu-first-exclude" in raw:
        cfg.gpu_first_exclude = _strings(raw["gpu-first-exclude"], "gpu-first-exclude", where)
    cfg.evidence = tuple(str(root / p) for p in _strings(raw.get("evidence", []), "evidence", where))
    if "docs-url" in raw:
        cfg.docs_url = _docs_url(raw["docs-url"], where)
    if "run-budget" in raw:
        cfg.run_budget = _run_budget(raw["run-budget"], root, where)
    rows = raw.get("rule", [])
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ConfigError(f"{where}: [[tool.xferaudit.rule]] must be an array of tables")
    cfg.rule_rows = tuple(rows)
    cfg.budget = raw.get("budget", {})
    if not isinstance(cfg.budget, dict):
        raise ConfigError(f"{where}: [tool.xferaudit.budget] must be a table of site = count")
    cfg.table()  # validate the rows now, with the file's name in the message
    return cfg


def _own_path(path: str, root: str) -> str:
    """`path` under its own name when it lies in the project: a path through a
    symbolic link (``alias.py``, ``a/link/x.py`` with ``a/link -> ../b``) becomes
    the real file's path below the root (``real.py``, ``b/x.py``), so a site is
    named, and a file written, once and by its own path. Outside the project
    the path is left as given."""
    try:
        real = os.path.realpath(path)
        top = os.path.realpath(root)
    except (OSError, ValueError):
        return path
    if real == os.path.abspath(path):
        return path
    if real == top:
        return root
    if real.startswith(top.rstrip(os.sep) + os.sep):
        return os.path.join(root, real[len(top.rstrip(os.sep)) + 1:])
    return path


def _file_id(st: os.stat_result) -> tuple:
    return (st.st_dev, st.st_ino)


_BY_NAME = attrgetter("name")


#: What a folder is searched for (``.ipynb``: a notebook's code cells are read).
PYTHON_FILE_SUFFIXES = (".py", ".pyi", ".ipynb")


def iter_python_paths(paths: Iterable, cfg: Config, stats: Optional[dict] = None, walked: Optional[dict] = None,
                      skip: Optional[dict] = None) -> Iterator[str]:
    """Python files (``*.py``, ``*.pyi``, and notebooks: ``*.ipynb``) under `paths`, in a stable order, minus
    excluded ones.

    Excludes are matched against paths relative to the project root. A *file*
    named on the command line is excluded too when it lies inside the root
    (ruff's ``force-exclude``, which pre-commit needs: it passes every staged
    file by name). A named *folder* is always walked, even one an exclude
    pattern matches (``xferaudit check .venv/lib/python3.11/site-packages/torch``),
    and the patterns apply to what lies below it. A named path that does not
    exist is yielded as is, for the caller to report.

    Odd trees: every real file is yielded once, under its own path. A walk never
    follows a symbolic link, to a folder or to a file: a link inside the tree
    leads to files the walk visits under their own names anyway, and one out of
    the tree or into a loop (``ln -s .. pkg/up``) must not be entered (a dangling
    link is yielded, for the caller to report as unreadable). A path *named* on
    the command line is followed through its links and, inside the project,
    yielded under the real file's path (``check alias.py`` reads and names
    ``real.py``). Hard links (two names of one file) are yielded once, under the
    first name found. Only regular files are read (no FIFOs or devices).

    `stats`, where given, is filled with each yielded path's ``os.stat`` result
    (the walk has it anyway; a path that cannot be stat'ed has none), and a path
    already in it is not stat'ed again: the project's state reads its files' stats
    from the walk that found them (:func:`~.static.project.scripted.project_of`).

    `walked`, where given, is filled with each folder named in `paths` that lies
    in the project (by its absolute path) and the identities (device, inode) of
    every file the walk met below it, each yielded there (None where one was
    not: a second name of a file yielded before, which the root walk might
    yield); given back as `skip` to the walk of the root, such a folder is not
    walked again: its files are taken as met there (what the root walk would
    yield of them is yielded already, and it meets them in that place of its
    order, which is what the hard links met later are compared with).
    """
    seen: set = set()
    g = cfg.globs
    excluded_name = g.name
    excluded_path = g.path if g.paths is not None else None
    root = str(cfg.root)

    def first(path: str, st: Optional[os.stat_result]) -> bool:
        key = _file_id(st) if st is not None else os.path.abspath(path)
        if key in seen:
            return False
        seen.add(key)
        return True

    for p in paths:
        sp = _own_path(os.fspath(p), root)
        ap = os.path.abspath(sp)
        inside = ap == root or ap.startswith(root.rstrip(os.sep) + os.sep)
        is_dir = os.path.isdir(sp)
        if inside and not is_dir and cfg.excluded(cfg.relpath(ap)):
            continue
        if not is_dir:
            try:
                st: Optional[os.stat_result] = os.stat(sp)
            except (OSError, ValueError):
                st = None
            if first(sp, st):
                if stats is not None and st is not None:
                    stats[sp] = st
                yield sp
            continue
        base = cfg.relpath(ap) if inside else ""
        ids: Optional[set] = set() if walked is not None and inside else None
        whole = True  # (every file met below it yielded here: none left to a name the root walk may yield)
        stack = [(sp, base)]
        while stack:
            d, rel = stack.pop()
            if skip is not None and skip.get(d) is not None:
                seen.update(skip[d])
                continue
            try:
                entries = sorted(os.scandir(d), key=_BY_NAME)
            except OSError:
                continue
            subdirs = []
            under = f"{rel}/" if rel and rel != "." else ""
            for e in entries:
                name = e.name
                if excluded_name(name):
                    continue
                if inside and excluded_path is not None and excluded_path(under + name):
                    continue
                try:
                    if e.is_symlink():
                        if name.endswith(PYTHON_FILE_SUFFIXES) and not os.path.exists(e.path):
                            yield e.path  # dangling: reported by the caller
                        continue
                    if e.is_dir(follow_symlinks=False):
                        subdirs.append((e.path, under + name))
                        continue
                    if not (name.endswith(PYTHON_FILE_SUFFIXES) and e.is_file(follow_symlinks=False)):
                        continue
                    path = e.path
                    st = stats.get(path) if stats is not None else None
                    if st is None:
                        st = e.stat(follow_symlinks=False)  # (no link: as os.stat reads it)
                except OSError:
                    continue
                key = _file_id(st)
                if ids is not None:
                    ids.add(key)
                if key not in seen:
                    seen.add(key)
                    if stats is not None:
                        stats[path] = st
                    yield path
                else:
                    whole = False
            stack.extend(reversed(subdirs))
        if walked is not None and ids is not None:
            walked[ap] = ids if whole else None


def iter_python_files(paths: Iterable[Path], cfg: Config) -> Iterator[Path]:
    """:func:`iter_python_paths` as :class:`~pathlib.Path` objects."""
    for p in iter_python_paths(paths, cfg):
        yield Path(p)
