"""Run the codemod over files: read, rewrite, write atomically, report.

Shared by ``xferaudit wrap`` and ``xferaudit unwrap``. Each file is read as
bytes and handed to :func:`~xferaudit.static.codemod.wrap_source` /
:func:`~xferaudit.static.codemod.unwrap_source`; a file that cannot be read,
decoded or parsed is reported and left untouched while the rest are processed.
Writes go to a temporary file in the same folder, keep the file's mode, and
replace the original with ``os.replace``: an interrupted run leaves each file
either old or new, never half-written. Many files run on a process pool.
"""

from __future__ import annotations

import difflib
import io
import os
import re
import stat
import sys
import tokenize
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional, Sequence, TextIO

from ..._atomic import HardLinkError, atomic_write
from ..._text import printable, printable_path
from ..._workers import KeptInterrupt
from ...config import Config
from ...rules import KINDS
from ..project import progress as _progress
from ..front import notebook
from . import CodemodError, CodemodResult, code_style, unwrap_source, wrap_source
from .rename import rename_sites_source
from ..project.scan import display_path

#: Below this many files the run stays in one process (a pool costs ~0.2 s to start).
PARALLEL_MIN_FILES = 16

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as a shell reports Ctrl-C


@dataclass
class FileOutcome:
    path: str  # as given / walked
    rel: str  # relative to the project root (site names, per-file ignores)
    result: Optional[CodemodResult] = None
    error: Optional[str] = None  # why the file was skipped
    old: Optional[bytes] = None  # original bytes, when a diff is wanted
    mtime_ns: int = 0
    size: int = 0


@dataclass
class Summary:
    mode: str
    files: int = 0
    changed: int = 0
    written: int = 0
    kinds: Counter = field(default_factory=Counter)
    evidence: Counter = field(default_factory=Counter)  # wrap --from: evidenced lines by outcome
    restored: int = 0
    left: int = 0  # sites left unwrapped (not safely wrappable)
    suppressed: int = 0
    skipped: Counter = field(default_factory=Counter)  # reason class -> files


# --- the per-file work (runs in pool workers) ------------------------------------------

_JOB: dict = {}


def _job(mode: str, cfg: Config, select: tuple[str, ...], want_old: bool, rename: bool = False,
         evidence=None, scripted=None, placed=None, compiled=None) -> dict:
    return dict(mode=mode, cfg=cfg, table=cfg.table(), select=select, want_old=want_old,
                style=code_style(cfg.root), rename=rename, evidence=evidence, scripted=scripted or {},
                placed=placed or {}, compiled=compiled or {})


def _init(mode: str, cfg: Config, select: tuple[str, ...], want_old: bool, rename: bool = False,
          evidence=None, scripted=None, placed=None, compiled=None) -> None:
    _JOB.clear()
    _JOB.update(_job(mode, cfg, select, want_old, rename, evidence, scripted, placed, compiled))


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


#: The summary's reason for a file unwrap leaves because it cannot restore a call in it.
UNRESTORABLE = "cannot restore a wrapper call"


def _skip_class(error: str) -> str:
    return error.split(":", 1)[0]


def _rewrite(data: bytes, path: str, rel: str, codes_ok, job: Optional[dict] = None) -> CodemodResult:
    """wrap or unwrap one file's bytes; a notebook through the Python text of its
    code cells, written back into the cells it changed (:mod:`..front.notebook`)."""
    job = job if job is not None else _JOB
    nb = renamed = None
    if notebook.is_notebook(path):
        try:
            nb = notebook.read(data)
        except notebook.NotebookError as e:
            raise CodemodError(f"cannot parse: {e}") from None
        data = nb.text.encode("utf-8")
    if job["mode"] == "wrap":
        if job.get("rename"):
            renamed = rename_sites_source(data, path, job["table"], rel)
            data = renamed if renamed is not None else data
        fe = _evidence_of(path, data, job) if job.get("evidence") is not None and nb is None else None
        from ..values.project import for_file

        res = wrap_source(data, path, job["table"], rel, codes_ok, job["style"], fe,
                          scripted=job["scripted"].get(os.path.abspath(path)),
                          placed=for_file(job.get("placed") or {}, path),
                          compiled=(job.get("compiled") or {}).get(os.path.abspath(path)))
        if renamed is not None and res.new is None:
            res.new = data
    else:
        res = unwrap_source(data, path, job["table"], job["style"])
    if nb is not None:
        for k in res.skipped:
            if k.line:
                cell, ln = notebook.position(nb, k.line)
                k.where = f"cell {cell}:{ln}"
        if res.changed:
            try:
                res.new = notebook.write(nb, res.new.decode("utf-8"))
            except notebook.NotebookError as e:
                raise CodemodError(f"cannot process: {e}") from None
    return res


def _evidence_of(path: str, data: bytes, job: dict):
    """``wrap --from``: the run's lines of this file, matched to its text."""
    from ..front.evidence import match_file
    from ..front.source import decode_source

    try:
        text = decode_source(data)
    except (SyntaxError, UnicodeDecodeError, LookupError) as e:
        raise CodemodError(f"cannot decode: {e}") from None

    def bare():
        new = unwrap_source(data, path, job["table"], job["style"]).new
        return decode_source(new) if new is not None else None

    return match_file(job["evidence"].for_file(path), text, bare=bare)


def process_file(path: str) -> FileOutcome:
    """One file: read it and compute its new bytes (writes nothing)."""
    cfg: Config = _JOB["cfg"]
    rel = cfg.relpath(Path(path))
    out = FileOutcome(path=path, rel=rel)
    try:
        st = os.stat(path)
        data = _read_bytes(path)
    except OSError as e:
        out.error = f"unreadable: {e.strerror or e}"
        return out
    out.mtime_ns, out.size = st.st_mtime_ns, st.st_size
    select = _JOB["select"]

    def codes_ok(code: str) -> bool:
        if select and not any(code.startswith(p) for p in select):
            return False
        return cfg.code_enabled(code, rel)

    try:
        out.result = _rewrite(data, path, rel, codes_ok)
    except CodemodError as e:
        msg = str(e)
        out.error = msg if msg.startswith(("cannot", "libcst", "internal")) else f"cannot process: {msg}"
        return out
    except RecursionError:
        out.error = "cannot parse: too deeply nested for the parser"
        return out
    if out.result.changed and _JOB["want_old"]:
        out.old = data
    return out


# --- writing ---------------------------------------------------------------------------


def is_read_only(path: str) -> bool:
    """True for a file nobody may write: no write permission bit set, or no access
    for this user (a read-only file is honoured even when running as root)."""
    st = os.stat(path)
    return not (st.st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)) or not os.access(path, os.W_OK)


# --- diff --------------------------------------------------------------------------------

_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")


def _text(data: bytes) -> str:
    enc, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return data.decode(enc)


def git_top(cwd: str) -> Optional[str]:
    """The top of the git work tree holding `cwd` (where ``.git`` is), or None."""
    d = os.path.abspath(cwd)
    while True:
        if os.path.exists(os.path.join(d, ".git")):
            return d
        up = os.path.dirname(d)
        if up == d:
            return None
        d = up


def diff_name(path: str, cwd: str, top: Optional[str]) -> str:
    """A file's name in a diff, as ``git diff`` names it: relative to the top of
    the git work tree (so ``git apply`` takes the diff from any folder of it),
    else relative to the working directory (where ``git apply`` and ``patch
    -p1`` outside a repository look)."""
    ap = os.path.abspath(path)
    if top is not None and ap.startswith(top.rstrip(os.sep) + os.sep):
        return display_path(ap, top)
    return display_path(ap, cwd)


def unified_diff(old: bytes, new: bytes, rel: str) -> str:
    """A unified diff of two versions of a file, git-style names (`rel`: see
    :func:`diff_name`), lines split on Python's own newlines (so form feeds and
    the like stay inside their line)."""
    a = _LINES.findall(_text(old))
    b = _LINES.findall(_text(new))
    out = []
    for line in difflib.unified_diff(a, b, f"a/{rel}", f"b/{rel}"):
        out.append(line)
        if not line.endswith(("\n", "\r")):
            out.append("\n\\ No newline at end of file\n")
    return "".join(out)


# --- progress (xferaudit.static.project.progress) --------------------------------------------------

Progress = _progress.Progress


# --- the run -------------------------------------------------------------------------------


def _outcomes(paths: Sequence[str], mode: str, cfg: Config, select: tuple[str, ...], want_old: bool,
              jobs: Optional[int], rename: bool = False, evidence=None):
    n = len(paths)
    scripted = placed = compiled = None
    if mode == "wrap" and n:  # what TorchScript and torch.compile compile, from any file of the project
        from ..project.compiled import for_wrap as compiled_for_wrap
        from ..project.placed import for_check as placed_for_check
        from ..project.reach import project_sources
        from ..project.scripted import for_wrap, project_of

        project = project_of(paths, cfg)
        sources = project_sources(project, cfg)
        scripted = for_wrap(project, cfg, sources)
        compiled = compiled_for_wrap(project, cfg, sources)
        del sources
        placed = placed_for_check(project, cfg)  # the helpers elsewhere that place what they return
    cpus = os.cpu_count() or 1
    workers = jobs if jobs else (min(cpus, 8) if n >= PARALLEL_MIN_FILES else 1)
    workers = max(1, min(workers, n or 1))
    if workers == 1:
        _init(mode, cfg, select, want_old, rename, evidence, scripted, placed, compiled)
        for p in paths:
            yield process_file(p)
        return
    chunk = max(1, min(16, n // (workers * 8)))
    with pool_of(workers, (mode, cfg, select, want_old, rename, evidence, scripted, placed, compiled)) as pool:
        yield from pool.imap(process_file, paths, chunksize=chunk)


def _worker_init(run_pid: int, *args) -> None:
    from ..._workers import die_with_parent

    die_with_parent(run_pid)
    _init(*args)


def pool_of(workers: int, initargs: tuple):
    """The process pool of a run: workers that end with the run (see
    :mod:`xferaudit._workers`) and leave Ctrl-C to it."""
    return _pool_context().Pool(workers, _worker_init, (os.getpid(), *initargs))


def _pool_context():
    """A fork server with the codemod preloaded where there is one: workers start
    fast, and never inherit threads of the parent (a plain fork after a library
    started threads, as JAX or torch may have in a long-lived process, can
    deadlock)."""
    import multiprocessing

    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["xferaudit.static.codemod.files"])
        return ctx
    return multiprocessing.get_context()


def run_codemod(
    paths: Sequence[str],
    mode: str,
    cfg: Config,
    *,
    select: Sequence[str] = (),
    diff: bool = False,
    check: bool = False,
    quiet: bool = False,
    jobs: Optional[int] = None,
    out: Optional[TextIO] = None,
    err: Optional[TextIO] = None,
    on_outcome: Optional[Callable[[FileOutcome], None]] = None,
    rename_sites: bool = False,
    evidence=None,
) -> int:
    """Wrap or unwrap every file of `paths` (already expanded to files).

    Exit code: 2 when a file was skipped for an error (unreadable, unparsable,
    read-only, write failed); otherwise with ``--check``/``--diff`` 1 when a file
    would change; otherwise (``wrap``) 1 when a site was left unwrapped because it
    cannot be wrapped safely; else 0.
    """
    out = out or sys.stdout
    err = err or sys.stderr
    dry = diff or check
    summary = Summary(mode=mode, files=len(paths))
    progress = Progress(len(paths), err, enabled=not quiet, label=f"xferaudit {mode}")
    messages: list[str] = []
    written: list[str] = []
    # Files are named as `check` names them: relative to the working directory.
    cwd = os.getcwd()
    top = git_top(cwd) if diff else None
    o = None
    ctrl_c = KeptInterrupt()
    try:
        for o in _outcomes(list(paths), mode, cfg, tuple(select), diff, jobs, rename_sites, evidence):
            ctrl_c.check()  # one swallowed by a finalizer: this file is not written
            shown = display_path(o.path, cwd)
            r = o.result
            progress.step(sites=(sum(r.wrapped.values()) + sum(r.unwrapped.values())) if r is not None else 0)
            if on_outcome is not None:
                on_outcome(o)
            res = o.result
            if o.error is None and res is not None:
                messages.extend(skipped_messages(res, shown))
                summary.left += len(res.skipped) if mode == "wrap" else 0
                if mode == "unwrap" and res.skipped:  # a call it cannot restore: the file is left, an error
                    summary.skipped[UNRESTORABLE] += 1
                summary.suppressed += res.suppressed
                summary.evidence.update(res.evidence)
                if res.changed:
                    if not dry:
                        o.error = _write(o, res.new)
                    if o.error is None:
                        summary.changed += 1
                        summary.written += 0 if dry else 1
                        if not dry:
                            written.append(shown)
                        summary.kinds.update(res.wrapped)
                        summary.restored += sum(res.unwrapped.values())
                        if diff:
                            out.write(unified_diff(o.old, res.new, diff_name(o.path, cwd, top)))
                        elif check and not quiet:
                            messages.append(f"would {'wrap' if mode == 'wrap' else 'unwrap'} {printable(shown)}")
            if o.error is not None:
                summary.skipped[_skip_class(o.error)] += 1
                messages.append(f"{printable_path(shown)}: skipped: {printable(o.error)}")
        ctrl_c.check()
    except KeyboardInterrupt:
        progress.close()
        last = display_path(o.path, cwd) if o is not None else None
        if o is not None and (not written or written[-1] != last) and _was_written(o, dry):
            written.append(last)  # interrupted between its rename and the bookkeeping
        err.write(interrupted_message(mode, written) + "\n")
        return EXIT_INTERRUPTED
    finally:
        ctrl_c.close()
    progress.close()
    out.flush()
    for m in messages:
        err.write(m + "\n")
    if not quiet:
        err.write(format_summary(summary, dry) + "\n")
    if summary.skipped:
        return EXIT_ERROR
    if dry:
        return EXIT_FINDINGS if summary.changed else EXIT_OK
    if mode == "wrap" and summary.left:
        return EXIT_FINDINGS
    return EXIT_OK


def rewrite_source(data: bytes, filename: str, mode: str, cfg: Config, *, select: Sequence[str] = (),
                   rename_sites: bool = False) -> FileOutcome:
    """Wrap or unwrap one file's bytes that were not read from disk (standard
    input, an editor's buffer) as the file `filename` (its config, its site
    names); writes nothing. An excluded file has neither result nor error."""
    out = FileOutcome(path=filename, rel=cfg.relpath(os.path.abspath(filename)))
    ap, root = os.path.abspath(filename), str(cfg.root)
    if (ap == root or ap.startswith(root.rstrip(os.sep) + os.sep)) and cfg.excluded(out.rel):
        return out
    job = _job(mode, cfg, tuple(select), False, rename_sites)

    def codes_ok(code: str) -> bool:
        return (not select or any(code.startswith(p) for p in select)) and cfg.code_enabled(code, out.rel)

    try:
        out.result = _rewrite(data, filename, out.rel, codes_ok, job)
    except CodemodError as e:
        out.error = str(e) if str(e).startswith(("cannot", "libcst", "internal")) else f"cannot process: {e}"
    except RecursionError:
        out.error = "cannot parse: too deeply nested for the parser"
    return out


def run_stdin(src, dst, filename: str, mode: str, cfg: Config, *, select: Sequence[str] = (),
              diff: bool = False, check: bool = False, quiet: bool = False, rename_sites: bool = False,
              err: Optional[TextIO] = None) -> int:
    """Wrap or unwrap the bytes of `src` (standard input) as the file
    `filename` and write the result to `dst`: the new bytes, or the unchanged
    ones when nothing changes, the file is excluded or cannot be processed (an
    editor that pipes its buffer through never gets it blanked); with `diff` a
    unified diff, with `check` nothing. Exit codes as :func:`run_codemod`'s."""
    err = err or sys.stderr
    data = src.read()
    out = rewrite_source(data, filename, mode, cfg, select=select, rename_sites=rename_sites)
    cwd = os.getcwd()
    rel = display_path(filename, cwd)  # named as every command names a file
    summary = Summary(mode=mode, files=1)
    res = out.result
    new = res.new if res is not None and res.changed else data
    if diff:
        if new != data:
            dst.write(unified_diff(data, new, diff_name(filename, cwd, git_top(cwd))).encode("utf-8"))
    elif not check:
        dst.write(new)
    dst.flush()
    if out.error is not None:
        err.write(f"{printable_path(rel)}: left as it is: {printable(out.error)}\n")
        return EXIT_ERROR
    if res is not None:
        for m in skipped_messages(res, rel):
            err.write(m + "\n")
        summary.left = len(res.skipped) if mode == "wrap" else 0
        if mode == "unwrap" and res.skipped:
            summary.skipped[UNRESTORABLE] += 1
        if res.changed:
            summary.changed = 1
            summary.kinds.update(res.wrapped)
            summary.restored = sum(res.unwrapped.values())
    if not quiet:
        err.write(format_summary(summary, diff or check) + "\n")
    if summary.skipped:
        return EXIT_ERROR
    if diff or check:
        return EXIT_FINDINGS if summary.changed else EXIT_OK
    return EXIT_FINDINGS if mode == "wrap" and summary.left else EXIT_OK


def skipped_messages(res: CodemodResult, rel: str) -> list[str]:
    """One line per site left as it is: where, its code, why."""
    out = []
    name = printable_path(rel)
    for s in res.skipped:
        where = f"{name}:{s.where or s.line}:{s.column}:" if s.line else f"{name}:"
        code = f" {s.code}" if s.code else ""
        out.append(f"{where}{code} left as it is: {printable(s.reason)} [{printable(s.label)}]")
    return out


def _was_written(o: FileOutcome, dry: bool) -> bool:
    """Whether the file of `o` already holds its new content (an interrupt can
    fall between the write and the list of files written)."""
    if dry or o.result is None or not o.result.changed:
        return False
    try:
        return _read_bytes(o.path) == o.result.new
    except OSError:
        return False


def interrupted_message(mode: str, written: Sequence[str]) -> str:
    """What an interrupted run (Ctrl-C) says: which files it had already
    rewritten (each one whole: the others are untouched)."""
    verb = "rewritten" if mode == "wrap" else "restored"
    head = f"xferaudit {mode}: interrupted; {_plural(len(written), 'file')} already {verb}"
    if not written:
        return head + "; no file was changed"
    return head + " (every other file is as it was):\n" + "\n".join(f"  {printable(r)}" for r in written)


def _write(o: FileOutcome, new: bytes) -> Optional[str]:
    try:
        st = os.stat(o.path)
        if st.st_mtime_ns != o.mtime_ns or st.st_size != o.size:
            return "changed on disk during the run: not rewritten"
        if is_read_only(o.path):
            n = sum(o.result.wrapped.values()) or sum(o.result.unwrapped.values())
            return f"read-only: not rewritten ({n} call{'s' if n != 1 else ''} would change)"
        atomic_write(o.path, new, hard_links="refuse", special="refuse")
    except HardLinkError as e:
        return str(e)
    except OSError as e:
        return f"cannot write: {e.strerror or e}"
    return None


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def format_summary(s: Summary, dry: bool) -> str:
    """One line: files changed, sites per kind, files skipped and why."""
    verb = "would change" if dry else "changed"
    parts = [f"{_plural(s.files, 'file')} checked", f"{_plural(s.changed, 'file')} {verb}"]
    if s.mode == "wrap":
        kinds = ", ".join(f"{k} {s.kinds[k]}" for k in KINDS if s.kinds[k])
        total = sum(s.kinds.values())
        parts.append(f"{_plural(total, 'site')} {'to wrap' if dry else 'wrapped'}" + (f" ({kinds})" if kinds else ""))
        if s.left:
            parts.append(f"{_plural(s.left, 'site')} left as {'it is' if s.left == 1 else 'they are'}"
                         " (not safely wrappable)")
        if s.suppressed:
            parts.append(f"{_plural(s.suppressed, 'suppressed site')} not wrapped")
        if s.evidence:
            seen = sum(s.evidence.values())
            names = {"wrapped": "to wrap" if dry else "wrapped", "already": "already wrapped",
                     "left": "left as they are", "stale": "stale"}
            parts.append(f"{_plural(seen, 'line')} the run saw crossing: " + ", ".join(
                f"{s.evidence[k]} {names[k]}" for k in names if s.evidence[k]))
    else:
        parts.append(f"{_plural(s.restored, 'call')} {'to unwrap' if dry else 'unwrapped'}")
    if s.skipped:
        why = ", ".join(f"{n} {k}" for k, n in sorted(s.skipped.items()))
        parts.append(f"{_plural(sum(s.skipped.values()), 'file')} skipped ({why})")
    return f"xferaudit {s.mode}: " + "; ".join(parts)


# --- the CLI side, shared by the wrap and unwrap commands ------------------------------------


def add_common_arguments(parser, mode: str, paths_optional: bool = False) -> None:
    verb = "rewrite" if mode == "wrap" else "restore"
    parser.add_argument("paths", nargs="*" if paths_optional else "+", metavar="PATH",
                        help=f"files or folders to {verb}; `-`: standard input, written to standard output")
    parser.add_argument("--stdin-filename", metavar="PATH",
                        help="the file standard input holds (with PATH `-`): its config applies and names its "
                             "sites; an excluded file is written back unchanged")
    parser.add_argument("--diff", action="store_true", help="print a unified diff and write nothing (exit 1 if any)")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if any file would change (for pre-commit)")
    parser.add_argument("--config", metavar="FILE", help="pyproject.toml to read (default: found from PATH)")
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress bar, no summary; problems only")
    parser.add_argument("--jobs", "-j", type=int, metavar="N",
                        help=f"worker processes (default: one per core from {PARALLEL_MIN_FILES} files)")
    parser.add_argument("--no-cache", action="store_true",
                        help=f"accepted as `check` and `sites` accept it: {mode} reads every file afresh and "
                             "keeps no findings cache")


def run_command(args, mode: str) -> int:
    from ...errors import UserError
    from ...config import ConfigError, iter_python_files, load_config

    stdin = "-" in args.paths
    if stdin and args.paths != ["-"]:
        raise UserError("`-` (standard input) must be the only path")
    if args.stdin_filename is not None and not stdin:
        raise UserError("--stdin-filename names what standard input holds: give `-` as the path")
    try:
        if args.config:
            cfg = load_config(path=Path(args.config))
        elif stdin:
            cfg = load_config(start=Path(args.stdin_filename) if args.stdin_filename else Path.cwd())
        else:
            cfg = load_config(start=Path(args.paths[0]) if args.paths else Path.cwd())
        if getattr(args, "implicit", None):
            cfg.implicit = args.implicit
        cfg.table()
    except ConfigError as e:
        raise UserError(str(e)) from None
    runs = getattr(args, "from_runs", None)
    select: tuple[str, ...] = ()
    for chunk in getattr(args, "select", None) or ():
        for code in chunk.split(","):
            code = code.strip().upper()
            if not code:
                continue
            if not re.fullmatch(r"XFA\d{0,3}", code):
                raise UserError(f"--select: {code!r} is not a rule code or prefix (like XFA202 or XFA2)")
            select += (code,)
    # --ignore: on top of the config's ignore list, as --select narrows on top of its select.
    ignore = tuple(c.strip().upper() for chunk in getattr(args, "ignore", None) or () for c in chunk.split(",") if c.strip())
    if ignore:
        cfg.ignore = tuple(cfg.ignore) + ignore
    if args.jobs is not None and args.jobs < 1:
        raise UserError("--jobs must be at least 1")
    if stdin:
        return run_stdin(sys.stdin.buffer, sys.stdout.buffer, args.stdin_filename or "-", mode, cfg,
                         select=select, diff=args.diff, check=args.check, quiet=args.quiet,
                         rename_sites=bool(getattr(args, "rename_sites", False)))
    for p in args.paths:
        if not os.path.exists(p) and not os.path.islink(p):
            raise UserError(f"{p}: no such file or folder")
    evidence, notes = None, []
    if runs:
        evidence, files, notes = _evidence_files(runs, args.paths, cfg)
    else:
        files = [str(f) for f in iter_python_files([Path(p) for p in args.paths], cfg)]
    for note in notes:
        sys.stderr.write(note + "\n")
    rc = run_codemod(files, mode, cfg, select=select, diff=args.diff, check=args.check,
                     quiet=args.quiet, jobs=args.jobs, rename_sites=bool(getattr(args, "rename_sites", False)),
                     evidence=evidence)
    return EXIT_FINDINGS if notes and rc == EXIT_OK else rc


def _evidence_files(runs: Sequence[str], paths: Sequence[str], cfg: Config) -> tuple:
    """``wrap --from``: (the evidence, the files it names that are to be
    rewritten, notes on the others). Without PATH, every file the runs name in
    the project; with PATH, those of them under PATH."""
    from ...config import iter_python_paths
    from ...errors import UserError
    from ..front.evidence import EvidenceError, load, seen

    try:
        evidence = load(runs, cfg.root)
    except EvidenceError as e:
        raise UserError(str(e)) from None
    named = {}
    for e in evidence.entries:
        named.setdefault(e.file, []).append(e)
    if paths:
        files = [f for f in iter_python_paths(paths, cfg) if evidence.for_file(f)]
        return evidence, files, []
    files, notes = [], []
    for f, entries in sorted(named.items()):
        rel = printable_path(cfg.relpath(f))
        if not os.path.isfile(f):
            notes.extend(f"{rel}:{e.line}:1: left as it is: stale evidence: {printable(seen(e))}; the file is gone"
                         for e in entries)
        elif os.path.isabs(cfg.relpath(f)):
            notes.append(f"{rel}: not rewritten: outside the project ({cfg.root}); name it as a PATH to wrap it")
        elif not _inside(f, cfg.root):
            notes.append(f"{rel}: not rewritten: a link on its path leads out of the project ({cfg.root}); "
                         "a run file's paths are never followed out of the tree")
        elif not cfg.excluded(cfg.relpath(f)):
            files.append(f)
    return evidence, files, notes


def _inside(path: str, root: Path) -> bool:
    """`path`, every link on it followed, is in the project (the root's own real
    folder): a run file naming ``linked/x.py``, where ``linked`` leads out of the
    tree, must not have ``wrap --from`` rewrite a file elsewhere."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    return os.path.commonpath([real, top]) == top
