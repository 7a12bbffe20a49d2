"""The project's formatting settings that shape wrapped code: line length and
import sorting, read from the same files ruff, black and isort read.

Read, in order (the first file that sets a key wins, as each tool's own
lookup would): ``ruff.toml`` / ``.ruff.toml`` at the project root, then
``pyproject.toml``'s ``[tool.ruff]`` (with ``[tool.ruff.lint.isort]`` or the
older ``[tool.ruff.isort]``), ``[tool.black]`` and ``[tool.isort]``.

Keys honoured: ``line-length`` (ruff, black; ``line_length`` in isort);
``known-first-party``, ``known-third-party``, ``known-local-folder``,
``force-sort-within-sections``, ``case-sensitive``, ``from-first`` (ruff's
isort spellings, and isort's ``known_first_party``... ``force_sort_within_sections``
and ``profile``, whose ``black`` and ``google`` basics are applied). Defaults are
ruff's: 88 columns, no forced sorting within sections. The project's
first-party packages are also found the way ruff's ``src = [".", "src"]``
finds them: a folder or module of that name at the root or in ``src/``.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional

DEFAULT_LINE_LENGTH = 88


@dataclass(frozen=True)
class CodeStyle:
    line_length: int = DEFAULT_LINE_LENGTH
    known_first_party: tuple[str, ...] = ()
    known_third_party: tuple[str, ...] = ()
    known_local_folder: tuple[str, ...] = ()
    force_sort_within_sections: bool = False
    case_sensitive: bool = False
    from_first: bool = False
    root: Optional[str] = None  # the project root, for first-party detection
    _found: dict = field(default_factory=dict, compare=False, hash=False, repr=False)

    def first_party_on_disk(self, top: str) -> bool:
        if self.root is None:
            return False
        hit = self._found.get(top)
        if hit is None:
            hit = False
            for base in (self.root, os.path.join(self.root, "src")):
                p = os.path.join(base, top)
                if os.path.isdir(p) or os.path.isfile(p + ".py"):
                    hit = True
                    break
            self._found[top] = hit
        return hit


DEFAULT_STYLE = CodeStyle()


def _table(data: Any, *keys: str) -> Mapping[str, Any]:
    for k in keys:
        if not isinstance(data, dict):
            return {}
        data = data.get(k, {})
    return data if isinstance(data, dict) else {}


def _read_toml(path: Path) -> Mapping[str, Any]:
    try:
        if sys.version_info >= (3, 11):
            import tomllib
        else:  # pragma: no cover
            import tomli as tomllib  # type: ignore
        with open(path, "rb") as f:
            return tomllib.load(f)
    except Exception:  # a broken formatter config is not ours to report: use defaults
        return {}


def _names(v: Any) -> tuple[str, ...]:
    if isinstance(v, str):
        return (v,)
    if isinstance(v, (list, tuple)):
        return tuple(x for x in v if isinstance(x, str))
    return ()


def code_style(root) -> CodeStyle:
    """The formatting settings of the project at `root` (defaults when none)."""
    root = Path(root)
    ruff: Mapping[str, Any] = {}
    for name in ("ruff.toml", ".ruff.toml"):
        if (root / name).is_file():
            ruff = _read_toml(root / name)
            break
    pyproject = _read_toml(root / "pyproject.toml") if (root / "pyproject.toml").is_file() else {}
    if not ruff:
        ruff = _table(pyproject, "tool", "ruff")
    ruff_isort = _table(ruff, "lint", "isort") or _table(ruff, "isort")
    black = _table(pyproject, "tool", "black")
    isort = _table(pyproject, "tool", "isort")

    def pick(*cands):
        for table, key in cands:
            if key in table:
                return table[key]
        return None

    length = pick((ruff, "line-length"), (black, "line-length"), (black, "line_length"), (isort, "line_length"))
    if not isinstance(length, int) or isinstance(length, bool) or length <= 0:
        length = DEFAULT_LINE_LENGTH
    force = pick((ruff_isort, "force-sort-within-sections"), (isort, "force_sort_within_sections"))
    if force is None and isort.get("profile") == "google":
        force = True
    return CodeStyle(
        line_length=length,
        known_first_party=_names(pick((ruff_isort, "known-first-party"), (isort, "known_first_party"))),
        known_third_party=_names(pick((ruff_isort, "known-third-party"), (isort, "known_third_party"))),
        known_local_folder=_names(pick((ruff_isort, "known-local-folder"), (isort, "known_local_folder"))),
        force_sort_within_sections=bool(force),
        case_sensitive=bool(pick((ruff_isort, "case-sensitive"), (isort, "case_sensitive"))),
        from_first=bool(pick((ruff_isort, "from-first"), (isort, "from_first"))),
        root=str(root),
    )
