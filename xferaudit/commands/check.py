"""``xferaudit check PATH...``: report unwrapped, unsuppressed transfer sites.

One line per finding, ``path:line:col: XFA202 message``, the message saying
what to write instead. Exit status as ruff's: 0 clean, 1 findings, 2 a usage,
config or input error (a file that cannot be read or parsed is reported as
XFA001, the others are still checked, and the exit is 2).

This module is imported on every pre-commit run, so it stays light: the
standard library and the ast-based finder; no libcst, no torch.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import EXIT_ERROR, EXIT_FINDINGS, EXIT_OK, Command, UserError
from ._args import add_implicit_argument

FORMATS = ("text", "full", "json", "github", "gitlab", "junit", "sarif")


def emit(text: str, file=None) -> None:
    """Print, and stop quietly when the reader has gone (`xferaudit check | head`)."""
    file = file or sys.stdout
    try:
        print(text, file=file)
        file.flush()
    except BrokenPipeError:
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), file.fileno())


def _codes(value: str) -> list[str]:
    return [c.strip() for c in value.split(",") if c.strip()]


def add_scan_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared by `check` and `sites`: what to scan and how."""
    parser.add_argument("paths", nargs="*", metavar="PATH", default=None,
                        help="files or folders to check (default: the current folder)")
    parser.add_argument("--config", metavar="FILE", default=None,
                        help="read [tool.xferaudit] from this pyproject.toml instead of the nearest one")
    parser.add_argument("--no-cache", action="store_true",
                        help="neither read nor write the findings cache")
    parser.add_argument("--cache-dir", metavar="DIR", default=None,
                        help="where the cache lives (default: .xferaudit_cache under the project root); "
                             "any path, but a new, empty or cache-only folder (others are refused)")
    parser.add_argument("--jobs", "-j", type=int, default=None, metavar="N",
                        help="parse on N processes (default: every core when there is enough to parse)")
    add_implicit_argument(parser)


def load(args: argparse.Namespace):
    """(config, rule table) for a command's arguments; config errors become exit 2."""
    from ..config import ConfigError, check_codes, load_config, outside

    from ._args import require_known_codes, require_python_files, split_codes

    paths = args.paths or ["."]
    require_python_files(paths)
    for opt in ("select", "ignore"):
        require_known_codes(split_codes(getattr(args, opt, None)), f"--{opt}")
    try:
        if args.config:
            cfg = load_config(path=Path(args.config))
        else:
            cfg = load_config(Path(paths[0]) if Path(paths[0]).exists() else Path.cwd())
        for opt in ("select", "ignore"):
            value = getattr(args, opt, None)
            if value is not None:
                setattr(cfg, opt, check_codes(_codes(value), f"--{opt}", "command line"))
        if getattr(args, "implicit", None):
            cfg.implicit = args.implicit
        if getattr(args, "cache_dir", None):
            cfg.cache_dir = Path(args.cache_dir)  # the command line may name any folder
        elif not getattr(args, "no_cache", False) and outside(cfg.cache_path(), cfg.root):
            raise ConfigError(f"cache folder {cfg.cache_path()} lies outside the project "
                              f"({outside(cfg.cache_path(), cfg.root)}, through a link); "
                              "name a folder outside it with --cache-dir, or use --no-cache")
        rules = cfg.table()
    except ConfigError as e:
        raise UserError(str(e)) from None
    if args.jobs is not None and args.jobs < 1:
        raise UserError("--jobs must be 1 or more")
    return cfg, rules, paths


def stdin_name(args: argparse.Namespace) -> "str | None":
    """The name standard input is checked under (``-`` as the only path, or
    ``--stdin-filename`` with no path); None when files are named."""
    name = getattr(args, "stdin_filename", None)
    paths = list(args.paths or [])
    if "-" in paths and paths != ["-"]:
        raise UserError("`-` (standard input) must be the only path")
    if paths == ["-"]:
        return name or "-"
    if name is not None:
        if paths:
            raise UserError("--stdin-filename names what standard input holds: give `-` as the only path, or no path")
        return name
    return None


def read_stdin() -> bytes:
    try:
        return sys.stdin.buffer.read()
    except (OSError, AttributeError, ValueError) as e:
        raise UserError(f"cannot read standard input: {e}") from None


def scan_or_exit(scan, paths, cfg, rules, args, **kw):
    """Run `scan`; a cache folder that cannot be used is an error (exit 2)."""
    from ..static.project.cache import CacheError

    try:
        return scan(paths, cfg, rules, use_cache=not args.no_cache, jobs=args.jobs, **kw)
    except CacheError as e:
        raise UserError(str(e)) from None


class CheckCommand(Command):
    NAME = "check"
    DESCRIPTION = "Report unwrapped, unsuppressed transfer and graph sites (exit 1 if any)."

    def add_arguments(self, parser: argparse.ArgumentParser) -> None:
        add_scan_arguments(parser)
        parser.add_argument("--stdin-filename", metavar="PATH", default=None,
                            help="check standard input (PATH `-`) as the file PATH: its config, excludes and "
                                 "per-file-ignores apply, and findings are reported under its name")
        parser.add_argument("--format", choices=FORMATS, default="text",
                            help="text (default), full (with the source line and a caret), json (ruff's record, "
                                 "with fixes), github (annotations), gitlab (Code Quality), junit (XML), "
                                 "sarif (2.1.0, with fixes)")
        parser.add_argument("--select", metavar="CODES", default=None,
                            help="comma-separated codes or prefixes to report, replacing the config's (e.g. XFA202,XFA3)")
        parser.add_argument("--ignore", metavar="CODES", default=None,
                            help="comma-separated codes or prefixes not to report, replacing the config's")
        parser.add_argument("--statistics", action="store_true",
                            help="print a count per code instead of each finding")
        parser.add_argument("--exit-zero", action="store_true",
                            help="exit 0 even with findings (errors still exit 2)")
        parser.add_argument("--show-suppressed", action="store_true",
                            help="also list findings suppressed by noqa comments or the baseline")
        parser.add_argument("--add-noqa", action="store_true",
                            help="append `# noqa: CODE` to every reported line, in place")
        parser.add_argument("--baseline", metavar="FILE", default=None,
                            help="accept the findings counted in FILE; fail where a (file, code, function) count grows")
        parser.add_argument("--write-baseline", metavar="FILE", default=None,
                            help="write the current findings to FILE as a baseline and exit 0")
        parser.add_argument("--quiet", "-q", action="store_true",
                            help="no summary line, findings only")
        parser.add_argument("--evidence", action="append", metavar="RUN.json", default=None,
                            help="a run file (`xferaudit run`): every line it saw crossing outside a wrapper is "
                                 "a finding, even where the code shows no device (repeatable; adds to the "
                                 "config's `evidence`)")

    def run(self, args: argparse.Namespace) -> int:
        from ..static.findings import baseline as bl
        from ..static.findings.diagnostics import (
            collect, docs_base, format_github, format_json, format_sarif, format_statistics, format_text, reported,
        )
        from ..static.findings.lint import lint_source
        from ..static.project.scan import scan

        from ..static.project.progress import Progress

        name = stdin_name(args)
        sources = None
        if name is not None:
            if args.add_noqa:
                raise UserError("--add-noqa rewrites files: it cannot take standard input")
            cfg, rules, _ = load(argparse.Namespace(**{**vars(args), "paths": [name] if name != "-" else []}))
            linted = lint_source(read_stdin(), name, cfg, rules, evidence=_evidence(cfg, args.evidence))
            result, diags, sources = linted.scan, linted.diags, linted.sources
        else:
            cfg, rules, paths = load(args)
            evidence = _evidence(cfg, args.evidence)
            progress = Progress(0, sys.stderr, enabled=not args.quiet, label="xferaudit check")
            try:
                result = scan_or_exit(scan, paths, cfg, rules, args, progress=progress, evidence=evidence)
            finally:
                progress.close()
            diags = collect(result, cfg, rules)
        out = sys.stdout

        if args.write_baseline:
            try:
                n = bl.write(Path(args.write_baseline), diags)
            except bl.BaselineError as e:
                raise UserError(str(e)) from None
            print(f"xferaudit: wrote a baseline of {n} finding(s) to {args.write_baseline}", file=sys.stderr)
            fatal = [d for d in diags if d.fatal]
            if fatal:
                emit(format_text(fatal), out)
            return EXIT_ERROR if fatal else EXIT_OK
        if args.baseline:
            try:
                bl.apply(diags, bl.load(Path(args.baseline)))
            except bl.BaselineError as e:
                raise UserError(str(e)) from None
        if args.add_noqa:
            from ..static.findings.noqa import add_noqa

            res = add_noqa(diags)
            for msg in res.skipped:
                print(f"xferaudit: {msg}", file=sys.stderr)
            print(f"Added {res.added} noqa directive(s) to {res.files} file(s).", file=sys.stderr)
            fatal = [d for d in diags if d.fatal]
            if fatal:
                emit(format_text(fatal), out)
            return EXIT_ERROR if fatal or res.skipped else EXIT_OK

        shown = reported(diags)
        if args.format in ("json", "sarif") and not args.statistics:
            from ..static.findings.fixes import attach

            attach(diags, result, cfg, rules, sources, args.jobs)  # the edits `wrap` would make (the codemod)
        if args.statistics:
            text = format_statistics(diags)
        elif args.format == "json":
            text = format_json(diags, args.show_suppressed, docs_base(cfg))
        elif args.format == "github":
            text = format_github(diags)
        elif args.format == "sarif":
            text = format_sarif(diags, str(cfg.root), docs_base(cfg))
        elif args.format in ("gitlab", "junit", "full"):
            from ..static.findings import formats

            text = (formats.format_full(diags, args.show_suppressed, sources, docs_base(cfg)) if args.format == "full"
                    else getattr(formats, f"format_{args.format}")(diags))
        else:
            text = format_text(diags, args.show_suppressed)
        if text:
            emit(text, out)
        if args.format in ("text", "full") and not args.quiet and not args.statistics:
            n = len(shown)
            sup = len(diags) - n
            tail = f" ({sup} suppressed)" if sup else ""
            if n:
                emit(f"Found {n} finding{'s' if n != 1 else ''}{tail}.", out)
            else:
                emit(f"All checks passed!{tail}", out)
        if any(d.fatal for d in shown):
            return EXIT_ERROR
        if shown and not args.exit_zero:
            return EXIT_FINDINGS
        return EXIT_OK


def _evidence(cfg, extra):
    """The run files in force: the config's `evidence`, then `--evidence` (read
    with plain JSON: no torch, no libcst; their reader imported only where there are some)."""
    if not cfg.evidence and not extra:
        return None
    from ..static.front.evidence import EvidenceError
    from ..static.findings.lint import config_evidence

    try:
        return config_evidence(cfg, extra)
    except EvidenceError as e:
        raise UserError(str(e)) from None


COMMAND = CheckCommand
