"""Real code with GPU kernels (issue 42): ``wrap`` changes no line inside a
kernel, and ``unwrap`` gives every file back byte for byte.

    python bench/kernels_real.py OUT_DIR TREE [TREE ...] [--before /path/to/older/checkout]

For each tree (a library's source: liger-kernel, mamba-ssm):

1. finds the kernels two ways: the finder's own spans
   (:func:`xferaudit.static.front.kernels.kernel_spans`) and, independently of
   it, every function whose decorator resolves, through the file's imports,
   to a kernel compiler (``triton.jit``, ``triton.autotune``,
   ``triton.heuristics``, ``cutlass.cute.jit``, ``cutlass.cute.kernel``, and
   the other DSLs of :data:`KERNEL_DECORATORS`); a kernel's span is the union,
   from its first decorator to its last line;
2. the findings of ``xferaudit check`` (with --before, also those of an older
   checkout's code, e.g. /work/main) and how many fall inside a kernel;
3. ``xferaudit wrap`` on a copy of the tree; for every changed file, the
   changed line ranges (``difflib`` over lines, in the original's numbering;
   an insertion is at the line it goes before) and whether one touches a
   kernel's span (an insertion between two lines of a kernel counts);
4. ``xferaudit unwrap`` on the copy, and every file of it compared byte for
   byte with the tree.

Writes ``kernels_real.json`` and ``kernels_real.txt`` (and the changed ranges,
``kernels_real_changes.txt``) to OUT_DIR. Exit status 1 when a changed line
falls inside a kernel or a file does not come back byte for byte. Needs libcst
(the codemod): not for the GPU image.
"""

from __future__ import annotations

import ast
import difflib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]

#: decorators (fully qualified) that make a function a kernel, for the
#: independent count: Triton, the CuTe DSL, cuTile, TileLang, numba CUDA
KERNEL_DECORATORS = {
    "triton.jit": "triton", "triton.autotune": "triton", "triton.heuristics": "triton",
    "triton.runtime.jit.jit": "triton", "triton.runtime.autotuner.autotune": "triton",
    "triton.runtime.autotuner.heuristics": "triton", "triton.experimental.gluon.jit": "triton",
    "cutlass.cute.jit": "cute", "cutlass.cute.kernel": "cute",
    "cuda.tile.kernel": "cutile", "cuda.tile.function": "cutile",
    "tilelang.jit": "tilelang", "tilelang.language.prim_func": "tilelang",
    "numba.cuda.jit": "numba",
}


def _imports(tree: ast.Module) -> dict:
    """name -> dotted module/object for every import of the file (any scope;
    a name imported two ways keeps the first: enough for a count)."""
    out: dict = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.asname:
                    out.setdefault(a.asname, a.name)
                else:
                    top = a.name.split(".")[0]
                    out.setdefault(top, top)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                out.setdefault(a.asname or a.name, f"{node.module}.{a.name}")
    return out


def _dotted(node: ast.AST):
    if isinstance(node, ast.Call):
        node = node.func
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return ".".join(reversed(parts))


def decorated_kernels(tree: ast.Module) -> list:
    """(first decorator line, last line, DSL, name) of every function a kernel
    decorator of :data:`KERNEL_DECORATORS` decorates, resolved through the
    file's imports."""
    names = _imports(tree)
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for d in node.decorator_list:
            name = _dotted(d)
            if name is None:
                continue
            head, _, rest = name.partition(".")
            q = names.get(head)
            q = (q + ("." + rest if rest else "")) if q else None
            if q in KERNEL_DECORATORS:
                first = min(x.lineno for x in node.decorator_list)
                out.append((first, node.end_lineno, KERNEL_DECORATORS[q], node.name))
                break
    return out


def finder_spans(tree: ast.Module, text: str) -> list:
    """(first decorator line, last line) of every kernel the finder sees
    (its spans start at the ``def``: the decorators are added here)."""
    from xferaudit.rules import table
    from xferaudit.static.front.kernels import kernel_spans
    from xferaudit.static.front.resolver import Resolver

    rules = table()
    r = Resolver(tree, rules)
    r.bind()
    spans = kernel_spans(tree, text, r, rules.kernels)
    defs = {n.lineno: n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    out = []
    for l0, _, l1, _ in spans:
        d = defs.get(l0)
        first = min([l0] + [x.lineno for x in d.decorator_list]) if d is not None else l0
        out.append((first, l1))
    return out


def changed_ranges(old: str, new: str) -> list:
    """(kind, first, last) of the lines of `old` that `new` changes, 1-based;
    an insertion is ("insert", k, k - 1): it goes before line k."""
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    out = []
    for tag, i1, i2, _, _ in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if tag == "equal":
            continue
        out.append((tag, i1 + 1, i2))
    return out


def touches(change: tuple, span: tuple) -> bool:
    tag, first, last = change
    l0, l1 = span
    if tag == "insert":  # between line first-1 and first: inside when both are in the span
        return l0 < first <= l1
    return first <= l1 and last >= l0


def _findings(tree: Path, code: Path) -> list:
    env = dict(os.environ, PYTHONPATH=str(code))
    done = subprocess.run([sys.executable, "-m", "xferaudit", "check", "--no-cache", "--exit-zero", "--format", "json",
                           "--jobs", "1", str(tree)], capture_output=True, text=True, env=env, cwd=tree, check=False)
    if done.returncode not in (0, 1):
        raise SystemExit(done.stderr[-2000:])
    return json.loads(done.stdout or "[]")


def _xfer(verb: str, copy: Path) -> tuple:
    env = dict(os.environ, PYTHONPATH=str(HERE))
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "xferaudit", verb, "--no-cache", str(copy)],
                          capture_output=True, text=True, env=env, cwd=copy, check=False)
    lines = (done.stdout + done.stderr).strip().splitlines()
    return done.returncode, (lines[-1] if lines else ""), round(time.perf_counter() - t, 1)


def _all_files(root: Path) -> dict:
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts and ".xferaudit_cache" not in p.parts}


def one_tree(tree: Path, before, changes_out: list) -> dict:
    files = sorted(tree.rglob("*.py"))
    spans, texts, dsl = {}, {}, Counter()
    own = both = indep = 0
    for p in files:
        try:
            text = p.read_text(encoding="utf-8")
            parsed = ast.parse(text)
        except (SyntaxError, UnicodeDecodeError, ValueError):
            continue
        mine = decorated_kernels(parsed)
        theirs = finder_spans(parsed, text)
        indep += len(mine)
        own += len(theirs)
        dsl.update(k[2] for k in mine)
        both += sum(1 for k in mine if any(f[0] <= k[0] and k[1] <= f[1] for f in theirs))
        union = sorted(set(theirs) | {(k[0], k[1]) for k in mine})
        if union:
            spans[p] = union
            texts[p] = text
    now = _findings(tree, HERE)

    def in_kernel(f) -> bool:
        q = Path(f["filename"])
        q = (q if q.is_absolute() else tree / q).resolve()
        ln = f["location"]["row"]
        return any(l0 <= ln <= l1 for l0, l1 in spans.get(q, ()))

    row = {"files": len(files), "files_with_kernels": len(spans),
           "kernel_functions_by_decorator": indep, "by_dsl": dict(sorted(dsl.items())),
           "kernel_functions_the_finder_sees": own,
           "decorated_kernels_the_finder_also_sees": both,
           "kernel_spans_checked (union)": sum(len(v) for v in spans.values()),
           "findings_now": len(now), "findings_now_in_kernels": sum(map(in_kernel, now))}
    if before is not None:
        old = _findings(tree, before)
        row["findings_before"] = len(old)
        row["findings_before_in_kernels"] = sum(map(in_kernel, old))
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / tree.name
        shutil.copytree(tree, copy, ignore=shutil.ignore_patterns("__pycache__", ".xferaudit_cache"))
        orig = _all_files(copy)
        rc, line, secs = _xfer("wrap", copy)
        row["wrap"] = {"exit": rc, "summary": line, "seconds": secs}
        wrapped = _all_files(copy)
        changed = [rel for rel in orig if wrapped.get(rel) != orig[rel]]
        row["files_changed_by_wrap"] = len(changed)
        row["kernel_files_changed_by_wrap"] = sum(1 for rel in changed if tree / rel in spans)
        inside, n_ranges = [], 0
        for rel in changed:
            ch = changed_ranges(orig[rel].decode("utf-8"), wrapped[rel].decode("utf-8"))
            n_ranges += len(ch)
            ks = spans.get(tree / rel, [])
            for c in ch:
                hit = [s for s in ks if touches(c, s)]
                changes_out.append(f"{tree.name}/{rel}: {c[0]} {c[1]}-{c[2]}"
                                   + (f"  INSIDE KERNEL {hit}" if hit else ""))
                if hit:
                    inside.append(f"{rel}: {c} in {hit}")
        row["changed_line_ranges"] = n_ranges
        row["changed_ranges_inside_a_kernel"] = inside
        row["lines_changed_inside_kernels"] = len(inside)
        rc, line, secs = _xfer("unwrap", copy)
        row["unwrap"] = {"exit": rc, "summary": line, "seconds": secs}
        back = _all_files(copy)
        differ = sorted(str(rel) for rel in set(orig) | set(back) if orig.get(rel) != back.get(rel))
        row["files_compared_after_unwrap"] = len(orig)
        row["files_not_byte_identical_after_unwrap"] = differ
    return row


def main(argv: list) -> int:
    before = None
    if "--before" in argv:
        i = argv.index("--before")
        before = Path(argv[i + 1])
        del argv[i:i + 2]
    out, trees = Path(argv[0]), [Path(a).resolve() for a in argv[1:]]
    out.mkdir(parents=True, exist_ok=True)
    sys.path.insert(0, str(HERE))
    report, changes = {}, []
    for tree in trees:
        report[str(tree)] = one_tree(tree, before, changes)
    (out / "kernels_real.json").write_text(json.dumps(report, indent=1) + "\n")
    (out / "kernels_real_changes.txt").write_text("\n".join(changes) + "\n")
    text = "\n".join(f"{k}\n" + "\n".join(f"  {kk}: {vv}" for kk, vv in v.items()) for k, v in report.items())
    (out / "kernels_real.txt").write_text(text + "\n")
    print(text)
    ok = all(not v["changed_ranges_inside_a_kernel"] and not v["files_not_byte_identical_after_unwrap"]
             for v in report.values())
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
