"""``[tool.xferaudit]`` in pyproject.toml, read once per run.

Keys follow ruff's names where ruff has one::

    [tool.xferaudit]
    packs = ["torch"]              # packs always on; others turn on by import
    select = ["XFA2"]              # code prefixes to report (default: all)
    ignore = ["XFA204"]
    exclude = [...]                # replaces the default excludes
    extend-exclude = ["legacy/"]   # adds to them
    per-file-ignores = { "tests/*" = ["XFA202"] }

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
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping, Optional

from .rules import RuleError, RuleTable, available_packs, table, user_rules

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

DEFAULT_EXCLUDE = (
    ".git", ".hg", ".svn", ".tox", ".nox", ".venv", "venv", ".eggs", "__pycache__",
    "build", "dist", "node_modules", "site-packages", ".mypy_cache", ".ruff_cache",
    ".pytest_cache", ".xferaudit_cache",
)
KNOWN_KEYS = {
    "packs", "select", "ignore", "exclude", "extend-exclude", "per-file-ignores",
    "rule", "budget", "cache-dir",
}


class ConfigError(ValueError):
    """pyproject.toml's [tool.xferaudit] is malformed; the message says where."""


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

    def table(self) -> RuleTable:
        """The rule table in force: the configured packs plus the user's own rows."""
        try:
            extra = user_rules(self.rule_rows, where=str(self.source or "config"))
        except RuleError as e:
            raise ConfigError(str(e)) from None
        # The torch pack and the configured packs are on in every file; every
        # other pack turns on in a file that imports its library.
        return table(("torch", *self.packs), extra=extra)

    def fingerprint(self) -> str:
        """What a cache key needs to know of the config: everything that changes findings."""
        import json

        return json.dumps(
            {k: v for k, v in sorted(self.raw.items()) if k != "budget"}, sort_keys=True, default=str
        )

    def relpath(self, path: Path) -> str:
        """Path relative to the project root, with forward slashes (for site names)."""
        try:
            rel = Path(os.path.abspath(path)).relative_to(self.root)
        except ValueError:
            rel = Path(path)
        return rel.as_posix()

    def code_enabled(self, code: str, relpath: str = "") -> bool:
        if self.select and not any(code.startswith(p) for p in self.select):
            return False
        if any(code.startswith(p) for p in self.ignore):
            return False
        for pattern, codes in self.per_file_ignores.items():
            if _match(relpath, pattern) and any(code.startswith(p) for p in codes):
                return False
        return True

    def excluded(self, relpath: str) -> bool:
        parts = relpath.split("/")
        for pattern in self.exclude:
            p = pattern.rstrip("/")
            if _match(relpath, p) or any(fnmatch.fnmatch(part, p) for part in parts):
                return True
        return False


def _match(relpath: str, pattern: str) -> bool:
    return fnmatch.fnmatch(relpath, pattern) or relpath.startswith(pattern.rstrip("/") + "/")


def find_root(start: Path) -> Path:
    """The nearest folder at or above `start` holding pyproject.toml or .git."""
    start = Path(os.path.abspath(start))
    if start.is_file():
        start = start.parent
    for d in (start, *start.parents):
        if (d / "pyproject.toml").is_file() or (d / ".git").exists():
            return d
    return start


def _strings(value: Any, key: str, where: str) -> tuple[str, ...]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: [tool.xferaudit] {key} must be a list of strings")
    return tuple(value)


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
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"{where}: cannot parse: {e}") from None
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
    cfg.select = _strings(raw.get("select", []), "select", where)
    cfg.ignore = _strings(raw.get("ignore", []), "ignore", where)
    if "exclude" in raw:
        cfg.exclude = _strings(raw["exclude"], "exclude", where)
    cfg.exclude = cfg.exclude + _strings(raw.get("extend-exclude", []), "extend-exclude", where)
    pfi = raw.get("per-file-ignores", {})
    if not isinstance(pfi, dict):
        raise ConfigError(f"{where}: [tool.xferaudit] per-file-ignores must be a table")
    cfg.per_file_ignores = {k: _strings(v, f"per-file-ignores.{k}", where) for k, v in pfi.items()}
    rows = raw.get("rule", [])
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise ConfigError(f"{where}: [[tool.xferaudit.rule]] must be an array of tables")
    cfg.rule_rows = tuple(rows)
    cfg.budget = raw.get("budget", {})
    cfg.table()  # validate the rows now, with the file's name in the message
    return cfg


def iter_python_files(paths: Iterable[Path], cfg: Config) -> Iterable[Path]:
    """Python files under `paths`, minus excluded ones. A file named explicitly is
    still checked unless it is excluded too (ruff's `force-exclude` behaviour,
    which pre-commit needs)."""
    seen: set[Path] = set()
    for p in paths:
        p = Path(p)
        if p.is_dir():
            for dirpath, dirnames, filenames in os.walk(p):
                d = Path(dirpath)
                dirnames[:] = sorted(n for n in dirnames if not cfg.excluded(cfg.relpath(d / n)))
                for fn in sorted(filenames):
                    if fn.endswith((".py", ".pyi")):
                        f = d / fn
                        if f not in seen and not cfg.excluded(cfg.relpath(f)):
                            seen.add(f)
                            yield f
        else:
            if p not in seen and not cfg.excluded(cfg.relpath(p)):
                seen.add(p)
                yield p
