"""A cold ``check`` in one parse per file: the project passes' facts come from
the scan's own reading of each file.

Where the project's maps are not remembered (a file of the project changed,
or there is no cache) and there are enough bytes to analyse for a pool, a
few long-lived worker processes each take a share of the files
(balanced by bytes, largest first). A worker:

1. reads and decodes each file of its share once, keeps its text, and
   returns the file's facts for the placing helpers
   (:func:`..values.project.file_facts`: read off the text, no parse); the
   project's files outside the paths checked, and those the cache answers by
   their content, are read for their facts only;
2. meanwhile the lead process (this one) walks what TorchScript and
   ``torch.compile`` compile (:mod:`.scripted`, :mod:`.compiled`): it parses
   the files that hold a root itself (found by their text before the workers
   start, and taken out of their shares), and for a file the walk reaches it
   either takes the file first (a table of claims shared with the workers:
   whoever claims a file reads it) or asks the worker that holds it for its
   tree, which is parsed there and sent, not parsed again; a worker whose
   facts are sent parses its files ahead until the maps come;
3. once every file's facts are in, the lead asks each worker for the
   summaries of those of its files' candidate helpers that an import of the
   project names (:func:`..values.project.wanted_files`; made side by side
   while the lead walks what ``torch.compile`` compiles), combines the maps
   (:func:`..values.project.combine` for the placing helpers), keeps them
   as the serial passes would (this process, beside the findings cache),
   and sends every worker the whole list of files to analyse with what each
   is handed. Each worker analyses the files
   it holds (the finder and the value layer,
   :func:`..front.finder.find_in_source` given the tree), those it parsed
   first, and then takes the files nobody has parsed yet from the other
   workers' shares, smallest first, parsing them itself (a second table
   shared with the workers: whoever parses a file analyses it). A fixed
   share by bytes left one worker up to a second behind the other on 2
   cores, since the analysis per byte varies from file to file. The lead
   analyses the files it holds.

The findings are those of the serial passes followed by the per-file scan
(:func:`.scan.scan`'s other path, which still runs for a warm or small run,
with run evidence, and on one core). A file that does not parse is parsed
again in its analysis (for the repair of old Python and the error's place).
"""

from __future__ import annotations

import gc
import os
import threading
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
    """What one process (a worker, or the lead) holds of its files: text and
    tree. `me` is its mark in the shared tables: `claims` (who reads a file,
    keeps its text and gives its facts) and `parsers` (who parses and analyses
    it), both set under `lock`."""

    def __init__(self, rules, gpu_first: bool, me: int, parsers, lock) -> None:
        self.rules, self.gpu_first = rules, gpu_first
        self.me, self.parsers, self.lock = me, parsers, lock
        self.held: dict = {}  # index -> [text or None, tree or None, parsed?, error or None]
        self.facts: dict = {}  # index -> :func:`..values.project.file_facts` (None: unreadable)

    def take(self, j: int, item: Item, facts: bool = True) -> None:
        """Read file `j` (its text kept) and give its facts."""
        from ..values.project import file_facts

        text, error = _text_of(item, item.data)
        entry = self.held[j] = [text, None, False, error]
        if facts and item.facts:
            self.facts[j] = None if text is None else file_facts(text, item.module, item.package, self.gpu_first)
        del entry

    def summaries(self, js: list, items) -> dict:
        """index -> the summaries of file `j`'s candidate helpers, for each of `js`
        (files whose facts were given here, and that an import of the project names)."""
        from ..values.project import summarise

        out: dict = {}
        for j in js:
            it, f = items[j], self.facts[j]
            out[j] = summarise(it.rel, it.ap, f[4], f[2], it.module, self.gpu_first)
        return out

    def mine(self, j: int) -> bool:
        """File `j` is parsed and analysed here: so marked now, or already."""
        with self.lock:
            who = self.parsers[j]
            if who == 0:
                self.parsers[j] = who = self.me
        return who == self.me

    def parse(self, j: int, item: Item):
        entry = self.held.get(j)
        if entry is None or entry[0] is None:
            return None
        if not entry[2] and self.mine(j):
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
        with collector_paused():
            if tree is None and not self.held[j][2]:
                tree = self.parse(j, item)
            # (a tree that did not parse is parsed again by the finder: the error's place, old Python repaired)
            return find_in_source(text, item.display, self.rules, item.rel, None, tree,
                                  scripted=scripted, placed=placed)

    def analyse_all(self, work: list, items, claims, steal: bool,
                    tick: Optional[Callable[[FileResult], None]] = None) -> dict:
        """Analyse the files of `work` ([(index, scripted, placed)]) that this
        process reads (those parsed first), then, where it may `steal`, those of
        the others that nobody has parsed yet (smallest first), each marked here
        before it is parsed: index -> result."""
        own = [x for x in work if claims[x[0]] == self.me]
        own.sort(key=lambda x: not self.held[x[0]][2])  # (stable: the order of `work` within each part)
        rest = [x for x in work if claims[x[0]] != self.me] if steal else []
        rest.sort(key=lambda x: items[x[0]].weight)
        out: dict = {}

        def analysed(j: int, scripted, placed) -> None:
            out[j] = self.analyse(j, items[j], scripted, placed)
            del self.held[j]  # (freed at once: the next file's tree reuses its memory, still cached)
            if tick is not None:
                tick(out[j])

        for j, scripted, placed in own:
            if self.held[j][2] or self.mine(j):
                analysed(j, scripted, placed)
        for j, scripted, placed in rest:
            if self.parsers[j] or not self.mine(j):  # (taken: its holder, or another process, parses it)
                continue
            self.take(j, items[j], facts=False)
            analysed(j, scripted, placed)
        return out


def _worker(w: int, conn, items, share: list, steal: bool, claims, parsers, lock, rules, gpu_first: bool,
            run_pid: int) -> None:
    from ..._workers import die_with_parent

    die_with_parent(run_pid)
    # (off for the worker's life: its trees hold no cycles, the value layer's objects are freed by their
    # counts, and a collection would walk every tree parsed ahead)
    gc.disable()
    me = w + 1
    h = _Holder(rules, gpu_first, me, parsers, lock)
    sending = threading.Lock()  # (the facts go out from a thread of their own: below)
    for j in share:
        while conn.poll():
            _answer(conn, sending, conn.recv(), h, items)
        with lock:
            if claims[j]:
                continue
            claims[j] = me
        h.take(j, items[j])
    # (sent beside the parse ahead: the lead reads the facts after its walk, and a pipe holds less than
    # a share's facts, so a plain send would wait for it doing nothing)
    sender = threading.Thread(target=_send, args=(conn, sending, ("facts", w, h.facts)), daemon=True)
    sender.start()
    maps = None
    # until the maps come: parse ahead, in the share's order (each file parsed here is analysed here)
    for j in list(h.held):
        maps = _maps(conn, sending, h, items, wait=False)
        if maps is not None:
            break
        if items[j].scan:
            h.parse(j, items[j])
    if maps is None:
        maps = _maps(conn, sending, h, items, wait=True)
    out = h.analyse_all(maps[1], items, claims, steal)
    sender.join()
    conn.send(("done", w, out))
    conn.close()
    # Sent whole (what the pipe holds outlives its writer): end here, without the interpreter's teardown
    # (freeing what is still held: the texts read for their facts alone), which the run's end would wait for
    os._exit(0)


def _answer(conn, sending, msg, h: _Holder, items) -> None:
    if msg[0] == "tree":
        j = msg[1]
        _send(conn, sending, ("tree", j, h.parse(j, items[j])))
    elif msg[0] == "want":
        _send(conn, sending, ("summaries", h.me - 1, h.summaries(msg[1], items)))


def _maps(conn, sending, h: _Holder, items, wait: bool):
    """The lead's maps message, the requests before it answered; None where it
    has not come yet and this is not to `wait` for it."""
    while wait or conn.poll():
        msg = conn.recv()
        if msg[0] == "maps":
            return msg
        _answer(conn, sending, msg, h, items)
    return None


def _send(conn, sending, msg) -> None:
    with sending:  # (the facts' thread and this one share the pipe)
        conn.send(msg)


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
        self.parsers = self.ctx.RawArray("h", len(items))
        self.lock = self.ctx.Lock()
        self.lead = _Holder(rules, gpu_first, _LEAD, self.parsers, self.lock)
        self.forked = start_method == "fork"
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
            # (forked, a worker has every file's bytes already and may take over any file; started afresh, it
            # is sent its share's alone, and takes over none)
            sub = self.items if self.forked else {j: self.items[j] for j in share}
            p = self.ctx.Process(target=_worker, daemon=True,
                                 args=(w, theirs, sub, share, self.forked, self.claims, self.parsers, self.lock,
                                       self.rules, self.gpu_first, os.getpid()))
            p.start()
            theirs.close()
            self.conns.append(mine)
            self.procs.append(p)

    def claim(self, roots: list) -> None:
        """The lead reads the files `roots` (a root's each) but those a worker
        has claimed (which then sends its tree where the walk needs it:
        :meth:`tree`): all claimed first, then read and parsed."""
        with self.lock:
            mine = [j for j in roots if not self.claims[j]]
            for j in mine:
                self.claims[j] = _LEAD
        for j in mine:
            self.lead.take(j, self.items[j])
            if self.items[j].scan:
                self.lead.parse(j, self.items[j])

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

    def ask_summaries(self, js: list) -> list:
        """Ask each worker for the summaries of those of the files `js` whose
        facts it gave (all asked at once: they make them side by side, while
        this process goes on); the workers asked. The lead's own files are not
        asked for (:func:`..values.project.combine` summarises them)."""
        asked: dict = {}
        for j in js:
            c = self.claims[j]  # (who claims a file gives its facts)
            if c != _LEAD:
                asked.setdefault(c - 1, []).append(j)
        for w, mine in asked.items():
            self.conns[w].send(("want", mine))
        return list(asked)

    def summaries(self, asked: list) -> dict:
        """index -> summaries, as the workers `asked` (:meth:`ask_summaries`) send them."""
        out: dict = {}
        for w in asked:
            out.update(self._wait(lambda m, w=w: m[0] == "summaries" and m[1] == w, [self.conns[w]])[2])
        return out

    def analyse(self, work: list, tick: Callable[[FileResult], None]) -> dict:
        """The files of `work` ([(index, scripted, placed)]) analysed across the
        pool, this process included: index -> result."""
        from multiprocessing.reduction import ForkingPickler

        blob = bytes(ForkingPickler.dumps(("maps", work)))  # (pickled once, for every worker)
        for conn in self.conns:
            conn.send_bytes(blob)
        out = self.lead.analyse_all(work, self.items, self.claims, False, tick)
        # the trees and texts this process held, freed while the workers still work, and while the collector
        # is paused (the run's, :func:`run`): the first collection after it would walk them all
        self.lead.held.clear()
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
    from ..values.project import combine, for_file, module_of, wanted_files
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
            roots = []
            for j in maybe:
                try:
                    text = decode_source(items[j].data)
                except (SyntaxError, UnicodeDecodeError, LookupError):
                    continue
                if may_root(text):
                    texts[items[j].ap] = text
                    roots.append(j)
            pool.claim(roots)
            sources = PooledSources(items, order, texts, pool.tree)
            scripted = scripted_in_project((), sources=sources)
            facts = pool.facts()
            readable = {items[j].ap: f for j, f in facts.items() if f is not None}
            # the candidates some import names, summarised by the workers that hold their texts while this
            # process walks what torch.compile compiles (which reads no file for facts: a worker sends its
            # facts once its whole share is claimed and read, so every file is by now)
            wanted = set(wanted_files(readable, modules))
            asked = pool.ask_summaries([j for j in facts if items[j].ap in wanted])
            compiled = compiled_in_project((), sources=sources)
            del sources
            # each target's own digest, made while the workers read (not after, when they wait for the maps)
            contents = {t[0]: content_digest(t[4]) for t in targets} if cache is not None else {}
            made = pool.summaries(asked)
            placed = combine(project.files, modules, readable, lambda p: cfg.relpath(os.path.abspath(p)), gpu_first,
                             {items[j].ap: got for j, got in made.items()})
            keep(project, gpu_first, cache, [scripted, compiled, placed])
            results: dict = {}
            digests: dict = {}
            cached: set = set()
            work: list = []
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
                work.append((j, s, p))
            back = {j: i for i, ap, *_ in targets for j in (by_ap[ap],)}
            for j, res in pool.analyse(work, tick).items():
                results[back[j]] = res
            del facts
    finally:
        pool.close()
    return results, digests, cached, scripted, compiled, placed
