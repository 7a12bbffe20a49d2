"""Scan a tree: which files, what the cache already knows, and on how many cores.

``xferaudit check`` must keep up with ruff on a 2,000-file tree and answer in a
blink for the ten files pre-commit hands it. What it costs, measured over the
installed torch package (``bench/scan_speed.py``): parsing with ``ast`` is most
of it; the finder's own pass is a fraction, because of three layers:

1. **Cache** (:mod:`.cache`): each file's findings, keyed on its content hash
   (and what the project hands it), the tool's own code and the rows in force.
   A warm run whose project is unchanged (each file's state, what an edit
   cannot keep) reads and hashes no file (:func:`_unchanged`); one after an
   edit reads and hashes the files and parses only the misses.
2. **Prefilter**, inside the finder (``prefilter.candidate_lines``): one regex
   pass over the text lists the lines where a rule's name is called
   (``cpu(``, ``to(``, ``tensor(``, an import alias of one, a graph decorator);
   the finder visits only the statements that span such a line and binds names
   only in the functions around them. A file with no such line is parsed (so a
   syntax error is still reported, as XFA001, whatever the file contains) and
   not visited. A separate bytes prefilter that skipped the parse for those
   files was measured too: it cost as much CPU as it saved on the finder's side
   and would have let syntax errors in such files pass unreported.
3. **Workers**: the cache misses are analysed on every core when there are
   enough bytes to repay a process pool's start-up; a handful is analysed
   in-process. Where the project's maps (TorchScript, ``torch.compile``,
   placing helpers) are not remembered either, the pool reads them from the
   same parse of each file (:mod:`.onepass`): no serial pass before it.

The rule table is the one the finder, the codemod and the runtime share; this
module only reads it.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from ...config import Config, iter_python_paths
from ...rules import RuleTable
from ..site import FileResult

# (the finder, and with it the value layer, is imported by the first file analysed: a warm run answers every
# file from the cache and imports neither)

#: Below this many bytes to parse, a process pool costs more than it saves.
PARALLEL_MIN_BYTES = 1_500_000
PARALLEL_MIN_FILES = 8


# --- one file ------------------------------------------------------------------------

_STATE: list = []  # the worker's rule table, set by _init (fork or spawn alike)


def _init(table: RuleTable, run_pid: int = 0) -> None:
    from ..._workers import die_with_parent  # end with the run, leave Ctrl-C to it

    die_with_parent(run_pid)
    _STATE[:] = [table]


def analyze(data: bytes, display: str, relpath: str, rules: RuleTable, evidence: Sequence = (),
            scripted: Optional[dict] = None, placed: Optional[dict] = None,
            parsed: Optional[tuple] = None) -> FileResult:
    """One file's findings from its bytes, decoded by its declared encoding;
    `evidence`: the entries of run files naming it (``check --evidence``);
    `scripted`: its functions that TorchScript compiles from another file
    (:mod:`.scripted`; ``wrap`` leaves their sites, so check says so);
    `placed`: the helpers of other modules that place what they return
    (:mod:`..values.project`); `parsed`: (text, tree) of the file as a project
    pass of this process read and parsed it, used where the text is the file's
    (no second parse).

    The cycle collector is paused for the whole file: its tree and the value
    layer's objects are freed by their counts on return, so the next
    collection walks what survives, not every node of the tree (as it did
    when only the parser ran paused: about a tenth of the scan)."""
    from ..front.source import collector_paused

    with collector_paused():
        return _analyze(data, display, relpath, rules, evidence, scripted, placed, parsed)


def _analyze(data: bytes, display: str, relpath: str, rules: RuleTable, evidence: Sequence,
             scripted: Optional[dict], placed: Optional[dict] = None, parsed: Optional[tuple] = None) -> FileResult:
    from ..front import notebook
    from ..front.finder import find_in_source
    from ..front.source import parse

    nb = notebook.is_notebook(relpath) or notebook.is_notebook(display)
    text, error = notebook.code_text(data, relpath, display)
    if text is None:
        res = FileResult(path=display)
        res.error = error
        return res
    if not evidence or nb:
        tree = parsed[1] if parsed is not None and not nb and parsed[0] == text else None
        return find_in_source(text, display, rules, relpath, None, tree, scripted=scripted, placed=placed)
    try:
        tree = parse(text, display)  # once, for the evidence and the finder
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return find_in_source(text, display, rules, relpath, scripted=scripted, placed=placed)  # XFA001: no evidence to match
    fe = _match_evidence(evidence, text, tree, data, display, rules)
    res = find_in_source(text, display, rules, relpath, fe.hot, tree, scripted=scripted, placed=placed)
    res.evidence = fe
    return res


def _match_evidence(entries: Sequence, text: str, tree, data: bytes, path: str, rules: RuleTable):
    """The run's lines of one file, matched to its text (through its unwrapped
    text where ``wrap`` rewrote them: libcst is imported only then)."""
    from ..front.evidence import match_file
    from ..front.source import decode_source

    def bare() -> Optional[str]:
        from ..codemod import CodemodError, unwrap_source

        try:
            new = unwrap_source(data, path, rules).new
        except CodemodError:
            return None
        return decode_source(new) if new is not None else None

    return match_file(entries, text, tree, bare=bare)


def _work(item: tuple) -> FileResult:
    data, display, relpath, evidence, scripted, placed = item
    return analyze(data, display, relpath, _STATE[0], evidence, scripted, placed)


def _threads() -> int:
    """OS threads in this process (native ones too: a library's thread pool)."""
    try:
        return len(os.listdir("/proc/self/task"))
    except OSError:  # pragma: no cover - not Linux
        import threading

        return threading.active_count()


def _start_method() -> str:
    """fork when it is safe (one thread: the command line), else spawn: forking
    a process whose other threads hold locks (JAX's, a test runner's) can hang."""
    import multiprocessing

    if "fork" in multiprocessing.get_all_start_methods() and _threads() == 1:
        return "fork"
    return "spawn"


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
    gone: list = field(default_factory=list)  # evidence of files under the paths that no longer exist
    # absolute path -> its functions that TorchScript compiles from another file (:mod:`.scripted`)
    scripted: dict = field(default_factory=dict)
    # the project's helpers that place what they return, and its files' modules (:mod:`..values.project`)
    placed: dict = field(default_factory=dict)
    # absolute path -> its functions that torch.compile compiles, and the spans that stay in the graph
    # (:mod:`.compiled`); applied to the findings after the cache (:func:`..front.graph_breaks.mark`)
    compiled: dict = field(default_factory=dict)


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
    progress: Optional[Any] = None,
    evidence: Optional[Any] = None,
) -> Scan:
    """Find the sites of every Python file under `paths`.

    `evidence` (an :class:`~..front.evidence.Evidence`): run files whose lines are
    matched to the files that they name; those files are analysed with it
    (each result's ``evidence``), never answered from the cache. Lines of files
    under `paths` that no longer exist are ``Scan.gone``.

    A path that cannot be read becomes a result with ``error`` set (reported as
    XFA001); the other files are still scanned. `progress`, if given (a
    :class:`~xferaudit.static.project.progress.Progress`), is told the number of files,
    then stepped once per file as it is done, with the sites found in it.
    """
    rules = rules if rules is not None else cfg.table()
    out = Scan()
    cwd = os.getcwd()
    # (absolute from here on: a relative path costs a getcwd in each of the many abspaths below)
    # (each file's os.stat and the folders walked, which the walk of the project's root takes from here)
    stats: dict = {}
    walked: dict = {}
    files = list(iter_python_paths([os.path.join(cwd, os.fspath(p)) for p in paths], cfg, stats, walked))
    out.stats.files = len(files)
    if progress is not None:
        progress.total = len(files)

    def tick(sites: int) -> None:
        if progress is not None:
            progress.step(sites)

    cache = None
    if use_cache and files:
        from .cache import Cache

        cache = Cache.open(cache_dir or cfg.cache_path(), cfg)
    project = None
    if files:
        from .scripted import project_of

        project = project_of(files, cfg, stats, walked)  # (the project's files, walked and stat'ed once for the passes)
        if cache is not None and not evidence and _unchanged(files, project, cfg, cache, cwd, out, tick):
            return out
    read: list = []  # (index in results, absolute path, display, relpath, bytes) of the files read
    for f in files:
        ap = os.path.abspath(f)
        display = display_path(ap, cwd)
        rel = cfg.relpath(ap)
        i = len(out.results)
        out.relpaths.append(rel)
        try:
            with open(f, "rb") as fh:
                data = fh.read()
        except OSError as e:
            res = FileResult(path=display)
            res.error = f"cannot read: {e.strerror or e}"
            out.results.append(res)
            tick(0)
            continue
        out.results.append(None)  # type: ignore[arg-type]
        read.append((i, ap, display, rel, data))
    todo: list[tuple[int, tuple]] = []  # (index in results, (data, display, relpath, evidence, scripted, placed))
    digests: dict[int, str] = {}  # the cache key of each file read (of those analysed, to save)
    fresh: set = set()
    trees: dict = {}  # absolute path -> (text, tree) of a file the serial project passes parsed
    if project is not None:
        from .maps import remembered

        maps = remembered(project, cfg, cache)
        pooled = None
        if maps is None and not evidence:
            pooled = _one_pass(read, project, cfg, rules, cache, jobs, out, tick)
        if pooled is not None:
            digests, cached = pooled
            fresh = set(digests) - cached
        else:
            out.scripted, out.compiled, out.placed = maps if maps is not None else _maps(project, cfg, cache, trees)
            todo = _lookups(read, out, cache, evidence, digests, tick)
            fresh = {i for i, _ in todo}
    if todo:
        out.stats.parsed = len(todo)
        # (the trees the compiler passes parsed, by index, for the files analysed in this process)
        here = {i: trees[ap] for i, ap, *_ in read if ap in trees} if trees else None
        trees.clear()  # (each freed once its file is analysed)
        found, out.stats.workers = _run(todo, rules, jobs, tick, here)
        for (i, _), res in zip(todo, found):
            out.results[i] = res
    if cache is not None:
        for i, digest in digests.items():
            if i in fresh:
                cache.put(out.relpaths[i], digest, out.results[i])
        if cache.save() and project is not None and not evidence:
            _remember_clean(project, cache, {out.relpaths[i]: d for i, d in digests.items()})
    _mark_compiled(out)  # (after the cache: it holds each file's own findings, this the project's)
    if evidence:
        out.gone = _gone(evidence, paths)
    return out


def _maps(project, cfg: Config, cache, trees: Optional[dict] = None) -> tuple:
    """The project passes, serially (the placing helpers' beside the TorchScript
    pass on a large project): (scripted, compiled, placed); `trees`, where
    given, is filled with (text, tree) of each file the compiler passes parsed
    (by absolute path), which its analysis need not parse again."""
    from .compiled import for_check as compiled_for_check
    from .placed import start
    from .reach import project_sources
    from .scripted import for_check

    placed = start(project, cfg, cache)  # (a large project's: beside the TorchScript pass)
    reading = project_sources(project, cfg)  # (read and parsed once for the two compiler passes)
    made: list = []

    def sources():
        made.append(reading())
        return made[-1]

    scripted = for_check(project, cfg, cache, sources)
    compiled = compiled_for_check(project, cfg, cache, sources)
    if made and trees is not None:
        got = made[-1]
        trees.update((ap, (got.texts[ap], m.tree)) for ap, m in got.parsed.items() if m is not None)
    made.clear()  # (the sources read: only the trees handed on are kept)
    return scripted, compiled, placed()


def _lookups(read: list, out: "Scan", cache, evidence, digests: dict, tick: Callable[[int], None]) -> list:
    """The files the cache answers (put in `out`) and those to analyse (returned;
    `digests`: the cache key of each, filled)."""
    from .cache import file_digest, line_bound
    from ..values.project import for_file

    todo = []
    for i, ap, display, rel, data in read:
        entries = evidence.for_file(ap) if evidence else ()
        scripted = out.scripted.get(ap)
        placed = for_file(out.placed, ap)
        if entries:  # (findings on run evidence are never cached)
            todo.append((i, (data, display, rel, tuple(entries), scripted, placed)))
            continue
        if cache is not None:
            # (what scripts the file from elsewhere changes its findings, so do the helpers elsewhere it calls)
            digest = file_digest(data, scripted, placed)
            digests[i] = digest
            hit = cache.get(rel, digest, display, line_bound(data))
            if hit is not None:
                out.stats.cached += 1
                out.results[i] = hit
                tick(len(hit.sites))
                continue
        todo.append((i, (data, display, rel, (), scripted, placed)))
    return todo


def _one_pass(read: list, project, cfg: Config, rules: RuleTable, cache, jobs: Optional[int], out: "Scan",
              tick: Callable[[int], None]) -> Optional[dict]:
    """The cold scan in one parse per file (:mod:`.onepass`) where the files to
    analyse are enough for a pool: `out` filled, the cache keys of its fresh
    results returned; None where the pool is not worth it (or failed: the
    serial passes then run)."""
    from .onepass import run

    misses = [t for t in read if cache is None or not cache.knows_data(t[3], t[4])]
    workers = _pool_size(sum(len(t[4]) for t in misses), len(misses), jobs)
    if workers == 1:
        return None

    def done(res: FileResult) -> None:
        tick(len(res.sites))

    try:
        results, digests, cached, out.scripted, out.compiled, out.placed = run(
            read, project, cfg, rules, cache, workers, _start_method(), done)
    except (RuntimeError, OSError, EOFError):
        return None
    for i, res in results.items():
        out.results[i] = res
    out.stats.parsed = len(results) - len(cached)
    out.stats.cached = len(cached)
    out.stats.workers = workers
    return digests, cached


def _unchanged(files: list, project, cfg: Config, cache, cwd: str, out: "Scan", tick: Callable[[int], None]) -> bool:
    """A warm run: where no file of the project changed since a run that saved
    every file's key (:func:`_remember_clean`, under the project's state: what an
    edit cannot keep of each file, :func:`.scripted.file_state`), the findings
    are the cache's, each file neither read nor hashed; `out` filled. False
    (`out` untouched) where any file is not so answered.

    What it does per file is kept small (a torch-sized tree has 2,000 files):
    its names relative to the root and to the working directory are cut from
    its absolute path, and the cache's entry is checked as it is decoded
    (:meth:`.cache.Cache.get`). Of the project's maps it reads the two that the
    findings need (TorchScript's, and ``torch.compile``'s, applied after the
    cache); the placing helpers' map, which only the fixes read, is read when
    first asked for (:class:`_Later`)."""
    from .maps import remembered

    keys = cache.side_get("clean", project.state)
    if not isinstance(keys, dict):
        return False
    sizes = project.sizes or {}
    root = str(cfg.root)
    under_root = root.rstrip(os.sep) + os.sep
    under_cwd = cwd.rstrip(os.sep) + os.sep
    slash = os.sep == "/"
    get = cache.get
    results, relpaths, aps = [], [], []
    for f in files:
        ap = os.path.abspath(f)
        aps.append(ap)
        if slash and ap.startswith(under_root):
            rel = ap[len(under_root):]  # (cfg.relpath's answer, without its second look)
        else:
            rel = cfg.relpath(ap)
        display = ap[len(under_cwd):] if slash and ap.startswith(under_cwd) else display_path(ap, cwd)
        digest, size = keys.get(rel), sizes.get(ap)
        if not isinstance(digest, str) or size is None:
            return False
        hit = get(rel, digest, display, size + 1)  # (line_bound of its bytes)
        if hit is None:
            return False
        results.append(hit)
        relpaths.append(rel)
    maps = remembered(project, cfg, cache, ("scripted", "compiled"))
    if maps is None:
        return False
    out.scripted, out.compiled = maps
    out.placed = _Later(lambda: _placed(project, cfg, cache))
    out.results, out.relpaths = results, relpaths
    out.stats.cached = len(results)
    for hit in results:
        tick(len(hit.sites))
    _mark_compiled(out, aps)
    return True


def _placed(project, cfg: Config, cache) -> dict:
    """The placing helpers' map (:func:`.placed.for_check`: remembered, else made and saved)."""
    from .placed import for_check

    return for_check(project, cfg, cache)


class _Later(Mapping):
    """A map read when first used: a warm run's placing helpers (the value
    layer's module is imported, and the map read, only for what asks: the fixes)."""

    def __init__(self, make: Callable[[], dict]) -> None:
        self._make: Optional[Callable[[], dict]] = make
        self._value: dict = {}

    def _got(self) -> dict:
        if self._make is not None:
            self._value, self._make = self._make(), None
        return self._value

    def __getitem__(self, key):
        return self._got()[key]

    def __iter__(self):
        return iter(self._got())

    def __len__(self) -> int:
        return len(self._got())


def _remember_clean(project, cache, keys: dict) -> None:
    """Save each file's cache key under the project's state, for :func:`_unchanged`
    (with the keys saved under the same state by a run over other files of it)."""
    old = cache.side_get("clean", project.state)
    if isinstance(old, dict):
        if all(old.get(k) == v for k, v in keys.items()):
            return
        keys = {**old, **keys}
    cache.side_put("clean", project.state, keys)


def _mark_compiled(out: Scan, paths: Optional[list] = None) -> None:
    """The reads that break the graph of code ``torch.compile`` compiles take
    their code (:func:`..front.graph_breaks.mark`): a look-up per site
    (`paths`: each result's absolute path, where the caller has them)."""
    if not out.compiled:
        return
    from ..front.graph_breaks import mark

    for k, res in enumerate(out.results):
        entry = None
        if res is not None:
            entry = out.compiled.get(paths[k] if paths is not None else os.path.abspath(res.path))
        if entry:
            mark(res.sites, entry, res.suppressions)


def _gone(evidence: Any, paths: Sequence) -> list:
    """Entries naming a file under `paths` that no longer exists (a file named
    on the command line is one pre-commit passes: it exists)."""
    tops = [os.path.abspath(os.fspath(p)) for p in paths]
    out = []
    for e in evidence.entries:
        if os.path.exists(e.file):
            continue
        if any(e.file == t or e.file.startswith(t.rstrip(os.sep) + os.sep) for t in tops):
            out.append(e)
    return out


def scan_source(data: "bytes | str", filename: str, cfg: Config, rules: Optional[RuleTable] = None,
                evidence: Optional[Any] = None) -> Scan:
    """The scan of one file's source that was not read from disk (standard
    input's bytes, an editor's or flake8's text), reported under `filename`:
    its path relative to the project root names its sites and picks its
    per-file-ignores, and an excluded path has no result at all (as when a
    folder is walked); `evidence` as for :func:`scan`."""
    rules = rules if rules is not None else cfg.table()
    out = Scan()
    ap = os.path.abspath(filename)
    rel = cfg.relpath(ap)
    root = str(cfg.root)
    if (ap == root or ap.startswith(root.rstrip(os.sep) + os.sep)) and cfg.excluded(rel):
        return out
    out.stats.files = out.stats.parsed = 1
    out.relpaths.append(rel)
    display = display_path(ap, os.getcwd())
    entries = tuple(evidence.for_file(ap)) if evidence else ()
    out.scripted, out.placed, out.compiled = _scripted_for(ap, cfg)
    scripted = out.scripted.get(ap)
    from ..front.finder import find_in_source
    from ..front.notebook import is_notebook
    from ..values.project import for_file

    placed = for_file(out.placed, ap)
    if isinstance(data, str) and not is_notebook(filename) and not entries:
        # already text: no decoding
        out.results.append(find_in_source(data, display, rules, rel, scripted=scripted, placed=placed))
    else:
        out.results.append(analyze(data.encode("utf-8") if isinstance(data, str) else data, display, rel, rules,
                                   entries, scripted, placed))
    entry = out.compiled.get(ap)
    if entry:
        from ..front.graph_breaks import mark

        mark(out.results[0].sites, entry, out.results[0].suppressions)
    return out


def _scripted_for(path: str, cfg: Config) -> tuple:
    """The project's TorchScript map, placing helpers and ``torch.compile`` map
    for a source not read from disk, from the findings cache where it can be
    read (:func:`.scripted.for_check`, :func:`.placed.for_check`,
    :func:`.compiled.for_check`: the project's files as saved)."""
    from .cache import Cache, CacheError
    from .compiled import for_check as compiled_for_check
    from .reach import project_sources
    from .scripted import for_check, project_of
    from .placed import for_check as placed_for_check

    cache = None
    if cfg.cache_path().is_dir():  # (a folder that check made: linting a text never makes one)
        try:
            cache = Cache.open(cfg.cache_path(), cfg)
        except (CacheError, OSError):
            pass
    project = project_of([path] if os.path.exists(path) else [], cfg)
    sources = project_sources(project, cfg)
    return (for_check(project, cfg, cache, sources), placed_for_check(project, cfg, cache),
            compiled_for_check(project, cfg, cache, sources))


def _pool_size(nbytes: int, nfiles: int, jobs: Optional[int]) -> int:
    """Workers for `nfiles` files of `nbytes` to analyse: `jobs` where given, else
    every core where there is enough to repay a pool's start-up, else 1."""
    workers = jobs if jobs is not None else worker_count()
    if jobs is None and (nbytes < PARALLEL_MIN_BYTES or nfiles < PARALLEL_MIN_FILES):
        workers = 1
    return max(1, min(workers, nfiles))


def _run(todo: list, rules: RuleTable, jobs: Optional[int],
         tick: Callable[[int], None] = lambda sites: None,
         trees: Optional[dict] = None) -> tuple[list[FileResult], int]:
    """`todo`'s results and the workers that made them; `trees`: (text, tree) by
    index in results of files already parsed here (used where they are analysed here)."""
    workers = _pool_size(sum(len(item[0]) for _, item in todo), len(todo), jobs)
    if workers == 1:
        done = []
        for i, (d, disp, rel, ev, scripted, placed) in todo:
            done.append(analyze(d, disp, rel, rules, ev, scripted, placed, trees.pop(i, None) if trees else None))
            tick(len(done[-1].sites))
        return done, 1
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    # Largest files first, so no worker is left with a big one at the end.
    order = sorted(range(len(todo)), key=lambda k: -len(todo[k][1][0]))
    items = [todo[k][1] for k in order]
    ctx = multiprocessing.get_context(_start_method())
    chunk = max(1, min(16, len(items) // (workers * 8)))
    with ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init,
                             initargs=(rules, os.getpid())) as ex:
        found = []
        for res in ex.map(_work, items, chunksize=chunk):
            found.append(res)
            tick(len(res.sites))
    results: list = [None] * len(todo)
    for k, res in zip(order, found):
        results[k] = res
    return results, workers
