"""Run a real library's own test suite bare, wrapped, and wrapped with counting on.

    python bench/real_suites.py SOURCE --package PKG [--tests PATH ...] [options] [-- PYTEST_ARGS]

SOURCE is the library's source tree: a folder (a checkout, an unpacked sdist),
or a git directory (bare or not), whose commit ``--rev`` (default HEAD) is
extracted with ``git archive``. Fetched code is never kept in this repository;
get a library's source, e.g.::

    git clone https://github.com/kornia/kornia && python bench/real_suites.py kornia --package kornia
    pip download --no-deps --no-binary :all: einops==0.8.1   # an sdist (often without its tests)

The script copies SOURCE into a work folder (``--work``, default a temporary
one), and there:

1. hashes every file of the package folder (``PKG``, or ``src/PKG``);
2. runs the tests bare: ``PYTHON -m pytest TESTS -p no:cacheprovider -q -rA
   --junitxml=...`` (``-x`` off), in the work folder, the work folder first on
   ``PYTHONPATH``;
3. ``xferaudit wrap PKGDIR`` (the package, not its tests), as a user would
   (``--exclude tests`` leaves a folder of the package out: einops keeps its
   tests in ``einops/tests``);
   (with ``--runs`` naming them: ``guarded-lite``, ``guarded-full``, the tests
   of the package as extracted, the whole run under ``xfer.guard("count",
   mode=...)``: the runtime must not change what they see);
4. runs the tests again: wrapped, counting off;
5. and again: wrapped, counting on for the whole run. A small pytest plugin
   (``-p xferaudit_counting_on``, written to the work folder) calls
   ``xfer.count(True)`` when pytest configures, before any test module is
   imported, checks before every test that counting is still on, and at the
   end writes how many wrapper calls were counted, so a run that counted
   nothing shows as such. (``pytest --xferaudit`` would count only each test's
   body and run it under the guard, which is more than counting.)
6. ``xferaudit unwrap PKGDIR`` and compares every byte with step 1.

Outcomes are read from each run's JUnit XML, test by test (passed, failed,
error, skipped, xfailed; a test that failed and then errored in teardown is
``error``). Prints, per library, the version and commit, the number of tests
in each state for each run, every test whose outcome differs from the bare
run (with its error's last lines), the wrap and unwrap summaries, and the
unwrap byte check, as Markdown (``--markdown FILE`` appends it to a file too).
Exit status 1 when an outcome differs or unwrap is not byte-identical.

``--python`` is the interpreter that runs the library's tests (a virtual
environment with the library's test dependencies and ``xferaudit`` installed);
``xferaudit wrap`` runs with this one, and its folder comes first on ``PATH``
in the runs, as in an activated virtual environment (a test that starts
``python`` in a subprocess gets the same interpreter, which has
``xferaudit``). ``--env NAME=VALUE`` sets variables for
the three runs (``OMP_NUM_THREADS=1`` is set unless given). ``--runs`` picks
which of bare, wrapped and counting to run (results of earlier runs in the same
``--work`` folder are read back: ``--keep`` keeps it). The package is put back
as extracted after every invocation, whatever unwrap gave.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Optional

RUNS = ("bare", "guarded-lite", "guarded-full", "wrapped", "counting")
#: the runs made by default (the guarded ones on request: the full mode is slow)
DEFAULT_RUNS = ("bare", "wrapped", "counting")
#: the runs of the wrapped package (the others run it as extracted)
WRAPPED_RUNS = ("wrapped", "counting")
STATES = ("passed", "failed", "error", "skipped", "xfailed")
_SKIP_DIRS = {"__pycache__", ".xferaudit_cache", ".pytest_cache"}

PLUGIN = '''\
"""Counting on for a whole pytest run (bench/real_suites.py)."""
import json
import os

import xferaudit.runtime as xfer
from xferaudit.runtime.counted import recorder

_turned_back_on = 0


def pytest_configure(config):
    xfer.count(True)


def pytest_runtest_setup(item):
    global _turned_back_on
    if not recorder.STATE.on:
        _turned_back_on += 1
        recorder.STATE.on = True


def pytest_unconfigure(config):
    S = recorder.STATE
    with S.lock:
        calls = sum(t.calls for t in S.sites.values())
        crossings = sum(t.crossings for t in S.sites.values())
        sites = sum(1 for t in S.sites.values() if t.calls)
    out = {"on_at_end": bool(S.on), "calls": calls, "crossings": crossings, "sites": sites,
           "launches": sum(xfer.launches().values()) if hasattr(xfer, "launches") else None,
           "turned_back_on": _turned_back_on}
    with open(os.environ["XFERAUDIT_COUNTING_OUT"], "w") as f:
        json.dump(out, f)
'''


GUARD_PLUGIN = '''\
"""The whole pytest run under xfer.guard("count", mode=...) (bench/real_suites.py):
the runtime must not change what the library's tests see."""
import os

import xferaudit.runtime as xfer

_guards = []


def pytest_configure(config):
    g = xfer.guard("count", mode=os.environ["XFERAUDIT_GUARDED_MODE"])
    g.__enter__()
    _guards.append(g)


def pytest_unconfigure(config):
    while _guards:
        _guards.pop().__exit__(None, None, None)
'''


# --- the source -------------------------------------------------------------------

def _git(gitdir: Path, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", str(gitdir), *args], check=True,
                          capture_output=True, text=True).stdout.strip()


def _git_dir(src: Path) -> Optional[Path]:
    if (src / "HEAD").is_file() and (src / "objects").is_dir():
        return src  # bare
    if (src / ".git").exists():
        return src / ".git"
    return None


def _missing_blobs(gitdir: Path, rev: str) -> list:
    """Paths of `rev` whose blobs the git directory does not hold."""
    tree = _git(gitdir, "ls-tree", "-r", rev).splitlines()
    blobs = [(ln.split()[2], ln.split("\t", 1)[1]) for ln in tree if ln.split()[1] == "blob"]
    check = subprocess.run(["git", "--git-dir", str(gitdir), "cat-file", "--batch-check"],
                           input="\n".join(b for b, _ in blobs) + "\n", capture_output=True, text=True).stdout
    gone = {ln.split()[0] for ln in check.splitlines() if ln.endswith(" missing")}
    return [p for b, p in blobs if b in gone]


def prepare(src: Path, rev: str, work: Path) -> dict:
    """Copy (or extract) SOURCE into work/src; returns {commit, describe}."""
    dst = work / "src"
    info = {"commit": None, "describe": None}
    gitdir = _git_dir(src)
    if gitdir is not None:
        info["commit"] = _git(gitdir, "rev-parse", rev)
        try:
            info["describe"] = _git(gitdir, "describe", "--tags", rev)
        except subprocess.CalledProcessError:
            pass
    if dst.exists():
        return info  # reused (--keep): the runs read back below
    if gitdir is not None:
        dst.mkdir(parents=True)
        missing = _missing_blobs(gitdir, rev)  # a snapshot may lack its largest files
        info["missing"] = missing
        archive = subprocess.run(["git", "--git-dir", str(gitdir), "archive", "--format=tar", rev, "--", "."]
                                 + [f":(exclude){p}" for p in missing], check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dst)], input=archive, check=True)
    else:
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns(*_SKIP_DIRS, ".git"))
    return info


def package_dir(root: Path, package: str) -> Path:
    for cand in (root / package, root / "src" / package, root / (package + ".py")):
        if cand.exists():
            return cand
    sys.exit(f"real_suites: no package {package!r} under {root} (nor under src/)")


def hashes(path: Path) -> dict:
    files = [path] if path.is_file() else sorted(
        p for p in path.rglob("*") if p.is_file() and not (_SKIP_DIRS & set(p.parts)))
    return {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}


def restore(pristine: Path, pkg: Path) -> None:
    if pkg.is_dir():
        shutil.rmtree(pkg)
        shutil.copytree(pristine, pkg)
    else:
        shutil.copyfile(pristine, pkg)


# --- running ----------------------------------------------------------------------

def _run_env(args: argparse.Namespace) -> dict:
    """The variables the runs set (``--env``, and OMP_NUM_THREADS=1 unless given)."""
    env = {"OMP_NUM_THREADS": "1"}
    for kv in args.env:
        k, _, v = kv.partition("=")
        env[k] = v
    return env


def run_pytest(name: str, args: argparse.Namespace, work: Path, root: Path) -> dict:
    xml = work / f"{name}.xml"
    log = work / f"{name}.log"
    env = dict(os.environ, **_run_env(args))
    paths = [str(root)] + ([str(root / "src")] if (root / "src").is_dir() else []) \
        + ([str(work)] if name == "counting" or name.startswith("guarded") else [])
    env["PYTHONPATH"] = os.pathsep.join(paths + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    # the interpreter's folder first on PATH, as an activated virtual environment has it: a test
    # that runs `python` in a subprocess (einops' test_einops_threading) gets the same one
    env["PATH"] = os.pathsep.join([str(Path(args.python).parent), env.get("PATH", "")])
    cmd = [args.python, "-m", "pytest", *args.tests, "-p", "no:cacheprovider", "-q", "-rA",
           f"--junitxml={xml}", *args.pytest_args]
    if name == "counting":
        (work / "xferaudit_counting_on.py").write_text(PLUGIN)
        env["XFERAUDIT_COUNTING_OUT"] = str(work / "counting.json")
        cmd[3:3] = ["-p", "xferaudit_counting_on"]
    if name.startswith("guarded"):
        (work / "xferaudit_guarded.py").write_text(GUARD_PLUGIN)
        env["XFERAUDIT_GUARDED_MODE"] = name.split("-", 1)[1]
        cmd[3:3] = ["-p", "xferaudit_guarded"]
    t0 = time.perf_counter()
    with open(log, "w") as f:
        rc = subprocess.run(cmd, cwd=root, env=env, stdout=f, stderr=subprocess.STDOUT).returncode
    wall = time.perf_counter() - t0
    meta = {"rc": rc, "wall_s": round(wall, 1),
            "cmd": " ".join([f"{k}={shlex.quote(v)}" for k, v in sorted(_run_env(args).items())]
                            + [shlex.quote(c) for c in ["python"] + cmd[1:]]).replace(str(work), "$WORK")}
    (work / f"{name}.meta.json").write_text(json.dumps(meta))
    return meta


def read_outcomes(xml: Path) -> dict:
    """nodeid-like key -> (state, message) from pytest's JUnit XML."""
    out: dict = {}
    if not xml.exists():
        return out
    rank = {s: i for i, s in enumerate(("passed", "skipped", "xfailed", "failed", "error"))}
    for tc in ET.parse(xml).getroot().iter("testcase"):
        key = f"{tc.get('classname', '')}::{tc.get('name', '')}"
        state, msg = "passed", ""
        for child in tc:
            tag = child.tag
            if tag == "skipped":
                s = "xfailed" if child.get("type") == "pytest.xfail" else "skipped"
            elif tag in ("failure", "error"):
                s = "failed" if tag == "failure" else "error"
            else:
                continue
            if rank[s] >= rank[state]:
                state = s
                msg = (child.get("message") or "") + "\n" + (child.text or "")
        prev = out.get(key)
        if prev is not None and rank[prev[0]] > rank[state]:
            continue
        out[key] = (state, msg.strip())
    return out


def targets(pkg: Path, root: Path, exclude: list) -> list:
    """What wrap and unwrap are given: the package folder, or its .py files
    outside the --exclude folders (a package that keeps its tests inside)."""
    if not exclude:
        return [str(pkg.relative_to(root))]
    skip = [(pkg / e).resolve() for e in exclude]
    return [str(p.relative_to(root)) for p in sorted(pkg.rglob("*.py"))
            if not any(p.resolve().is_relative_to(s) for s in skip)]


def xferaudit(args: argparse.Namespace, verb: str, target: Path, root: Path, work: Path) -> dict:
    files = targets(target, root, args.exclude)
    cmd = [args.python, "-m", "xferaudit", verb, *files]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=root, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    (work / f"{verb}.log").write_text(p.stdout + p.stderr)
    lines = [ln for ln in (p.stdout + p.stderr).splitlines() if ln.strip()]
    summary = next((ln for ln in reversed(lines) if ln.startswith(f"xferaudit {verb}:")), "")
    left = [ln for ln in lines if "left as it is" in ln]
    return {"rc": p.returncode, "wall_s": round(wall, 1), "summary": summary, "left": len(left),
            "cmd": f"xferaudit {verb} " + (files[0] if len(files) == 1 else
                                           f"<{len(files)} files of {target.name}/ outside {', '.join(args.exclude)}>"),
            "problems": [ln for ln in lines if not ln.startswith(f"xferaudit {verb}:") and "left as it is" not in ln][:20]}


def version_of(args: argparse.Namespace, package: str, root: Path) -> str:
    """The package's ``__version__``, else the version pyproject.toml states."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(root), str(root / "src")]))
    p = subprocess.run([args.python, "-c", f"import {package} as m; print(getattr(m, '__version__', '?'))"],
                       cwd=root, env=env, capture_output=True, text=True)
    v = p.stdout.strip().splitlines()[-1] if p.returncode == 0 and p.stdout.strip() else "?"
    if v == "?" and (root / "pyproject.toml").is_file():
        import tomllib

        with open(root / "pyproject.toml", "rb") as f:
            v = str(tomllib.load(f).get("project", {}).get("version", "?"))
    return v


def python_info(args: argparse.Namespace) -> str:
    code = ("import sys, torch; print(sys.executable, sys.version.split()[0], 'torch', torch.__version__)")
    p = subprocess.run([args.python, "-c", code], capture_output=True, text=True)
    return p.stdout.strip() or args.python


# --- the report ---------------------------------------------------------------------

def _tail(msg: str, n: int = 4) -> str:
    lines = [ln.rstrip() for ln in msg.splitlines() if ln.strip()]
    head = lines[:1]
    tail = [ln for ln in lines[1:] if ln.startswith("E ")][-n:] or lines[1:][-n:]
    return "\n".join(head + [ln for ln in tail if ln not in head])


def report(name: str, info: dict, outcomes: dict, metas: dict, wrap: Optional[dict], unwrap: Optional[dict],
           counting: Optional[dict], byte_diff: Optional[list]) -> tuple[str, bool]:
    out = [f"## {name}", ""]
    out.append(f"- version {info['version']}, commit {info['commit'] or '(not a git tree)'}"
               + (f" ({info['describe']})" if info.get("describe") else ""))
    out.append(f"- python: {info['python']}")
    if info.get("missing"):
        out.append(f"- not in the source snapshot (left out): {', '.join(info['missing'])}")
    for run in RUNS:
        if run in metas:
            out.append(f"- {run}: `{metas[run]['cmd']}` (exit {metas[run]['rc']}, {metas[run]['wall_s']} s)")
    if wrap:
        out.append(f"- wrap: `{wrap['cmd']}` (exit {wrap['rc']}, {wrap['wall_s']} s): {wrap['summary']}")
    if counting:
        out.append(f"- counting on: {counting['calls']} wrapper calls counted at {counting['sites']} sites "
                   f"({counting['crossings']} crossings); still on at the end: {counting['on_at_end']}"
                   + (f"; turned back on before {counting['turned_back_on']} tests" if counting["turned_back_on"] else ""))
    out += ["", "| run | tests | " + " | ".join(STATES) + " |", "|---|---:|" + "---:|" * len(STATES)]
    for run in RUNS:
        if run in outcomes:
            c = Counter(s for s, _ in outcomes[run].values())
            out.append(f"| {run} | {len(outcomes[run])} | " + " | ".join(str(c.get(s, 0)) for s in STATES) + " |")
    out.append("")
    ok = True
    base = outcomes.get("bare")
    for run in RUNS[1:]:
        if base is None or run not in outcomes:
            continue
        other = outcomes[run]
        diffs = sorted(k for k in set(base) | set(other)
                       if base.get(k, ("absent", ""))[0] != other.get(k, ("absent", ""))[0])
        ok &= not diffs
        out.append(f"**{run} vs bare: {len(diffs)} test(s) differ**" + (":" if diffs else ""))
        for k in diffs:
            b, o = base.get(k, ("absent", "")), other.get(k, ("absent", ""))
            out.append(f"- `{k}`: {b[0]} -> {o[0]}")
            err = _tail(o[1] if o[0] in ("failed", "error") else b[1])
            if err:
                out.append("  ```text\n" + "\n".join("  " + ln for ln in err.splitlines()) + "\n  ```")
        out.append("")
    if unwrap:
        out.append(f"- unwrap: `{unwrap['cmd']}` (exit {unwrap['rc']}, {unwrap['wall_s']} s): {unwrap['summary']}")
    if byte_diff is not None:
        ok &= not byte_diff and (unwrap is None or unwrap["rc"] == 0)
        out.append(f"- unwrap byte-identical: {'yes' if not byte_diff else 'NO, ' + str(len(byte_diff)) + ' file(s) differ'}")
        out += [f"  - `{p}`" for p in byte_diff[:30]]
    return "\n".join(out) + "\n", ok


def main(argv: Optional[list] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra: list = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("source", type=Path)
    ap.add_argument("--package", required=True, help="the package folder (or module) to wrap")
    ap.add_argument("--name", help="the library's name in the report (default: the package's)")
    ap.add_argument("--exclude", action="append", default=[], metavar="DIR",
                    help="a folder of the package not to wrap (its tests), relative to it")
    ap.add_argument("--rev", default="HEAD", help="the commit to extract from a git SOURCE")
    ap.add_argument("--tests", nargs="+", default=["tests"], help="what pytest runs (default: tests)")
    ap.add_argument("--python", default=sys.executable, help="the interpreter of the library's tests")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    ap.add_argument("--work", type=Path, help="the work folder (default: a temporary one, removed after)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    ap.add_argument("--runs", default=",".join(DEFAULT_RUNS),
                    help=f"which runs, of {','.join(RUNS)} (default {','.join(DEFAULT_RUNS)}); guarded-*: "
                         "the package as extracted, the whole run under xfer.guard('count', mode=...)")
    ap.add_argument("--markdown", type=Path, help="also append the report to this file")
    args = ap.parse_args(argv)
    args.pytest_args = extra
    runs = [r.strip() for r in args.runs.split(",") if r.strip()]
    bad = [r for r in runs if r not in RUNS]
    if bad:
        ap.error(f"unknown run(s) {bad}; choose from {RUNS}")
    if not args.source.exists():
        ap.error(f"{args.source}: no such folder")
    work = args.work or Path(tempfile.mkdtemp(prefix="real_suites_"))
    work = work.resolve()
    work.mkdir(parents=True, exist_ok=True)
    try:
        info = prepare(args.source.resolve(), args.rev, work)
        root = work / "src"
        pkg = package_dir(root, args.package)
        info["version"] = version_of(args, args.package, root)
        info["python"] = python_info(args)
        before_file = work / "hashes.json"
        if not before_file.exists():
            before_file.write_text(json.dumps(hashes(pkg)))
        before = json.loads(before_file.read_text())
        metas: dict = {}
        wrap = unwrap = byte_diff = None
        pristine = work / "pristine"
        if pristine.exists():  # the package as extracted (an interrupted run may have left it wrapped)
            restore(pristine, pkg)
        else:
            (shutil.copytree if pkg.is_dir() else shutil.copyfile)(pkg, pristine)
        for run in RUNS:
            if run in runs:
                if run in WRAPPED_RUNS and wrap is None:
                    wrap = xferaudit(args, "wrap", pkg, root, work)
                    (work / "wrap.json").write_text(json.dumps(wrap))
                print(f"real_suites: {run} run ...", file=sys.stderr, flush=True)
                metas[run] = run_pytest(run, args, work, root)
            elif (work / f"{run}.meta.json").exists():
                metas[run] = json.loads((work / f"{run}.meta.json").read_text())
        if wrap is not None:
            unwrap = xferaudit(args, "unwrap", pkg, root, work)
            after = hashes(pkg)
            byte_diff = sorted(str(Path(p).relative_to(root)) for p in set(before) | set(after)
                               if before.get(p) != after.get(p))
            restore(pristine, pkg)
        elif (work / "wrap.json").exists():
            wrap = json.loads((work / "wrap.json").read_text())
        outcomes = {r: read_outcomes(work / f"{r}.xml") for r in RUNS if (work / f"{r}.xml").exists()}
        counting = json.loads((work / "counting.json").read_text()) if (work / "counting.json").exists() else None
        text, ok = report(args.name or args.package, info, outcomes, metas, wrap, unwrap, counting, byte_diff)
        print(text)
        if args.markdown:
            with open(args.markdown, "a") as f:
                f.write(text + "\n")
        return 0 if ok else 1
    finally:
        if args.work is None and not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
