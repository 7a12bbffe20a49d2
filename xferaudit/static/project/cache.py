"""The on-disk cache of ``xferaudit check``: each file's findings, not a clean bit.

One JSON file per *key* under ``.xferaudit_cache/`` (or ``--cache-dir``, or
``cache-dir`` in the config). The key covers everything that changes what the
finder reports besides the file itself: the tool's version and its own source
(finder, rules, packs), the Python version (its parser), the rows in force
(packs and the user's ``[[tool.xferaudit.rule]]``) and the value layer's
reading (``implicit``, ``gpu-first-exclude``). Inside, each file (by its
path relative to the project root) maps to its content hash and its findings:
sites, suppression comments, parse error. ``select``, ``ignore``, baselines and
output formats are applied after the cache, so changing them costs nothing.

Writes are atomic (a temporary file renamed over the old one); a cache that
cannot be read is ignored and one that cannot be written is skipped, silently:
the cache only ever saves time. What is read back is checked before use, since
anything may have written the file: a cache that is not the expected shape
(``"files": null``, a list, JSON nested too deeply, not a regular file) is
read as empty, and an entry whose findings are malformed (a field of the wrong
type, a line below 1 or past the file's size, an unknown code or kind) is a
miss; either way the file is parsed again and the cache rewritten.

The cache folder is the tool's alone. When the tool creates it, it also writes
a ``.gitignore`` (``*``, so git never sees the cache) and a ``CACHEDIR.TAG``
(so backup tools skip it); it writes them nowhere else. A folder that already
exists is used only when it holds nothing but the cache's own files (an empty
folder is used as it is, without markers); one that holds anything else is
refused with :class:`CacheError` (``--cache-dir .`` must not turn the project
into a cache). The config's ``cache-dir`` must lie inside the project
(checked in :func:`xferaudit.config.load_config`); ``--cache-dir`` may point
anywhere.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import re
import stat
import sys
from dataclasses import fields
from pathlib import Path
from typing import Any, Optional

from ... import __version__
from ..._atomic import atomic_write
from ...config import Config
from ..codes import CODES, IMPLICIT_OP_CODES
from ..site import FileResult, Site

FORMAT = 1
KEEP_FILES = 4  # findings files of other keys kept (older tool versions, other configs)
_SITE_FIELDS = tuple(f.name for f in fields(Site) if f.name != "path")
_PKG = Path(__file__).resolve().parents[2]  # xferaudit/ (this is static/project/cache.py)
#: Modules outside static/ whose code decides what the finder reports.
_OTHER_CODE = ("rules.py", "config.py", "wrapform.py")


def _code_files() -> list[Path]:
    """Every file whose content can change a finding: the whole static package
    (found, not listed by hand), the rule table's modules, and every pack's data."""
    from ...rules import pack_files

    static = []
    for folder, subfolders, names in os.walk(_PKG / "static"):  # (os.walk: a third of rglob's time, every run)
        subfolders[:] = [d for d in subfolders if d != "__pycache__"]
        static.extend(Path(folder, n) for n in names if n.endswith(".py"))
    return sorted(static) + [_PKG / p for p in _OTHER_CODE] + list(pack_files())


#: The names a cache folder may hold: findings files, the markers, temporaries.
_OWN = re.compile(r"(?:findings|scripted|placed|compiled|clean)-[0-9a-f]+\.json|\.gitignore|CACHEDIR\.TAG"
                  r"|\.(?:findings|scripted|placed|compiled|clean)-.*\.xferaudit-tmp", re.S)


class CacheError(ValueError):
    """The cache folder cannot be used (it holds other files, or is not a folder)."""


def check_folder(directory: Path) -> None:
    """Raise :class:`CacheError` unless `directory` is missing, empty, or holds
    only the cache's own files. An unreadable folder passes (the cache is then
    skipped, as any cache that cannot be read)."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise CacheError(f"cache folder {directory}: not a folder") from None
    except OSError:
        return
    foreign = sorted(n for n in names if not _OWN.fullmatch(n))
    if foreign:
        shown = ", ".join(repr(n) for n in foreign[:3]) + (", ..." if len(foreign) > 3 else "")
        raise CacheError(
            f"cache folder {directory} holds other files ({shown}); xferaudit keeps its cache "
            "in a folder of its own: give a new or empty one with --cache-dir (or use --no-cache)"
        )


def code_fingerprint() -> str:
    """A hash of the tool's own classifying code and packs: a changed finder
    must not be answered from an old cache even if the version string is the same."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{__version__}|{FORMAT}|{sys.version_info[:2]}".encode())
    top = os.path.join(str(_PKG), "")
    for p in _code_files():
        path = str(p)
        # (its name below the package, with forward slashes: cut from the string, not pathlib's relative_to)
        h.update((path[len(top):].replace(os.sep, "/") if path.startswith(top) else p.name).encode())
        try:
            with open(path, "rb") as f:
                h.update(f.read())
        except OSError:
            pass
    return h.hexdigest()


def cache_key(cfg: Config) -> str:
    h = hashlib.blake2b(digest_size=12)
    h.update(code_fingerprint().encode())
    h.update(
        json.dumps(
            {"packs": list(cfg.packs), "rules": list(cfg.rule_rows), "implicit": cfg.implicit,
             "gpu-first-exclude": list(cfg.gpu_first_exclude)}, sort_keys=True, default=str
        ).encode()
    )
    return h.hexdigest()


def _encode(res: FileResult) -> list:
    return [
        res.error,
        res.error_line,
        res.error_column,
        [[ln, list(codes)] for ln, codes in res.suppressions],
        [[getattr(s, f) for f in _SITE_FIELDS] for s in res.sites],
        res.bare_own,
        res.repaired,
    ]


class _Malformed(ValueError):
    """A cache entry that no run of the finder wrote."""


def _want(ok: bool) -> None:
    if not ok:
        raise _Malformed


def _is_int(v: object, low: int, high: int) -> bool:
    return type(v) is int and low <= v <= high


def _is_line(v: object, lines: int) -> bool:
    return _is_int(v, 1, lines)


def _strings(v: object) -> bool:
    return isinstance(v, list) and all(type(c) is str for c in v)


# Each site field's JSON type: the types Site declares (its annotations are strings).
_FIELD_TYPES = {"int": (int,), "str": (str,), "bool": (bool,), "Optional[str]": (str, type(None))}
_SITE_TYPES = tuple(_FIELD_TYPES[f.type] for f in fields(Site) if f.name != "path")
_KINDS = frozenset({"up", "down", "move", "graph"})


#: Each field's type as the finder writes it, as one tuple per form a site may take (a tuple of the
#: values' types is looked up, not each value tested: a warm run decodes every site of the project).
_SITE_SHAPES = frozenset(itertools.product(*_SITE_TYPES))


def _site(vals: object, display: str, lines: int) -> Site:
    _want(type(vals) is list and tuple(map(type, vals)) in _SITE_SHAPES)
    s = Site(display, *vals)
    _want(_is_line(s.line, lines) and _is_int(s.end_line, s.line, lines))
    _want(s.column >= 1 and s.end_column >= 1 and s.byte_col >= 0)
    _want(s.kind in _KINDS and s.rule in CODES)
    _want(not s.implicit or IMPLICIT_OP_CODES.get(s.op) == s.rule)
    return s


#: The entry of a file with nothing to report (:func:`_encode` of a bare result).
_PLAIN = [None, 1, 1, [], [], [], False]


def _decode(row: object, display: str, lines: int = 2**31) -> FileResult:
    """The FileResult of a cache entry; :class:`_Malformed` (a ValueError) unless
    every field has the type and range the finder writes (`lines`: a bound on
    the file's line count)."""
    if row == _PLAIN and row[6] is False and type(row[1]) is type(row[2]) is int:  # (most files: nothing)
        return FileResult(path=display)
    _want(isinstance(row, list) and len(row) == 7)
    error, eline, ecol, sups, sites, bare_own, repaired = row
    _want(error is None or type(error) is str)
    _want(_is_line(eline, lines) and _is_int(ecol, 1, 2**31) and type(repaired) is bool)
    _want(isinstance(bare_own, list) and all(_is_line(n, lines) for n in bare_own))
    _want(isinstance(sups, list) and isinstance(sites, list))
    _want(all(isinstance(x, list) and len(x) == 2 and _is_line(x[0], lines) and _strings(x[1]) for x in sups))
    res = FileResult(path=display, error=error, error_line=eline, error_column=ecol, bare_own=bare_own,
                     repaired=repaired)
    res.suppressions = [(ln, tuple(codes)) for ln, codes in sups]
    res.sites = [_site(vals, display, lines) for vals in sites]
    return res


def line_bound(data: bytes) -> int:
    """A line count no file of these bytes exceeds, for free: its length (a line
    takes a byte at least; a notebook's code, in JSON strings, two). Counting its
    line ends would cost as much as hashing it, on every cached file."""
    return len(data) + 1


def content_digest(data: bytes) -> str:
    """The part of a file's key its own bytes make."""
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def file_digest(data: bytes, scripted: Optional[dict], placed: Optional[dict], content: Optional[str] = None) -> str:
    """A file's key in the cache: its content's digest (:func:`content_digest`),
    then, where the project hands it something, the digest of what: its
    functions TorchScript compiles from elsewhere, the placing helpers of other
    modules it calls (so a change there reaches its findings, and a run can tell
    a file whose content the cache knows from one it must read again).
    `content`: :func:`content_digest` of `data`, where the caller has it."""
    key = content_digest(data) if content is None else content
    if not scripted and not placed:
        return key
    from ..values.project import digest_of

    h = hashlib.blake2b(digest_size=16)
    if scripted:
        h.update(repr(sorted(scripted.items())).encode("utf-8", "surrogateescape"))
    h.update(digest_of(placed))
    return key + h.hexdigest()


class Cache:
    def __init__(self, directory: Path, key: str) -> None:
        self.directory = Path(directory)
        self.path = self.directory / f"findings-{key}.json"
        self.entries: dict[str, list] = {}
        self.new: dict[str, list] = {}
        self._mtime: Optional[int] = None
        self._load()

    @classmethod
    def open(cls, directory: Path, cfg: Config) -> "Cache":
        """The cache in `directory` for `cfg`; :class:`CacheError` when the folder
        holds files that are not the cache's."""
        check_folder(Path(directory))
        return cls(directory, cache_key(cfg))

    def _load(self) -> None:
        try:
            # Non-blocking, and only a regular file: a FIFO in the cache's place
            # would block the open and the read.
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            with open(fd, "rb") as fh:
                st = os.fstat(fd)
                if not stat.S_ISREG(st.st_mode):
                    return
                data = json.loads(fh.read())
        except (OSError, ValueError, RecursionError, MemoryError):
            return
        files = data.get("files") if isinstance(data, dict) and data.get("format") == FORMAT else None
        if isinstance(files, dict):
            # [digest, findings] per path; the findings are checked when used (get)
            self.entries = {k: v for k, v in files.items()
                            if isinstance(v, list) and len(v) == 2 and type(v[0]) is str}
            self._mtime = st.st_mtime_ns

    def get(self, relpath: str, digest: str, display: str, lines: int = 2**31) -> Optional[FileResult]:
        """The cached findings of `relpath` if its content hash is `digest` and
        the entry is well formed (`lines`: a bound on the file's line count,
        see :func:`line_bound`); else None (parse it again)."""
        e = self.entries.get(relpath)
        if e is None or e[0] != digest:
            return None
        try:
            return _decode(e[1], display, lines)
        except (TypeError, ValueError):
            return None

    def knows_content(self, relpath: str, content: str) -> bool:
        """The cache holds findings of `relpath` for this content (`content`: its
        :func:`content_digest`), whatever the project handed the file then."""
        e = self.entries.get(relpath)
        return e is not None and e[0][:len(content)] == content

    def knows_data(self, relpath: str, data: bytes) -> bool:
        """:meth:`knows_content` of these bytes, hashed only where the cache holds `relpath`."""
        return relpath in self.entries and self.knows_content(relpath, content_digest(data))

    def put(self, relpath: str, digest: str, res: FileResult) -> None:
        entry = [digest, _encode(res)]
        self.entries[relpath] = entry
        self.new[relpath] = entry

    def save(self) -> bool:
        """Write the new entries (merged over what another run may have written
        meanwhile); False when the cache folder is not writable."""
        if not self.new:
            return True
        try:
            self._make_folder()
            try:
                if self.path.stat().st_mtime_ns != self._mtime:
                    fresh = Cache(self.directory, self.path.stem[len("findings-"):])
                    fresh.entries.update(self.new)
                    self.entries = fresh.entries
            except OSError:
                pass
            payload = json.dumps({"format": FORMAT, "files": self.entries}, separators=(",", ":"))
            atomic_write(self.path, payload, special="refuse")
            self._prune()
            self.new = {}
            return True
        except OSError:
            return False

    def _make_folder(self) -> None:
        try:
            self.directory.mkdir(parents=True)
        except FileExistsError:
            return
        # markers only in a folder this run made
        (self.directory / ".gitignore").write_text("# Created by xferaudit automatically.\n*\n", encoding="utf-8")
        (self.directory / "CACHEDIR.TAG").write_text(
            "Signature: 8a477f597d28d172789f06886806bc55\n"
            "# This file is a cache directory tag created by xferaudit.\n",
            encoding="utf-8",
        )

    def _side_path(self, name: str) -> Path:
        return self.directory / f"{name}-{self.path.stem[len('findings-'):]}.json"

    def side_get(self, name: str, key: str) -> Any:
        """A whole-project fact kept beside the findings (``scripted``: what
        TorchScript compiles, :mod:`.scripted`), if it was saved under `key`;
        else None."""
        try:
            fd = os.open(self._side_path(name), os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            with open(fd, "rb") as fh:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    return None
                data = json.loads(fh.read())
        except (OSError, ValueError, RecursionError, MemoryError):
            return None
        if isinstance(data, dict) and data.get("format") == FORMAT and data.get("key") == key:
            return data.get("value")
        return None

    def side_put(self, name: str, key: str, value: Any) -> None:
        """Save `value` for :meth:`side_get`; skipped when the folder is not writable."""
        try:
            self._make_folder()
            payload = json.dumps({"format": FORMAT, "key": key, "value": value}, separators=(",", ":"))
            atomic_write(self._side_path(name), payload, special="refuse")
            for old in self.directory.glob(f"{name}-*.json"):
                if old != self._side_path(name):
                    old.unlink()
        except OSError:
            pass

    def _prune(self) -> None:
        others = sorted(
            (p for p in self.directory.glob("findings-*.json") if p != self.path),
            key=lambda p: p.stat().st_mtime,
            reverse=True,
        )
        for p in others[KEEP_FILES:]:
            try:
                p.unlink()
            except OSError:
                pass
