"""Scan a tree: which files, which of them to parse, on how many cores, and what
the cache already knows.

``xferaudit check`` must keep up with ruff on a 2,000-file tree and answer in a
blink for the ten files pre-commit hands it, so the finder's one ``ast`` pass is
wrapped in three cheap layers:

1. **Cache** (:mod:`.cache`): each file's findings, keyed on its content hash,
   the tool's own code and the config. A warm run reads and hashes the files
   and parses none.
2. **Prefilter** (:class:`Prefilter`): a file in which no rule's name is ever
   called (``cpu(``, ``to(``, ``tensor(`` ...), aliased on import
   (``tensor as mk``), used bare (a graph decorator) and in which no wrapper or
   suppression appears can hold no site, so the finder does not visit it. It
   is still parsed (the C parser alone, no visit): a file that does not parse
   is reported as XFA001 whatever it contains.
3. **Workers**: the cache misses are analysed on every core when there are
   enough bytes to repay a process pool's start-up (measured:
   ``bench/scan_speed.py``); a handful is analysed in-process.

The rule table is the one the finder, the codemod and the runtime share; this
module only reads it.
"""

from __future__ import annotations

import ast
import hashlib
import os
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional, Sequence

from ..config import Config, iter_python_files
from ..rules import RuleTable
from .finder import FileResult, decode_source, find_in_source

#: Below this many bytes to parse, a process pool costs more than it saves.
PARALLEL_MIN_BYTES = 1_500_000
PARALLEL_MIN_FILES = 8


# --- prefilter ---------------------------------------------------------------------


class Prefilter:
    """A superset test on a file's bytes: False proves the file holds no site and
    no suppression of ours, so the finder need not visit it (it is still parsed,
    so a syntax error is still reported).

    True for any call of a rule's name (method or function: ``x.cpu(``,
    ``T.tensor (``), an import alias of a function row's name
    (``from torch import tensor as mk``), a graph function named on a decorator
    line (``@torch.compile``), the runtime's name (wrapped sites), an ``XFA``
    code (suppressions), or the import name of a pack that is on only by import.
    Substring tests run first (they are memchr-fast); one regex settles the rest.
    """

    def __init__(self, rules: RuleTable) -> None:
        always = rules.always
        words: set[str] = set()
        aliasable: set[str] = set()
        bare: set[str] = set()
        for r in rules.rules:
            if always is not None and r.pack not in always:
                continue
            names = {r.method} | {a.rsplit(".", 1)[-1] for a in r.aliases}
            words |= names
            words.add(r.wrapper)
            if r.call == "function":
                aliasable |= names
                if r.kind == "graph":
                    bare |= names
        literals = {b"xferaudit", b"XFA"}
        literals |= {f"{n} as ".encode() for n in aliasable}
        if always is not None:
            for mods in rules.pack_imports.values():
                literals |= {m.split(".", 1)[0].encode() for m in mods}
        self.literals = tuple(sorted(literals))
        self.calls = re.compile(rb"\b(?:" + _alt(words) + rb")[\s\\]*\(") if words else None
        self.bare = re.compile(rb"@[^\n]*\b(?:" + _alt(bare) + rb")\b") if bare else None

    def __call__(self, data: bytes) -> bool:
        for lit in self.literals:
            if lit in data:
                return True
        if self.calls is not None and self.calls.search(data) is not None:
            return True
        return self.bare is not None and b"@" in data and self.bare.search(data) is not None


def prefilter(rules: RuleTable) -> Prefilter:
    return Prefilter(rules)


def _alt(words: Iterable[str]) -> bytes:
    return b"|".join(re.escape(w.encode()) for w in sorted(words, key=lambda w: (-len(w), w)))


# --- one file ------------------------------------------------------------------------

_STATE: list = []  # the worker's (table, prefilter), set by _init (fork or spawn alike)


def _init(table: RuleTable) -> None:
    _STATE[:] = [table, Prefilter(table)]


def analyze(data: bytes, display: str, relpath: str, rules: RuleTable, pf: Optional[Prefilter]) -> FileResult:
    """One file's findings from its bytes: decode by its declared encoding; parse
    only when the prefilter passes it, else just check that it parses."""
    try:
        text = decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError) as e:
        res = FileResult(path=display)
        res.error = f"cannot decode: {e}"
        return res
    if pf is None or pf(data):
        return find_in_source(text, display, rules, relpath)
    res = FileResult(path=display)
    err = syntax_error(text, display)
    if err is not None:
        res.error, res.error_line, res.error_column = err
    return res


def syntax_error(text: str, path: str) -> Optional[tuple[str, int, int]]:
    """(message, line, column) of the file's syntax error, or None."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text, filename=path)
    except SyntaxError as e:
        return f"SyntaxError: {e.msg}", e.lineno or 1, e.offset or 1
    except (ValueError, RecursionError, MemoryError) as e:
        return f"{type(e).__name__}: {e}", 1, 1
    return None


def find_in_bytes(data: bytes, display: str, relpath: str, rules: RuleTable) -> FileResult:
    """Decode by the file's declared encoding and find (no prefilter)."""
    return analyze(data, display, relpath, rules, None)


def _work(item: tuple) -> FileResult:
    data, display, relpath = item
    table, pf = _STATE
    return analyze(data, display, relpath, table, pf)


def worker_count() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


# --- the scan ------------------------------------------------------------------------


@dataclass
class ScanStats:
    files: int = 0
    cached: int = 0
    parsed: int = 0  # not answered by the cache
    workers: int = 1


@dataclass
class Scan:
    """Results in the order the files were found, paths displayed relative to
    the working directory (like ruff), plus each file's path relative to the root."""

    results: list[FileResult] = field(default_factory=list)
    relpaths: list[str] = field(default_factory=list)
    stats: ScanStats = field(default_factory=ScanStats)


def display_path(path: str, cwd: str) -> str:
    """`path` relative to `cwd` when it is under it, else absolute (ruff's habit)."""
    ap = os.path.abspath(path)
    prefix = cwd.rstrip(os.sep) + os.sep
    if ap.startswith(prefix):
        ap = ap[len(prefix):]
    return ap.replace(os.sep, "/") if os.sep != "/" else ap


def scan(
    paths: Sequence,
    cfg: Config,
    rules: Optional[RuleTable] = None,
    *,
    use_cache: bool = True,
    cache_dir: Optional[Path] = None,
    jobs: Optional[int] = None,
) -> Scan:
    """Find the sites of every Python file under `paths`.

    A path that cannot be read becomes a result with ``error`` set (reported as
    XFA001); the other files are still scanned.
    """
    rules = rules if rules is not None else cfg.table()
    out = Scan()
    cwd = os.getcwd()
    files = list(iter_python_files([Path(p) for p in paths], cfg))
    out.stats.files = len(files)
    cache = None
    if use_cache and files:
        from .cache import Cache

        cache = Cache.open(cache_dir or cfg.cache_path(), cfg)
    todo: list[tuple[int, tuple]] = []  # (index in results, (data, display, relpath))
    digests: dict[int, str] = {}
    for f in files:
        display = display_path(os.fspath(f), cwd)
        rel = cfg.relpath(f)
        i = len(out.results)
        out.relpaths.append(rel)
        try:
            with open(f, "rb") as fh:
                data = fh.read()
        except OSError as e:
            res = FileResult(path=display)
            res.error = f"cannot read: {e.strerror or e}"
            out.results.append(res)
            continue
        if cache is not None:
            digest = hashlib.blake2b(data, digest_size=16).hexdigest()
            hit = cache.get(rel, digest, display)
            if hit is not None:
                out.stats.cached += 1
                out.results.append(hit)
                continue
            digests[i] = digest
        todo.append((i, (data, display, rel)))
        out.results.append(None)  # type: ignore[arg-type]
    if todo:
        out.stats.parsed = len(todo)
        found, out.stats.workers = _run(todo, rules, jobs)
        for (i, _), res in zip(todo, found):
            out.results[i] = res
    if cache is not None:
        for i, digest in digests.items():
            cache.put(out.relpaths[i], digest, out.results[i])
        cache.save()
    return out


def _run(todo: list, rules: RuleTable, jobs: Optional[int]) -> tuple[list[FileResult], int]:
    nbytes = sum(len(item[0]) for _, item in todo)
    workers = jobs if jobs is not None else worker_count()
    if jobs is None and (nbytes < PARALLEL_MIN_BYTES or len(todo) < PARALLEL_MIN_FILES):
        workers = 1
    workers = max(1, min(workers, len(todo)))
    if workers == 1:
        pf = Prefilter(rules)
        return [analyze(d, disp, rel, rules, pf) for _, (d, disp, rel) in todo], 1
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # Largest files first, so no worker is left with a big one at the end.
    order = sorted(range(len(todo)), key=lambda k: -len(todo[k][1][0]))
    items = [todo[k][1] for k in order]
    try:
        ctx = multiprocessing.get_context("fork")
    except ValueError:  # pragma: no cover - no fork on this platform
        ctx = multiprocessing.get_context()
    chunk = max(1, min(16, len(items) // (workers * 8)))
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init, initargs=(rules,)) as ex:
        found = list(ex.map(_work, items, chunksize=chunk))
    results: list = [None] * len(todo)
    for k, res in zip(order, found):
        results[k] = res
    return results, workers
