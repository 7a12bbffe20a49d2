"""A cold ``check`` in one parse per file: the project passes' facts come from
the scan's own reading of each file.

Where the project's maps are not remembered (a file of the project changed,
or there is no cache) and there are enough bytes to analyse for a pool, a
few long-lived worker processes each take a fixed share of the files
(balanced by bytes, largest first). A worker:

1. reads, decodes and parses each file of its share once, keeps its text and
   tree, and returns the file's facts for the placing helpers
   (:func:`..values.project.file_facts`, with the summaries of its candidate
   helpers); the project's files outside the paths checked, and those the
   cache answers by their content, are read for their facts only (no parse);
2. meanwhile the lead process (this one) walks what TorchScript and
   ``torch.compile`` compile (:mod:`.scripted`, :mod:`.compiled`): it parses
   the files that hold a root itself (found by their text before the workers
   start, and taken out of their shares), and for a file the walk reaches it
   either takes the file first (a table of claims shared with the workers:
   whoever claims a file reads it) or asks the worker that holds it for its
   tree, which is sent, not parsed again;
3. the lead combines the maps (:func:`..values.project.combine` for the
   placing helpers), keeps them as the serial passes would (this process,
   beside the findings cache), and sends each worker what its files are
   handed; each worker analyses the trees it holds (the finder and the value
   layer, :func:`..front.finder.find_in_source` given the tree), and the
   lead analyses the files it holds.

The findings are those of the serial passes followed by the per-file scan
(:func:`.scan.scan`'s other path, which still runs for a warm or small run,
with run evidence, and on one core). A file that does not parse is parsed
again in its analysis (for the repair of old Python and the error's place).
"""

from __future__ import annotations

import gc
import os
from typing import Any, Callable, Optional

from ..front.notebook import code_text
from ..front.source import collector_paused, decode_source, is_stub, parse
from ..site import FileResult  # (the finder: imported where a file is analysed)
from .reach import Module, Sources, module_name

_LEAD = -1  # a claim by the lead process (a worker's is its number + 1)


class Item:
    """One file of the run: a target to analyse (`scan`, its bytes read by the
    lead) and/or a ``.py`` file of the project whose facts the maps need (`facts`)."""

    __slots__ = ("path", "ap", "rel", "display", "data", "scan", "facts", "module", "package", "weight")

    def __init__(self, path: str, ap: str, rel: str, display: str, data: Optional[bytes], scan: bool,
                 facts: bool) -> None:
        self.path, self.ap, self.rel, self.display, self.data = path, ap, rel, display, data
        self.scan, self.facts = scan, facts
        self.module, self.package = "", False
        # (a share's weight is the work its files cost, read off their sizes: a stub, .pyi, is parsed
        # and not analysed, about 3/8 of a module's cost per byte; facts alone, an eighth)
        if data is None:
            self.weight = 2000
        elif scan:
            self.weight = len(data) * 3 // 8 if is_stub(rel) else len(data)
        else:
            self.weight = len(data) // 8


def shares(items: list, indices: list, n: int) -> list:
    """`indices` of `items` in `n` shares balanced by weight (largest first, each to the lightest share)."""
    out: list = [[] for _ in range(n)]
    load = [0] * n
    for j in sorted(indices, key=lambda j: -items[j].weight):
        k = load.index(min(load))
        out[k].append(j)
        load[k] += items[j].weight
    return out


def may_root(text: str) -> bool:
    """`text` may hold a root of the TorchScript pass or the ``torch.compile``
    pass: the files their ``roots`` parse (each pass tests them again)."""
    from .compiled import _hits
    from .scripted import may_script

    return may_script(text) or ("compile" in text and bool(_hits(text)))


def _maybe_root_bytes(data: bytes) -> bool:
    """Cheap: the bytes may decode to a text that :func:`may_root` takes."""
    if b"jit" in data or b"ScriptModule" in data or b"compile" in data:
        return True
    head = data[:400]
    return head[:2] in (b"\xff\xfe", b"\xfe\xff") or b"coding" in head  # (another encoding: decode to know)


def _text_of(item: Item, data: Optional[bytes]) -> tuple:
    """(text, error) of a file: its code cells for a notebook."""
    if data is None:
        try:
            with open(item.path, "rb") as f:
                data = f.read()
        except OSError as e:
            return None, f"cannot read: {e.strerror or e}"
    return code_text(data, item.rel, item.display)


def _tree_of(text: str, display: str):
    try:
        return parse(text, display)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


class _Holder:
    """What one process (a worker, or the lead) holds of its files: text and tree."""

    def __init__(self, rules, gpu_first: bool) -> None:
        self.rules, self.gpu_first = rules, gpu_first
        self.held: dict = {}  # index -> [text or None, tree or None, parsed?, error or None]
        self.facts: dict = {}  # index -> :func:`..values.project.file_facts` (None: unreadable)

    def take(self, j: int, item: Item) -> None:
        from ..values.project import file_facts

        text, error = _text_of(item, item.data)
        entry = self.held[j] = [text, None, False, error]
        if text is not None and item.scan:
            self.parse(j, item)
        if item.facts:
            self.facts[j] = None if text is None else file_facts(
                text, item.module, item.package, self.gpu_first, item.rel, item.ap)
        del entry

    def parse(self, j: int, item: Item):
        entry = self.held.get(j)
        if entry is None or entry[0] is None:
            return None
        if not entry[2]:
            entry[2] = True
            entry[1] = _tree_of(entry[0], item.display)
        return entry[1]

    def analyse(self, j: int, item: Item, scripted, placed) -> FileResult:
        from ..front.finder import find_in_source

        text, tree, _, error = self.held.get(j) or (None, None, False, "cannot read")
        if text is None:
            res = FileResult(path=item.display)
            res.error = error
            return res
        if tree is None and not self.held[j][2]:
            tree = self.parse(j, item)
        with collector_paused():
            # (a tree that did not parse is parsed again by the finder: the error's place, old Python repaired)
            return find_in_source(text, item.display, self.rules, item.rel, None, tree,
                                  scripted=scripted, placed=placed)


def _worker(w: int, conn, items: dict, share: list, claims, lock, rules, gpu_first: bool, run_pid: int) -> None:
    from ..._workers import die_with_parent

    die_with_parent(run_pid)
    gc.disable()  # (the trees it keeps hold no cycles: a collection would walk them all)
    h = _Holder(rules, gpu_first)
    me = w + 1
    for j in share:
        while conn.poll():
            _answer(conn, conn.recv(), h, items)
        with lock:
            if claims[j]:
                continue
            claims[j] = me
        h.take(j, items[j])
    conn.send(("facts", w, h.facts))
    gc.freeze()
    gc.enable()
    while True:
        msg = conn.recv()
        if msg[0] != "maps":
            _answer(conn, msg, h, items)
            continue
        out = {}
        for j, scripted, placed in msg[1]:
            out[j] = h.analyse(j, items[j], scripted, placed)
        conn.send(("done", w, out))
        conn.close()
        # Sent whole (what the pipe holds outlives its writer): end here, without freeing the trees
        # held and the interpreter's teardown, which the run's end would wait for (a second or so)
        os._exit(0)


def _answer(conn, msg, h: _Holder, items: dict) -> None:
    if msg[0] == "tree":
        j = msg[1]
        conn.send(("tree", j, h.parse(j, items[j])))


class PooledSources(Sources):
    """:class:`.reach.Sources` over trees held across the pool: the lead's
    files parsed here, the others claimed here first or asked of their holder."""

    def __init__(self, items: list, order: list, texts: dict, fetch: Callable[[str], Any]) -> None:
        self.texts = texts
        self.rels: dict = {}
        self.modules: dict = {}
        for j in order:
            it = items[j]
            self.rels[it.ap] = it.rel
            self.modules.setdefault(module_name(it.rel), it.ap)
        self.project = frozenset(m.split(".")[0] for m in self.modules) - {"torch"}
        self.parsed: dict = {}
        self._resolved: dict = {}
        self._fetch = fetch

    def module(self, ap: Optional[str]) -> Optional[Module]:
        if ap is None:
            return None
        if ap not in self.parsed:
            tree = self._fetch(ap)
            try:
                self.parsed[ap] = Module(ap, self.rels[ap], tree, self.project) if tree is not None else None
            except (ValueError, RecursionError, MemoryError):
                self.parsed[ap] = None
        return self.parsed[ap]


class Pool:
    """The run's workers, their pipes, and what the lead holds."""

    def __init__(self, items: list, rules, gpu_first: bool, workers: int, start_method: str) -> None:
        import multiprocessing

        self.items = items
        self.ctx = multiprocessing.get_context(start_method)
        self.claims = self.ctx.RawArray("h", len(items))
        self.lock = self.ctx.Lock()
        self.lead = _Holder(rules, gpu_first)
        self.rules, self.gpu_first, self.n = rules, gpu_first, workers
        self.conns: list = []
        self.procs: list = []
        self.inbox: list = []  # messages read while waiting for another
        self.index = {it.ap: j for j, it in enumerate(items) if it.facts}

    def start(self, later: frozenset = frozenset()) -> None:
        """Start the workers, each on its share; the files in `later` (those
        that may hold a root, which the lead may claim meanwhile: :meth:`claim`)
        last in each share."""
        from ... import _workers  # noqa: F401  (imported once here, not in each forked worker)

        rest = [j for j, it in enumerate(self.items) if (it.scan or it.facts) and not self.claims[j]]
        for w, share in enumerate(shares(self.items, rest, self.n)):
            share = [j for j in share if j not in later] + [j for j in share if j in later]
            mine, theirs = self.ctx.Pipe()
            sub = {j: self.items[j] for j in share}
            p = self.ctx.Process(target=_worker, daemon=True,
                                 args=(w, theirs, sub, share, self.claims, self.lock, self.rules, self.gpu_first,
                                       os.getpid()))
            p.start()
            theirs.close()
            self.conns.append(mine)
            self.procs.append(p)

    def claim(self, j: int) -> None:
        """The lead reads file `j` (a root's) unless a worker has claimed it
        (which then sends its tree where the walk needs it: :meth:`tree`)."""
        with self.lock:
            if self.claims[j]:
                return
            self.claims[j] = _LEAD
        self.lead.take(j, self.items[j])

    def tree(self, ap: str):
        """The tree of the project's file `ap`, for the walk: parsed here if no
        worker has claimed it, else sent by the worker that holds it."""
        j = self.index.get(ap)
        if j is None:
            return None
        with self.lock:
            c = self.claims[j]
            if c == 0:
                self.claims[j] = c = _LEAD
        if c == _LEAD:
            if j not in self.lead.held:
                self.lead.take(j, self.items[j])
            return self.lead.parse(j, self.items[j])
        conn = self.conns[c - 1]
        conn.send(("tree", j))
        return self._wait(lambda m: m[0] == "tree" and m[1] == j, [conn])[2]

    def _wait(self, want: Callable[[tuple], bool], conns: Optional[list] = None) -> tuple:
        from multiprocessing.connection import wait

        for k, m in enumerate(self.inbox):
            if want(m):
                return self.inbox.pop(k)
        while True:
            for c in wait(conns or self.conns):
                try:
                    m = c.recv()
                except EOFError as e:
                    raise RuntimeError("a scan worker ended early") from e
                if want(m):
                    return m
                self.inbox.append(m)

    def facts(self) -> dict:
        """index -> facts of every file read for them (the workers', then the lead's)."""
        out: dict = {}
        for _ in range(len(self.conns)):
            out.update(self._wait(lambda m: m[0] == "facts")[2])
        out.update(self.lead.facts)
        return out

    def holder(self, j: int) -> int:
        return self.claims[j]

    def analyse(self, work: dict, lead_work: list, tick: Callable[[FileResult], None]) -> dict:
        """Each worker analyses its part of `work` (worker -> [(index, scripted, placed)]),
        the lead `lead_work`; index -> result."""
        for w, conn in enumerate(self.conns):
            conn.send(("maps", work.get(w, [])))
        out: dict = {}
        for j, scripted, placed in lead_work:
            out[j] = self.lead.analyse(j, self.items[j], scripted, placed)
            tick(out[j])
        left = list(self.conns)
        while left:  # (a worker that has answered closes its end: it is waited on no more)
            m = self._wait(lambda m: m[0] == "done", left)
            left.remove(self.conns[m[1]])
            for j, res in m[2].items():
                out[j] = res
                tick(res)
        return out

    def close(self) -> None:
        for c in self.conns:
            c.close()
        for p in self.procs:
            p.join(timeout=5)
            if p.is_alive():
                p.kill()


def run(targets: list, project, cfg, rules, cache, workers: int, start_method: str,
        tick: Callable[[FileResult], None]) -> tuple:
    """The cold scan of `targets` ([(index in the scan's results, absolute path,
    display, path relative to the root, bytes)]) over `project` (a
    :class:`.scripted.Project`) on `workers` processes: (results: index ->
    FileResult, digests: index -> cache key of each file, the indices the cache
    answered, the scripted, compiled and placed maps). The maps are kept as the serial
    passes keep them (:func:`keep`)."""
    from ..values.project import combine, for_file, module_of
    from .cache import content_digest, file_digest, line_bound
    from .compiled import compiled_in_project
    from .maps import keep
    from .scripted import scripted_in_project

    gpu_first = getattr(cfg, "implicit", "gpu-first") == "gpu-first"
    items: list = []
    by_ap: dict = {}
    order: list = []  # the project's .py files, in its order
    folders: dict = {}
    modules: dict = {}
    wanted = {t[1]: t for t in targets}
    for path in project.files:
        if not path.endswith(".py"):
            continue
        ap = os.path.abspath(path)
        modules[ap] = list(module_of(ap, folders))
        if ap in by_ap:
            continue
        t = wanted.get(ap)
        if t is not None:
            hit = cache is not None and cache.knows_data(t[3], t[4])
            it = Item(path, ap, t[3], t[2], t[4], not hit, True)
        else:
            try:
                with open(path, "rb") as f:
                    data = f.read()
            except OSError:
                data = None
            it = Item(path, ap, cfg.relpath(ap), path, data, False, True)
        it.module, it.package = modules[ap]
        by_ap[ap] = len(items)
        order.append(len(items))
        items.append(it)
    for t in targets:  # (what is not a .py file of the project: stubs, notebooks)
        if t[1] not in by_ap:
            by_ap[t[1]] = len(items)
            items.append(Item(t[1], t[1], t[3], t[2], t[4], True, False))
    texts: dict = {}
    maybe = [j for j in order if items[j].data is not None and _maybe_root_bytes(items[j].data)]
    pool = Pool(items, rules, gpu_first, workers, start_method)
    try:
        with collector_paused():
            # the workers start first (the files that may hold a root last in their shares): the lead
            # finds the roots meanwhile and reads those files itself, unless a worker got there first
            pool.start(frozenset(maybe))
            for j in maybe:
                try:
                    text = decode_source(items[j].data)
                except (SyntaxError, UnicodeDecodeError, LookupError):
                    continue
                if may_root(text):
                    texts[items[j].ap] = text
                    pool.claim(j)
            sources = PooledSources(items, order, texts, pool.tree)
            scripted = scripted_in_project((), sources=sources)
            compiled = compiled_in_project((), sources=sources)
            del sources
            # each target's own digest, made while the workers read (not after, when they wait for the maps)
            contents = {t[0]: content_digest(t[4]) for t in targets} if cache is not None else {}
            facts = pool.facts()
            placed = combine(project.files, modules, {items[j].ap: f for j, f in facts.items() if f is not None},
                             lambda p: cfg.relpath(os.path.abspath(p)), gpu_first)
            keep(project, gpu_first, cache, [scripted, compiled, placed])
            results: dict = {}
            digests: dict = {}
            cached: set = set()
            work: dict = {}
            lead_work: list = []
            for i, ap, display, rel, data in targets:
                j = by_ap[ap]
                it = items[j]
                s, p = scripted.get(ap), for_file(placed, ap)
                if cache is not None:
                    digests[i] = digest = file_digest(data, s, p, contents[i])
                    if not it.scan:
                        hit = cache.get(rel, digest, display, line_bound(data))
                        if hit is not None:
                            results[i] = hit
                            cached.add(i)
                            tick(hit)
                            continue
                c = pool.holder(j)
                (lead_work if c == _LEAD else work.setdefault(c - 1, [])).append((j, s, p))
            back = {j: i for i, ap, *_ in targets for j in (by_ap[ap],)}
            for j, res in pool.analyse(work, lead_work, tick).items():
                results[back[j]] = res
            # the trees and texts this process held, freed while the collector is paused: the first
            # collection after it would walk them all (half a second on torch's tree)
            pool.lead.held.clear()
            del facts
    finally:
        pool.close()
    return results, digests, cached, scripted, compiled, placed
